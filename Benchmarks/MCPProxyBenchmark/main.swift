// The MCP proxy's cost per tool call (docs/mcp.md, "Performance"): the same client calls the same
// server — this binary started again with `--serve`, an MCP server over stdio that answers at
// once — directly and through `MCPProxy`, which runs here as `agent-eval mcp-proxy` runs it
// (every call judged by a policy file of `--rules` rules, its verdict, intent and result written
// to a log with the default durability), alternating one call each way so drift hits both alike.
//
// Prints p50 and p99 of each and the difference: the proxy's added latency per call beyond the
// server's own time. Target: p50 added < 1 ms, in either era of MCP: `--era 2025` (the default:
// `initialize`, then plain requests) or `--era 2026-07-28` (`server/discover`, then every request
// with the envelope in `_meta`, every result with `resultType`).
//
//   swift run -c release mcp-proxy-benchmark [--calls 1000] [--rules 200] [--era 2025|2026-07-28] [--bridge]
//
// With --bridge the proxy runs as `mcp-proxy --bridge`: the server answers `server/discover`, so a
// 2025 client is bridged (the envelope added to every request, `resultType` taken off every result).
//
// Run it several times and quote the medians.
import AgentRuntime
import Foundation
import Recording
import Synchronization
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

var calls = 1000
var rules = 200
var isStateless = false
var bridges = false
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--serve":
        serve()
        exit(0)
    case "--bridge": bridges = true
    case "--calls": calls = max(10, arguments.next().flatMap(Int.init) ?? calls)
    case "--rules": rules = max(1, arguments.next().flatMap(Int.init) ?? rules)
    case "--era":
        switch arguments.next() {
        case "2025": isStateless = false
        case "2026-07-28": isStateless = true
        default:
            FileHandle.standardError.write(Data("mcp-proxy-benchmark: --era takes 2025 or 2026-07-28\n".utf8))
            exit(64)
        }
    default:
        FileHandle.standardError.write(Data("usage: mcp-proxy-benchmark [--calls N] [--rules N] [--era 2025|2026-07-28] [--bridge]\n".utf8))
        exit(64)
    }
}

/// The server: answers `initialize` or `server/discover`, `tools/list` (ten tools) and every
/// `tools/call` at once; a request with the 2026-07-28 envelope gets `resultType` in its result.
func serve() {
    let tools: [JSONValue] = (0..<10).map { index in
        [
            "name": .string("tool_\(index)"), "description": "a tool", "inputSchema": ["type": "object"],
            "annotations": ["readOnlyHint": .bool(index % 2 == 0)],
        ]
    }
    _ = JSONLinesProcess.readLines(from: 0, limit: 1 << 24) { line in
        guard let message = try? JSONParser.parse(line), let id = message["id"], let method = message["method"]?.stringValue else {
            return true
        }
        var result: JSONValue
        switch method {
        case "initialize":
            result = ["protocolVersion": "2025-11-25", "capabilities": ["tools": [:]], "serverInfo": ["name": "bench", "version": "1"]]
        case "server/discover":
            result = [
                "supportedVersions": ["2026-07-28"], "capabilities": ["tools": [:]],
                "_meta": ["io.modelcontextprotocol/serverInfo": ["name": "bench", "version": "1"]],
            ]
        case "tools/list": result = ["tools": .array(tools)]
        case "tools/call": result = ["content": [["type": "text", "text": "done"]], "isError": false]
        default: result = [:]
        }
        if message["params"]?["_meta"]?["io.modelcontextprotocol/protocolVersion"] != nil, case .object(var object) = result {
            object["resultType"] = "complete"
            result = .object(object)
        }
        let answer: JSONValue = ["jsonrpc": "2.0", "id": id, "result": result]
        return JSONLinesProcess.writeAll(JSONWriter.encode(answer) + [0x0A], to: 1) == nil
    }
}

/// A policy of `count` rules: all but the last look at the tool and its arguments and do not
/// match the calls made, so every call is judged against every rule; the last allows.
func policyFile(rules count: Int, in directory: String) throws -> PolicyFile {
    var text = "policy:\n  name: benchmark\n  default: deny\n  rules:\n"
    for index in 0..<(count - 1) {
        text += """
                - id: rule-\(index)
                  when:
                    tool: ["tool_*"]
                    arguments: {order: {matches: "^X-\(index)-[0-9]+$"}, amount: {min: \(index + 100_000)}}
                  verdict: deny

            """
    }
    text += "    - id: allow-rest\n      verdict: allow\nside_effects:\n  tool_9: write\n"
    let path = directory + "/benchmark.policy.yaml"
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    do {
        return try PolicyFile.load(path: path)
    } catch {
        fatalError("the benchmark's policy file does not read: \(error)")
    }
}

/// One side of a conversation: lines written to `output`, lines read from `input` on a thread.
final class Conversation: Sendable {
    let output: Int32
    private let lines: Mutex<[[UInt8]]> = Mutex([])
    private let arrived = DispatchSemaphore(value: 0)

    init(input: Int32, output: Int32) {
        self.output = output
        let thread = Thread { [self] in
            _ = JSONLinesProcess.readLines(from: input, limit: 1 << 24) { line in
                lines.withLock { $0.append(line) }
                arrived.signal()
                return true
            }
        }
        thread.start()
    }

