import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import Catalog

/// The team catalog on a real PostgreSQL server (scripts/postgres_server) against the SQLite
/// catalog: the same logs must give the same answers from both stores.
@Suite("The catalog on PostgreSQL")
struct PostgresCatalogTests {
    /// The queries `runs` is asked in these tests: every filter, alone and together.
    static let queries: [RunQuery] = {
        var all: [RunQuery] = []
        var query = RunQuery()
        query.limit = 500
        all.append(query)
        var tool = query
        tool.tools = ["refund_order"]
        all.append(tool)
        var notTool = tool
        notTool.notTools = ["delete_customer"]
        all.append(notTool)
        var agent = query
        agent.agent = "support-*"
        all.append(agent)
        var model = query
        model.model = "scripted:[rs]*"
        all.append(model)
        var denied = query
        denied.hasDenied = true
        all.append(denied)
        var unapproved = query
        unapproved.tools = ["refund_order"]
        unapproved.approval = RunQuery.ApprovalFilter.none
        all.append(unapproved)
        var running = query
        running.stopReasons = ["running", "success"]
        all.append(running)
        var damaged = query
        damaged.statuses = [.damaged, .torn]
        damaged.limit = 3
        all.append(damaged)
        // Everything at once: on PostgreSQL the driven shape binds its common table
        // expressions' values first; the order must follow the text.
        var combined = query
        combined.tools = ["lookup_order", "refund_order"]
        combined.notTools = ["delete_customer", "web_search"]
        combined.agent = "support-*"
        combined.stopReasons = ["success", "running"]
        combined.statuses = [.intact, .torn]
        combined.sinceUs = 0
        all.append(combined)
        return all
    }()

    @Test("the same logs indexed into SQLite and PostgreSQL give the same runs, statistics, staleness and SQL answers")
    func sameAnswers() async throws {
        try await PostgresTestServer.with { server in
            try TemporaryDirectory.with { directory in
                let sqlite = try Catalog(path: directory.path("catalog.sqlite"))
                let postgres = try Catalog(path: server.url)
                #expect(postgres.path == server.url)
                let fixtures = ExampleRuns.fixtures.path
                let indexedSQLite = try sqlite.index(paths: [fixtures], jobs: 2)
                let indexedPostgres = try postgres.index(paths: [fixtures], jobs: 2)
                #expect(indexedPostgres.logs.count == indexedSQLite.logs.count)
                #expect(indexedPostgres.logs.map(\.status) == indexedSQLite.logs.map(\.status))
                #expect(indexedPostgres.logs.map(\.problem) == indexedSQLite.logs.map(\.problem))
                #expect(indexedPostgres.count(.damaged) > 0)

                for query in Self.queries {
                    let expected = try sqlite.runs(query)
                    #expect(try postgres.runs(query) == expected, "runs for \(query)")
                    #expect(try postgres.runs(query, shape: .newestFirst) == expected)
                    if let tool = query.tools.first {
                        #expect(try postgres.runs(query, shape: .drivenBy(tool: tool)) == expected)
                    }
                }
                #expect(try !sqlite.runs(Self.queries[1]).isEmpty)
                #expect(try postgres.stats(RunQuery()).tools == sqlite.stats(RunQuery()).tools)
                #expect(try postgres.stats(RunQuery()).agents.map(\.runs) == sqlite.stats(RunQuery()).agents.map(\.runs))
                #expect(try postgres.check().checked == sqlite.check().checked)

                // Each listed row's file, looked at: the same on both stores, every fixture as indexed.
                var everyRun = RunQuery()
                everyRun.limit = 500
                let lookedSQLite = try sqlite.runs(everyRun, looksAtFiles: true)
                #expect(try postgres.runs(everyRun, looksAtFiles: true) == lookedSQLite)
                #expect(!lookedSQLite.isEmpty && lookedSQLite.allSatisfy { $0.file == .asIndexed }, "\(lookedSQLite.map(\.file))")
                // A row another machine of the shared catalog saw last names a file of that machine:
                // not looked at here (`elsewhere`), while the others still are.
                let other = try #require(lookedSQLite.first?.path)
                try postgres.write { db in try db.execute("UPDATE logs SET seen_on = ? WHERE path = ?", ["another-runner", other]) }
                let shared = try postgres.runs(everyRun, looksAtFiles: true)
                #expect(shared.first { $0.path == other }?.file == .elsewhere)
                #expect(shared.filter { $0.path != other }.allSatisfy { $0.file == .asIndexed })
                try postgres.write { db in try db.execute("UPDATE logs SET seen_on = ? WHERE path = ?", [Catalog.seenOn, other]) }

                let statement = "SELECT tool, COUNT(*) AS calls, SUM(duration_us) AS total FROM calls GROUP BY tool ORDER BY tool"
                #expect(try postgres.query(statement) == sqlite.query(statement))
                #expect(try !postgres.plan(Self.queries[1]).isEmpty)

                // A second index reads nothing: every log is known by its identity.
                let again = try postgres.index(paths: [fixtures])
                #expect(again.count(.unchanged) == again.logs.count)
                #expect(again.eventsRead == 0)
            }
        }
    }

