import AgentRuntime
import ConfigFile
import Foundation
import ModelClients
import Synchronization
import TraceCore
import TraceLog

/// Where the proxy's session records its gate: a log of its own (`LocalProxyLog`), or the run
/// that `agent-eval record` writes, through its gateway (`RemoteProxyLog`). Each operation
/// returns once what it recorded is durable where the log says so; one that throws recorded
/// nothing the session may act on (a call whose verdict or intent failed is not forwarded).
protocol ProxyLog: Sendable {
    /// The log's path: approvals are asked for beside it.
    func logPath() async throws -> String
    /// What the session learned of its peers: the server's tools, who the client and server are.
    func learned(tools: [ServedTool], client: (name: String, version: String?)?, server: ServerInfo?) async
    /// Records a call's proposal and verdict: the policy's, or `refusal` when the proxy itself
    /// refuses the call.
    func judge(name: String, arguments: JSONValue, params: JSONValue, waiting: Int, refusal: PolicyDecision?) async throws
        -> (callId: String, judgement: ProxyGate.Judgement, decision: PolicyDecision)
    func intend(callId: String, tool: String, arguments: JSONValue) async throws
    func settle(callId: String, answer: MCPApprovals.Answer) async throws
    func complete(callId: String, tool: String, status: ToolStatus, output: JSONValue?, error: String?, durationUs: Int) async throws
    /// Keeps an exchange as it came (`ProxyGate.store`).
    func store(_ bytes: [UInt8], mediaType: String) async throws
    /// The session ended: `stop` is the proxy's own run's stop (a run recorded by `record` is
    /// stopped by it, not by a proxy).
    func finish(_ stop: RunStopped) async throws
}

/// Who the server said it is.
struct ServerInfo: Sendable {
    var name: String
    var version: String
    var protocolVersion: String?
}

/// The proxy's own log: one run per client connection (made, with `run_started`, at the first
/// thing recorded, so it names the tools, the client and the server as they were learned).
final class LocalProxyLog: ProxyLog {
    private struct State: ~Copyable {
        var recorder: RunRecorder?
        var gate: ProxyGate
        var calls = 0
        var client: (name: String, version: String?)?
        var server: ServerInfo?
    }

    private let settings: MCPProxy.Settings
    // Guarded by the mutex; the recorder is used only inside it.
    private let state: Mutex<State>

    init(settings: MCPProxy.Settings, gate: ProxyGate) {
        self.settings = settings
        state = Mutex(State(gate: gate))
    }

    func logPath() -> String { settings.logPath }

    func learned(tools: [ServedTool], client: (name: String, version: String?)?, server: ServerInfo?) {
        state.withLock { state in
            state.gate.tools = tools
            if let client { state.client = client }
            if let server { state.server = server }
        }
    }

    func judge(name: String, arguments: JSONValue, params: JSONValue, waiting: Int, refusal: PolicyDecision?) throws
        -> (callId: String, judgement: ProxyGate.Judgement, decision: PolicyDecision)
    {
        try state.withLock { state throws -> (String, ProxyGate.Judgement, PolicyDecision) in
            state.calls += 1
            let callId = "mcp-\(state.calls)"
            let recorder = try recorder(&state)
            let (judgement, decision) = try state.gate.judge(
                callId: callId, name: name, arguments: arguments, params: params, isProposed: false, waiting: waiting, refusal: refusal,
                on: recorder)
            return (callId, judgement, decision)
        }
    }

    func intend(callId: String, tool: String, arguments: JSONValue) throws {
        try state.withLock { state throws in
            try state.gate.intend(callId: callId, tool: tool, arguments: arguments, on: try recorder(&state))
        }
    }

    func settle(callId: String, answer: MCPApprovals.Answer) throws {
        try state.withLock { state throws in
            try state.gate.settle(
                callId: callId, isGranted: answer.isGranted, approver: answer.approver, reason: answer.reason, on: try recorder(&state))
        }
    }

