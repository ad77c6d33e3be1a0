import AgentRuntime
import ConfigFile
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import Catalog

@Suite("The runs query")
struct RunQueryTests {
    /// Two support runs the runtime writes: the fixture agent's, whose refund a human approved
    /// while its lookups ran on policy alone, and one under a policy that lets the refund run
    /// with no human. Both have the delete the policy denies. Indexed into a new catalog.
    static func approvedAndUnapprovedRefunds(in directory: TemporaryDirectory) async throws -> (
        catalog: Catalog, approved: String, unapproved: String
    ) {
        let approved = directory.path("approved.jsonl.gz")
        _ = try await ExampleRuns.support.record(approved)
        let unapproved = directory.path("unapproved.jsonl.gz")
        let agent = try AgentFile.load(path: ExampleRuns.writeUnapprovedRefundAgent(into: directory.path("agent")))
        let outcome = try await AgentRuntime(agent: agent, environment: .deterministic(runId: "run-unapproved")).run(
            goal: "Order A-1042 arrived broken. Refund me and close my account.", log: unapproved)
        #expect(outcome.stop.reason == .success)
        let catalog = try Catalog(path: directory.path("catalog.sqlite"))
        _ = try catalog.index(paths: [approved, unapproved])
        return (catalog, approved, unapproved)
    }

    /// The paths of the runs `query` lists, sorted; every shape of the statement gives the same.
    static func paths(_ query: RunQuery, in catalog: Catalog) throws -> [String] {
        let chosen = try catalog.runs(query).map(\.path).sorted()
        #expect(try catalog.runs(query, shape: .newestFirst).map(\.path).sorted() == chosen)
        for tool in query.tools { #expect(try catalog.runs(query, shape: .drivenBy(tool: tool)).map(\.path).sorted() == chosen) }
        if query.usesToolSets { #expect(try catalog.runs(query, shape: .drivenByToolSets).map(\.path).sorted() == chosen) }
        return chosen
    }

    @Test("--tool refund_order --approval none finds the refund that ran unapproved, not an approved refund beside an unapproved lookup")
    func callFiltersHoldForOneCall() async throws {
        try await TemporaryDirectory.with { directory in
            let (catalog, approved, unapproved) = try await Self.approvedAndUnapprovedRefunds(in: directory)
            // What the two runs hold, call by call: the premise of every answer below.
            let calls = try catalog.query(
                "SELECT l.path, c.tool, c.approval, c.attempts > 0 FROM calls c JOIN logs l USING (log_id) ORDER BY l.path, c.ordinal")
            #expect(
                calls.rows.map { $0.map(\.description) } == [
                    [approved, "lookup_order", "NULL", "1"], [approved, "get_customer", "NULL", "1"],
                    [approved, "refund_order", "granted", "1"], [approved, "delete_customer", "NULL", "0"],
                    [unapproved, "lookup_order", "NULL", "1"], [unapproved, "get_customer", "NULL", "1"],
                    [unapproved, "refund_order", "NULL", "1"], [unapproved, "delete_customer", "NULL", "0"],
                ])

            func paths(_ tools: [String], approval: RunQuery.ApprovalFilter? = nil, denied: Bool = false) throws -> [String] {
                var query = RunQuery()
                query.tools = tools
                query.approval = approval
                query.hasDenied = denied
                return try Self.paths(query, in: catalog)
            }
            #expect(try paths(["refund_order"], approval: RunQuery.ApprovalFilter.none) == [unapproved])
            #expect(try paths(["refund_order"], approval: .granted) == [approved])
            #expect(try paths(["lookup_order"], approval: .granted) == [])
            // Each tool needs a call of its own in that state.
            #expect(try paths(["lookup_order", "refund_order"], approval: RunQuery.ApprovalFilter.none) == [unapproved])
            // The delete was denied, no refund was: a denied call of refund_order is in neither run.
            #expect(try paths(["refund_order"], denied: true) == [])
            #expect(try paths(["delete_customer"], denied: true) == [approved, unapproved])
            // Without --tool, the call filters hold for one call of any tool.
            #expect(try paths([], approval: RunQuery.ApprovalFilter.none) == [approved, unapproved])
            #expect(try paths([], approval: .granted, denied: true) == [])
            #expect(try paths([], denied: true) == [approved, unapproved])
            // Alone, --tool is a call of that tool that ran: the denied delete ran in neither.
            #expect(try paths(["delete_customer"]) == [])
            #expect(try paths(["refund_order"]) == [approved, unapproved])
        }
    }

    @Test("--not-tool lists only runs whose logs were read whole to their stop: a damaged or torn copy cannot show the tool never ran")
    func notToolNeedsTheWholeRun() async throws {
        try await TemporaryDirectory.with { directory in
            let (catalog, approved, unapproved) = try await Self.approvedAndUnapprovedRefunds(in: directory)
            // Copies of the approved run that end before its refund: one with a byte changed in
            // its first member (the reader stops there), one cut short (a crashed writer).
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: approved)))
            let damaged = directory.path("damaged.jsonl.gz")
            let torn = directory.path("torn.jsonl.gz")
            try Data(bytes.prefix(bytes.count / 3)).write(to: URL(fileURLWithPath: torn))
            bytes[40] ^= 0x55
            try Data(bytes).write(to: URL(fileURLWithPath: damaged))
            _ = try catalog.index(paths: [damaged, torn])
            // The premise: the copies are indexed, not intact, and show no refund.
            let copies = try catalog.query(
                """
                SELECT path, status, (SELECT COUNT(*) FROM calls c WHERE c.log_id = l.log_id AND c.tool = 'refund_order')
                FROM logs l WHERE path IN (?, ?) ORDER BY path
                """, arguments: [.text(damaged), .text(torn)])
            #expect(copies.rows.map { $0.map(\.description) } == [[damaged, "damaged", "0"], [torn, "torn", "0"]])