    /// Sends a request and waits for the next line (the answer: one request at a time).
    func ask(_ message: JSONValue) -> [UInt8] {
        _ = JSONLinesProcess.writeAll(JSONWriter.encode(message) + [0x0A], to: output)
        arrived.wait()
        return lines.withLock { $0.removeFirst() }
    }

    func tell(_ message: JSONValue) {
        _ = JSONLinesProcess.writeAll(JSONWriter.encode(message) + [0x0A], to: output)
    }
}

/// The 2026-07-28 envelope every request of that era carries.
let envelope: JSONValue = [
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": ["name": "benchmark", "version": "1"],
    "io.modelcontextprotocol/clientCapabilities": [:],
]

func handshake(_ conversation: Conversation, stateless: Bool) {
    if stateless {
        _ = conversation.ask(["jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": ["_meta": envelope]])
        _ = conversation.ask(["jsonrpc": "2.0", "id": -1, "method": "tools/list", "params": ["_meta": envelope]])
        return
    }
    _ = conversation.ask([
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": ["protocolVersion": "2025-11-25", "capabilities": [:], "clientInfo": ["name": "benchmark", "version": "1"]],
    ])
    conversation.tell(["jsonrpc": "2.0", "method": "notifications/initialized"])
    _ = conversation.ask(["jsonrpc": "2.0", "id": -1, "method": "tools/list"])
}

func pipePair() -> (read: Int32, write: Int32) {
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { fatalError("no pipe: \(String(cString: strerror(errno)))") }
    return (ends[0], ends[1])
}

let directory = NSTemporaryDirectory() + "mcp-proxy-benchmark-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
// Absolute: the server starts in the benchmark's temporary directory.
let serverCommand = [URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path, "--serve"]

// Direct: the server's own pipes.
let direct = try SpawnedProcess.start(command: serverCommand, directory: directory, environment: [])
let directConversation = Conversation(input: direct.stdout, output: direct.stdin)

// Through the proxy: its stdin and stdout are two pipes of this process.
let toProxy = pipePair()
let fromProxy = pipePair()
var settings = MCPProxy.Settings(
    server: serverCommand, directory: directory, environment: [:], serverName: "bench",
    policy: try policyFile(rules: rules, in: directory), logPath: directory + "/proxy.jsonl.gz", runId: "run-benchmark")
settings.callTimeout = .seconds(60)
settings.bridges = bridges
let proxySettings = settings
// Detached: the top-level code holds the main actor, and blocks it while it waits for answers.
let proxyTask = Task.detached { try await MCPProxy(settings: proxySettings).run(input: toProxy.read, output: fromProxy.write) }
let proxied = Conversation(input: fromProxy.read, output: toProxy.write)

handshake(directConversation, stateless: isStateless)
handshake(proxied, stateless: isStateless)

func call(_ index: Int, stateless: Bool) -> JSONValue {
    var params: JSONValue = ["name": .string("tool_\(index % 10)"), "arguments": ["order": .string("A-\(index)"), "amount": .int(index)]]
    if stateless, case .object(var object) = params {
        object["_meta"] = envelope
        params = .object(object)
    }
    return ["jsonrpc": "2.0", "id": .int(index + 1), "method": "tools/call", "params": params]
}

var directTimes: [Double] = []
var proxiedTimes: [Double] = []
let clock = ContinuousClock()
for index in 0..<calls {
    let message = call(index, stateless: isStateless)
    let started = clock.now
    _ = directConversation.ask(message)
    directTimes.append(Double((clock.now - started).components.attoseconds) / 1e12 + Double((clock.now - started).components.seconds) * 1e6)
    let proxyStarted = clock.now
    let answer = proxied.ask(message)
    let elapsed = clock.now - proxyStarted
    proxiedTimes.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
    if index == 0, (try? JSONParser.parse(answer))?["result"]?["isError"] != false {
        fatalError("the proxy did not let the call through: \(String(decoding: answer, as: UTF8.self))")
    }
}
close(toProxy.write)
let outcome = try await proxyTask.value
close(direct.stdin)
direct.killGroup()

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
}
let logBytes = (try? FileManager.default.attributesOfItem(atPath: settings.logPath)[.size] as? Int) ?? 0
print(
    "mcp-proxy-benchmark: \(calls) calls, a policy of \(rules) rules, MCP \(isStateless ? "2026-07-28" : "2025"), "
        + "log \(logBytes) bytes (\(outcome.allowed) calls recorded)")
print(String(format: "direct   p50 %7.1f µs  p99 %7.1f µs", percentile(directTimes, 0.5), percentile(directTimes, 0.99)))
print(String(format: "proxied  p50 %7.1f µs  p99 %7.1f µs", percentile(proxiedTimes, 0.5), percentile(proxiedTimes, 0.99)))
print(
    String(
        format: "added    p50 %7.1f µs  p99 %7.1f µs   (target: p50 < 1000 µs)",
        percentile(proxiedTimes, 0.5) - percentile(directTimes, 0.5),
        percentile(proxiedTimes, 0.99) - percentile(directTimes, 0.99)))
