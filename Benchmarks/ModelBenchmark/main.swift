// The model client's costs, in two parts.
//
// 1. A streamed reply, client side only: a 1 MB event stream of each provider's shape (text deltas
//    of about 40 bytes, then a tool call whose arguments come in pieces of 10 bytes) handed to
//    `HTTPModelClient` in 16 KiB chunks by an in-memory transport, so no network or server pacing
//    is measured: SSE parsing, reading every event, assembly and the final message. Target: >= 200 MB/s.
// 2. Requests per second against a local server that answers at once (this binary started again
//    with `--serve`, in its own process: NIO, keep-alive, a short streamed reply), `--concurrency`
//    at a time: our client through the CLI's factory (async-http-client), then the official
//    `openai` Python SDK (httpx, its stream helper; `scripts/openai_sdk_bench.py` in the
//    `scripts/python_venv interop` environment) on the same server in the same run. Compared per
//    core: requests per CPU-second of each client's own process. Target: >= 3x the SDK.
//
//   swift run -c release model-benchmark [--megabytes 1] [--repetitions 9] [--requests 3000] [--concurrency 2]
//
// Prints each repetition and the medians; `--requests 0` skips part 2.
import AgentRuntime
import BenchmarkSupport
import Foundation
import ModelClients
import Synchronization
import TraceCore

#if canImport(Glibc)
    import Glibc
#endif

struct MemoryTransport: ModelTransport {
    let stream: [UInt8]

    func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws {
        try receive([.head(status: 200, headers: [HTTPHeader(name: "content-type", value: "text/event-stream")])])
        var offset = 0
        while offset < stream.count {
            let end = min(offset + 16 * 1024, stream.count)
            try receive([.chunk(Array(stream[offset..<end]))])
            offset = end
        }
    }
}

var megabytes = 1.0
var repetitions = 9
var requests = 3000
var concurrency = 2
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--serve": try LocalReplyServer.serve(portFile: arguments.next() ?? "port")
    case "--megabytes": megabytes = arguments.next().flatMap(Double.init) ?? megabytes
    case "--repetitions": repetitions = arguments.next().flatMap(Int.init) ?? repetitions
    case "--requests": requests = arguments.next().flatMap(Int.init) ?? requests
    case "--concurrency": concurrency = max(1, arguments.next().flatMap(Int.init) ?? concurrency)
    default:
        FileHandle.standardError.write(
            Data("usage: model-benchmark [--megabytes N] [--repetitions N] [--requests N] [--concurrency N]\n".utf8))
        exit(64)
    }
}

/// The same shape as a Messages stream: text deltas, then a tool_use block whose input comes
/// in `input_json_delta` pieces.
func makeAnthropicStream(bytes target: Int) -> [UInt8] {
    func event(_ name: String, _ value: JSONValue) -> String { "event: \(name)\ndata: " + JSONWriter.encodeString(value) + "\n\n" }
    var text = event("message_start", ["type": "message_start", "message": ["usage": ["input_tokens": 10, "output_tokens": 1]]])
    text += event("content_block_start", ["type": "content_block_start", "index": 0, "content_block": ["type": "text", "text": ""]])
    let textDelta = event(
        "content_block_delta",
        ["type": "content_block_delta", "index": 0, "delta": ["type": "text_delta", "text": "The order shipped on Tuesday, "]])
    while text.utf8.count < target / 2 { text += textDelta }
    text += event("content_block_stop", ["type": "content_block_stop", "index": 0])
    text += event(
        "content_block_start",
        [
            "type": "content_block_start", "index": 1,
            "content_block": ["type": "tool_use", "id": "toolu_1", "name": "lookup", "input": [:]],
        ])
    func piece(_ json: String) -> String {
        event(
            "content_block_delta",
            ["type": "content_block_delta", "index": 1, "delta": ["type": "input_json_delta", "partial_json": .string(json)]])
    }
    text += piece("{\"note\":\"")
    let argumentPiece = piece("abcdefghij")
    while text.utf8.count < target { text += argumentPiece }
    text += piece("\"}") + event("content_block_stop", ["type": "content_block_stop", "index": 1])
    text += event("message_delta", ["type": "message_delta", "delta": ["stop_reason": "tool_use"], "usage": ["output_tokens": 20]])
    text += event("message_stop", ["type": "message_stop"])
    return Array(text.utf8)
}

let request = ModelRequest(
    instructions: "", packet: ContextBuilt(goal: "g", stateSummary: "", tokenEstimate: 1), tools: [], observations: [], feedback: nil,
    decisionIndex: 0, step: 1)
