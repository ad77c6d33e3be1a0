import Foundation
import Synchronization
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Catalog

/// A log of `Fixtures/runs`, written by the project's writer.
private func runsFixture(_ name: String) -> String {
    FixtureLogs.directory.deletingLastPathComponent().appendingPathComponent("runs/\(name).jsonl.gz").path
}

/// A run whose goal is `goalBytes` long, written through the real writer: its `logs` row
/// carries the goal as `input`.
private func writeRun(at path: String, goalBytes: Int) throws {
    let writer = try LogWriter.create(at: path, runId: "run-long-goal")
    let clock = SteppingClock()
    let recorder = RunRecorder(writer: writer, clock: { clock.now() })
    try recorder.record(.runStarted(SampleRun.supportStart(goal: String(repeating: "g", count: goalBytes))))
    try writer.close()
}

/// Makes the catalog at `path` a version-6 one, as the build before `case_results.file_digest`
/// left it: the column dropped and the version set back (sqlite3, as a user's old file is).
private func downgradeToVersion6(_ path: String) async throws {
    let done = try await Subprocess.run(
        "/usr/bin/env", ["sqlite3", path, "ALTER TABLE case_results DROP COLUMN file_digest; PRAGMA user_version = 6;"])
    #expect(done.status == 0, "\(done.stderr)")
}

private let suiteReport: JSONValue = [
    "summary": ["cases": 1, "passed": 1, "failed": 0, "errors": 0, "duration_ms": 3], "k": 1,
    "cases": [["case_id": "kept", "source": "recorded", "outcome": "pass", "pass_rate": 1, "stability": "stable_pass", "runs": []]],
]

@Suite("The catalog stays bounded and keeps what it holds")
struct CatalogBoundsTests {
    @Test("a log whose row SQLite refuses is recorded damaged with SQLite's reason, and the rest of its batch is indexed")
    func refusedRowStandsAlone() throws {
        try TemporaryDirectory.with { directory in
            let logs = directory.path("logs")
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
            for name in ["research-budget", "support-refund"] {
                try FileManager.default.copyItem(atPath: runsFixture(name), toPath: "\(logs)/\(name).jsonl.gz")
            }
            try writeRun(at: "\(logs)/long-goal.jsonl.gz", goalBytes: 50_000)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            // SQLite refuses a value over its length limit (1e9 bytes unless lowered) with
            // SQLITE_TOOBIG; a 50 kB goal reaches a lowered one.
            catalog.limitValueLength(to: 20_000)
            let summary = try catalog.index(paths: [logs])
            let byName = Dictionary(uniqueKeysWithValues: summary.logs.map { (($0.path as NSString).lastPathComponent, $0) })
            #expect(byName["research-budget.jsonl.gz"]?.status == .intact)
            #expect(byName["support-refund.jsonl.gz"]?.status == .intact)
            let refused = try #require(byName["long-goal.jsonl.gz"])
            #expect(refused.status == .damaged)
            #expect(refused.problem?.contains("could not store") == true, "\(refused.problem ?? "")")
            #expect(refused.problem?.contains("too big") == true, "\(refused.problem ?? "")")
            // The good logs' rows are there, calls and all; the refused one's row says why.
            let stored = try catalog.query("SELECT path, status, events FROM logs ORDER BY path").rows
            #expect(stored.map { $0[1].description } == ["damaged", "intact", "intact"])
            #expect(try catalog.query("SELECT COUNT(*) FROM calls").rows.first?.first?.int ?? 0 > 0)
            // Its identity is kept: the next index does not read it again until it changes.
            let again = try catalog.index(paths: [logs])
            #expect(again.logs.allSatisfy { $0.change == .unchanged }, "\(again.logs.map(\.change))")
            // One log alone (`exec`, `run`) is recorded the same way.
            let single = try catalog.index(log: "\(logs)/long-goal.jsonl.gz")
            #expect(single.status == .damaged)
        }
    }

