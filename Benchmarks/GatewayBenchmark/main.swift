// The recording gateway's costs (docs/record.md, "Performance"), against a local model server that
// answers at once (this binary started again with `--serve`, in its own process), the same client
// (the model clients' HTTP transport) going to it directly and through the gateway — which runs
// here as `agent-eval record` runs it: forwarding, reading each reply, and recording every
// exchange into a log.
//
// 1. Added latency: `--requests` short streamed replies one at a time, alternating direct and
//    through the gateway (so drift hits both alike); p50 and p99 of each, and the difference.
//    Target: p50 added < 1 ms.
// 2. Streamed throughput: `--streams` Chat Completions streams of `--stream-megabytes` each,
//    alternating; MB/s as the client receives them, read by the client as an SDK would (every
//    event parsed and the reply assembled, `ReplyReader`). Target: >= 0.8 of direct. Then the
//    same streams read by the official openai Python SDK (`scripts/openai_sdk_bench.py` in the
//    `scripts/python_venv interop` environment), direct and through the gateway.
// 3. Memory: `--memory-requests` requests through the gateway, two at a time, recorded into one
//    log; the process's resident memory after each tenth. Target: flat.
//
//   swift run -c release gateway-benchmark [--requests 2000] [--streams 20] [--stream-megabytes 4] [--memory-requests 10000]
//                                          [--sdk-rounds 3]   (0 skips the SDK)
//
// Prints each part's numbers; run it several times and quote the medians.
import AgentRuntime
import BenchmarkSupport
import Foundation
import ModelClients
import Recording
import Synchronization
import TraceCore

#if canImport(Glibc)
    import Glibc
#endif

var requests = 2000
var streams = 20
var streamMegabytes = 4.0
var memoryRequests = 10_000
var sdkRounds = 3
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--serve":
        let file = arguments.next() ?? "port"
        var bytes = 4_000_000
        if arguments.next() == "--big-bytes" { bytes = arguments.next().flatMap(Int.init) ?? bytes }
        try LocalReplyServer.serve(portFile: file, bigBytes: bytes)
    case "--requests": requests = max(10, arguments.next().flatMap(Int.init) ?? requests)
    case "--streams": streams = max(2, arguments.next().flatMap(Int.init) ?? streams)
    case "--stream-megabytes": streamMegabytes = arguments.next().flatMap(Double.init) ?? streamMegabytes
    case "--memory-requests": memoryRequests = max(10, arguments.next().flatMap(Int.init) ?? memoryRequests)
    case "--sdk-rounds": sdkRounds = max(0, arguments.next().flatMap(Int.init) ?? sdkRounds)
    default:
        FileHandle.standardError.write(
            Data(
                "usage: gateway-benchmark [--requests N] [--streams N] [--stream-megabytes N] [--memory-requests N] [--sdk-rounds N]\n".utf8
            ))
        exit(64)
    }
}

let streamBytes = Int(streamMegabytes * 1_000_000)
let server = try LocalReplyServer.Child(extraArguments: ["--big-bytes", String(streamBytes)])
defer { server.stop() }
let upstream = "http://127.0.0.1:\(server.port)"

let directory = NSTemporaryDirectory() + "gateway-benchmark-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

/// A gateway recording into `log`, as `agent-eval record` sets it up, forwarding OpenAI requests
/// to `openAI` on the local server.
// No request budget: the benchmark measures the gateway, not `--max-requests` (default 100).
func startGateway(log: String, openAI: String = "/v1") async throws -> (ModelGateway, ExchangeRecorder) {
    let recorder = ExchangeRecorder(
        logPath: log, runId: "run-benchmark", goal: nil, agentName: "benchmark", command: ["benchmark"], limits: .init(maxRequests: nil),
        keys: nil, onStop: { _ in })
    let gateway = try await ModelGateway(
        handler: GatewayHandler(
            upstreams: Upstreams(openAI: upstream + openAI, anthropic: upstream),
            forwarder: ModelForwarder(transport: ModelTransports.live, limits: CommandRecording.defaultRequestLimits),
            recorder: recorder))
    return (gateway, recorder)
}

let limits = RequestLimits(timeoutMs: 60_000, connectTimeoutMs: 5_000, idleTimeoutMs: 60_000)
let transport = ModelTransports.live