    func complete(callId: String, tool: String, status: ToolStatus, output: JSONValue?, error: String?, durationUs: Int) throws {
        try state.withLock { state throws in
            try state.gate.complete(
                callId: callId, tool: tool, status: status, output: output, error: error, durationUs: durationUs, on: try recorder(&state))
        }
    }

    func store(_ bytes: [UInt8], mediaType: String) throws {
        try state.withLock { state throws in try state.gate.store(bytes, mediaType: mediaType, on: try recorder(&state)) }
    }

    func finish(_ stop: RunStopped) throws {
        try state.withLock { state throws in
            let recorder = try recorder(&state)
            try recorder.record(.runStopped(stop))
            try recorder.writer.close()
        }
    }

    private func recorder(_ state: inout State) throws -> RunRecorder {
        if let recorder = state.recorder { return recorder }
        let writer = try LogWriter.create(at: settings.logPath, runId: settings.runId, options: settings.logOptions)
        let recorder = RunRecorder(writer: writer, clock: settings.now)
        let client = state.client?.name ?? "an MCP client"
        let command = ShellWords.command(settings.server)
        let gate = state.gate
        try recorder.record(
            .runStarted(
                RunStarted(
                    goal: settings.goal ?? "MCP session of \(client) with \(command)",
                    agent: AgentIdentity(
                        name: client, version: state.client?.version, configDigest: ContentHash.sha256(Array(command.utf8))),
                    model: ModelIdentity(provider: "unknown", name: "unknown (the MCP client's)"),
                    policy: gate.policy.policy.identity, tools: gate.tools.map { gate.spec($0.name) },
                    limits: RunLimits(maxToolCalls: gate.maxToolCalls), actor: gate.actor, route: gate.route,
                    toolServers: [
                        ToolServerIdentity(
                            name: gate.serverName, kind: "mcp-stdio", serverName: state.server?.name ?? gate.serverName,
                            serverVersion: state.server?.version ?? "", protocolVersion: state.server?.protocolVersion)
                    ])))
        state.recorder = recorder
        return recorder
    }
}

