import AgentRuntime
import ConfigFile
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import EvalEngine

/// The table of expectation kinds is the one list the reader, the counter and the checker use;
/// these tests hold it to the published schema, so a kind cannot be added to one and not the other.
@Suite("Expectation kinds: one table, held to the schema")
struct ExpectationKindTests {
    /// One example per kind, as a case file would give it, and the checks it counts as.
    static let examples: [String: (value: JSONValue, checks: Int)] = [
        "toolsCalled": (["lookup_order", "refund_order"], 2),
        "toolsSucceeded": ("lookup_order", 1),
        "toolsNotCalled": (["delete_account"], 1),
        "toolsAllowed": (["lookup_order"], 1),
        "notSequence": (["refund_order", "lookup_order"], 1),
        "failedResults": (["max": 1], 1),
        "stopReason": ("success", 1),
        "limit": ("max_steps", 1),
        "sequence": (["mode": "in_order", "calls": ["lookup_order", ["tool": "refund_order", "arguments": ["order_id": "A-1"]]]], 1),
        "arguments": (
            ["refund_order": ["paths": ["amount": ["max": 100]]], "lookup_order": [["order_id": "A-1"], ["order_id": "A-2"]]], 3
        ),
        "callCounts": (["lookup_order": 1, "refund_order": ["min": 0, "max": 1]], 2),
        "maxSteps": (8, 1),
        "maxToolCalls": (4, 1),
        "minToolCalls": (1, 1),
        "maxTokens": (5000, 1),
        "maxDurationMs": (60000, 1),
        "verdicts": (["denied": ["delete_account"], "approvalRequired": "refund_order", "noUnapprovedExecution": true], 3),
        "answer": (["contains": ["refund"], "matches": "A-[0-9]+", "similarTo": "Your refund is on its way.", "min": 0.5], 3),
        "communicate": (["refund of 49.99", "rf-9"], 2),
        "turns": (["2": ["toolsCalled": ["lookup_order"], "toolsNotCalled": ["refund_order"]], "3": ["communicate": "refund"]], 3),
        "state": (["command": ["python3", "dump_state.py"], "match": ["orders": ["A-1042": ["refunded": true]]]], 1),
        "countDeniedAttempts": (true, 0),
    ]

    func schema() throws -> (schema: JSONSchema, expected: JSONObject, task: JSONObject) {
        let root = ExampleRuns.fixtures.deletingLastPathComponent()
        let json = try JSONParser.parse(Array(try Data(contentsOf: root.appendingPathComponent("docs/eval-case.schema.json"))))
        let single = try #require(json["anyOf"]?.arrayValue?.first)
        let expected = try #require(single["properties"]?["expected"]?["properties"]?.objectValue)
        let task = try #require(expected["tasks"]?["additionalProperties"]?["properties"]?.objectValue)
        return (try JSONSchema(json: json), expected, task)
    }

    @Test("the table's keys are the schema's run-level keys, under expected: and under a task, and their members match")
    func tableMatchesSchema() throws {
        let (_, expected, task) = try schema()
        let keys = Set(ExpectationKind.all.map(\.key))
        #expect(keys.count == ExpectationKind.all.count, "a key is in the table twice")
        #expect(Set(expected.keys).subtracting(["pipeline", "tasks"]) == keys)
        #expect(Set(task.keys).subtracting(["status", "retries", "output"]) == keys)
        for kind in ExpectationKind.all {
            let property = try #require(expected[kind.key])
            // A mapping form, on its own or as one branch of anyOf.
            let mapping = property["properties"] ?? property["anyOf"]?.arrayValue?.lazy.compactMap { $0["properties"] }.first
            #expect(Set(mapping?.objectValue?.keys ?? []) == Set(kind.members), "\(kind.key)")
        }
    }

    @Test("every kind has an example that the schema accepts, the reader reads, and the counter counts as documented")
    func everyKindReadsAndCounts() throws {
        let (schema, _, _) = try schema()
        #expect(Set(Self.examples.keys) == Set(ExpectationKind.all.map(\.key)), "give the new kind an example here")
        for kind in ExpectationKind.all {
            let (value, checks) = try #require(Self.examples[kind.key])
            let caseJSON: JSONValue = ["caseId": "x", "logs": "runs/*.jsonl.gz", "expected": .object(JSONObject([(kind.key, value)]))]
            #expect(schema.violation(of: caseJSON, root: "case") == nil, "\(kind.key)")
            // A modifier checks nothing on its own, and a case that expects nothing is refused: give it company.
            let company = checks == 0 ? "  toolsNotCalled: [x]\n" : ""
            let node = try ConfigNode.parse(
                "expected:\n  \(kind.key): \(JSONWriter.encodeString(value))\n" + company, path: "case.yaml")
            var errors = ConfigErrors([])
            var fields = try node.mapping("case")
            let expectedNode = try #require(fields.optional("expected") as ConfigNode?)
            let read = EvalCaseFile.readExpectations(expectedNode, case: "x", directory: "/tmp", errors: &errors, keepingPartial: true)
            #expect(errors.errors.isEmpty, "\(kind.key): \(errors.errors.map(\.description))")
            let expectations = try #require(read, "\(kind.key)")
            #expect(kind.isGiven(expectations), "\(kind.key)")
            #expect(kind.count(expectations) == checks, "\(kind.key)")
            #expect(expectations.count == max(checks, 1), "\(kind.key): only its own kind counts")
        }
    }