            func paths(notTools: [String], tools: [String] = []) throws -> [String] {
                var query = RunQuery()
                query.tools = tools
                query.notTools = notTools
                return try Self.paths(query, in: catalog)
            }
            // Both whole runs refunded; the copies stopped reading before theirs.
            #expect(try paths(notTools: ["refund_order"]) == [])
            #expect(try paths(notTools: ["delete_customer"]) == [approved, unapproved])
            #expect(try paths(notTools: ["delete_customer"], tools: ["lookup_order"]) == [approved, unapproved])
            // Asked for by status, the copies are still there: only the claim of absence needs the whole run.
            var byStatus = RunQuery()
            byStatus.statuses = [.damaged, .torn]
            #expect(try catalog.runs(byStatus).map(\.path).sorted() == [damaged, torn])
        }
    }

    /// The run's calls of `tool` at `step` made calls of `renamed` (a tool its start declares).
    static func renameCalls(in run: inout SyntheticCorpus.Run, atStep step: Int, to renamed: String) {
        for index in run.events.indices where run.events[index].step == step {
            switch run.events[index].payload {
            case .decisionMade(var decision):
                if case .valid(.toolCalls(let calls)) = decision.outcome {
                    decision.outcome = .valid(.toolCalls(calls.map { ToolCall(id: $0.id, name: renamed, arguments: $0.arguments) }))
                }
                run.events[index].payload = .decisionMade(decision)
            case .verdictGiven(var verdict):
                verdict.tool = renamed
                run.events[index].payload = .verdictGiven(verdict)
            case .toolIntended(var intent):
                intent.tool = renamed
                run.events[index].payload = .toolIntended(intent)
            case .toolCompleted(var result):
                result.tool = renamed
                run.events[index].payload = .toolCompleted(result)
            default: break
            }
        }
    }

    @Test(
        "a run's set of tools holds a tool called only before the calls a long log's read wrote out, also when the log grew and was read on",
        arguments: CatalogStoreKind.allCases)
    func toolSetAcrossDroppedCallsAndResume(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            // More calls than a read holds: the first are written out and dropped from the
            // state, the resume point saved after them. Step 1's call alone is of tool_3.
            let log = directory.path("long.jsonl.gz")
            let growing = try GrowingLog(at: log, seed: 5, steps: Catalog.callsHeldInMemory + 60) { run in
                Self.renameCalls(in: &run, atStep: 1, to: "tool_3")
            }
            let cut = growing.run.events.count - 120
            try growing.record(0..<cut)
            let catalog = try Catalog(path: location)
            defer { try? catalog.close() }
            #expect(try catalog.index(log: log).status == .torn)
            func paths(tools: [String] = [], notTools: [String] = []) throws -> [String] {
                var query = RunQuery()
                (query.tools, query.notTools) = (tools, notTools)
                return try Self.paths(query, in: catalog)
            }
            #expect(try paths(tools: ["tool_3"]) == [Catalog.absolute(log)])
            // The resume point carries the dropped calls' tools.
            let resume = try #require(try catalog.query("SELECT resume FROM logs").rows.first?.first)
            guard case .blob(let bytes) = resume else {
                Issue.record("no resume point: \(resume)")
                return
            }
            #expect(String(decoding: bytes, as: UTF8.self).contains(#""dropped_tools":["tool_0","tool_1","tool_2","tool_3"]"#))

            try growing.finish(from: cut)
            #expect(try catalog.index(log: log).change == .grew)
            #expect(try paths(tools: ["tool_3"]) == [Catalog.absolute(log)])
            #expect(try paths(notTools: ["tool_3"]) == [])
            #expect(try paths(tools: ["tool_0"], notTools: ["tool_3"]) == [])
            #expect(try paths(tools: ["tool_0", "tool_3"], notTools: ["tool_4"]) == [Catalog.absolute(log)])
            let fresh = try Catalog(path: directory.path("fresh.sqlite"))
            _ = try fresh.index(log: log)
            let (grown, whole) = (try rows(catalog, "logs"), try rows(fresh, "logs"))
            #expect(grown == whole, "\(zip(grown.first ?? [], whole.first ?? []).filter { $0 != $1 })")
            #expect(
                try catalog.query("SELECT s.tools FROM logs l JOIN tool_sets s ON s.set_id = l.tool_set").rows
                    == [[.text(#"["tool_0","tool_1","tool_2","tool_3"]"#)]])
            // Every step and call counted, though most were dropped before the point it was read on from.
            let steps = Int64(Catalog.callsHeldInMemory + 60)
            #expect(try catalog.query("SELECT steps, executed_calls FROM logs").rows == [[.integer(steps), .integer(steps)]])
            try expectToolSetsFollowCalls(catalog)
        }
    }

    @Test(
        "a catalog of schema 13 gets each run's set of tools from its calls, and the runs query answers as before; push carries sets by their tools",
        arguments: CatalogStoreKind.allCases)
    func toolSetsMigratedAndPushed(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            // Three runs as a schema 13 catalog held them: one executed a and b, one a (its b
            // was denied: no attempt), one none of its calls.
            var rows = ""
            for run in 1...3 {
                rows += """
                    INSERT INTO log_files (file_id, path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash)
                    VALUES (\(run), '/logs/\(run).jsonl.gz', 1, 100, 0, 0, 0, '');
                    INSERT INTO logs (log_id, path, file_id, generation, status, run_id, started_at_us, stop_reason, events, steps,
                        decisions, invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens,
                        cost_usd, anomalies, indexed_at_us)
                    VALUES (\(run), '/logs/\(run).jsonl.gz', \(run), 1, 'intact', 'run-\(run)', \(run), 'success', 0, 0, 0, 0, 0, 0, 0,
                        0, 0, 0, 0, 0, 0);

                    """
            }
            rows += """
                INSERT INTO calls (log_id, ordinal, run_id, step, call_id, tool, arguments, attempts, duration_us) VALUES
                    (1, 0, 'run-1', 1, 'c0', 'b', '{}', 1, 0), (1, 1, 'run-1', 2, 'c1', 'a', '{}', 2, 0),
                    (1, 2, 'run-1', 3, 'c2', 'a', '{}', 1, 0),
                    (2, 0, 'run-2', 1, 'c0', 'a', '{}', 1, 0), (2, 1, 'run-2', 2, 'c1', 'b', '{}', 0, 0),
                    (3, 0, 'run-3', 1, 'c0', 'b', '{}', 0, 0);

                """
            try await store.makeCatalog(at: location, version: 13, rows: rows)
            let catalog = try Catalog(path: location)
            defer { try? catalog.close() }
            #expect(
                try catalog.query("SELECT l.path, s.tools FROM logs l JOIN tool_sets s ON s.set_id = l.tool_set ORDER BY l.path").rows
                    == [
                        [.text("/logs/1.jsonl.gz"), .text(#"["a","b"]"#)], [.text("/logs/2.jsonl.gz"), .text(#"["a"]"#)],
                        [.text("/logs/3.jsonl.gz"), .text("[]")],
                    ])
            #expect(
                try catalog.query("SELECT m.tool, s.tools FROM tool_set_members m JOIN tool_sets s USING (set_id) ORDER BY 1, 2").rows
                    == [[.text("a"), .text(#"["a","b"]"#)], [.text("a"), .text(#"["a"]"#)], [.text("b"), .text(#"["a","b"]"#)]])
            func paths(_ catalog: Catalog, tools: [String] = [], notTools: [String] = []) throws -> [String] {
                var query = RunQuery()
                (query.tools, query.notTools) = (tools, notTools)
                return try Self.paths(query, in: catalog)
            }
            let expected: [([String], [String], [String])] = [
                (["a"], [], ["/logs/1.jsonl.gz", "/logs/2.jsonl.gz"]), (["b"], [], ["/logs/1.jsonl.gz"]),
                ([], ["b"], ["/logs/2.jsonl.gz", "/logs/3.jsonl.gz"]), (["a"], ["b"], ["/logs/2.jsonl.gz"]),
                ([], ["a", "b"], ["/logs/3.jsonl.gz"]), (["a", "b"], [], ["/logs/1.jsonl.gz"]), (["b"], ["a"], []),
            ]
            for (tools, notTools, answer) in expected {
                #expect(try paths(catalog, tools: tools, notTools: notTools) == answer, "--tool \(tools) --not-tool \(notTools)")
                // `stats` selects its runs with the sets listed by the statement itself.
                var query = RunQuery()
                (query.tools, query.notTools) = (tools, notTools)
                #expect(try catalog.stats(query).agents.reduce(0) { $0 + $1.runs } == answer.count, "stats: \(tools) \(notTools)")
            }
            try expectToolSetsFollowCalls(catalog)
            // Pushed into a catalog whose dictionary already numbers another set first.
            let target = try Catalog(path: directory.path("target.sqlite"))
            defer { try? target.close() }
            _ = try target.index(paths: [FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path])
            #expect(try catalog.push(to: target).logs == 3)
            for (tools, notTools, answer) in expected {
                #expect(
                    try paths(target, tools: tools, notTools: notTools).filter { $0.hasPrefix("/logs/") } == answer,
                    "pushed: --tool \(tools) --not-tool \(notTools)")
            }
        }
    }

    /// 20,000 runs of run `n`: stopped for `error` when n is a multiple of 997, running when n %
    /// 5000 is 3, `max_steps` when n is a multiple of 10, else `success`; none for
    /// `budget_exhausted`. `agent-rare` runs when n % 1000 is 7, else `agent-<n % 5>`. Newer n, later start.
    static let stoppedRuns = 20_000

    static func stopReason(_ n: Int) -> String? {
        n % 997 == 0 ? "error" : n % 5000 == 3 ? nil : n % 10 == 0 ? "max_steps" : "success"
    }

    static func agentName(_ n: Int) -> String { n % 1000 == 7 ? "agent-rare" : "agent-\(n % 5)" }

    @Test(
        "--stop finds a rare reason's runs through logs_by_stop, not by walking every run; several common reasons walk; the page is the same either way",
        arguments: CatalogStoreKind.allCases)
    func stopReasonsOverManyRuns(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let numbers =
                store == .sqlite
                ? "WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers WHERE n < \(Self.stoppedRuns))"
                : "WITH numbers(n) AS (SELECT generate_series(1, \(Self.stoppedRuns)))"
            let reason = """
                CASE WHEN n % 997 = 0 THEN 'error' WHEN n % 5000 = 3 THEN NULL WHEN n % 10 = 0 THEN 'max_steps' ELSE 'success' END
                """
            let agent = "CASE WHEN n % 1000 = 7 THEN 'agent-rare' ELSE 'agent-' || (n % 5) END"
            var rows = """
                \(numbers)
                INSERT INTO log_files (file_id, path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash)
                SELECT n, '/logs/run-' || n || '.jsonl.gz', 1, 1000, 0, 0, 0, '' FROM numbers;
                \(numbers)
                INSERT INTO logs (log_id, path, file_id, generation, status, run_id, agent, model, started_at_us, stop_reason, events,
                    steps, decisions, invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens,
                    output_tokens, cost_usd, anomalies, indexed_at_us, forked_from)
                SELECT n, '/logs/run-' || n || '.jsonl.gz', n, 1, 'intact', 'run-' || n, \(agent), 'scripted:m',
                    1795000000000000 + n * 1000, \(reason), 3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    CASE WHEN n % 4000 = 1 THEN 'run-parent' END
                FROM numbers;

                """
            if store == .postgres {
                rows += """
                    SELECT setval(pg_get_serial_sequence('logs', 'log_id'), \(Self.stoppedRuns));
                    SELECT setval(pg_get_serial_sequence('log_files', 'file_id'), \(Self.stoppedRuns));
                    ANALYZE;
                    """
            }
            try await store.makeCatalog(at: location, version: CatalogSchema.version, rows: rows)
            let catalog = try Catalog(path: location)
            defer { try? catalog.close() }

            func query(_ reasons: [String], agent: String? = nil, forksOf: String? = nil) -> RunQuery {
                var query = RunQuery()
                query.stopReasons = reasons
                query.agent = agent
                query.forksOf = forksOf
                return query
            }
            // What each query must list: its runs, newest first, a page of them.
            func matching(_ query: RunQuery) -> [Int] {
                (1...Self.stoppedRuns).reversed().filter { n in
                    query.stopReasons.contains(Self.stopReason(n) ?? "running")
                        && (query.agent.map { Glob($0).matches(Self.agentName(n)) } ?? true)
                        && (query.forksOf.map { n % 4000 == 1 && $0 == "run-parent" } ?? true)
                }
            }
            func expected(_ query: RunQuery) -> [String] { matching(query).prefix(query.limit).map { "/logs/run-\($0).jsonl.gz" } }
            let none = query(["budget_exhausted"])
            let success = query(["success"])
            let common = query(["success", "max_steps"])
            let rare = query(["error", "running"])
            let rareAgent = query(["success"], agent: "agent-rare")
            let commonAgent = query(["error"], agent: "agent-2")
            let rareGlob = query(["success"], agent: "agent-r*")
            let parent = query(["success"], forksOf: "run-parent")
            let rareReasonsCommonAgent = query(["error", "running"], agent: "agent-2")
            let all = [none, success, common, rare, rareAgent, commonAgent, rareGlob, parent, rareReasonsCommonAgent]
            for listed in all + [query(["running"]), query(["max_steps", "max_steps"])] {
                let name = "\(listed.stopReasons) \(listed.agent ?? "") \(listed.forksOf ?? "")"
                #expect(try catalog.runs(listed).map(\.path) == expected(listed), "\(name)")
                // `stats` counts every run the query selects, through the same choice of index.
                #expect(try catalog.stats(listed).agents.reduce(0) { $0 + $1.runs } == matching(listed).count, "stats: \(name)")
            }
            #expect(expected(none).isEmpty && expected(rare).count == 24 && expected(rareAgent).count == 20 && expected(parent).count == 5)

            let plans = try all.map { try catalog.plan($0).joined(separator: "\n") }
            if store == .sqlite {
                // One reason, rare or common: its runs from the index, in the list's order.
                for plan in plans[0...1] {
                    #expect(plan.contains("logs_by_stop (stop_reason=?)") && !plan.contains("TEMP B-TREE"), "\(plan)")
                }
                // Two common reasons: the runs walked newest first; two rare ones: read and sorted.
                #expect(plans[2].contains("SCAN logs USING INDEX logs_by_start"), "\(plans[2])")
                #expect(plans[3].contains("logs_by_stop") && plans[3].contains("TEMP B-TREE"), "\(plans[3])")
                // With an agent, the index of the one with fewer runs.
                #expect(plans[4].contains("logs_by_agent") && !plans[4].contains("logs_by_stop"), "\(plans[4])")
                #expect(plans[5].contains("logs_by_stop (stop_reason=?)"), "\(plans[5])")
                // An agent's glob with a literal start is a range of its index; a parent, its own.
                #expect(plans[6].contains("logs_by_agent") && !plans[6].contains("logs_by_stop"), "\(plans[6])")
                #expect(plans[7].contains("logs_by_parent") && !plans[7].contains("logs_by_stop"), "\(plans[7])")
                // Two rare reasons of a common agent: the reasons' few runs, sorted.
                #expect(plans[8].contains("logs_by_stop") && !plans[8].contains("logs_by_agent"), "\(plans[8])")
                for plan in plans { #expect(!plan.contains("SCAN logs") || plan.contains("USING INDEX"), "\(plan)") }
            } else {
                // PostgreSQL weighs the reasons by its statistics: a reason no run has, from the index.
                #expect(plans[0].contains("logs_by_stop"), "\(plans[0])")
                #expect(plans[3].contains("logs_by_stop"), "\(plans[3])")
            }
            // Another shape leads (the calls of a tool): SQLite is kept off the stop's index.
            var driven = success
            driven.tools = ["lookup_order"]
            driven.approval = .granted
            let statement = driven.statement(.drivenBy(tool: "lookup_order"), dialect: .sqlite).sql
            #expect(statement.contains("+stop_reason = ?"), "\(statement)")
        }
    }

    @Test(
        "--text finds runs whose values hold the text, ASCII case aside; %, _ and \\ are themselves, other letters keep their case, a long text works",
        arguments: CatalogStoreKind.allCases)
    func textFilter(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let long = String(repeating: "x", count: 12_000)
            let inputs = [
                "Refund 100% of ORDER_7", "refund 100 of order-7", #"path\with\backslash"#, "ÉCOLE résumé", "Plain text", long,
                "cafe\u{301} ok", "hello",
            ]
            var rows = ""
            for (index, input) in inputs.enumerated() {
                let run = index + 1
                rows += """
                    INSERT INTO log_files (file_id, path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash)
                    VALUES (\(run), '/logs/\(run).jsonl.gz', 1, 100, 0, 0, 0, '');
                    INSERT INTO logs (log_id, path, file_id, generation, status, run_id, agent, model, input, started_at_us, stop_reason,
                        events, steps, decisions, invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens,
                        output_tokens, cost_usd, anomalies, indexed_at_us)
                    VALUES (\(run), '/logs/\(run).jsonl.gz', \(run), 1, 'intact', 'run-\(run)', 'agent', 'scripted:m',
                        '\(input.replacingOccurrences(of: "'", with: "''"))', \(run), 'success', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

                    """
            }
            if store == .postgres {
                rows +=
                    "SELECT setval(pg_get_serial_sequence('logs', 'log_id'), 10); SELECT setval(pg_get_serial_sequence('log_files', 'file_id'), 10);"
            }
            try await store.makeCatalog(at: location, version: CatalogSchema.version, rows: rows)
            let catalog = try Catalog(path: location)
            defer { try? catalog.close() }
            func runs(holding text: String) throws -> [Int] {
                var query = RunQuery()
                query.text = text
                return try catalog.runs(query).compactMap { Int($0.path.dropFirst("/logs/".count).prefix { $0.isNumber }) }.sorted()
            }
            let expected: [(String, [Int])] = [
                ("100%", [1]), ("%", [1]), ("order_7", [1]), ("_", [1]), ("ORDER", [1, 2]), ("0 of", [2]), (#"\with\"#, [3]),
                (#"\"#, [3]), ("école", []), ("RÉSUMÉ", []), ("résumé", [4]), ("ÉCOLE", [4]), ("PLAIN TEXT", [5]),
                ("/LOGS/5.", [5]), ("RUN-6", [6]), (String(repeating: "X", count: 10_001), [6]), (long + "x", []), ("nothing", []),
                // A wildcard with a combining mark after it is still itself.
                ("e\u{301}", [7]), ("_\u{301}", []), ("%\u{301}", []), ("\\\u{301}", []),
            ]
            for (text, answer) in expected { #expect(try runs(holding: text) == answer, "\(text.prefix(20))") }
            // A NUL in the text is not the end of it (to `LIKE`, `%o`: every value ending in
            // o, as run 8's does); PostgreSQL refuses the character itself.
            if store == .sqlite { #expect(try runs(holding: "o\u{0}x").isEmpty && runs(holding: "ello") == [8]) }
            // The text alone: the table read in its order, its matches sorted; where the scan
            // keeps as many as it may (a bound of 1 or 2 here), the runs walked newest first. Every
            // shape lists the same runs in the same order.
            for text in ["ORDER", "o", "/logs/", "nothing"] {
                var query = RunQuery()
                query.text = text
                let walked = try catalog.runs(query, shape: .newestFirst).map(\.path)
                #expect(try catalog.runs(query).map(\.path) == walked, "\(text)")
                for bound in [1, 2, 100] {
                    #expect(try catalog.runs(query, shape: .scannedFirst(bound: bound)).map(\.path) == walked, "\(text) \(bound)")
                }
            }
            var text = RunQuery()
            text.text = "nothing"
            let plan = try catalog.plan(text).joined(separator: "\n")
            #expect(
                store == .sqlite ? plan.contains("SCAN logs") && !plan.contains("logs_by_start") : !plan.contains("logs_by_start"),
                "\(plan)")
            // With a stop reason as well, that reason's index (a plan of SQLite's own; PostgreSQL
            // weighs a table this small its own way).
            text.stopReasons = ["success"]
            if store == .sqlite { #expect(try catalog.plan(text).joined(separator: "\n").contains("logs_by_stop")) }
        }
    }
}