/// The run `agent-eval record` writes: the proxy's gate is applied there by the recorder's
/// gateway (`POST /agent-eval/mcp`, found through `AGENT_EVAL_RECORDER`), on the run's own
/// state, so a call the model proposed is judged as that call, and its result is recorded once.
actor RemoteProxyLog: ProxyLog {
    /// The variable `agent-eval record` sets for the command: the URL of its gateway's proxy endpoint.
    static let variable = "AGENT_EVAL_RECORDER"

    private let url: String
    private let registration: JSONValue
    private let poster = HTTPPoster(maxRetries: 0, limits: HTTPPoster.limits(timeoutMs: 30_000))
    /// The proxy's number and the run's log, once registered (one registration however many
    /// ask for it at once).
    private var registering: Task<(proxy: Int, log: String), any Error>?
    private var tools: [ServedTool] = []
    /// The tools as the gateway last took them.
    private var sentTools: [ServedTool]?

    init(url: String, gate: ProxyGate, policyPath: String?) {
        self.url = url
        registration =
            ProxyOperation.register(
                ProxyOperation.Registration(
                    policy: policyPath, actor: gate.actor, route: gate.route, maxToolCalls: gate.maxToolCalls,
                    preApproved: gate.preApproved.map(\.pattern), server: gate.serverName)
            ).json
    }

    /// Sends one operation of this proxy; the gateway's answer, or a thrown sentence.
    private func send(_ operation: (Int) -> ProxyOperation) async throws -> JSONValue {
        try await post(operation(try await registered()).json)
    }

    private func post(_ body: JSONValue) async throws -> JSONValue {
        let response: HTTPPoster.Response
        do {
            response = try await poster.post(JSONWriter.encode(body), to: url)
        } catch {
            throw RecordingError(
                .logFailed,
                "agent-eval record's gateway (\(url)) did not take the proxy's record: \((error as? any Diagnostic)?.message ?? "\(error)")"
            )
        }
        guard let answer = try? JSONParser.parse(response.body) else {
            throw RecordingError(.logFailed, "agent-eval record's gateway answered the proxy with what is not JSON")
        }
        return answer
    }

    /// Registers with the gateway once, and tells it of the tools whenever they changed.
    private func registered() async throws -> Int {
        if registering == nil {
            let (registration, post) = (registration, self.post)
            registering = Task {
                let answer = try await post(registration)
                guard let number = answer["proxy"]?.intValue, let log = answer["log"]?.stringValue else {
                    throw RecordingError(
                        .logFailed,
                        "agent-eval record's gateway did not register the proxy: \(answer["error"]?.stringValue ?? JSONWriter.encodeString(answer))"
                    )
                }
                return (number, log)
            }
        }
        guard let task = registering else { return 0 }
        let proxy: Int
        do {
            proxy = try await task.value.proxy
        } catch {
            // The next operation tries again — unless another has begun a new try meanwhile.
            if registering == task { registering = nil }
            throw error
        }
        // The tools may change while they are sent: send until the gateway has the latest.
        while sentTools != tools {
            let sending = tools
            let answer = try await post(ProxyOperation.tools(proxy: proxy, sending).json)
            if let error = answer["error"]?.stringValue { throw RecordingError(.logFailed, error) }
            sentTools = sending
        }
        return proxy
    }

    func logPath() async throws -> String {
        _ = try await registered()
        return try await registering?.value.log ?? ""
    }

    func learned(tools: [ServedTool], client: (name: String, version: String?)?, server: ServerInfo?) async {
        guard tools != self.tools else { return }
        self.tools = tools
        // At once, before the client sees the listing: the model's calls of these tools, which
        // may come next, are then left to the proxy (their intents are recorded when made). A
        // failure here shows again at the first call, which is then refused.
        _ = try? await registered()
    }

    func judge(name: String, arguments: JSONValue, params: JSONValue, waiting: Int, refusal: PolicyDecision?) async throws
        -> (callId: String, judgement: ProxyGate.Judgement, decision: PolicyDecision)
    {
        let answer = try await send {
            .judge(proxy: $0, name: name, arguments: arguments, params: params, waiting: waiting, refusal: refusal)
        }
        guard let callId = answer["call_id"]?.stringValue,
            let judgement = answer["judgement"]?.stringValue.flatMap(ProxyGate.Judgement.init),
            let verdict = answer["verdict"]?.stringValue.flatMap(Verdict.init(rawValue:))
        else {
            throw RecordingError(
                .logFailed,
                "agent-eval record's gateway did not judge the call: \(answer["error"]?.stringValue ?? JSONWriter.encodeString(answer))")
        }
        return (callId, judgement, PolicyDecision(verdict, reason: answer["reason"]?.stringValue, rule: answer["rule"]?.stringValue))
    }

    func intend(callId: String, tool: String, arguments: JSONValue) async throws {
        try Self.check(await send { .intend(proxy: $0, callId: callId, tool: tool, arguments: arguments) })
    }

    func settle(callId: String, answer: MCPApprovals.Answer) async throws {
        try Self.check(await send { .settle(proxy: $0, callId: callId, answer: answer) })
    }

    func complete(callId: String, tool: String, status: ToolStatus, output: JSONValue?, error: String?, durationUs: Int) async throws {
        try Self.check(
            await send {
                .complete(proxy: $0, callId: callId, tool: tool, status: status, output: output, error: error, durationUs: durationUs)
            })
    }

    func store(_ bytes: [UInt8], mediaType: String) async throws {
        try Self.check(await send { .store(proxy: $0, message: bytes, mediaType: mediaType) })
    }

    func finish(_ stop: RunStopped) {}

    private static func check(_ answer: JSONValue) throws {
        if let error = answer["error"]?.stringValue { throw RecordingError(.logFailed, error) }
    }
}

extension JSONValue {
    /// This object with `members` set (replacing members of the same name).
    func merging(_ members: [String: JSONValue]) -> JSONValue {
        var object = objectValue ?? JSONObject()
        for (key, value) in members.sorted(by: { $0.key < $1.key }) { object[key] = value }
        return .object(object)
    }
}
