import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// Writes `count` synthetic runs of `steps` steps into `directory`.
private func writeRuns(_ count: Int, steps: Int, into directory: String, seed: UInt64) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var corpus = SyntheticCorpus(seed: seed)
    for index in 0..<count {
        let run = corpus.run(index: index, steps: steps)
        let writer = try LogWriter.create(at: "\(directory)/run-\(index).jsonl.gz", runId: run.runId)
        try SyntheticCorpus.record(run, into: writer, clock: SteppingClock())
        try writer.close()
    }
}

@Suite("The catalog from the command line", .ownThread)
struct CatalogCommandTests {
    @Test("catalog check finds a damaged page of the catalog's own file: exit 2 saying so and what rebuilds it, never \"0 stale\"")
    func checkFindsADamagedCatalog() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = directory.path("logs")
        try writeRuns(3, steps: 4, into: logs, seed: 5)
        let catalog = directory.path("catalog.sqlite")
        let indexed = try await agentEval(["index", logs, "--catalog", catalog])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        let whole = try await agentEval(["catalog", "check", "--catalog", catalog])
        #expect(whole.status == 0 && whole.stdoutText.contains("3 logs checked: 0 stale"), "\(whole.stdoutText)\(whole.stderr)")
        // Junk over the file's fourth page (an index's or a table's: either is damage).
        let handle = try #require(FileHandle(forUpdatingAtPath: catalog))
        try handle.seek(toOffset: 3 * 4096)
        try handle.write(contentsOf: Data(repeating: 0xFF, count: 4096))
        try handle.close()
        let damaged = try await agentEval(["catalog", "check", "--catalog", catalog])
        #expect(damaged.status == 2, "\(damaged.status): \(damaged.stdoutText)\(damaged.stderr)")
        #expect(!damaged.stdoutText.contains("0 stale"), "\(damaged.stdoutText)")
        #expect(damaged.stderr.contains("damaged") && damaged.stderr.contains("catalog rebuild"), "\(damaged.stderr)")
    }

    @Test("index says what a path that is no log file is (a folder, a named pipe, a link to nothing or in a loop), not only \"vanished\"")
    func indexNamesWhatIsNoLogFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = directory.path("logs")
        try writeRuns(1, steps: 2, into: logs, seed: 9)
        #expect(mkfifo(logs + "/fifo.jsonl.gz", 0o600) == 0)
        try FileManager.default.createDirectory(atPath: logs + "/dir.jsonl.gz", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: logs + "/loop.jsonl.gz", withDestinationPath: "loop.jsonl.gz")
        try FileManager.default.createSymbolicLink(atPath: logs + "/dangling.jsonl.gz", withDestinationPath: "/nonexistent/x")
        let indexed = try await agentEval(["index", logs, "--catalog", directory.path("catalog.sqlite")])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        for said in [
            "problem: it is a named pipe (FIFO), not a file", "problem: it is a folder, not a file",
            "problem: it is a symbolic link that leads round in a loop", "problem: it is a symbolic link to nothing", "1 added",
        ] {
            #expect(indexed.stdoutText.contains(said), "\(said): \(indexed.stdoutText)")
        }
    }

    @Test("push into a catalog that holds another run at the same path (another runner's, in the same workspace path) says it replaced it")
    func pushSaysWhatItReplaced() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let folder = directory.path("P")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let runs = ExampleRuns.fixtures.appendingPathComponent("runs").path
        let log = folder + "/run.jsonl.gz"
        try FileManager.default.copyItem(atPath: runs + "/support-refund.jsonl.gz", toPath: log)
        #expect(
            try await agentEval(["index", folder, "--catalog", directory.path("a.sqlite")], environment: ["RUNNER_NAME": "runner-a"]).status
                == 0)
        try FileManager.default.removeItem(atPath: log)
        try FileManager.default.copyItem(atPath: runs + "/research-budget.jsonl.gz", toPath: log)
        #expect(
            try await agentEval(["index", folder, "--catalog", directory.path("b.sqlite")], environment: ["RUNNER_NAME": "runner-b"]).status
                == 0)
        let team = directory.path("team.sqlite")
        let first = try await agentEval(["catalog", "push", "--from", directory.path("a.sqlite"), "--to", team])
        #expect(first.status == 0 && !first.stderr.contains("warning"), "\(first.stderr)")
        let second = try await agentEval(["catalog", "push", "--from", directory.path("b.sqlite"), "--to", team, "--json"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(
            second.stderr.contains(
                "held run run-support-refund (indexed on runner-a) at \(log); it holds run run-research-budget there now"),
            "\(second.stderr)")
        #expect(second.stdoutText.contains(#""runs_replaced":[{"by_run_id":"run-research-budget""#), "\(second.stdoutText)")
    }

    @Test("index, run and index again in several processes at once: no lock errors, no lost or doubled rows")
    func concurrentProcesses() async throws {
        try await CLISandbox.with { sandbox in
            let root = sandbox.directory
            let catalog = root.path("shared.sqlite")
            for part in 0..<3 { try writeRuns(15, steps: 8, into: root.path("logs/part-\(part)"), seed: UInt64(part + 1)) }
            var started: [(Process, String)] = []
            for part in 0..<3 { started.append(try startAgentEval(["index", "logs/part-\(part)"], in: root.url, catalog: catalog)) }
            // Two processes index the same logs; two suite runs record results and index what they write.
            started.append(try startAgentEval(["index", "logs"], in: root.url, catalog: catalog))
            for number in 0..<2 {
                started.append(
                    try startAgentEval(
                        ["run", "EvalCases/", "--out", "runs/suite-\(number)", "--jobs", "2"], in: root.url, catalog: catalog))
            }
            for (process, errors) in started {
                await wait(for: process)
                let text = try String(contentsOfFile: errors, encoding: .utf8)
                #expect(process.terminationStatus == 0, "\(process.arguments ?? []): \(text)")
                #expect(!text.contains("locked") && !text.contains("warning"), "\(text)")
            }
            let environment = ["AGENT_EVAL_CATALOG": catalog]
            let count = try await agentEval(
                ["sql", "--json", "SELECT COUNT(*) AS logs, COUNT(DISTINCT path) AS paths FROM logs"], in: root.url,
                environment: environment)
            // 45 synthetic logs and, per suite run, the 3 live agent runs (one a conversation) and
            // the 2 live pipelines' agent tasks' child runs (a pipeline log is not a run: not indexed).
            #expect(count.stdoutText.contains(#""logs":55"#), "\(count.stdoutText)")
            #expect(count.stdoutText.contains(#""paths":55"#), "\(count.stdoutText)")
            let calls = try await agentEval(
                ["sql", "--json", "SELECT SUM(tool_calls) = (SELECT COUNT(*) FROM calls) AS whole FROM logs"], in: root.url,
                environment: environment)
            #expect(calls.stdoutText.contains(#""whole":1"#), "\(calls.stdoutText)")
            let suites = try await agentEval(
                ["sql", "--json", "SELECT COUNT(*) AS n FROM suite_runs"], in: root.url, environment: environment)
            #expect(suites.stdoutText.contains(#""n":2"#), "\(suites.stdoutText)")
        }
    }

    @Test(
        "an index killed mid-way leaves a consistent catalog; the next index finishes it with the rows a rebuild gives", .atScale,
        .tags(.scale))
    func killedMidIndex() async throws {
        try await TemporaryDirectory.with { root in
            try writeRuns(250, steps: 20, into: root.path("logs"), seed: 9)
            let catalog = root.path("catalog.sqlite")
            let environment = ["AGENT_EVAL_CATALOG": catalog]
            let (process, _) = try startAgentEval(["index", "logs"], in: root.url, catalog: catalog)
            // Kill it once some logs are in (64 logs a transaction: 4 batches).
            var waited = 0
            while waited < 400 {
                try await Task.sleep(for: .milliseconds(20))
                waited += 1
                // A look, not work: it does not queue behind the other tests' programs.
                let done = try await agentEval(
                    ["sql", "--json", "SELECT COUNT(*) AS n FROM logs"], in: root.url, environment: environment, queued: false)
                if done.status == 0, !done.stdoutText.contains(#""n":0"#) { break }
            }
            kill(process.processIdentifier, SIGKILL)
            await wait(for: process)
            #expect(process.terminationReason == .uncaughtSignal, "the index finished before it was killed")
            let check = try await Subprocess.run("/usr/bin/env", ["sqlite3", catalog, "PRAGMA integrity_check"])
            #expect(check.stdoutText == "ok\n", "\(check.stdoutText) \(check.stderr)")
            let again = try await agentEval(["index", "logs", "--json"], in: root.url, environment: environment)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdoutText.contains(#""change":"added""#))
            #expect(again.stdoutText.contains(#""change":"unchanged""#))

            // A run's row with the identity of its file's one record (`log_files`).
            let select = """
                SELECT l.path, f.size, f.tail_hash, l.status, l.run_id, l.events, l.steps, l.tool_calls, l.executed_calls, l.input_tokens
                FROM logs l JOIN log_files f ON f.file_id = l.file_id AND f.generation = l.generation ORDER BY l.path
                """
            let incremental = try await agentEval(["sql", "--json", select], in: root.url, environment: environment)
            let incrementalCalls = try await agentEval(
                ["sql", "--json", "SELECT path, ordinal, tool, arguments, status FROM run_calls ORDER BY path, ordinal"], in: root.url,
                environment: environment)
            let rebuild = try await agentEval(["catalog", "rebuild"], in: root.url, environment: environment)
            #expect(rebuild.status == 0, "\(rebuild.stderr)")
            let rebuilt = try await agentEval(["sql", "--json", select], in: root.url, environment: environment)
            let rebuiltCalls = try await agentEval(
                ["sql", "--json", "SELECT path, ordinal, tool, arguments, status FROM run_calls ORDER BY path, ordinal"], in: root.url,
                environment: environment)
            #expect(incremental.stdoutText == rebuilt.stdoutText)
            #expect(incrementalCalls.stdoutText == rebuiltCalls.stdoutText)
            #expect(incremental.stdoutText.components(separatedBy: "\"path\"").count == 251)
        }
    }

    @Test("runs says which rows are of a log that changed, grew or went since it was indexed, instead of listing them as the file is")
    func runsLooksAtTheFiles() async throws {
        try await CLISandbox.with { sandbox in
            let root = sandbox.directory.url
            let environment = ["AGENT_EVAL_CATALOG": sandbox.directory.path("catalog.sqlite"), "NO_COLOR": "1"]
            let logs = sandbox.directory.path("logs")
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
            let fixtures = repositoryRoot.path + "/Fixtures/runs"
            for name in ["edited", "removed", "touched", "grown"] {
                try FileManager.default.copyItem(atPath: fixtures + "/support-refund.jsonl.gz", toPath: "\(logs)/\(name).jsonl.gz")
            }
            #expect(try await agentEval(["index", "logs"], in: root, environment: environment).status == 0)
            func files() async throws -> [String: String] {
                let listed = try await agentEval(["runs", "--json"], in: root, environment: environment)
                #expect(listed.status == 0, "\(listed.stderr)")
                var files: [String: String] = [:]
                for row in try JSONParser.parse(listed.stdout).arrayValue ?? [] {
                    files[(row["path"]?.stringValue.map { ($0 as NSString).lastPathComponent }) ?? "?"] = row["file"]?.stringValue
                }
                return files
            }
            func expected(_ edited: String, _ removed: String, _ touched: String, _ grown: String) -> [String: String] {
                ["edited.jsonl.gz": edited, "removed.jsonl.gz": removed, "touched.jsonl.gz": touched, "grown.jsonl.gz": grown]
            }
            #expect(try await files() == expected("as_indexed", "as_indexed", "as_indexed", "as_indexed"))

            // Another run's bytes where the refund was; one log removed; one given a new time only;
            // one with more bytes after the same ones, as a run still being written adds them.
            try FileManager.default.removeItem(atPath: logs + "/edited.jsonl.gz")
            try FileManager.default.copyItem(atPath: fixtures + "/research-budget.jsonl.gz", toPath: logs + "/edited.jsonl.gz")
            try FileManager.default.removeItem(atPath: logs + "/removed.jsonl.gz")
            try FileManager.default.setAttributes(
                [.modificationDate: Date().addingTimeInterval(3600)], ofItemAtPath: logs + "/touched.jsonl.gz")
            let grown = try #require(FileHandle(forWritingAtPath: logs + "/grown.jsonl.gz"))
            try grown.seekToEnd()
            try grown.write(contentsOf: try Data(contentsOf: URL(fileURLWithPath: fixtures + "/research-budget.jsonl.gz")).prefix(64))
            try grown.close()
            #expect(try await files() == expected("changed", "vanished", "as_indexed", "grew"))
            // The table: the filter matched the refund the edited file no longer holds, and says so.
            let table = try await agentEval(["runs", "--tool", "refund_order"], in: root, environment: environment)
            let lines = table.stdoutText.split(separator: "\n").map(String.init)
            #expect(lines.contains { $0.contains("edited.jsonl.gz") && $0.contains("intact (file changed)") }, "\(table.stdoutText)")
            #expect(lines.contains { $0.contains("removed.jsonl.gz") && $0.contains("intact (file gone)") }, "\(table.stdoutText)")
            #expect(lines.contains { $0.contains("touched.jsonl.gz") && $0.contains("intact ") && !$0.contains("(file") })
            #expect(lines.contains { $0.contains("grown.jsonl.gz") && $0.contains("intact (file grew)") }, "\(table.stdoutText)")
            #expect(table.stdoutText.contains("`agent-eval index logs/edited.jsonl.gz` reads it again"), "\(table.stdoutText)")
            #expect(table.stdoutText.contains("`agent-eval index logs/grown.jsonl.gz` reads what it added"), "\(table.stdoutText)")

            // Indexed again: the rows are of the files as they are (the grown log's added bytes are
            // no event: it is read as damaged from there).
            #expect(try await agentEval(["index", "logs"], in: root, environment: environment).status != 2)
            #expect(try await files() == expected("as_indexed", "vanished", "as_indexed", "as_indexed"))
            let again = try await agentEval(["runs", "--tool", "refund_order"], in: root, environment: environment)
            #expect(!again.stdoutText.contains("edited.jsonl.gz") && !again.stdoutText.contains("(file"), "\(again.stdoutText)")
            // A row that says vanished, of a file that is there again, is not what the file is.
            try FileManager.default.copyItem(atPath: fixtures + "/support-refund.jsonl.gz", toPath: logs + "/removed.jsonl.gz")
            #expect(try await files()["removed.jsonl.gz"] == "changed")
        }
    }

    @Test("runs finds runs by tools called and not called, and prints the replay command; history flags a case that flips")
    func runsAndHistory() async throws {
        try await CLISandbox.with { sandbox in
            let catalog = sandbox.directory.path("catalog.sqlite")
            let environment = ["AGENT_EVAL_CATALOG": catalog, "NO_COLOR": "1"]
            let root = sandbox.directory.url
            #expect(try await agentEval(["index", "Fixtures/runs", "Fixtures/samples"], in: root, environment: environment).status == 0)
            let found = try await agentEval(
                ["runs", "--tool", "refund_order", "--not-tool", "web_search"], in: root, environment: environment)
            #expect(found.status == 0)
            #expect(found.stdoutText.contains("agent-eval replay Fixtures/runs/support-refund.jsonl.gz"))
            #expect(found.stdoutText.contains("agent-eval replay Fixtures/samples/support-sample.jsonl.gz"))
            #expect(!found.stdoutText.contains("research"))
            let torn = try await agentEval(["runs", "--status", "torn", "--json"], in: root, environment: environment)
            #expect(torn.stdoutText.contains("research-sample-torn.jsonl.gz"))
            #expect(torn.stdoutText.contains(#""replay":"agent-eval replay "#))
            let bad = try await agentEval(["runs", "--since", "last tuesday"], in: root, environment: environment)
            #expect(bad.status == 64)
            #expect(bad.stderr.contains("--since last tuesday is not a time"))
            // So far back that counting the microseconds overflows: refused, not a trap.
            let far = try await agentEval(["runs", "--since", "999999999999999999d"], in: root, environment: environment)
            #expect(
                far.status == 64 && far.stderr.contains("reaches back further than any time a log holds: give at most 104249d"),
                "\(far.stderr)")
            let everything = try await agentEval(["runs", "--limit", "\(Int.max)", "--agent", "s*"], in: root, environment: environment)
            #expect(
                everything.status == 0 && everything.stdoutText.contains("support-refund.jsonl.gz"),
                "\(everything.stdoutText)\(everything.stderr)")

            // A case over a log that is swapped between suite runs: pass, fail, pass.
            let cases = sandbox.directory.path("cases")
            try FileManager.default.createDirectory(atPath: cases, withIntermediateDirectories: true)
            try """
            caseId: swapped
            logs: current.jsonl.gz
            expected:
              stopReason: success
            """.write(toFile: cases + "/swapped.yaml", atomically: true, encoding: .utf8)
            var statuses: [Int32] = []
            for source in ["runs/support-refund", "runs/research-budget", "runs/support-refund"] {
                try? FileManager.default.removeItem(atPath: cases + "/current.jsonl.gz")
                try FileManager.default.copyItem(
                    atPath: "\(repositoryRoot.path)/Fixtures/\(source).jsonl.gz", toPath: cases + "/current.jsonl.gz")
                let run = try await agentEval(["run", "cases", "--history"], in: root, environment: environment)
                statuses.append(run.status)
                if statuses.count == 3 {
                    #expect(run.stdoutText.contains("FLAKY in history: swapped passed 2 of its last 3 suite runs"), "\(run.stdoutText)")
                }
            }
            #expect(statuses == [0, 1, 0])
            let history = try await agentEval(["history", "swapped"], in: root, environment: environment)
            #expect(history.status == 1)
            #expect(history.stdoutText.contains("swapped: passed 2 of its last 3 suite runs — FLAKY"))
            let refused = try await agentEval(["sql", "DELETE FROM suite_runs"], in: root, environment: environment)
            #expect(refused.status == 2)
            #expect(refused.stderr.contains("read-only"))
            // ATTACH is read-only to SQLite, but it would change what the reused connection reads.
            let attach = try await agentEval(["sql", "ATTACH DATABASE 'elsewhere.db' AS x"], in: root, environment: environment)
            #expect(attach.status == 2 && attach.stderr.contains("ATTACH would change what its connection reads"), "\(attach.stderr)")
            let hidden = try await agentEval(
                ["sql", "/* first */ ATTACH DATABASE 'elsewhere.db' AS x"], in: root, environment: environment)
            #expect(hidden.status == 2, "a comment before it does not hide it: \(hidden.stdoutText)")
            #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("elsewhere.db").path))
            // A limit of no runs, and a cost that is no number, are usage errors, not empty answers.
            #expect(try await agentEval(["runs", "--limit", "0"], in: root, environment: environment).status == 64)
            #expect(try await agentEval(["runs", "--min-cost", "nan"], in: root, environment: environment).status == 64)

            // A suite run on a CI runner says which runner and which job.
            let ci = environment.merging([
                "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/agents", "GITHUB_RUN_ID": "42", "GITHUB_JOB": "evals",
                "RUNNER_NAME": "runner-7",
            ]) { $1 }
            #expect(try await agentEval(["run", "cases"], in: root, environment: ci).status == 0)
            let placed = try await agentEval(["history", "swapped", "--json"], in: root, environment: environment)
            let entries = try JSONParser.parse(placed.stdout).arrayValue?.first?["history"]?.arrayValue ?? []
            #expect(entries.first?["runner"] == "runner-7")
            #expect(entries.first?["ci_job"] == "https://github.com/acme/agents/actions/runs/42 (job evals)")
            #expect(entries.count == 4 && entries.dropFirst().allSatisfy { $0["ci_job"] == nil }, "the earlier runs ran on no CI")
        }
    }
}