for (provider, stream) in [
    (ModelSettings.Provider.openai, BenchmarkStreams.chat(bytes: Int(megabytes * 1_000_000))),
    (.anthropic, makeAnthropicStream(bytes: Int(megabytes * 1_000_000))),
] {
    let client = HTTPModelClient(settings: ModelSettings(provider: provider, name: "m"), transport: MemoryTransport(stream: stream))
    var rates: [Double] = []
    for repetition in 1...repetitions {
        let clock = ContinuousClock()
        let start = clock.now
        let reply = try await client.reply(to: request)
        let elapsed = start.duration(to: clock.now).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        precondition(reply.raw.contains("abcdefghij") && reply.usage?.output == 20, "the benchmark stream was not assembled")
        let rate = Double(stream.count) / seconds / 1e6
        rates.append(rate)
        print(
            String(
                format: "%@ repetition %d: %.1f MB/s (%d bytes in %.2f ms)", provider.rawValue, repetition, rate, stream.count,
                seconds * 1000))
    }
    print(String(format: "%@ median: %.1f MB/s of event stream (target >= 200)", provider.rawValue, rates.sorted()[rates.count / 2]))
}

// Part 2: requests per second, ours and the official SDK's, against the same local server.
guard requests > 0 else { exit(0) }

let server = try LocalReplyServer.Child()
defer { server.stop() }
let port = server.port
let baseURL = "http://127.0.0.1:\(port)/v1"

var settings = ModelSettings(provider: .openai, name: "local-model", baseURL: baseURL)
settings.maxRetries = 0
let live = try HTTPModelClients(environment: ["OPENAI_API_KEY": "sk-bench"]).client(for: settings)
let agentRequest = ModelRequest(
    instructions: "Be brief.", packet: ContextBuilt(goal: "Where is order A-1042?", stateSummary: "", tokenEstimate: 10),
    tools: [
        ToolSpec(
            name: "lookup_order", description: "Finds an order.",
            inputSchema: ["type": "object", "properties": ["order_id": ["type": "string"]]], sideEffect: .read)
    ], observations: [], feedback: nil, decisionIndex: 0, step: 1)
// One request first: the connection and the client's set-up are not measured.
let warmUp = try await live.reply(to: agentRequest)
precondition(warmUp.raw.contains("delivered"), "the local server's reply was not read")
let left = Mutex(requests)
let cpuBefore = ProcessCPU.seconds()
let started = ContinuousClock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    for _ in 0..<concurrency {
        group.addTask {
            while left.withLock({ count in
                guard count > 0 else { return false }
                count -= 1
                return true
            }) {
                let reply = try await live.reply(to: agentRequest)
                precondition(reply.usage?.output == 12, "a reply was not assembled")
            }
        }
    }
    try await group.waitForAll()
}
let oursElapsed = started.duration(to: .now).components
let oursSeconds = Double(oursElapsed.seconds) + Double(oursElapsed.attoseconds) / 1e18
let oursCPU = ProcessCPU.seconds() - cpuBefore
print(
    String(
        format: "ours: %d requests, %d at a time: %.0f requests/s, %.0f per CPU-second, %.0f µs of CPU per reply (%.2f s wall, %.2f s CPU)",
        requests, concurrency, Double(requests) / oursSeconds, Double(requests) / oursCPU, oursCPU / Double(requests) * 1e6, oursSeconds,
        oursCPU))

guard let python = try BenchmarkScripts.python(venv: "interop") else {
    print("the official SDK: skipped (scripts/python_venv interop could not make its environment)")
    exit(1)
}
let (sdkStatus, sdkResult) = try BenchmarkScripts.runJSON(python, "openai_sdk_bench.py", [baseURL, String(requests), String(concurrency)])
guard sdkStatus == 0, let sdkSeconds = sdkResult?["seconds"]?.doubleValue, let sdkCPU = sdkResult?["cpu_seconds"]?.doubleValue else {
    fatalError("the official SDK's run failed: \(sdkResult.map(JSONWriter.encodeString) ?? "no JSON")")
}
print(
    String(
        format: "the official openai SDK: %.0f requests/s, %.0f per CPU-second, %.0f µs of CPU per reply (%.2f s wall, %.2f s CPU)",
        Double(requests) / sdkSeconds, Double(requests) / sdkCPU, sdkCPU / Double(requests) * 1e6, sdkSeconds, sdkCPU))
print(
    String(
        format: "ours / the SDK: %.1fx requests/s, %.1fx per core (target >= 3x per core)", sdkSeconds / oursSeconds,
        sdkCPU / oursCPU))