    @Test("baselines from a branch's history are each case's own newest suite runs, on SQLite and on PostgreSQL alike")
    func branchBaselines() async throws {
        try await PostgresTestServer.with { server in
            try await TemporaryDirectory.with { directory in
                let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
                try
                    "- {caseId: often, logs: \(log), expected: {stopReason: success}}\n- {caseId: once, logs: \(log), expected: {stopReason: success}}\n"
                    .write(toFile: directory.path("cases.yaml"), atomically: true, encoding: .utf8)
                let (cases, errors) = EvalSuite.load(paths: [directory.path("cases.yaml")])
                #expect(errors.isEmpty)
                let both = EvalReport(results: await EvalRunner(options: EvalOptions(jobs: 1)).run(cases))
                let often = EvalReport(results: await EvalRunner(options: EvalOptions(jobs: 1)).run(cases.filter { $0.id == "often" }))
                var answers: [[String: Baseline]] = []
                var commentBases: [JSONValue] = []
                for catalog in [try Catalog(path: directory.path("catalog.sqlite")), try Catalog(path: server.url)] {
                    // Both cases once, then the one case alone twice (a --filter, a shard).
                    for (index, report) in [both, often, often].enumerated() {
                        _ = try catalog.recordSuite(
                            report,
                            info: SuiteRunInfo(startedAtUs: index + 1, gitCommit: "c", gitBranch: "main", commandLine: "agent-eval run"),
                            flakyHistory: false)
                    }
                    let (suiteRuns, baselines) = try catalog.baselines(branch: "main", lastRuns: 1)
                    #expect(suiteRuns == 2, "often's newest suite run, and once's")
                    #expect(baselines.keys.sorted() == ["often", "once"])
                    #expect(baselines["once"]?.passed == true && baselines["once"]?.counts.attempts == 1)
                    answers.append(baselines)
                    // A pull request comment's base, per case too: once's result from the first suite run.
                    let base = try #require(try catalog.latestCaseReport(branch: "main"))
                    #expect(base.suiteRunIds.count == 2)
                    #expect(base.report["cases"]?.arrayValue?.compactMap { $0["case_id"]?.stringValue } == ["often", "once"])
                    #expect(base.report["summary"]?["cases"] == 2)
                    #expect(try catalog.latestCaseReport(branch: "release") == nil)
                    commentBases.append(base.report)
                }
                #expect(answers[0] == answers[1], "SQLite and PostgreSQL agree")
                #expect(commentBases[0] == commentBases[1], "SQLite and PostgreSQL agree on the comment's base")
            }
        }
    }

    @Test("in a PostgreSQL catalog, the same bytes at another path or touched are answered from the cache, and indexed as unchanged")
    func contentIdentity() async throws {
        try await PostgresTestServer.with { server in
            try await TemporaryDirectory.with { directory in
                try await ContentIdentity.check(catalog: server.url, in: directory)
            }
        }
    }

