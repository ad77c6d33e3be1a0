import Foundation
import TestSupport
import TestTags
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A log of `Fixtures/runs`, written by the project's writer.
private func runsFixture(_ name: String) -> String {
    repositoryRoot.appendingPathComponent("Fixtures/runs/\(name).jsonl.gz").path
}

/// Writes two decompression bombs into `directory` with Python's zlib, as a hostile peer would
/// hand them over: `endless-line.jsonl.gz`, 1 GiB of `a` with no newline, and
/// `huge-event.jsonl.gz`, a well-formed `run_started` line whose goal is 200 MiB long. Each is a
/// few MB on disk.
private func writeBombs(into directory: String) async throws {
    let script = """
        import sys, zlib
        directory = sys.argv[1]
        def bomb(name, head, fill, tail):
            c = zlib.compressobj(1, zlib.DEFLATED, 31)
            with open(directory + '/' + name, 'wb') as out:
                out.write(c.compress(head))
                chunk = b'a' * (1 << 20)
                for _ in range(fill):
                    out.write(c.compress(chunk))
                out.write(c.compress(tail))
                out.write(c.flush())
        bomb('endless-line.jsonl.gz', b'', 1024, b'')
        prefix = b'{"v":1,"run":"run-bomb","seq":0,"step":0,"time_us":1795000000001250,"kind":"run_started",' \\
            + b'"prev":"' + b'0' * 64 + b'","data":{"goal":"'
        bomb('huge-event.jsonl.gz', prefix, 200, b'","agent":{"name":"a","version":"1"}}}\\n')
        """
    let made = try await Subprocess.run("/usr/bin/env", ["python3", "-c", script, directory])
    #expect(made.status == 0, "\(made.stderr)")
}

/// Bytes waiting in the pipe whose read end is `descriptor`.
private func bytesWaiting(in descriptor: Int32) -> Int {
    var count: Int32 = 0
    return ioctl(descriptor, UInt(FIONREAD), &count) == 0 ? Int(count) : -1
}

@Suite("The catalog's commands stay bounded under hostile input and slow readers", .ownThread)
struct CatalogBoundsCommandTests {
    @Test("index of a folder with decompression bombs indexes the good logs, reports each bomb by name, and stays in bounded memory")
    func poisonedLogs() async throws {
        try await TemporaryDirectory.with { directory in
            let logs = directory.path("logs")
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
            for name in ["research-budget", "support-refund"] {
                try FileManager.default.copyItem(atPath: runsFixture(name), toPath: "\(logs)/\(name).jsonl.gz")
            }
            try await writeBombs(into: logs)
            let catalog = directory.path("catalog.sqlite")
            let measured = try await PeakMemory.run(
                try agentEvalBinary(), ["index", logs, "--catalog", catalog, "--jobs", "2"], environment: ["NO_COLOR": "1"])
            let output = measured.result.stdoutText
            // A bad log is reported, as any damaged log is: the index itself succeeded.
            #expect(measured.result.status == 0, "\(measured.result.stderr)")
            for bomb in ["endless-line", "huge-event"] {
                #expect(output.contains("added     damaged  \(logs)/\(bomb).jsonl.gz"), "\(output)")
            }
            #expect(output.components(separatedBy: "holds more than 64 MiB (67108864 bytes) of events").count == 3, "\(output)")
            #expect(output.contains("hint: a log you trust may be indexed with a higher --max-member-mib (now 64)"))
            for good in ["research-budget", "support-refund"] {
                #expect(output.contains("added     intact   \(logs)/\(good).jsonl.gz"), "\(output)")
            }
            #expect(output.contains("4 logs: 4 added"), "\(output)")
            // Two readers, each up to a 64 MiB member, beside the writer: far below the gigabytes inflated.
            #expect(measured.peakResidentBytes < 400 << 20, "peak resident memory \(measured.peakResidentBytes >> 20) MiB")
            let rows = try await agentEval(
                ["sql", "--catalog", catalog, "SELECT status, COUNT(*) FROM logs GROUP BY status ORDER BY status"])
            #expect(rows.stdoutText.contains("damaged  2") && rows.stdoutText.contains("intact   2"), "\(rows.stdoutText)")
        }
    }