    @Test("an expectation that checks nothing is an error at its line even beside others; toolsAllowed: [] checks something")
    func emptyExpectations() throws {
        func errors(_ line: String) throws -> [String] {
            let node = try ConfigNode.parse("expected:\n  stopReason: success\n  \(line)\n", path: "case.yaml")
            var errors = ConfigErrors([])
            var fields = try node.mapping("case")
            let expectedNode = try #require(fields.optional("expected") as ConfigNode?)
            _ = EvalCaseFile.readExpectations(expectedNode, case: "x", directory: "/tmp", errors: &errors)
            return errors.errors.map { "\($0.location.line ?? 0): \($0.message)" }
        }
        for (line, said) in [
            ("toolsNotCalled: []", "toolsNotCalled is empty"), ("toolsCalled: []", "toolsCalled is empty"),
            ("callCounts: {}", "callCounts is empty"), ("callCounts: {refund_order: {}}", "callCounts.refund_order is empty"),
            ("verdicts: {denied: []}", "verdicts.denied is empty"), ("answer: {contains: []}", "answer.contains is empty"),
            ("turns: {}", "turns is empty"), ("turns: {2: {}}", "turns.2 is empty"), ("arguments: {}", "arguments is empty"),
            ("communicate: []", "communicate is empty"), ("answer: ''", "answer is empty"),
            ("answer: {contains: ['']}", "answer.contains[0] is empty"), ("answer: {matches: ''}", "answer.matches is empty"),
            ("turns: {2: {toolsNotCalled: [], toolsCalled: [lookup_order]}}", "turns.2.toolsNotCalled is empty"),
            // A count every run meets.
            ("minToolCalls: 0", "minToolCalls: 0 checks nothing"),
            ("failedResults: {min: 0}", "failedResults asks for at least 0 and sets no max"),
            ("callCounts: {refund_order: {min: 0}}", "callCounts.refund_order asks for at least 0"),
        ] {
            let found = try errors(line)
            #expect(found.count == 1 && found[0].hasPrefix("3: \(said)"), "\(line): \(found)")
        }
        #expect(try errors("toolsAllowed: []").isEmpty)
        #expect(try errors("maxToolCalls: 0").isEmpty)
        #expect(try errors("failedResults: 0").isEmpty)
        #expect(try errors("callCounts: {refund_order: {min: 0, max: 1}}").isEmpty)
        #expect(try errors("sequence: {mode: strict, calls: []}").isEmpty)
        // A pipeline's: its own keys.
        let node = try ConfigNode.parse("expected:\n  pipeline: {status: succeeded, tasksNotRan: []}\n", path: "case.yaml")
        var pipelineErrors = ConfigErrors([])
        var fields = try node.mapping("case")
        let expectedNode = try #require(fields.optional("expected") as ConfigNode?)
        _ = EvalCaseFile.readExpectations(expectedNode, case: "x", directory: "/tmp", errors: &pipelineErrors)
        #expect(pipelineErrors.errors.map(\.message).contains { $0.hasPrefix("pipeline.tasksNotRan is empty") }, "\(pipelineErrors.errors)")
    }

    @Test("failures come in the table's order, whatever order the file gives the keys in")
    func failuresFollowTheTable() throws {
        let node = try ConfigNode.parse(
            """
            expected:
              maxToolCalls: 0
              answer: done
              stopReason: blocked
              toolsCalled: [lookup_order]
            """, path: "case.yaml")
        var errors = ConfigErrors([])
        var fields = try node.mapping("case")
        let expectedNode = try #require(fields.optional("expected") as ConfigNode?)
        let expected = try #require(EvalCaseFile.readExpectations(expectedNode, case: "x", directory: "/tmp", errors: &errors))
        let state = trajectory([], stop: RunStopped(reason: .success))
        let names = TrajectoryCheck.check(expected, against: state).failures.map(\.expectation)
        #expect(names == ["toolsCalled", "stopReason", "answer.contains"])
    }

    @Test("the tools a case names come in the order unknown ones have always been reported: a sequence's last")
    func toolNamesOrder() throws {
        let node = try ConfigNode.parse(
            """
            expected:
              sequence: [s1, s2]
              callCounts: {c1: 1}
              arguments: {a1: {x: 1}}
              verdicts: {denied: [d1]}
              toolsCalled: [t1]
            """, path: "case.yaml")
        var errors = ConfigErrors([])
        var fields = try node.mapping("case")
        let expectedNode = try #require(fields.optional("expected") as ConfigNode?)
        let expected = try #require(EvalCaseFile.readExpectations(expectedNode, case: "x", directory: "/tmp", errors: &errors))
        #expect(expected.toolNames == ["t1", "a1", "c1", "d1", "s1", "s2"])
    }

    @Test("a failure's words are the ones the reports have always shown")
    func failureWords() {
        var expected = Expectations()
        expected.toolsCalled = ["refund_order"]
        let failure = TrajectoryCheck.check(expected, against: run("lookup_order")).failures.first
        #expect(failure?.actual == "no call of refund_order; tools executed: lookup_order")
    }
}
