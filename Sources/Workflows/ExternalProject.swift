import AgentRuntime
public import EvalEngine
import Foundation
import ModelClients
public import Recording
import TraceCore

/// `agent-eval init --external python`: the example agent is a Python program, recorded through
/// the model gateway into the cassette its case replays. The model answers of that first
/// recording are the ones a model gives this agent (`ExampleModel`), so the project runs offline
/// from the start; `run --record all` with a real model replaces them.
///
/// ```swift
/// let (project, outcome) = try await ExternalProject.write(into: "my-agent", language: "python", templates: folder)
/// ```
public enum ExternalProject {
    /// The template folder of each language `--external` takes.
    public static let templates = ["python": "init-external-python"]

    /// The case's command and input, as `evals/order-status-external.yaml` writes them.
    static let command = ["python3", "../agents/order_agent.py"]
    static let input = ProjectTemplate.firstInput
    public static let cassette = "cassettes/order-status"
    public static let firstRunLog = "runs/first-run.jsonl.gz"

    /// Writes the project for `language` into `directory` from the templates under `templates`
    /// (the folder holding `init-common` and the language's), then runs its agent once through
    /// the gateway to record the cassette and the first run's log. Nothing is overwritten: when
    /// any file (the cassette and the log among them) is there, nothing is written. A project
    /// whose first run cannot be made or does not succeed is written, and the error says so.
    public static func write(into directory: String, language: String, templates: String) async throws(EvalError)
        -> (project: ProjectTemplate.Project, firstRun: CommandRecording.Outcome, files: [String])
    {
        guard let folder = Self.templates[language] else {
            throw EvalError(.missingPath, "init --external takes \(Self.templates.keys.sorted().joined(separator: ", ")); got \(language)")
        }
        // What the first run writes is checked with the templates' files: nothing is overwritten.
        let root = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        let existing = [cassette, firstRunLog].filter { FileManager.default.fileExists(atPath: root == "." ? $0 : root + "/" + $0) }
        guard existing.isEmpty else {
            throw EvalError(
                .projectExists,
                "\(root == "." ? "this folder" : root) has \(existing.joined(separator: ", ")) already; init overwrites nothing",
                hint: "run init in a new folder (agent-eval init --external \(language) my-agent), or move those files away")
        }
        let project = try await ProjectTemplate(templates: [templates + "/init-common", templates + "/" + folder], recordsFirstRun: false)
            .write(into: directory)
        let outcome: CommandRecording.Outcome
        do {
            outcome = try await record(in: project)
        } catch {
            throw EvalError(
                .writeFailed, "the project was written, but its agent could not be run once to record the model's answers",
                hint: (error as? any Diagnostic)?.hint.map { "\($0) (the agent needs python3 on PATH)" }
                    ?? "the agent needs python3 on PATH",
                cause: error as? any Diagnostic)
        }
        guard outcome.stop.reason == .success else {
            throw EvalError(
                .writeFailed,
                "the project was written, but its agent's first run did not succeed (\(outcome.stop.reason.rawValue): "
                    + "\(outcome.stop.error ?? "")); its cassette may be incomplete",
                location: SourceLocation(path: project.path(firstRunLog)),
                hint: "replay it: agent-eval replay \(ShellWords.quoted(project.path(firstRunLog)))")
        }
        let cassetteFiles = ProjectTemplate.files(under: project.path(cassette)).map { cassette + "/" + $0 }
        return (project, outcome, (project.files + cassetteFiles + [firstRunLog]).sorted())
    }

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
