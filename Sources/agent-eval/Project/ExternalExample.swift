import AgentRuntime
import EvalEngine
import Foundation
import ModelClients
import Recording
import TraceCore

/// `agent-eval init --external python`: the example agent is a Python program, recorded through
/// the model gateway into the cassette its case replays. The model answers of that first
/// recording are the ones a model gives this agent (`ExampleModel`), so the project runs offline
/// from the start; `run --record all` with a real model replaces them.
enum ExternalExample {
    /// The template folder of each language `--external` takes.
    static let templates = ["python": "init-external-python"]

    /// The case's command and input, as `evals/order-status-external.yaml` writes them.
    static let command = ["python3", "../agents/order_agent.py"]
    static let input = ProjectTemplate.firstInput
    static let cassette = "cassettes/order-status"
    static let firstRunLog = "runs/first-run.jsonl.gz"

    /// Runs the example agent once through the gateway, `ExampleModel` answering, recording the
    /// cassette and the run's log.
    static func record(in project: ProjectTemplate.Project) async throws -> CommandRecording.Outcome {
        let cassette = try Cassette(directory: project.path(Self.cassette), mode: .all)
        var recording = CommandRecording(
            command: command + [input], directory: project.path("evals"), input: input, logPath: project.path(firstRunLog),
            runId: RuntimeEnvironment.live.makeRunId(), goal: input, agentName: "order_agent", timeoutMs: 120_000,
            upstreams: Upstreams(), cassette: cassette, environment: ProcessInfo.processInfo.environment)
        recording.upstream = ExampleModel()
        recording.outputDescriptor = nil
        try FileManager.default.createDirectory(atPath: project.path("runs"), withIntermediateDirectories: true)
        return try await recording.run()
    }
}

/// The model of the example's first recording: a Chat Completions server that looks the order up
/// and then answers from what the tool said — what a model asked by the example agent does.
struct ExampleModel: ModelTransport {
    func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws {
        let body = (try? JSONParser.parse(request.body)) ?? .null
        let results = (body["messages"]?.arrayValue ?? []).filter { $0["role"]?.stringValue == "tool" }
        let message: JSONValue
        let finish: String
        if results.isEmpty {
            message = [
                "role": "assistant", "content": .null,
                "tool_calls": [
                    [
                        "id": "call_order_status_1", "type": "function",
                        "function": ["name": "order_status", "arguments": #"{"order_id": "A-1001"}"#],
                    ]
                ],
            ]
            finish = "tool_calls"
        } else {
            message = [
                "role": "assistant",
                "content": "Order A-1001 has shipped with DHL and should arrive in about 2 days, so it can no longer be cancelled.",
            ]
            finish = "stop"
        }
        let reply: JSONValue = [
            "id": "chatcmpl-example", "object": "chat.completion", "created": 0, "model": body["model"] ?? "gpt-4o-mini",
            "choices": [["index": 0, "message": message, "finish_reason": .string(finish)]],
            "usage": ["prompt_tokens": 120, "completion_tokens": 24, "total_tokens": 144],
        ]
        try receive([
            .head(status: 200, headers: [HTTPHeader(name: "content-type", value: "application/json")]), .chunk(JSONWriter.encode(reply)),
        ])
    }
}
