import ConfigFile
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import EvalEngine

/// A pipeline's expectation kinds are one table too (`PipelineExpectationKind`, and
/// `TaskExpectationKind` for a task's own keys), held to the published schema.
@Suite("Pipeline expectation kinds: one table, held to the schema")
struct PipelineExpectationKindTests {
    /// One example per pipeline-level kind, and the checks it counts as.
    static let pipelineExamples: [String: (value: JSONValue, checks: Int)] = [
        "status": ("succeeded", 1),
        "tasksRan": (["fetch", "classify"], 2),
        "tasksNotRan": ("notify", 1),
        "order": (["fetch", "classify"], 1),
        "maxRetries": (2, 1),
        "breakersOpened": (["model"], 1),
        "noBreakerOpened": (true, 1),
        "outputs": (["classify": ["label": "refund"]], 1),
    ]

    /// One example per task-level kind.
    static let taskExamples: [String: (value: JSONValue, checks: Int)] = [
        "status": ("succeeded", 1),
        "retries": (["max": 1], 1),
        "output": ("done", 1),
    ]

    func schemaKeys() throws -> (pipeline: Set<String>, task: Set<String>) {
        let root = ExampleRuns.fixtures.deletingLastPathComponent()
        let json = try JSONParser.parse(Array(try Data(contentsOf: root.appendingPathComponent("docs/eval-case.schema.json"))))
        let expected = try #require(json["anyOf"]?.arrayValue?.first?["properties"]?["expected"]?["properties"])
        let pipeline = try #require(expected["pipeline"]?["properties"]?.objectValue)
        let task = try #require(expected["tasks"]?["additionalProperties"]?["properties"]?.objectValue)
        return (Set(pipeline.keys), Set(task.keys).subtracting(ExpectationKind.all.map(\.key)))
    }

    func read(pipeline: String, tasks: String = "") throws -> (PipelineExpectations, [ConfigError]) {
        let node = try ConfigNode.parse("pipeline:\n" + pipeline + (tasks.isEmpty ? "" : "tasks:\n" + tasks), path: "case.yaml")
        var fields = try node.mapping("expected")
        var errors = ConfigErrors([])
        let expected = EvalCaseFile.readPipelineExpectations(
            fields.optional("pipeline"), tasks: fields.optional("tasks"), directory: "/tmp", errors: &errors)
        return (expected, errors.errors)
    }

    @Test("the tables' keys are the schema's keys under expected.pipeline and a task's own keys under expected.tasks")
    func tablesMatchSchema() throws {
        let (pipeline, task) = try schemaKeys()
        #expect(Set(PipelineExpectationKind.all.map(\.key)) == pipeline)
        #expect(PipelineExpectationKind.all.count == pipeline.count, "a key is in the table twice")
        #expect(Set(TaskExpectationKind.all.map(\.key)) == task)
        #expect(Set(Self.pipelineExamples.keys) == pipeline, "give the new kind an example here")
        #expect(Set(Self.taskExamples.keys) == task, "give the new kind an example here")
    }

    @Test("every kind's example is read without error and counts as documented, alone")
    func everyKindReadsAndCounts() throws {
        for kind in PipelineExpectationKind.all {
            let (value, checks) = try #require(Self.pipelineExamples[kind.key])
            let (expected, errors) = try read(pipeline: "  \(kind.key): \(JSONWriter.encodeString(value))\n")
            #expect(errors.isEmpty, "\(kind.key): \(errors.map(\.description))")
            #expect(kind.count(expected) == checks, "\(kind.key)")
            #expect(expected.count == checks, "\(kind.key): only its own kind counts")
        }
        for kind in TaskExpectationKind.all {
            let (value, checks) = try #require(Self.taskExamples[kind.key])
            let (expected, errors) = try read(
                pipeline: "  status: succeeded\n", tasks: "  fetch: {\(kind.key): \(JSONWriter.encodeString(value))}\n")
            #expect(errors.isEmpty, "\(kind.key): \(errors.map(\.description))")
            let task = try #require(expected.tasks.first)
            #expect(kind.count(task) == checks, "\(kind.key)")
            #expect(task.count == checks, "\(kind.key): only its own kind counts")
        }
    }

    @Test("a key the tables do not know is refused with a did-you-mean; a bad value names its path")
    func unknownKeys() throws {
        let (_, unknown) = try read(pipeline: "  tasksRun: [fetch]\n")
        #expect(unknown.map(\.description).joined().contains("tasksRan"), "\(unknown.map(\.description))")
        let (_, bad) = try read(pipeline: "  maxRetries: -1\n")
        #expect(bad.map(\.description).joined().contains("pipeline.maxRetries"), "\(bad.map(\.description))")
        let (_, task) = try read(pipeline: "  status: succeeded\n", tasks: "  fetch: {retries: many}\n")
        #expect(task.map(\.description).joined().contains("tasks.fetch.retries"), "\(task.map(\.description))")
    }
}
