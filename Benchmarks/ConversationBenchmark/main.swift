// The conversation benchmark: what a simulated user played by a model costs, per turn, when a
// conversation replays from its cassette, on top of the agent's own replay (docs/performance.md,
// "Conversations").
//
//   swift run -c release conversation-benchmark [--repetitions 9]
//
// 1. Records once: a 20-turn conversation into a cassette, both models served by
//    scripts/model_server.py on 127.0.0.1 (the agent answers each turn; the user says
//    "message N" and stops at its 20th turn), then stops the server.
// 2. A: the conversation replayed from the cassette alone (mode none): the agent's and the
//    user's requests, the log written as in a run.
// 3. B: the agent's own replay: the same conversation with the user's turns scripted (the same
//    texts, so the agent's requests are the same and come from the same cassette).
// Prints each repetition and the medians of A, B and (A - B) / 20: the user's cost per turn.
// Target: below 5 ms per turn.
import AgentRuntime
import Foundation
import ModelClients
import TestSupport
import TraceCore
import TraceLog

var repetitions = 9
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--repetitions": repetitions = max(1, arguments.next().flatMap(Int.init) ?? repetitions)
    default:
        FileHandle.standardError.write(Data("usage: conversation-benchmark [--repetitions N]\n".utf8))
        exit(64)
    }
}

let turns = 20
let directory = NSTemporaryDirectory() + "/agent-eval-conversation-benchmark-\(UUID().uuidString)"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
let cassetteDirectory = directory + "/cassette"

func agent(cassette: Cassette, baseURL: String) throws -> Agent {
    var settings = ModelSettings(provider: .openai, name: "agent-model")
    settings.baseURL = baseURL
    settings.maxRetries = 0
    let model = try HTTPModelClients(cassette: cassette, environment: ["OPENAI_API_KEY": "benchmark"]).client(for: settings)
    return Agent(name: "chat", instructions: "Help the customer.", model: model, tools: ToolRegistry(), limits: RunLimits(maxSteps: 100))
}

func modelUser(cassette: Cassette, baseURL: String) throws -> ModelUser {
    var settings = ModelSettings(provider: .openai, name: "user-model")
    settings.baseURL = baseURL
    settings.maxRetries = 0
    let client = try HTTPModelClients(cassette: cassette, environment: ["OPENAI_API_KEY": "benchmark"]).client(for: settings)
    return ModelUser(client: client, persona: UserPersona(persona: "A customer who counts.", task: "Count to twenty."))
}

/// The same turns, said by script: what the user's model said, without asking it.
let scripted = CaseUser(
    lines: (1...turns).map { turn in CaseUser.Line(turn: turn, say: "message \(turn)" + (turn == turns ? " ###STOP###" : "")) })

func converse(_ agent: Agent, _ user: any SimulatedUser, log: String) async throws -> RunOutcome {
    let runtime = AgentRuntime(agent: agent, environment: .live)
    return try await runtime.converse(Conversation(user: user, maxTurns: turns), log: log)
}

// 1. Record.
let server = try LocalModelServer()
let recorder = try Cassette(directory: cassetteDirectory, mode: .new)
let recorded = try await converse(
    try agent(cassette: recorder, baseURL: server.baseURL("answer")),
    CaseUser(model: try modelUser(cassette: recorder, baseURL: server.baseURL("customer-counting"))), log: directory + "/recorded.jsonl.gz")
server.stop()
guard recorded.stop.reason == .userStop, recorded.state.userTurns.count == turns else {
    FileHandle.standardError.write(Data("the recording did not go \(turns) turns: \(recorded.stop)\n".utf8))
    exit(1)
}

// 2 and 3, alternating, from the cassette alone (nothing listens at the base URLs now).
let replay = try Cassette(directory: cassetteDirectory, mode: .none)
let base = server.baseURL("answer")
let userBase = server.baseURL("customer-counting")
var withModel: [Double] = []
var withScript: [Double] = []
for repetition in 1...repetitions {
    let clock = ContinuousClock()
    var start = clock.now
    let a = try await converse(
        try agent(cassette: replay, baseURL: base), CaseUser(model: try modelUser(cassette: replay, baseURL: userBase)),
        log: directory + "/a-\(repetition).jsonl.gz")
    let timeA = clock.now - start
    start = clock.now
    let b = try await converse(try agent(cassette: replay, baseURL: base), scripted, log: directory + "/b-\(repetition).jsonl.gz")
    let timeB = clock.now - start
    guard a.state.dialogue == recorded.state.dialogue, b.state.dialogue == recorded.state.dialogue else {
        FileHandle.standardError.write(Data("a replay differs from the recording: \(a.stop) / \(b.stop)\n".utf8))
        exit(1)
    }
    let ms = { (duration: Duration) in Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15 }
    withModel.append(ms(timeA))
    withScript.append(ms(timeB))
    print(String(format: "repetition %d: model-played user %.2f ms, scripted user %.2f ms", repetition, ms(timeA), ms(timeB)))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
let a = median(withModel)
let b = median(withScript)
print(
    String(
        format:
            "median of %d: a %d-turn conversation replayed %.2f ms with its user's model from the cassette, %.2f ms with the user scripted",
        repetitions, turns, a, b))
print(String(format: "the user's model from the cassette: %.3f ms per turn (target: below 5 ms)", (a - b) / Double(turns)))