/// A request an agent makes: instructions, the user's message, a tool; streamed.
func requestBody(_ index: Int) -> [UInt8] {
    JSONWriter.encode(
        [
            "model": "local-model", "stream": true,
            "messages": [
                ["role": "system", "content": "You are a support agent. Be brief."],
                ["role": "user", "content": .string("Where is order A-\(1000 + index)?")],
            ],
            "tools": [
                [
                    "type": "function",
                    "function": [
                        "name": "lookup_order", "description": "Finds an order.",
                        "parameters": ["type": "object", "properties": ["order_id": ["type": "string"]]],
                    ],
                ]
            ],
        ] as JSONValue)
}

/// Sends one request and reads the whole answer; `parse` reads it as an SDK would. Returns the
/// seconds it took and the bytes received.
func exchange(_ url: String, body: [UInt8], parse: Bool) async throws -> (seconds: Double, bytes: Int) {
    let request = TransportRequest(
        url: url,
        headers: [
            HTTPHeader(name: "content-type", value: "application/json"), HTTPHeader(name: "authorization", value: "Bearer sk-bench"),
        ],
        body: body, limits: limits)
    var reader = ReplyReader(api: .openAIChat, limits: limits)
    var bytes = 0
    var status = 0
    let clock = ContinuousClock()
    let started = clock.now
    try await transport.exchange(request) { parts in
        for part in parts {
            switch part {
            case .head(let code, _): status = code
            case .chunk(let chunk): bytes += chunk.count
            }
            if parse { reader.take(part) }
        }
    }
    let elapsed = started.duration(to: clock.now).components
    // fatalError, not precondition: a release build prints its message.
    guard status == 200 else { fatalError("\(url) answered \(status)") }
    if parse, reader.finish().raw == nil { fatalError("the reply from \(url) was not assembled") }
    return (Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18, bytes)
}

/// Sends requests `start..<end` to `url`, two at a time.
func send(_ url: String, from start: Int, to end: Int) async throws {
    final class Counter: Sendable {
        let value: Mutex<Int>
        init(_ start: Int) { value = Mutex(start) }
    }
    let next = Counter(start)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<2 {
            group.addTask {
                while let index = next.value.withLock({ count -> Int? in
                    guard count < end else { return nil }
                    count += 1
                    return count
                }) {
                    _ = try await exchange(url, body: requestBody(index), parse: true)
                }
            }
        }
        try await group.waitForAll()
    }
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

/// The process's resident memory, in bytes.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}

// Part 1: added latency.
do {
    let (gateway, recorder) = try await startGateway(log: directory + "/latency.jsonl.gz")
    let direct = upstream + "/v1/chat/completions"
    let through = gateway.openAIBaseURL + "/chat/completions"
    // The connections and the clients' set-up are not measured.
    for index in 0..<20 {
        _ = try await exchange(direct, body: requestBody(index), parse: true)
        _ = try await exchange(through, body: requestBody(index), parse: true)
    }
    var directTimes: [Double] = []
    var gatewayTimes: [Double] = []
    for index in 0..<requests {
        let body = requestBody(index)
        directTimes.append(try await exchange(direct, body: body, parse: true).seconds)
        gatewayTimes.append(try await exchange(through, body: body, parse: true).seconds)
    }
    await gateway.stop()
    _ = try recorder.finish(.exited(0), stderrTail: "")
    let (p50Direct, p50Gateway) = (percentile(directTimes, 0.5) * 1e6, percentile(gatewayTimes, 0.5) * 1e6)
    let (p99Direct, p99Gateway) = (percentile(directTimes, 0.99) * 1e6, percentile(gatewayTimes, 0.99) * 1e6)
    print(
        String(
            format:
                "latency, %d short streamed replies each way: direct p50 %.0f µs p99 %.0f µs; through the gateway p50 %.0f µs p99 %.0f µs",
            requests, p50Direct, p99Direct, p50Gateway, p99Gateway))
    print(
        String(
            format: "added by the gateway: p50 %.0f µs, p99 %.0f µs (target: p50 < 1000 µs); %d requests recorded", p50Gateway - p50Direct,
            p99Gateway - p99Direct, recorder.requestCount))
}