    @Test("over many runs, runs (both shapes) and history use the documented indexes on PostgreSQL, and the shapes agree")
    func plansOverManyRuns() async throws {
        try await PostgresTestServer.with { server in
            let catalog = try Catalog(path: server.url)
            defer { try? catalog.close() }
            // 20,000 runs of 10 calls: tool_0 … tool_2 in turn; tool_1 never in every fourth run;
            // tool_rare once in about 500 calls, tool_some once in 50. 2,000 suite runs of ten cases.
            let load = try await Subprocess.run(
                Subprocess.which("psql") ?? "/usr/bin/psql",
                [
                    server.url, "-v", "ON_ERROR_STOP=1", "-q", "-c",
                    """
                    BEGIN;
                    INSERT INTO log_files (file_id, path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash)
                    SELECT n, '/logs/run-' || n || '.jsonl.gz', 1, 1000, 0, 0, 0, '' FROM generate_series(1, 20000) AS n;
                    INSERT INTO logs (log_id, path, file_id, status, run_id, agent, model,
                        started_at_us, stop_reason, events, steps, decisions, invalid_decisions, tool_calls, executed_calls, denied_calls,
                        failed_calls, input_tokens, output_tokens, cost_usd, anomalies, indexed_at_us)
                    SELECT n, '/logs/run-' || n || '.jsonl.gz', n, 'intact', 'run-' || n, 'agent-' || (n % 5), 'scripted:m',
                        1795000000000000 + n::bigint * 1000, 'success', 30, 10, 10, 0, 10, 10, 0, 0, 0, 0, 0, 0, 0
                    FROM generate_series(1, 20000) AS n;
                    INSERT INTO calls (log_id, ordinal, run_id, step, call_id, tool, arguments, attempts, status, duration_us)
                    SELECT n, k, 'run-' || n, k + 1, 'call-' || k,
                        CASE WHEN (n * 7 + k) % 500 = 0 THEN 'tool_rare' WHEN (n * 7 + k) % 50 = 1 THEN 'tool_some'
                            WHEN k % 3 = 1 AND n % 4 = 0 THEN 'tool_2' ELSE 'tool_' || (k % 3) END,
                        '{}', 1, 'ok', 10
                    FROM generate_series(1, 20000) AS n, generate_series(0, 9) AS k;
                    SELECT setval(pg_get_serial_sequence('logs', 'log_id'), 20000);
                    SELECT setval(pg_get_serial_sequence('log_files', 'file_id'), 20000);
                    INSERT INTO suite_runs (suite_run_id, started_at_us, duration_ms, command_line, origin, cases, passed, failed, errors, k)
                    SELECT n, 1795000000000000 + n::bigint * 60000000, 1000, 'agent-eval run', 'run', 10, 10, 0, 0, 1
                    FROM generate_series(1, 2000) AS n;
                    INSERT INTO case_results (suite_run_id, case_id, source, outcome, runs, passed_runs, pass_rate, stability)
                    SELECT n, 'case-' || c, 'recorded', 'pass', 1, 1, 1.0, 'stable'
                    FROM generate_series(1, 2000) AS n, generate_series(0, 9) AS c;
                    SELECT setval(pg_get_serial_sequence('suite_runs', 'suite_run_id'), 2000);
                    COMMIT;
                    ANALYZE;
                    """,
                ])
            try #require(load.status == 0, "\(load.stderr)")
            // The runs' sets of tools, from the calls loaded; then the planner's statistics of them.
            try catalog.deriveToolSets()
            let analyzed = try await Subprocess.run(
                Subprocess.which("psql") ?? "/usr/bin/psql", [server.url, "-v", "ON_ERROR_STOP=1", "-q", "-c", "ANALYZE"])
            try #require(analyzed.status == 0, "\(analyzed.stderr)")

            var rare = RunQuery()
            rare.tools = ["tool_rare"]
            rare.notTools = ["tool_1"]
            var common = RunQuery()
            common.tools = ["tool_1"]
            common.notTools = ["tool_rare"]
            // A rare tool whose runs the filter mostly drops: the few runs of the sets that
            // qualify, through `logs_by_tool_set`; no call is read.
            let rarePlan = try catalog.plan(rare).joined(separator: "\n")
            #expect(rarePlan.contains("logs_by_tool_set") && !rarePlan.contains("calls"), "\(rarePlan)")
            let commonPlan = try catalog.plan(common).joined(separator: "\n")
            #expect(commonPlan.contains("logs_by_start") && !commonPlan.contains("calls"), "\(commonPlan)")
            // A tool in one run of five, whose runs the filter keeps: the newest 50 are near, so
            // the runs are walked newest first; one whose runs the filter all drops qualifies no
            // set of tools, and nothing is read.
            var some = RunQuery()
            some.tools = ["tool_some"]
            some.notTools = ["tool_none"]
            let somePlan = try catalog.plan(some).joined(separator: "\n")
            #expect(somePlan.contains("logs_by_start") && !somePlan.contains("calls"), "\(somePlan)")
            var dropped = some
            dropped.notTools = ["tool_0"]
            #expect(try catalog.read { db in try dropped.toolSets(in: db) } == [])
            #expect(try catalog.runs(dropped).isEmpty)
            // With a call filter, the runs are found through their calls, and the sets of tools
            // still answer --not-tool.
            var approved = rare
            approved.approval = RunQuery.ApprovalFilter.none
            let approvedPlan = try catalog.plan(approved).joined(separator: "\n")
            #expect(approvedPlan.contains("calls_by_tool_log") && !approvedPlan.contains("Seq Scan on calls"), "\(approvedPlan)")
            #expect(try catalog.runs(approved) == catalog.runs(rare))
            // The shapes give the same runs, and some runs match.
            for query in [rare, common, some] {
                let driven = try catalog.runs(query, shape: .drivenByToolSets)
                #expect(!driven.isEmpty)
                #expect(try catalog.runs(query, shape: .newestFirst) == driven)
                #expect(try catalog.runs(query, shape: .drivenBy(tool: query.tools[0])) == driven)
            }
            let rareRuns = try catalog.runs(rare)
            #expect(rareRuns.allSatisfy { ($0.runId.flatMap { Int($0.dropFirst(4)) } ?? 1) % 4 == 0 })

            let historyPlan = try catalog.plan(historyOf: "case-3").joined(separator: "\n")
            #expect(historyPlan.contains("suite_runs_by_start") && historyPlan.contains("case_results_by_case"), "\(historyPlan)")
            #expect(!historyPlan.contains("Seq Scan on case_results"), "\(historyPlan)")
            #expect(try catalog.history(caseId: "case-3").entries.first?.suiteRunId == 2000)
        }
    }

