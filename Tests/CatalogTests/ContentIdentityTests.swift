import EvalEngine
import Foundation
import Replay
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Catalog

/// A log known by its content (catalog schema version 11): the same bytes at another path, on
/// another machine sharing the catalog, or with a new modification time after a checkout, are
/// recognised without being read. `ContentIdentity.check` runs against each store.
@Suite("A log known by its content")
struct ContentIdentityTests {
    @Test("in a SQLite catalog, the same bytes at another path or touched are answered from the cache, and indexed as unchanged")
    func sqlite() async throws {
        try await TemporaryDirectory.with { directory in
            try await ContentIdentity.check(catalog: directory.path("catalog.sqlite"), in: directory)
        }
    }

    @Test("the content hash is the SHA-256 of the file's bytes, none for a file that cannot be read that far")
    func contentHash() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("a.jsonl.gz")
            try writeSyntheticRun(to: log, steps: 3, seed: 5)
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: log)))
            #expect(LogFingerprint.contentHash(log, length: bytes.count) == ContentHash.sha256(bytes))
            #expect(LogFingerprint.contentHash(log, length: 10) == ContentHash.sha256(bytes[..<10]))
            #expect(LogFingerprint.contentHash(log, length: bytes.count + 1) == nil)
            #expect(LogFingerprint.contentHash(directory.path("missing.jsonl.gz"), length: 0) == nil)
        }
    }
}

