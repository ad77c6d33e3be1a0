import AgentRuntime
import Foundation
import TestSupport
import Testing

/// The CLI on a team catalog in a real PostgreSQL server (scripts/postgres_server).
@Suite("agent-eval with a PostgreSQL catalog")
struct PostgresCatalogCLITests {
    /// The repository's bundled eval cases, as the README runs them.
    static var evalCases: String { ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("EvalCases").path }

    /// `count` copies of the sample logs under `directory`, in folders of their own.
    static func copies(_ count: Int, into directory: String) throws -> Int {
        let samples = ["support-sample.jsonl.gz", "research-sample.jsonl.gz", "research-sample-torn.jsonl.gz"]
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for number in 0..<count {
            let name = samples[number % samples.count]
            try FileManager.default.copyItem(atPath: fixture(name), toPath: directory + "/\(number)-" + name)
        }
        return count
    }

    /// Each log's row and how many call rows it has, in path order.
    static let perLog = """
        SELECT path, status, steps, tool_calls, executed_calls, (SELECT COUNT(*) FROM calls c WHERE c.log_id = l.log_id) AS calls
        FROM logs l ORDER BY path
        """

    /// What `sql` answers for a one-number statement.
    /// `queued: false` for a look taken while a process the test started waits on a clock of its
    /// own (a lock timeout): behind the tests' queue of subprocesses the look can come too late.
    static func number(_ statement: String, catalog: String, queued: Bool = true) async throws -> Int? {
        let result = try await agentEval(["sql", "--catalog", catalog, "--json", statement], queued: queued)
        guard result.status == 0, let json = try? JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]] else {
            return nil
        }
        return json.first?.values.first as? Int
    }

    @Test("run records each suite run in the team catalog, reuses its check results, and history, runs and catalog check read them back")
    func runAndHistory() async throws {
        try await PostgresTestServer.with { server in
            try await TemporaryDirectory.with { directory in
                let first = try await agentEval(["run", Self.evalCases, "--catalog", server.url], in: directory.url)
                #expect(first.status == 0, "\(first.stderr)")
                #expect(first.stdoutText.contains("passed"))
                let second = try await agentEval(["run", Self.evalCases, "--catalog", server.url], in: directory.url)
                #expect(second.status == 0, "\(second.stderr)")
                // The second run's checks came from the results the first kept.
                #expect(try await Self.number("SELECT COUNT(*) AS n FROM check_results", catalog: server.url) ?? 0 > 0)

                let history = try await agentEval(
                    ["history", "support-refund-recorded", "--catalog", server.url, "--json"], in: directory.url)
                #expect(history.status == 0, "\(history.stderr)")
                let entries = try #require(
                    (try JSONSerialization.jsonObject(with: Data(history.stdout)) as? [[String: Any]])?.first?["history"] as? [Any])
                #expect(entries.count == 2)

                let runs = try await agentEval(["runs", "--catalog", server.url, "--tool", "refund_order"], in: directory.url)
                #expect(runs.status == 0, "\(runs.stderr)")
                #expect(runs.stdoutText.contains("support-agent"))
                let check = try await agentEval(["catalog", "check", "--catalog", server.url], in: directory.url)
                #expect(check.status == 0, "\(check.stderr)")
                #expect(check.stdoutText.contains("0 stale"))

                // A statement that finds nothing still says which columns it has, as on SQLite.
                let none = try await agentEval(
                    ["sql", "--catalog", server.url, "SELECT path, status FROM logs WHERE steps < 0 -- none"], in: directory.url)
                #expect(none.status == 0, "\(none.stderr)")
                let lines = none.stdoutText.split(separator: "\n")
                #expect(lines.first?.split(separator: " ") == ["path", "status"], "\(none.stdoutText)")
                #expect(lines.last == "(0 rows)", "\(none.stdoutText)")
            }
        }
    }

    @Test("two runners index into one team catalog: each re-checks and marks vanished only the logs it saw, and runs says where")
    func twoRunners() async throws {
        try await PostgresTestServer.with { server in
            try await TemporaryDirectory.with { directory in
                let (first, second) = (directory.path("runner-a/logs"), directory.path("runner-b/logs"))
                _ = try Self.copies(2, into: first)
                _ = try Self.copies(3, into: second)
                func onRunner(_ name: String, _ arguments: [String]) async throws -> ProcessResult {
                    let result = try await agentEval(
                        arguments + ["--catalog", server.url], in: directory.url, environment: ["RUNNER_NAME": name])
                    #expect(result.status == 0, "\(arguments): \(result.stderr)")
                    return result
                }
                _ = try await onRunner("runner a", ["index", first])
                _ = try await onRunner("runner-b", ["index", second])
                // The first runner's files are not on the second: its index with no paths and its
                // check leave them alone.
                try FileManager.default.moveItem(atPath: first, toPath: directory.path("elsewhere"))
                let again = try await onRunner("runner-b", ["index", "--json"])
                /// The summary object, the last line `index --json` prints.
                func summaryObject(of result: ProcessResult) throws -> [String: Any] {
                    let last = result.stdoutText.split(separator: "\n").last.map(String.init) ?? ""
                    return try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
                }
                let summary = try summaryObject(of: again)
                #expect(summary["vanished"] as? Int == 0 && summary["unchanged"] as? Int == 3, "\(summary)")
                let check = try await onRunner("runner-b", ["catalog", "check"])
                #expect(check.stdoutText.contains("0 stale"), "\(check.stdoutText)")
                #expect(try await Self.number("SELECT COUNT(*) FROM logs WHERE status = 'vanished'", catalog: server.url) == 0)
                // On the first runner, its own missing logs are found vanished.
                let gone = try await onRunner("runner a", ["index", "--json"])
                let goneSummary = try summaryObject(of: gone)
                #expect(goneSummary["vanished"] as? Int == 2, "\(goneSummary)")

                let runs = try await onRunner("runner-b", ["runs", "--json", "--limit", "100"])
                let rows = try #require(try JSONSerialization.jsonObject(with: Data(runs.stdout)) as? [[String: Any]])
                let places = rows.compactMap { $0["seen_at"] as? String }.sorted()
                #expect(places.count == 5)
                #expect(places.filter { $0.hasPrefix("file://runner%20a/") }.count == 2, "\(places)")
                #expect(places.filter { $0.hasPrefix("file://runner-b/") }.count == 3, "\(places)")
                #expect(
                    rows.allSatisfy { ($0["content_hash"] as? String)?.hasPrefix("sha256:") == true || $0["status"] as? String == "torn" })
            }
        }
    }

    @Test("catalog push copies a job's SQLite catalog into the team's once: the same runs and suite history there, nothing twice")
    func push() async throws {
        try await PostgresTestServer.with { server in
            try await TemporaryDirectory.with { directory in
                let job = directory.path("job.sqlite")
                let run = try await agentEval(["run", Self.evalCases, "--catalog", job], in: directory.url)
                #expect(run.status == 0, "\(run.stderr)")
                let index = try await agentEval(["index", ExampleRuns.fixtures.path + "/runs", "--catalog", job], in: directory.url)
                #expect(index.status == 0, "\(index.stderr)")

                let first = try await agentEval(["catalog", "push", "--from", job, "--to", server.url, "--json"], in: directory.url)
                #expect(first.status == 0, "\(first.stderr)")
                let pushed = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout)) as? [String: Any])
                #expect(pushed["suite_runs"] as? Int == 1)
                #expect((pushed["runs"] as? Int ?? 0) > 0 && pushed["runs_known"] as? Int == 0)
                let second = try await agentEval(["catalog", "push", "--from", job, "--to", server.url, "--json"], in: directory.url)
                let again = try #require(try JSONSerialization.jsonObject(with: Data(second.stdout)) as? [String: Any])
                #expect(again["suite_runs"] as? Int == 0 && again["suite_runs_known"] as? Int == 1)
                #expect(again["runs"] as? Int == 0 && again["runs_known"] as? Int == pushed["runs"] as? Int)

                let fromServer = try await agentEval(["sql", "--catalog", server.url, "--json", Self.perLog])
                let fromFile = try await agentEval(["sql", "--catalog", job, "--json", Self.perLog])
                #expect(fromServer.status == 0 && fromServer.stdoutText == fromFile.stdoutText)
                let history = "SELECT case_id, outcome, runs, passed_runs, file_digest FROM case_history ORDER BY case_id"
                let historyServer = try await agentEval(["sql", "--catalog", server.url, "--json", history])
                let historyFile = try await agentEval(["sql", "--catalog", job, "--json", history])
                #expect(historyServer.status == 0 && historyServer.stdoutText == historyFile.stdoutText)
                #expect(historyServer.stdoutText.contains("support-refund-recorded"))
            }
        }
    }

    @Test("four processes indexing into one PostgreSQL catalog at once lose no row and show no serialization failure")
    func fourIndexersAtOnce() async throws {
        try await PostgresTestServer.with { server in
            try await TemporaryDirectory.with { directory in
                var total = 0
                for worker in 0..<4 { total += try Self.copies(60, into: directory.path("logs-\(worker)")) }
                let results = try await withThrowingTaskGroup(of: ProcessResult.self) { group in
                    for worker in 0..<4 {
                        group.addTask {
                            try await agentEval(["index", directory.path("logs-\(worker)"), "--catalog", server.url], queued: false)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                for result in results {
                    #expect(result.status == 0, "\(result.stderr)")
                    #expect(!result.stderr.contains("serialize"))
                }
                #expect(try await Self.number("SELECT COUNT(*) AS n FROM logs", catalog: server.url) == total)
                #expect(
                    try await Self.number("SELECT COUNT(*) AS n FROM logs WHERE status = 'intact'", catalog: server.url) == total / 3 * 2)
                // Each log's calls are there once, as one process indexing them all into a file has them.
                let reference = directory.path("reference.sqlite")
                let fresh = try await agentEval(["index"] + (0..<4).map { directory.path("logs-\($0)") } + ["--catalog", reference])
                #expect(fresh.status == 0)
                let fromServer = try await agentEval(["sql", "--catalog", server.url, "--json", Self.perLog])
                let fromFile = try await agentEval(["sql", "--catalog", reference, "--json", Self.perLog])
                #expect(fromServer.status == 0 && fromFile.status == 0)
                #expect(fromServer.stdoutText == fromFile.stdoutText)
            }
        }
    }

    @Test("a server that goes away while index waits for the catalog ends it with a clear error and a non-zero exit")
    func serverGoneMidCommand() async throws {
        let server = try await PostgresTestServer.start()
        try await TemporaryDirectory.with { directory in
            _ = try Self.copies(6, into: directory.path("logs"))
            // The catalog's tables first (an index of nothing makes them), so that `sql` can look.
            try FileManager.default.createDirectory(atPath: directory.path("empty"), withIntermediateDirectories: true)
            let create = try await agentEval(["index", directory.path("empty"), "--catalog", server.url])
            #expect(create.status == 0, "\(create.stderr)")
            // Another client holds the catalog's write lock (the key every writer takes), so the
            // index is surely inside its first write when the server goes.
            let holder = Task {
                try await ChildProcess(
                    command: ["psql", server.url, "-c", "SELECT pg_advisory_lock(7018690069350147446)", "-c", "SELECT pg_sleep(120)"],
                    timeoutMs: 150_000, outputLimit: 1 << 16
                ).run()
            }
            // The index starts once the lock is held: on a loaded machine psql took longer to
            // start than the index took to finish.
            var held = 0
            for _ in 0..<600 where held == 0 {
                held =
                    try await Self.number(
                        "SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted", catalog: server.url) ?? 0
                if held == 0 { try await Task.sleep(for: .milliseconds(50)) }
            }
            try #require(held > 0, "psql never took the catalog's lock")
            let index = Task { try await agentEval(["index", directory.path("logs"), "--catalog", server.url], queued: false) }
            var waiting = 0
            // Up to a minute: a debug build started beside the suite's other tests (and pip
            // installing a test's packages) took more than 20 s to reach the lock.
            for _ in 0..<1200 {
                waiting =
                    try await Self.number(
                        "SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", catalog: server.url,
                        queued: false) ?? 0
                if waiting > 0 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(waiting > 0, "index never waited for the lock")
            await server.stop()
            let result = try await index.value
            _ = try? await holder.value
            #expect(result.status != 0)
            #expect(
                result.stderr.contains("ended the connection") || result.stderr.contains("lost the connection"), "\(result.stderr)")
            #expect(!result.stdoutText.contains("logs:"))
        }
        await server.stop()
    }

    @Test(
        "an index killed with SIGKILL mid-way leaves a catalog that a second index completes to exactly what one uninterrupted index gives")
    func killedIndexIsConsistent() async throws {
        try await PostgresTestServer.with { server in
            try await TemporaryDirectory.with { directory in
                let total = try Self.copies(400, into: directory.path("logs"))
                let (process, _) = try startAgentEval(
                    ["index", directory.path("logs"), "--catalog", server.url], in: directory.url, catalog: server.url)
                // Killed once it has committed some batches (or, on a slow machine, before).
                for _ in 0..<200 {
                    if try await Self.number("SELECT COUNT(*) AS n FROM logs", catalog: server.url) ?? 0 >= 64 { break }
                    try await Task.sleep(for: .milliseconds(25))
                }
                kill(process.processIdentifier, SIGKILL)
                await wait(for: process)
                let again = try await agentEval(["index", directory.path("logs"), "--catalog", server.url])
                #expect(again.status == 0, "\(again.stderr)")
                #expect(try await Self.number("SELECT COUNT(*) AS n FROM logs", catalog: server.url) == total)

                let reference = directory.path("reference.sqlite")
                let fresh = try await agentEval(["index", directory.path("logs"), "--catalog", reference])
                #expect(fresh.status == 0)
                let fromServer = try await agentEval(["sql", "--catalog", server.url, "--json", Self.perLog])
                let fromFile = try await agentEval(["sql", "--catalog", reference, "--json", Self.perLog])
                #expect(fromServer.status == 0 && fromFile.status == 0)
                #expect(fromServer.stdoutText == fromFile.stdoutText)
            }
        }
    }
}