    @Test("sql on PostgreSQL refuses writes and second statements and stops a statement past its time, each with its own code")
    func sqlGuards() async throws {
        try await PostgresTestServer.with { server in try Self.checkGuards(server.url) }
    }

    static func checkGuards(_ url: String) throws {
        let catalog = try Catalog(path: url)
        #expect(throws: CatalogError.self) { try catalog.query("DELETE FROM logs") }
        do {
            _ = try catalog.query("DELETE FROM logs")
        } catch {
            #expect(error.code == .readOnly)
        }
        do {
            _ = try catalog.query("SELECT 1; SELECT 2")
            Issue.record("two statements ran")
        } catch {
            #expect(error.code == .severalStatements)
        }
        do {
            _ = try catalog.query("SELECT pg_sleep(5)", timeout: 0.3)
            Issue.record("the statement was not stopped")
        } catch {
            #expect(error.code == .timedOut)
        }
        do {
            _ = try catalog.query("SELECT nothing FROM nowhere")
            Issue.record("a statement over a missing table ran")
        } catch {
            #expect(error.code == .queryFailed)
            #expect(error.hint?.contains("logs") == true)
        }
        // The connection is still good after each refusal.
        #expect(try catalog.query("SELECT COUNT(*) AS n FROM logs").rows == [[.integer(0)]])
        // The role the docs say to create cannot run a program on the server through sql.
        do {
            _ = try catalog.query("COPY (SELECT 1) TO PROGRAM 'touch /tmp/agent-eval-sql-pwned'")
            Issue.record("COPY TO PROGRAM ran")
        } catch {
            #expect(error.code == .readOnly || error.code == .queryFailed, "\(error.message)")
        }
        #expect(!FileManager.default.fileExists(atPath: "/tmp/agent-eval-sql-pwned"))
    }