    @Test("index never holds the write lock while its output waits for a reader: a second index beside it succeeds")
    func slowReaderOfTheOutput() async throws {
        try await TemporaryDirectory.with { directory in
            let logs = directory.path("logs")
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
            // Enough logs that their JSON lines overfill a pipe (64 KiB) several times over.
            for index in 0..<1200 {
                try FileManager.default.copyItem(atPath: runsFixture("support-refund"), toPath: "\(logs)/run-\(index).jsonl.gz")
            }
            let other = directory.path("other")
            try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: runsFixture("research-budget"), toPath: "\(other)/research-budget.jsonl.gz")
            let catalog = directory.path("catalog.sqlite")

            let first = Process()
            first.executableURL = URL(fileURLWithPath: try agentEvalBinary())
            first.arguments = ["index", logs, "--catalog", catalog, "--json"]
            let output = Pipe()
            first.standardOutput = output
            first.standardError = FileHandle.nullDevice
            try first.run()
            defer { if first.isRunning { first.terminate() } }
            // Nobody reads the pipe: wait (bounded) until it is full and stays so, with the first
            // index blocked on writing to it.
            let reader = output.fileHandleForReading.fileDescriptor
            var steady = 0
            var last = -1
            var polls = 0
            while steady < 10 && polls < 1200 && first.isRunning {
                try await Task.sleep(for: .milliseconds(50))
                polls += 1
                let waiting = bytesWaiting(in: reader)
                steady = waiting == last && waiting >= 32 << 10 ? steady + 1 : 0
                last = waiting
            }
            try #require(first.isRunning, "the first index ended before its output filled the pipe")
            try #require(steady >= 10, "the first index's output never filled the pipe")

            let second = try await agentEval(["index", other, "--catalog", catalog])
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stdoutText.contains("1 log: 1 added"), "\(second.stdoutText)")

            let lines = output.fileHandleForReading.readDataToEndOfFile()
            await wait(for: first)
            #expect(first.terminationStatus == 0)
            let text = String(decoding: lines, as: UTF8.self)
            #expect(text.components(separatedBy: #""change":"added""#).count == 1201)
        }
    }

    @Test("catalog rebuild refuses to replace a log or a text file given as --catalog, and index does not suggest it")
    func rebuildOverOtherFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("run.jsonl.gz")
            try FileManager.default.copyItem(atPath: runsFixture("support-refund"), toPath: log)
            let notes = directory.path("notes.txt")
            try Data("remember the milk\n".utf8).write(to: URL(fileURLWithPath: notes))
            for path in [log, notes] {
                let before = try Data(contentsOf: URL(fileURLWithPath: path))
                let rebuilt = try await agentEval(["catalog", "rebuild", runsFixture("research-budget"), "--catalog", path])
                #expect(rebuilt.status == 2)
                #expect(rebuilt.stderr.contains("error: \(path) is not an agent-eval catalog"), "\(rebuilt.stderr)")
                #expect(rebuilt.stderr.contains("so rebuild does not replace it; nothing was changed"), "\(rebuilt.stderr)")
                #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(path) was overwritten")
            }
            let indexed = try await agentEval(["index", runsFixture("research-budget"), "--catalog", notes])
            #expect(indexed.status == 2)
            #expect(indexed.stderr.contains("error: \(notes) is not a SQLite database"), "\(indexed.stderr)")
            #expect(!indexed.stderr.contains("rebuild"), "\(indexed.stderr)")
            #expect(indexed.stderr.contains("hint: give --catalog (or AGENT_EVAL_CATALOG) the catalog's own file"), "\(indexed.stderr)")
        }
    }

    @Test("sql stops a statement at --timeout with a message that says so, and refuses a second statement in words")
    func sqlBounds() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = directory.path("catalog.sqlite")
            #expect(try await agentEval(["index", runsFixture("support-refund"), "--catalog", catalog]).status == 0)
            let endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n"
            let stopped = try await agentEval(["sql", "--timeout", "1", endless, "--catalog", catalog])
            #expect(stopped.elapsed < .seconds(60))
            #expect(stopped.status == 2)
            #expect(stopped.stderr.contains("error: the statement ran for more than 1 s and was stopped"), "\(stopped.stderr)")
            #expect(stopped.stderr.contains("--timeout SECONDS"), "\(stopped.stderr)")
            // A timeout no deadline can count (it once trapped computing nanoseconds) is a usage error.
            let huge = try await agentEval(["sql", "--timeout", "1e11", "SELECT 1", "--catalog", catalog])
            #expect(huge.status == 64 && huge.stderr.contains("to 31536000 (a year), got 100000000000.0"), "\(huge.stderr)")

            let two = try await agentEval(["sql", "SELECT COUNT(*) FROM logs; DELETE FROM logs", "--catalog", catalog])
            #expect(two.status == 2)
            #expect(
                two.stderr.contains("error: sql runs one statement; this text has a second one at character 28: DELETE FROM logs"),
                "\(two.stderr)")
            #expect(!two.stderr.contains("Multiple statements"), "\(two.stderr)")
            #expect(try await agentEval(["sql", "SELECT COUNT(*) AS n FROM logs", "--catalog", catalog]).stdoutText.contains("1"))
        }
    }
}