/// The scenario both stores must pass.
enum ContentIdentity {
    static func check(catalog location: String, in directory: TemporaryDirectory) async throws {
        let sample = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
        let first = directory.path("machine-a/logs/run.jsonl.gz")
        let second = directory.path("machine-b/checkout/logs/run.jsonl.gz")
        for path in [first, second] {
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: sample, toPath: path)
        }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: sample)))

        // Indexed: the row holds the content hash and where it was seen.
        let catalog = try Catalog(path: location)
        defer { try? catalog.close() }
        #expect(try catalog.index(paths: [first]).count(.added) == 1)
        let row = try #require(try catalog.runs(RunQuery()).first { $0.path == first })
        #expect(row.contentHash == ContentHash.sha256(bytes))
        #expect(row.seenOn == Catalog.seenOn)
        if Catalog.seenOn != nil {
            let seenAt = try #require(row.seenAt)
            #expect(seenAt.hasPrefix("file://") && seenAt.hasSuffix("/machine-a/logs/run.jsonl.gz"), "\(seenAt)")
        }
        #expect(row.json["content_hash"] == .string(ContentHash.sha256(bytes)))

        // A suite over the log at the first path fills the fact cache and keeps its result. The
        // case file beside the logs, the same bytes on both machines, names them relatively.
        func suite(over log: String, calling tool: String = "lookup_order") async throws -> (FactCache, RunResult) {
            let caseFile = ((log as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent + "/case.yaml"
            try "caseId: c\nlogs: logs/run.jsonl.gz\nexpected:\n  toolsCalled: [\(tool)]\n".write(
                toFile: caseFile, atomically: true, encoding: .utf8)
            let cache = FactCache(catalog: catalog)
            var options = EvalOptions(jobs: 1)
            options.facts = cache
            let result = try #require(await EvalRunner(options: options).run(EvalSuite.load(paths: [caseFile]).cases).first?.runs.first)
            cache.flush()
            return (cache, result)
        }
        // The stamp of the file's one record, when `table` has an entry made from the bytes it
        // names (schema 13: the run's row, the facts and the step table refer to the record).
        func stamps(_ table: String, _ path: String) throws -> [CatalogValue] {
            try catalog.query(
                """
                SELECT f.mtime_ns FROM log_files f JOIN \(table) x ON x.file_id = f.file_id AND x.generation = f.generation
                WHERE f.path = ?
                """, arguments: [.text(path)]
            ).rows.compactMap(\.first)
        }
        let (firstCache, firstResult) = try await suite(over: first)
        #expect(firstCache.usage == (0, 1))

        // A replay keeps the log's step table.
        #expect(try StepIndex.open(log: first, store: CatalogStepStore(catalog: catalog)).rebuilt)
        // A checkout gives the file a new modification time: indexed as unchanged, nothing read,
        // and the file's record takes the new stamp, the row, the step table and the fact
        // cache's entry still holding (the next index and suite need no hash).
        let later = Date().addingTimeInterval(3600)
        try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: first)
        #expect(try catalog.check().stale.isEmpty, "the same bytes under a new stamp are not stale")
        let touched = try catalog.index(paths: [first])
        #expect(touched.count(.unchanged) == 1 && touched.eventsRead == 0)
        let stamp = try #require(FileStamp(path: first))
        for table in ["logs", "step_logs", "facts"] {
            #expect(try stamps(table, first) == [.integer(Int64(stamp.mtimeNs))], "\(table)")
        }
        let (touchedCache, _) = try await suite(over: first)
        #expect(touchedCache.usage == (0, 0) && touchedCache.reusedResults == 1)
        // The same through the one-log entry point.
        try FileManager.default.setAttributes([.modificationDate: later.addingTimeInterval(60)], ofItemAtPath: first)
        let one = try catalog.index(log: first)
        #expect(one.change == .unchanged && one.eventsRead == 0)

        // The same bytes at another path (another machine's checkout): the result kept for the
        // first path is reused, nothing is read or written.
        let (secondCache, secondResult) = try await suite(over: second)
        #expect(secondCache.usage == (0, 0) && secondCache.reusedResults == 1)
        #expect(secondResult.failures == firstResult.failures && secondResult.summary == firstResult.summary)
        #expect(secondResult.logPath == second)
        #expect(try stamps("facts", second).isEmpty)
        // Its facts come from the cache too, and a pointer to them is kept under its path, with
        // the result of a check made from them (here: of an edited case).
        let facts = FactCache(catalog: catalog)
        #expect(try facts.facts(for: second) == (try LogFacts.read(second)))
        #expect(facts.usage == (1, 0))
        facts.flush()
        let secondStamp = try #require(FileStamp(path: second))
        #expect(try stamps("facts", second) == [.integer(Int64(secondStamp.mtimeNs))])
        let (edited, editedResult) = try await suite(over: second, calling: "refund_order")
        #expect(edited.usage == (1, 0) && editedResult.error == nil)
        let kept = try catalog.query(
            "SELECT COUNT(*) FROM check_results r JOIN log_files f ON f.file_id = r.file_id WHERE f.path = ?", arguments: [.text(second)])
        #expect(kept.rows.first?.first == .integer(1))
        let (again, _) = try await suite(over: second, calling: "refund_order")
        #expect(again.usage == (0, 0) && again.reusedResults == 1)

        // A log that vanished and is back is read again, not left vanished: moved back with the
        // very stamp its row has, or restored by a checkout (the same bytes, a new stamp).
        let aside = directory.path("aside.jsonl.gz")
        let folder = directory.path("machine-a/logs")
        try FileManager.default.moveItem(atPath: first, toPath: aside)
        #expect(try catalog.index(paths: [folder]).count(IndexedLog.Change.vanished) == 1)
        try FileManager.default.moveItem(atPath: aside, toPath: first)
        let movedBack = try catalog.index(paths: [folder])
        #expect(movedBack.logs.map(\.status) == [.intact] && movedBack.count(.reindexed) == 1, "\(movedBack.logs)")
        try FileManager.default.moveItem(atPath: first, toPath: aside)
        #expect(try catalog.index(paths: [folder]).count(IndexedLog.Change.vanished) == 1)
        try FileManager.default.copyItem(atPath: aside, toPath: first)
        let restored = try catalog.index(paths: [folder])
        #expect(restored.logs.map(\.status) == [.intact] && restored.count(.reindexed) == 1, "\(restored.logs)")
        #expect(try catalog.index(paths: [folder]).count(.unchanged) == 1)

        // Other bytes at the second path: read, never answered from the first log's entry.
        try FileManager.default.removeItem(atPath: second)
        try FileManager.default.copyItem(
            atPath: FixtureLogs.directory.appendingPathComponent("research-sample.jsonl.gz").path, toPath: second)
        let (thirdCache, thirdResult) = try await suite(over: second)
        #expect(thirdCache.usage == (0, 1) && thirdCache.reusedResults == 0)
        #expect(thirdResult.summary != firstResult.summary)
        let changed = try catalog.index(paths: [second])
        #expect(changed.count(.added) == 1 && changed.eventsRead > 0)
    }
}
