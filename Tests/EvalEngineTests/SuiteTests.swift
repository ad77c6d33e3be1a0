import AgentRuntime
import ConfigFile
import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

@Suite("Case files, sharding and filters")
struct CaseFileTests {
    func loadErrors(_ text: String, name: String = "case.yaml") throws -> [String] {
        try TemporaryDirectory.with { directory in
            try text.write(toFile: directory.path(name), atomically: true, encoding: .utf8)
            return EvalSuite.load(paths: [directory.url.path]).errors.map { error in
                (error.location.map { "\(($0.path as NSString).lastPathComponent):\($0.line):\($0.column): " } ?? "") + error.message
                    + (error.hint.map { " (\($0))" } ?? "")
            }
        }
    }

    @Test("the minimal shape works as is, and runs with the runner's --agent")
    func minimalShape() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            caseId: refund
            input: Order A-1042 arrived broken. Refund me.
            expected:
              toolsCalled: [lookup_order]
              toolsNotCalled: [delete_customer]
              stopReason: approval_required
            """.write(toFile: directory.path("refund.yaml"), atomically: true, encoding: .utf8)
            let (cases, errors) = EvalSuite.load(paths: [directory.url.path])
            #expect(errors.isEmpty)
            let options = EvalOptions(
                jobs: 1, defaultAgent: ExampleRuns.agentPath("support"), outputDirectory: directory.path("runs"),
                environment: .deterministic(runId: "r"))
            let results = await EvalRunner(options: options).run(cases)
            #expect(results.map(\.passed) == [true])
            let withoutAgent = await EvalRunner(options: EvalOptions(jobs: 1, outputDirectory: directory.path("runs"))).run(cases)
            let error = try #require(withoutAgent.first?.harnessError)
            #expect(error.diagnosticCode == "eval.bad_case")
            #expect(error.message == #"case "refund" names no agent and no logs"#)
            #expect(error.place?.path.hasSuffix(".yaml") == true)
            #expect(error.hint == "add agent: or logs: to it, or give the runner a default agent")
        }
    }

    @Test(
        "bad case files of every kind, with file:line:column and what to do",
        arguments: [
            ("caseId: [x\n", "case.yaml:2:1: the file is not valid YAML: did not find expected ',' or ']'"),
            ("input: hi\nexpected: {toolsCalled: [t]}\n", #"case.yaml:1:1: the case has no "caseId" (every case needs a unique caseId)"#),
            (
                "caseId: a\nlogs: x.gz\nexpected: {}\n",
                #"case.yaml:3:11: case "a" expects nothing: a case with no expectation would pass any run (add at least one expectation, such as toolsCalled, toolsNotCalled or stopReason)"#
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {toolsCalled: 5}\n",
                "case.yaml:3:25: toolsCalled must be a name (a string), found a number"
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {toolsNotCalled: [refund, true]}\n",
                "case.yaml:3:37: each item of toolsNotCalled must be a name (a string), found a boolean"
            ),
            (
                "caseId: a\ninput: x\nexpected: {toolsCaled: [x]}\n",
                #"case.yaml:3:12: expected has no setting "toolsCaled" (did you mean "toolsCalled"?)"#
            ),
            (
                "caseId: a\ninput: x\nexpected: {stopReason: done}\n",
                #"case.yaml:3:24: stopReason must be one of "success", "blocked", "approval_required", "budget_exhausted", "invalid_decision", "policy_denied", "tool_failure", "user_stop", "user_transfer", "user_out_of_scope", "agent_stop", "max_turns", found "done""#
            ),
            (
                "caseId: a\ninput: x\nexpected: {toolsCalled: a}\nexpected: {}\n",
                #"case.yaml:4:1: the key "expected" appears twice in this mapping (first at line 3) (remove one of them)"#
            ),
            (
                "caseId: a\nlogs: x.gz\nagent: y.yaml\nexpected: {toolsCalled: [t]}\n",
                "case.yaml:1:1: case \"a\" has both agent and logs; a case checks live runs or recorded ones"
            ),
            ("caseId: a\nagent: y.yaml\nexpected: {toolsCalled: [t]}\n", "case.yaml:1:1: case \"a\" runs live and needs an input"),
            // An input beside logs read as checked: a log of another task passed.
            (
                "caseId: a\ninput: Close account c-99.\nlogs: x.gz\nexpected: {toolsCalled: [t]}\n",
                "case.yaml:2:8: case \"a\" has input and logs: input is the goal of a live run, and a recorded log holds its own "
                    + "(drop input, since the log's goal is its run_started event's; or run the case live with agent and input)"
            ),
            // An empty path named the case file's own folder.
            (
                "caseId: a\nlogs: \"\"\nexpected: {toolsCalled: [t]}\n",
                "case.yaml:2:7: case \"a\" logs has an empty path (name a log, e.g. logs: runs/refund.jsonl.gz, or a pattern such as runs/*.jsonl.gz)"
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {sequence: {mode: sorted, calls: [x]}}\n",
                #"case.yaml:3:29: sequence.mode must be one of "strict", "unordered", "superset", "subset", "in_order", found "sorted""#
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {arguments: {t: {mode: exact}}}\n",
                "case.yaml:3:27: arguments of t mode exact needs match (the expected arguments)"
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {arguments: {t: {paths: {n: {regex: '('}}}}}\n",
                #"case.yaml:3:47: arguments of t paths.n regex is not a regular expression this tool runs: a "(" is never closed (at position 2 of the pattern)"#
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {callCounts: {t: {min: 3, max: 1}}}\n",
                "case.yaml:3:28: callCounts.t max (1) is below min (3)"
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {arguments: {t: []}}\n",
                "case.yaml:3:27: arguments of t is an empty list: give a matcher per call, in order"
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {arguments: {t: [{id: 1}, {mode: exact}]}}\n",
                "case.yaml:3:37: arguments of t, call 2 mode exact needs match (the expected arguments)"
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {notSequence: [t]}\n",
                "case.yaml:3:25: notSequence names 1 tool: an order needs two or more (for a tool that must never run, use toolsNotCalled)"
            ),
            (
                "caseId: a\nlogs: x.gz\nexpected: {failedResults: {max: -1}}\n",
                "case.yaml:3:33: failedResults.max must be at least 0, found -1"
            ),
            (
                "caseId: a\nlogs: x.gz\ncassette: cassettes/a\nexpected: {toolsCalled: [t]}\n",
                "case.yaml:3:11: case \"a\" names a cassette but checks recorded logs: a cassette serves the model of live runs (drop cassette, or run the case live with agent and input)"
            ),
            (
                "caseId: a b\nlogs: x.gz\nexpected: {toolsCalled: [t]}\n",
                "case.yaml:1:9: caseId \"a b\" may only hold letters, digits, \"-\", \"_\", \".\" and \":\""
            ),
        ] as [(String, String)])
    func badCaseFiles(_ text: String, _ message: String) throws {
        #expect(try loadErrors(text) == [message])
    }

    @Test("every broken file is reported, not only the first; duplicate ids are named with both places")
    func allErrors() throws {
        try TemporaryDirectory.with { directory in
            try "caseId: a\nlogs: x.gz\nexpected: {toolsCalled: [t]}\n".write(
                toFile: directory.path("1.yaml"), atomically: true, encoding: .utf8)
            try "caseId: a\nlogs: y.gz\nexpected: {toolsCalled: [t]}\n".write(
                toFile: directory.path("2.yaml"), atomically: true, encoding: .utf8)
            try "caseId: b\nlogs: z.gz\nexpected: {maxSteps: -1}\n".write(
                toFile: directory.path("3.json"), atomically: true, encoding: .utf8)
            try "not: [a case".write(toFile: directory.path(".hidden.yaml"), atomically: true, encoding: .utf8)
            let (cases, errors) = EvalSuite.load(paths: [directory.url.path])
            #expect(cases.map(\.id) == ["a"])
            #expect(errors.count == 2)
            #expect(errors[0].code == .duplicateCase)
            #expect(errors[0].message.contains("1.yaml:1:1"))
            #expect(errors[1].message == "maxSteps must be at least 0, found -1")
        }
    }

    @Test("every error of one case file is reported, in file order, and the file's other cases are read too")
    func allErrorsOfAFile() throws {
        let text = """
            - caseId: a
              logs: x.gz
              tags: [ok]
              expected: {toolsCaled: [x], maxSteps: many}
            - caseId: b
              lgos: y.gz
              expected: {}
            """
        #expect(
            try loadErrors(text) == [
                #"case.yaml:4:14: expected has no setting "toolsCaled" (did you mean "toolsCalled"?)"#,
                "case.yaml:4:41: maxSteps must be a whole number, found a string",
                // With its logs misspelled, b is a live case without input.
                #"case.yaml:5:3: case "b" runs live and needs an input"#,
                #"case.yaml:6:3: case "b" has no setting "lgos" (known keys: caseId, description, tags, input, agent, pipeline, logs, approve, deny, allowUnfinished, allowReusedCallIds, minPassRate, quarantine, judgeMinKappa, cassette, policy, user, command, upstream, timeout, env, name, expected)"#,
                #"case.yaml:7:13: case "b" expects nothing: a case with no expectation would pass any run (add at least one expectation, such as toolsCalled, toolsNotCalled or stopReason)"#,
            ])
    }

    @Test("sharding puts every case in exactly one shard, and adding cases moves none of the others")
    func sharding() throws {
        let cases = (0..<500).map { index in
            EvalCase(id: "case-\(index)", source: .recorded(patterns: []), expected: Expectations(), location: SourceLocation(path: "x"))
        }
        for count in [1, 2, 3, 7] {
            let shards = (1...count).map { EvalSuite.shard(cases, index: $0, count: count).map(\.id) }
            #expect(shards.flatMap { $0 }.sorted() == cases.map(\.id).sorted())
            #expect(Set(shards.flatMap { $0 }).count == cases.count)
            if count == 7 { #expect(shards.allSatisfy { $0.count > 40 }) }
        }
        let more =
            cases
            + (500..<600).map {
                EvalCase(id: "case-\($0)", source: .recorded(patterns: []), expected: Expectations(), location: SourceLocation(path: "x"))
            }
        for index in 1...3 {
            let before = Set(EvalSuite.shard(cases, index: index, count: 3).map(\.id))
            let after = Set(EvalSuite.shard(more, index: index, count: 3).map(\.id))
            #expect(before.isSubset(of: after))
        }
        // The hash is FNV-1a: the same everywhere, every run (published test vector).
        #expect(EvalSuite.stableHash("a") == 0xaf63_dc4c_8601_ec8c)
    }

    @Test("filters match ids and tags by glob")
    func filters() {
        let cases = [
            EvalCase(
                id: "support-1", tags: ["live"], source: .recorded(patterns: []), expected: Expectations(),
                location: SourceLocation(path: "x")),
            EvalCase(
                id: "research-1", tags: ["budget"], source: .recorded(patterns: []), expected: Expectations(),
                location: SourceLocation(path: "x")),
        ]
        #expect(EvalSuite.filter(cases, by: ["support-*"]).map(\.id) == ["support-1"])
        #expect(EvalSuite.filter(cases, by: ["budget"]).map(\.id) == ["research-1"])
        #expect(EvalSuite.filter(cases, by: []).count == 2)
    }
}

@Suite("The published case schema")
struct CaseSchemaTests {
    @Test("every bundled case file conforms to docs/eval-case.schema.json, and a misspelt key does not")
    func bundledCasesConform() throws {
        let root = ExampleRuns.fixtures.deletingLastPathComponent()
        let schemaText = try Data(contentsOf: root.appendingPathComponent("docs/eval-case.schema.json"))
        let schema = try JSONSchema(json: try JSONParser.parse(Array(schemaText)))
        let files =
            (FileManager.default.enumerator(atPath: root.appendingPathComponent("EvalCases").path)?.allObjects as? [String] ?? []).map {
                root.appendingPathComponent("EvalCases/\($0)").path
            }
            + (try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Fixtures/eval/failing").path)).map {
                root.appendingPathComponent("Fixtures/eval/failing/\($0)").path
            }
        let cases = files.filter { $0.hasSuffix(".yaml") }
        #expect(cases.count >= 10)
        for file in cases {
            #expect(schema.violation(of: try ConfigNode.load(path: file).json, root: "case") == nil, "\(file)")
        }
        let bad: JSONValue = ["caseId": "x", "expected": ["toolsCaled": ["a"]]]
        #expect(schema.violation(of: bad, root: "case") != nil)
        let gated: JSONValue = [
            "caseId": "x", "agent": "a.yaml", "input": "i", "minPassRate": 0.8,
            "quarantine": ["owner": "alice", "reason": "#1", "until": "2026-12-31"], "expected": ["toolsCalled": ["a"]],
        ]
        #expect(schema.violation(of: gated, root: "case") == nil)
        var undated = gated
        if case .object(var members) = undated {
            members["quarantine"] = ["owner": "alice", "reason": "#1"]
            undated = .object(members)
        }
        #expect(schema.violation(of: undated, root: "case") != nil)
    }

    @Test("the quarantine file `agent-eval quarantine add` writes conforms to docs/quarantine.schema.json")
    func quarantineFileConforms() throws {
        let root = ExampleRuns.fixtures.deletingLastPathComponent()
        let schemaText = try Data(contentsOf: root.appendingPathComponent("docs/quarantine.schema.json"))
        let schema = try JSONSchema(json: try JSONParser.parse(Array(schemaText)))
        try TemporaryDirectory.with { directory in
            let file = QuarantineFile(
                path: directory.path("q.yaml"),
                entries: [
                    QuarantineEntry(
                        caseId: "refund-flow", owner: "alice: on call", reason: "https://x/issues/1, \"flaky\"", until: "2026-12-31",
                        location: SourceLocation(path: "q.yaml"))
                ])
            try file.save()
            let written = try ConfigNode.load(path: directory.path("q.yaml")).json
            #expect(schema.violation(of: written, root: "quarantine file") == nil)
            #expect(try QuarantineFile.load(path: directory.path("q.yaml")).entries.first?.owner == "alice: on call")
            #expect(schema.violation(of: ["quarantine": [["case": "x", "owner": "o", "reason": "r"]]], root: "quarantine file") != nil)
        }
    }
}