// Part 2: streamed throughput.
let (streamGateway, streamRecorder) = try await startGateway(log: directory + "/streams.jsonl.gz", openAI: "/big/v1")
readBySDK: do {
    let direct = upstream + "/big/v1/chat/completions"
    let bigThrough = streamGateway.openAIBaseURL + "/chat/completions"
    _ = try await exchange(direct, body: requestBody(0), parse: true)
    _ = try await exchange(bigThrough, body: requestBody(0), parse: true)
    var directRates: [Double] = []
    var gatewayRates: [Double] = []
    // This process's CPU per MB each way (the client's, and through the gateway the gateway's
    // too; the server is another process): on two cores, what decides the ratio.
    var directCPU: [Double] = []
    var gatewayCPU: [Double] = []
    for index in 0..<streams {
        let body = requestBody(index)
        var cpu = ProcessCPU.seconds()
        let straight = try await exchange(direct, body: body, parse: true)
        directCPU.append((ProcessCPU.seconds() - cpu) * 1e3 / (Double(straight.bytes) / 1e6))
        directRates.append(Double(straight.bytes) / straight.seconds / 1e6)
        cpu = ProcessCPU.seconds()
        let forwarded = try await exchange(bigThrough, body: body, parse: true)
        gatewayCPU.append((ProcessCPU.seconds() - cpu) * 1e3 / (Double(forwarded.bytes) / 1e6))
        gatewayRates.append(Double(forwarded.bytes) / forwarded.seconds / 1e6)
    }
    let (directMedian, gatewayMedian) = (percentile(directRates, 0.5), percentile(gatewayRates, 0.5))
    print(
        String(
            format:
                "streamed throughput, %d streams of %.1f MB each way, read as an SDK reads them: direct %.0f MB/s, through the gateway %.0f MB/s",
            streams, streamMegabytes, directMedian, gatewayMedian))
    print(String(format: "gateway / direct: %.2f (target >= 0.8)", gatewayMedian / directMedian))
    print(
        String(
            format: "CPU of this process per MB streamed (medians): direct %.2f ms, through the gateway %.2f ms (%.2f×)",
            percentile(directCPU, 0.5), percentile(gatewayCPU, 0.5), percentile(gatewayCPU, 0.5) / percentile(directCPU, 0.5)))

    // The same streams read by the official openai Python SDK, as an agent reads them: one
    // stream each way per round (the SDK reads a few MB/s).
    guard sdkRounds > 0 else { break readBySDK }
    guard let python = try BenchmarkScripts.python(venv: "interop") else {
        print("the official SDK: skipped (scripts/python_venv interop could not make its environment)")
        break readBySDK
    }
    var sdkDirect: [Double] = []
    var sdkGateway: [Double] = []
    let perRound = 1
    for _ in 0..<sdkRounds {
        for (base, into) in [(upstream + "/big/v1", 0), (streamGateway.openAIBaseURL, 1)] {
            let (status, result) = try BenchmarkScripts.runJSON(python, "openai_sdk_bench.py", [base, String(perRound), "1"])
            guard status == 0, let seconds = result?["seconds"]?.doubleValue else {
                fatalError("the official SDK's run failed: \(result.map(JSONWriter.encodeString) ?? "no JSON")")
            }
            let rate = Double(perRound * streamBytes) / seconds / 1e6
            if into == 0 { sdkDirect.append(rate) } else { sdkGateway.append(rate) }
        }
    }
    let (sdkDirectMedian, sdkGatewayMedian) = (percentile(sdkDirect, 0.5), percentile(sdkGateway, 0.5))
    print(
        String(
            format:
                "the same streams read by the official openai SDK: direct %.1f MB/s, through the gateway %.1f MB/s; gateway / direct: %.2f",
            sdkDirectMedian, sdkGatewayMedian, sdkGatewayMedian / sdkDirectMedian))
}
await streamGateway.stop()
_ = try streamRecorder.finish(.exited(0), stderrTail: "")

// Part 3: memory over many requests, recorded into one log.
do {
    let (gateway, recorder) = try await startGateway(log: directory + "/memory.jsonl.gz")
    let through = gateway.openAIBaseURL + "/chat/completions"
    var samples: [(requests: Int, bytes: Int)] = []
    let tenth = max(1, memoryRequests / 10)
    for round in 1...10 {
        try await send(through, from: (round - 1) * tenth, to: round * tenth)
        samples.append((round * tenth, residentBytes()))
        print(String(format: "memory: %5d requests recorded, resident %.1f MB", round * tenth, Double(samples.last?.bytes ?? 0) / 1e6))
    }
    await gateway.stop()
    _ = try recorder.finish(.exited(0), stderrTail: "")
    let first = samples[0]
    let last = samples[samples.count - 1]
    let perRequest = Double(last.bytes - first.bytes) / Double(last.requests - first.requests)
    let logSize = (try? FileManager.default.attributesOfItem(atPath: directory + "/memory.jsonl.gz")[.size] as? Int) ?? 0
    print(
        String(
            format: "memory from %d to %d requests: %+.1f MB (%.0f bytes per request); the log: %.1f MB, %d requests",
            first.requests, last.requests, Double(last.bytes - first.bytes) / 1e6, perRequest, Double(logSize) / 1e6,
            recorder.requestCount))
}