    @Test("a log with a member over the read limit is indexed as damaged, by its reader's error, beside the others")
    func memberOverTheLimit() throws {
        try TemporaryDirectory.with { directory in
            let logs = directory.path("logs")
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: runsFixture("support-refund"), toPath: "\(logs)/support-refund.jsonl.gz")
            try writeRun(at: "\(logs)/long-goal.jsonl.gz", goalBytes: 3 << 20)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let summary = try catalog.index(paths: [logs], memberLimit: 1 << 20)
            let long = try #require(summary.logs.first { $0.path.hasSuffix("long-goal.jsonl.gz") })
            #expect(long.status == .damaged)
            #expect(long.problemCode == "log.event_too_large")
            #expect(long.problem?.contains("more than 1 MiB (1048576 bytes)") == true, "\(long.problem ?? "")")
            #expect(summary.logs.first { $0.path.hasSuffix("support-refund.jsonl.gz") }?.status == .intact)
            // Within the default limit the same log is read whole.
            let whole = try Catalog(path: directory.path("default.sqlite")).index(paths: [logs])
            #expect(whole.logs.allSatisfy { $0.status == .intact })
        }
    }

    @Test("rebuild carries the suite history over from a catalog of an older schema version, leaving later columns empty")
    func rebuildFromAnOlderSchema() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("catalog.sqlite")
            let catalog = try Catalog(path: path)
            _ = try catalog.index(paths: [runsFixture("support-refund")])
            try catalog.recordSuite(report: suiteReport, info: SuiteRunInfo(startedAtUs: 1, commandLine: "agent-eval run"))
            try catalog.checkpoint()
            try catalog.close()
            try await downgradeToVersion6(path)

            // No paths: the old catalog still says which logs to index.
            let rebuilt = try Catalog.rebuild(at: path)
            #expect(rebuilt.suiteRuns == 1)
            #expect(rebuilt.fromSchemaVersion == 6)
            #expect(rebuilt.summary.logs.count == 1)
            let after = try Catalog(path: path, readOnly: true)
            #expect(try after.history(caseId: "kept").entries.map(\.outcome) == ["pass"])
            #expect(try after.query("SELECT file_digest FROM case_results").rows == [[.null]])
        }
    }

    @Test("rebuild refuses, changing nothing, while the catalog is open for writing elsewhere, whose suite results it would lose")
    func rebuildWaitsForNoWriter() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("catalog.sqlite")
            let writer = try Catalog(path: path)
            _ = try writer.index(paths: [runsFixture("support-refund")])
            try writer.checkpoint()
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            let error = try #require(throws: CatalogError.self) { _ = try Catalog.rebuild(at: path) }
            #expect(error.code == .inUse)
            #expect(error.message.contains("has the catalog at \(path) open for writing"), "\(error.message)")
            #expect(error.message.contains("nothing was changed"), "\(error.message)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the catalog was replaced under its writer")
            // What the writer records now is in the catalog the name holds, and the rebuild,
            // once the writer is done, carries it over.
            try writer.recordSuite(report: suiteReport, info: SuiteRunInfo(startedAtUs: 1, commandLine: "agent-eval run"))
            try writer.close()
            let rebuilt = try Catalog.rebuild(at: path)
            #expect(rebuilt.suiteRuns == 1)
            #expect(try Catalog(path: path, readOnly: true).history(caseId: "kept").entries.map(\.outcome) == ["pass"])
            // The rebuild's own working files are gone; the lock file stays where it was.
            let left = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.contains(".rebuild-") }
            #expect(left.isEmpty, "\(left)")
            #expect(FileManager.default.fileExists(atPath: path + ".lock"))

            // Opened through a symbolic link, the catalog is the same file, with the same lock.
            let alias = directory.path("alias.sqlite")
            try FileManager.default.createSymbolicLink(atPath: alias, withDestinationPath: path)
            let throughAlias = try Catalog(path: alias)
            #expect(throws: CatalogError.self) { _ = try Catalog.rebuild(at: path) }
            try throughAlias.close()
            // A catalog in a folder that is not there yet is made, folder and all, as `index` makes it.
            let fresh = directory.path("new/folder/catalog.sqlite")
            #expect(try Catalog.rebuild(at: fresh, from: [runsFixture("support-refund")]).summary.logs.count == 1)
        }
    }

    @Test("a writer that opens the catalog while a rebuild holds it waits for the rebuild, and then writes to the new file")
    func writerWaitsForRebuild() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("catalog.sqlite")
            try Catalog(path: path).close()
            let rebuilding = try CatalogFileLock.forReplacing(path)
            let released = Mutex(false)
            let opened = Task.detached { () throws -> Bool in
                let catalog = try Catalog(path: path)
                defer { try? catalog.close() }
                return released.withLock { $0 }
            }
            try await Task.sleep(for: .milliseconds(300))
            released.withLock { $0 = true }
            rebuilding.release()
            #expect(try await opened.value, "the writer opened the catalog while the rebuild held it")
        }
    }

    @Test("rebuild stops, changing nothing, when the old catalog's history cannot be read, unless told to discard it")
    func rebuildKeepsUnreadableHistory() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("catalog.sqlite")
            let catalog = try Catalog(path: path)
            _ = try catalog.index(paths: [runsFixture("support-refund"), runsFixture("research-budget")])
            try catalog.recordSuite(report: suiteReport, info: SuiteRunInfo(startedAtUs: 1, commandLine: "agent-eval run"))
            try catalog.checkpoint()
            try catalog.close()
            // Every page but the first (the schema) overwritten: a catalog, with its history lost to damage.
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            for index in 4096..<bytes.count { bytes[index] = 0xA5 }
            try bytes.write(to: URL(fileURLWithPath: path))
            let logs = runsFixture("support-refund")
            let error = try #require(throws: CatalogError.self) { _ = try Catalog.rebuild(at: path, from: [logs]) }
            #expect(error.code == .historyUnreadable)
            #expect(error.message.contains("the suite history of the catalog at \(path) cannot be read"), "\(error.message)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the damaged catalog was replaced")
            // Told to, it goes on without that history, and says what was dropped.
            let rebuilt = try Catalog.rebuild(at: path, from: [logs], discardingUnreadableHistory: true)
            #expect(rebuilt.suiteRuns == 0)
            #expect(rebuilt.discardedHistory?.contains("cannot be read") == true)
            #expect(try Catalog(path: path).query("SELECT COUNT(*) FROM logs").rows == [[.integer(1)]])
        }
    }

    @Test("rebuild refuses to replace a file that is not a catalog, and leaves it byte for byte as it was")
    func rebuildRefusesOtherFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("run.jsonl.gz")
            try FileManager.default.copyItem(atPath: runsFixture("support-refund"), toPath: log)
            let notes = directory.path("notes.txt")
            try Data("remember the milk\n".utf8).write(to: URL(fileURLWithPath: notes))
            let foreign = directory.path("other.sqlite")
            _ = try await Subprocess.run("/usr/bin/env", ["sqlite3", foreign, "PRAGMA user_version = 3; CREATE TABLE people (name TEXT);"])
            for path in [log, notes, foreign] {
                let before = try Data(contentsOf: URL(fileURLWithPath: path))
                let error = try #require(throws: CatalogError.self) {
                    _ = try Catalog.rebuild(at: path, from: [runsFixture("research-budget")])
                }
                #expect(error.code == .notACatalog)
                #expect(error.message.contains("\(path) is not an agent-eval catalog"), "\(error.message)")
                #expect(error.place?.path == path)
                #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(path) was changed")
                #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
            }
            // A text file given to any command is not a catalog either, and nothing suggests rebuilding over it.
            let opened = try #require(throws: CatalogError.self) { _ = try Catalog(path: notes) }
            #expect(opened.code == .notACatalog)
            #expect(opened.hint?.contains("rebuild") == false, "\(opened.hint ?? "")")
            // No file at all, or an empty one, is simply made.
            let empty = directory.path("empty.sqlite")
            _ = FileManager.default.createFile(atPath: empty, contents: nil)
            #expect(try Catalog.rebuild(at: empty, from: [runsFixture("research-budget")]).summary.logs.count == 1)
        }
    }

    @Test("a query still running at its time limit is stopped with an error that says so")
    func queryTimeout() throws {
        try TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n"
            let started = ContinuousClock.now
            let error = try #require(throws: CatalogError.self) { _ = try catalog.query(endless, timeout: 0.5) }
            #expect(error.code == .timedOut)
            #expect(error.message == "the statement ran for more than 0.5 s and was stopped")
            #expect(ContinuousClock.now - started < .seconds(60))
            // The connection is fine afterwards, and a quick statement is not stopped.
            #expect(try catalog.query("SELECT 1", timeout: 0.5).rows == [[.integer(1)]])
        }
    }

    @Test("a text with two statements is refused before either runs, naming where the second starts")
    func twoStatements() throws {
        try TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let error = try #require(throws: CatalogError.self) { _ = try catalog.query("SELECT 1; SELECT 2") }
            #expect(error.code == .severalStatements)
            #expect(error.message == "sql runs one statement; this text has a second one at character 11: SELECT 2")
            #expect(!error.message.contains("Multiple statements"))
            // A closing semicolon, white space and comments are one statement.
            #expect(try catalog.query("SELECT 1; -- done\n ;").rows == [[.integer(1)]])
        }
    }
}