    @Test("a server that stops answering mid-command ends it at the answer deadline with an error naming the server, not a hang")
    func serverThatStopsAnswering() async throws {
        try await PostgresTestServer.with { server in
            let catalog = try Catalog(path: server.url)
            _ = try catalog.index(paths: [FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path])
            let kept = PostgresStore.answerWait
            PostgresStore.answerWait = 2
            defer { PostgresStore.answerWait = kept }
            try await server.signal("STOP")
            do {
                // The kept connection is reused: the statement goes out and nothing comes back.
                _ = try catalog.runs(RunQuery())
                Issue.record("a stopped server answered")
            } catch let error as CatalogError {
                #expect(error.code == .unreachable)
                #expect(error.message.contains("did not answer within 2 s"), "\(error.message)")
                #expect(
                    error.location?.path == "postgres://agent_eval@127.0.0.1:\(server.port)/catalog",
                    "\(String(describing: error.location))")
                #expect(error.hint?.contains("AGENT_EVAL_CATALOG_ANSWER_TIMEOUT") == true)
            }
            try await server.signal("CONT")
            // Back: the next command works.
            #expect(try Catalog(path: server.url).runs(RunQuery()).count == 1)
        }
    }

    @Test("sql refuses to run as a superuser, whom a read-only transaction does not hold back, and says which role to give it")
    func sqlRefusesSuperuser() async throws {
        try await PostgresTestServer.with { server in
            _ = try Catalog(path: server.url)
            let admin = try Catalog(path: server.adminURL)
            do {
                _ = try admin.query("COPY (SELECT 1) TO PROGRAM 'touch /tmp/agent-eval-sql-pwned-admin'")
                Issue.record("sql ran as a superuser")
            } catch let error as CatalogError {
                #expect(error.code == .privilegedRole)
                #expect(error.message.contains("agent_eval_admin") && error.message.contains("it is a superuser"), "\(error.message)")
                #expect(error.hint?.contains("GRANT SELECT ON ALL TABLES") == true)
            }
            #expect(!FileManager.default.fileExists(atPath: "/tmp/agent-eval-sql-pwned-admin"))
            // Not a superuser itself, but a member of one: SET ROLE would make it one.
            let made = try await Subprocess.run(
                Subprocess.which("psql") ?? "/usr/bin/psql",
                [
                    server.adminURL, "-v", "ON_ERROR_STOP=1", "-q", "-c",
                    "CREATE ROLE lender LOGIN NOINHERIT; GRANT agent_eval_admin TO lender; GRANT USAGE ON SCHEMA public TO lender; GRANT SELECT ON ALL TABLES IN SCHEMA public TO lender",
                ])
            try #require(made.status == 0, "\(made.stderr)")
            let member = try Catalog(path: server.adminURL.replacingOccurrences(of: "agent_eval_admin@", with: "lender@"))
            do {
                _ = try member.query("SELECT 1")
                Issue.record("sql ran as a member of a superuser role")
            } catch let error as CatalogError {
                #expect(error.code == .privilegedRole && error.message.contains("it may become a superuser"), "\(error.message)")
            }
        }
    }

    @Test("the PostgreSQL schema is numbered in step with SQLite's and has the same tables, views and columns in the same order")
    func schemaInStep() async throws {
        #expect(PostgresSchema.version == CatalogSchema.version)
        try await PostgresTestServer.with { server in
            try TemporaryDirectory.with { directory in
                let sqlite = try Catalog(path: directory.path("catalog.sqlite"))
                let postgres = try Catalog(path: server.url)
                let sqliteTables = try sqlite.query(
                    "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
                ).rows.map { $0[0].description }
                let postgresTables = try postgres.query(
                    "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'agent_eval_schema' ORDER BY 1"
                ).rows.map { $0[0].description }
                #expect(postgresTables == sqliteTables)
                for table in sqliteTables {
                    var sqliteColumns = try sqlite.query("SELECT name FROM pragma_table_info(?)", arguments: [.text(table)]).rows.map {
                        $0[0].description
                    }
                    let postgresColumns = try postgres.query(
                        "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                        arguments: [.text(table)]
                    ).rows.map { $0[0].description }
                    // SQLite's case_history keeps the joined table's copy of its join column, as
                    // `suite_run_id:1`; PostgreSQL's view names it once.
                    sqliteColumns.removeAll { $0 == "suite_run_id:1" }
                    #expect(postgresColumns == sqliteColumns, "columns of \(table)")
                }
            }
        }
    }

    @Test("a database that does not exist and a server that is not there give clear errors, and the password given never shows")
    func connectionErrors() async throws {
        try await PostgresTestServer.with { server in try await Self.checkConnectionErrors(server) }
    }

    static func checkConnectionErrors(_ server: PostgresTestServer) async throws {
        let missingDatabase = "postgres://agent_eval@127.0.0.1:\(server.port)/no_such_database"
        do {
            _ = try Catalog(path: missingDatabase)
            Issue.record("opened a database that does not exist")
        } catch {
            #expect(error.code == .cannotOpen)
            #expect(error.message.contains("no such database"))
        }
        await server.stop()
        let secret = "s3cret-Pa55"
        do {
            _ = try Catalog(path: "postgres://agent_eval:\(secret)@127.0.0.1:\(server.port)/catalog")
            Issue.record("opened a catalog on a stopped server")
        } catch {
            #expect(error.code == .unreachable)
            #expect(error.message.contains("127.0.0.1:\(server.port)"))
            // In words, not the networking library's types.
            #expect(error.message.hasSuffix("(connection refused)"), "\(error.message)")
            #expect(!error.message.contains("SingleConnectionFailure") && !error.message.contains("errno"), "\(error.message)")
            #expect(!error.message.contains(secret) && !(error.hint ?? "").contains(secret))
            #expect(error.location?.path == "postgres://agent_eval@127.0.0.1:\(server.port)/catalog")
        }
    }

    @Test("rebuild of a shared catalog re-indexes only the logs this machine has, and a path that matches nothing changes nothing")
    func rebuildKeepsOtherMachinesRows() async throws {
        try await PostgresTestServer.with { server in
            let catalog = try Catalog(path: server.url)
            let fixtures = ExampleRuns.fixtures.path
            _ = try catalog.index(paths: [fixtures + "/runs", fixtures + "/samples"])
            let before = try catalog.query("SELECT COUNT(*) AS n FROM logs").rows
            #expect(throws: CatalogError.self) { try Catalog.rebuild(at: server.url, from: [fixtures + "/no-such-folder"]) }
            #expect(try catalog.query("SELECT COUNT(*) AS n FROM logs").rows == before)
            let rebuilt = try Catalog.rebuild(at: server.url, from: [fixtures + "/runs"])
            #expect(rebuilt.summary.count(.added) == rebuilt.summary.logs.count)
            #expect(try catalog.query("SELECT COUNT(*) AS n FROM logs").rows == before)
            let samples = try catalog.query("SELECT COUNT(*) AS n FROM logs WHERE path LIKE '%/samples/%'").rows
            #expect(samples.first?.first?.int ?? 0 > 0)
        }
    }

    @Test("a password is masked in every URL a message shows, also one URLComponents cannot read")
    func redaction() {
        #expect(Catalog.redacted("postgres://ci:s3cret@db:5432/evals") == "postgres://ci:***@db:5432/evals")
        #expect(Catalog.redacted("postgres://ci:p#a ss@w@rd@db/evals?sslmode=require") == "postgres://ci:***@db/evals?sslmode=require")
        #expect(Catalog.redacted("postgres://ci@db/evals") == "postgres://ci@db/evals")
        #expect(Catalog.redacted("postgres://db/evals") == "postgres://db/evals")
    }

    @Test("globs become anchored regular expressions that match what SQLite's GLOB matches")
    func globs() {
        #expect(SQLDialect.regex(ofGlob: "support-*") == "^support-.*$")
        #expect(SQLDialect.regex(ofGlob: "a?c") == "^a.c$")
        #expect(SQLDialect.regex(ofGlob: "[rs]x") == "^[rs]x$")
        #expect(SQLDialect.regex(ofGlob: "[^a]") == "^[^a]$")
        #expect(SQLDialect.regex(ofGlob: "[]]") == "^[]]$")
        #expect(SQLDialect.regex(ofGlob: "a.b(c)") == "^a\\.b\\(c\\)$")
        #expect(SQLDialect.regex(ofGlob: "[ab") == "(?!)")
    }
}
