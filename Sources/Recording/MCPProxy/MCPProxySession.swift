import AgentRuntime
import ConfigFile
import Foundation
import Interop
import TraceCore
import TraceLog

/// One client connection of `MCPProxy`: what passes between the client and the server, and the
/// run's log. An actor, so the two directions (the client's lines, the server's) and the tasks
/// that wait (approvals, call timeouts) change its state one at a time.
///
/// The client's messages are handled in the order they came, each to its end before the next
/// (the verdicts are recorded in the order the calls were made); the server's come in between
/// whenever a client message waits (for the proxy's own tool listing, for a write).
///
/// Steps of the log: one per `tools/call` (its decision, verdict and, when allowed, its intent —
/// the step ends, durably, before the call is forwarded), one per answer or end of a call (its
/// result, recorded and made durable before the client sees it), one per approval answered.
///
/// Both eras of MCP pass (`MCPEra`): a client whose requests carry the 2026-07-28 envelope gets
/// the proxy's own answers with `resultType`, and the proxy's own requests carry its envelope. A
/// call the server answers `input_required` is one call over all its rounds: judged once, on its
/// first; the client's retry (`inputResponses`, `requestState`) continues it without a new
/// decision, each round kept in the log (`MCPRound`); a retry that continues no call waiting for
/// input is refused, so a denied call cannot be continued past its verdict.
actor MCPProxySession {
    enum End: Sendable {
        case clientClosed(longLine: Bool)
        case serverEnded(String)
        case interrupted
    }

    /// A `tools/call` that was forwarded and waits for its answer.
    struct ForwardedCall {
        var requestId: JSONValue
        var callId: String
        var tool: String
        var arguments: JSONValue
        var startUs: Int
        /// The round this request is of the call: 1, or more for a client's retry.
        var round = 1
        /// Of a call whose task asks for input: the questions it asked last, as they came, so the
        /// same questions seen again at the next poll are not a new round; nil until it asks, and
        /// again once the client answered.
        var lastAsked: JSONValue?
    }

    /// A call whose server answered `input_required`: it waits for the client's retry.
    struct AwaitingInput {
        var call: ForwardedCall
        /// The `requestState` the server gave, as it gave it.
        var requestState: JSONValue?
    }

    /// What a client request forwarded to the server is, by its id's key.
    enum Outstanding {
        case call(ForwardedCall)
        case initialize
        /// `server/discover` (2026-07-28), at the protocol version the client asked for.
        case discover(version: String?)
        case listTools(isFirstPage: Bool, generation: Int)
        /// `tasks/get`, `tasks/update` or `tasks/cancel` of a task a call of this session made.
        case task(String)
        case other
    }

    let settings: MCPProxy.Settings
    /// The server process: the one the proxy started, or the one it started again after the
    /// first ended on the client's `server/discover` probe (`restartAfterProbe`).
    private(set) var server: JSONLinesProcess
    /// Starts another server process (`MCPProxy.startServer`).
    private let spawn: @Sendable () throws -> JSONLinesProcess
    let client: ClientChannel
    /// Where the gate is recorded: the proxy's own log, or the run `agent-eval record` writes.
    let log: any ProxyLog

    /// The last failure to record, if any (the outcome says so).
    private var writeFailure: String?
    private var tools: [ServedTool] = [] {
        didSet { outputSchemas = ServedTool.outputSchemas(of: tools) }
    }
    /// The output schemas the tools declare: a result is checked against its tool's, as the MCP
    /// tools check it.
    private var outputSchemas: [String: JSONSchema] = [:]
    /// Whether `tools` is what the server lists now (a listing passed, or the proxy asked).
    private var isListed = false
    /// Whether `tools` is the server's whole listing, every page: a client that fetched only the
    /// first page leaves it false, and a call naming a tool not in it has the proxy list them all.
    private var isListingWhole = false
    /// Whether the client's listing passing by began with the first page, this generation.
    private var isRelayedFromFirstPage = false
    private var listing: Task<Void, Never>?
    private var clientInfo: (name: String, version: String?)?
    private var serverInfo: ServerInfo?
    private var outstanding: [String: Outstanding] = [:] {
        didSet { releaseIfSettled() }
    }
    /// The ids of calls the client cancelled that the server has not answered: kept from reuse
    /// until it does, so that the cancelled call's late answer is never taken for another's.
    private var cancelledKeys: Set<String> = []
    /// Who waits for the forwarded calls to end (`callsSettled`).
    private var settledWaiters: [CheckedContinuation<Void, Never>] = []
    /// Calls the server asked for input, by call id, until the client retries them.
    private var awaitingInput: [String: AwaitingInput] = [:]
    /// Calls the server answered with a task (the tasks extension), by task id, until a
    /// `tasks/get` the client sent finds the task ended: its end is the call's.
    private var runningTasks: [String: ForwardedCall] = [:]
    /// Tasks whose questions the proxy refused (and cancelled), with why: the call ended there
    /// (the log says so), so whatever the server says of the task after — a question, or a result
    /// it made though told to cancel — the client is told the task was cancelled, never shown it.
    private var refusedTasks: [String: String] = [:]
    /// The envelope of the client's last 2026-07-28 request; nil while it speaks the 2025 era.
    private var clientEnvelope: JSONValue?
    /// The proxy's own requests to the server (its tool listing), matched to their answers.
    private var own: JSONRPCPeer
    /// The client sent requests, and every one was a `server/discover` probe: a session that
    /// ends so writes no run.
    private var requests = 0
    private var probes = 0
    /// The server was sent something other than a probe: it is past its start.
    private var isPastProbe = false
    private var restarts = 0
    /// Something was written to the log (or tried): the run is then closed properly.
    private var hasRecorded = false
    private var callCount = 0
    private var allowed = 0
    private var denied = 0
    private var timers: [String: Task<Void, Never>] = [:]
    /// Calls that wait for a person, by call id: their polling task, and the request.
    private var approvals: [String: (task: Task<Void, Never>, requestId: JSONValue)] = [:]
    /// Bumped by `notifications/tools/list_changed`: a listing asked for before it is stale.
    private var listGeneration = 0
    /// The proxy's own listing failed in this generation: calls are judged without it rather
    /// than each waiting for another listing that will not come.
    private var listingFailed = false
    /// The policy's unreachable conditions already warned of (`learned`).
    private var warnedConditions = Set<String>()
    /// The policy file names tools the server does not have (found when its tools are listed):
    /// every call is refused from then on, and the session does not end `success`.
    private var policyProblem: String?
    private var isFinished = false
    /// The server's messages ended: no more own requests are sent.
    private var isServerGone = false
    /// Between a client and a server of different eras (`--bridge`); nil without it.
    private var bridge: MCPBridge?
    /// The bridge's `server/discover` probe waits for its answer: a server that ends on it is
    /// started again, as on the client's own probe.
    private var isBridgeProbing = false
    /// The bridge is kept in the log (at the first thing recorded).
    private var isBridgeNoted = false
    /// Requests whose server (of 2026-07-28) asked the client through the bridge, by the client's
    /// id: what they are, until the client answered every question.
    private var bridgeAsking: [String: Outstanding] = [:]

    init(
        settings: MCPProxy.Settings, server: JSONLinesProcess, spawn: @escaping @Sendable () throws -> JSONLinesProcess,
        client: ClientChannel, log: any ProxyLog
    ) {
        self.settings = settings
        self.server = server
        self.spawn = spawn
        self.client = client
        self.log = log
        own = JSONRPCPeer(server: server, idPrefix: "agent-eval-proxy")
        bridge = settings.bridges ? MCPBridge() : nil
    }

    /// Runs one operation on the log; false, with `writeFailure` set and said, when it failed.
    private func recorded(_ operation: () async throws -> Void) async -> Bool {
        hasRecorded = true
        do {
            if !isBridgeNoted, let note = bridge?.note {
                // What the bridge translates between, before anything else of the session.
                isBridgeNoted = true
                try await log.store(JSONWriter.encode(note), mediaType: ProxyGate.bridgeMediaType)
            }
            try await operation()
            return true
        } catch {
            writeFailure = (error as? any Diagnostic)?.message ?? "\(error)"
            settings.notices?("the log could not be written: \(writeFailure ?? "")")
            return false
        }
    }

    /// Tells the log what the session learned of the tools and its peers, and checks the names
    /// the policy file gives against the tools now known.
    private func learned() async {
        await log.learned(tools: tools, client: clientInfo, server: serverInfo)
        guard isListed, policyProblem == nil else { return }
        // Each said once a session, however often the tools are learned again.
        for note in settings.policy.unreachableConditions(among: tools) where warnedConditions.insert(note).inserted {
            settings.notices?("warning: the policy file's \(note)")
        }
        let problems =
            settings.policy.unknownTools(among: tools.map(\.name)) + settings.policy.unknownServers(besides: settings.serverName)
        guard let first = problems.first else { return }
        for problem in problems {
            settings.notices?(
                "error: \(problem.message)" + (problem.location.path.isEmpty ? "" : " (\(problem.location))")
                    + (problem.hint.map { "; \($0)" } ?? ""))
        }
        policyProblem =
            "the policy file\(settings.policyPath.map { " \($0)" } ?? "") has \(counted(problems.count, "entry", plural: "entries")) that would never apply to "
            + "the server \(settings.serverName) (\(first.message)); every call is refused until it is fixed"
    }

    /// Who the client is, from its `initialize`.
    private func learnClient(initialize message: JSONValue) async {
        let info = message["params"]?["clientInfo"]
        clientInfo = (info?["name"]?.stringValue ?? "an MCP client", info?["version"]?.stringValue)
        await learned()
    }

    // MARK: The client's messages

    func fromClient(_ line: [UInt8]) async {
        guard !isFinished, !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) else { return }
        let message: JSONValue
        do {
            message = try JSONParser.parse(line)
        } catch {
            // JSON-RPC's answer to a line that is not JSON: a parse error with a null id.
            await refuseClient(
                line, id: .null,
                error: (
                    -32700, "agent-eval mcp-proxy: the line is not JSON the proxy can judge (\(error)): \(JSONLinesProcess.excerpt(line))"
                ))
            return
        }
        if case .array(let items) = message {
            // Batches left MCP in 2025-06-18, and a batch would carry calls past the gate: its
            // requests are refused; its notifications and answers go on one by one, so a server
            // that asked the client something is not left waiting.
            for item in items {
                if item["id"] != nil && item["method"] != nil {
                    await refuseClient(
                        JSONWriter.encode(item), id: item["id"] ?? .null,
                        error: (-32600, "agent-eval mcp-proxy does not take JSON-RPC batches: send one message a line"))
                } else if item.objectValue != nil {
                    await fromClient(JSONWriter.encode(item))
                }
            }
            return
        }
        guard message.objectValue != nil else {
            await refuseClient(line, id: .null, error: (-32600, "agent-eval mcp-proxy: a message must be a JSON object"))
            return
        }
        let method = message["method"]?.stringValue
        let id = message["id"]
        if id != nil, method != nil { requests += 1 }
        if method == "server/discover" {
            if id != nil { probes += 1 }
        } else {
            isPastProbe = true
        }
        if method == "initialize" {
            clientEnvelope = nil
        } else if id != nil, let envelope = MCPEra.envelope(of: message["params"]) {
            clientEnvelope = envelope
            if clientInfo == nil, let info = envelope[MCPEra.clientInfoKey] {
                clientInfo = (info["name"]?.stringValue ?? "an MCP client", info["version"]?.stringValue)
                await learned()
            }
        }
        if let id, method != nil {
            let key = JSONLinesProcess.key(id)
            if id.stringValue?.hasPrefix("agent-eval-proxy") == true {
                await answerClient(
                    id: id, error: (-32600, "agent-eval mcp-proxy: request ids that begin agent-eval-proxy are the proxy's own"))
                return
            }
            if outstanding[key] != nil || approvals.values.contains(where: { JSONLinesProcess.key($0.requestId) == key })
                || bridge?.holds(key) == true
            {
                await answerClient(
                    id: id, error: (-32600, "agent-eval mcp-proxy: request id \(key) is already in use by a request in flight"))
                return
            }
            if cancelledKeys.contains(key) {
                await answerClient(
                    id: id,
                    error: (
                        -32600,
                        "agent-eval mcp-proxy: request id \(key) belongs to a call the client cancelled, which the server has not answered yet: use a new id"
                    ))
                return
            }
        }
        if bridge != nil {
            if method == nil, let answered = bridge?.clientAnswered(message) {
                await bridgeAnswered(answered)
                return
            }
            if let method, let id, await answeredByBridge(method: method, id: id, message: message) { return }
        }
        switch (method, id) {
        case ("tools/call"?, let id?):
            let params = message["params"] ?? [:]
            if MCPEra.continues(params), params["name"]?.stringValue?.isEmpty == false {
                await continueCall(requestId: id, params: params, message: message, line: line)
            } else {
                await gate(requestId: id, params: params, line: line)
            }
        case ("tools/call"?, nil):
            // A call sent as a notification has no answer to carry a verdict: never forwarded.
            settings.notices?("a tools/call without an id (a notification) was dropped: calls must be requests to be gated")
        case (let method?, let id?):
            if method == "initialize" { await learnClient(initialize: message) }
            if method.hasPrefix("tasks/"), let taskId = message["params"]?["taskId"]?.stringValue {
                guard await taskRequest(method, taskId: taskId, id: id, message: message, line: line) else { return }
                outstanding[JSONLinesProcess.key(id)] = .task(taskId)
                await forward(line, requestId: id)
                return
            }
            let kind: Outstanding =
                switch method {
                case "initialize": .initialize
                case "server/discover": .discover(version: MCPEra.envelope(of: message["params"])?[MCPEra.protocolVersionKey]?.stringValue)
                case "tools/list":
                    // A cursor of null is none (the first page), as everywhere JSON-RPC nulls are absent.
                    .listTools(
                        isFirstPage: message["params"]?["cursor"] == nil || message["params"]?["cursor"] == .null,
                        generation: listGeneration)
                default: .other
                }
            outstanding[JSONLinesProcess.key(id)] = kind
            await forward(line, requestId: id)
        case ("notifications/cancelled"?, nil):
            let why = message["params"]?["reason"]?.stringValue.map { ": \($0)" } ?? ""
            if let requestId = message["params"]?["requestId"] {
                let key = JSONLinesProcess.key(requestId)
                if case .call(let call)? = outstanding[key] {
                    outstanding[key] = nil
                    cancelledKeys.insert(key)
                    timers.removeValue(forKey: key)?.cancel()
                    await recordEnd(of: call, status: .error, error: "the client cancelled the call\(why)")
                } else if let callId = approvals.first(where: { JSONLinesProcess.key($0.value.requestId) == key })?.key {
                    // It never reached the server: refuse it, so no later approval runs it.
                    await refuseWaiting(callId, reason: "the client cancelled the call\(why)")
                    return
                } else if bridge?.way == .towardLegacy,
                    let waiting = awaitingInput.values.first(where: { JSONLinesProcess.key($0.call.requestId) == key })
                {
                    // The client gave up on a call whose server still holds its question: it ends
                    // here, and the server is told (the bridge cancels it there).
                    awaitingInput[waiting.call.callId] = nil
                    await recordEnd(of: waiting.call, status: .error, error: "the client cancelled the call\(why)")
                } else if let kind = bridgeAsking.removeValue(forKey: key) {
                    // Its questions were out to the client: the server holds nothing of it.
                    _ = bridge?.abandon(answerId: requestId)
                    if case .call(let call) = kind {
                        await recordEnd(of: call, status: .error, error: "the client cancelled the call\(why)")
                    }
                    return
                }
            }
            await forward(line, requestId: nil)
        case (nil, let id?) where message["result"] != nil || message["error"] != nil:
            // The client's answer to a request of the server's (sampling, elicitation, roots,
            // ping): what a person or a model chose after the verdict, kept beside the request
            // it answers. One that cannot be recorded is not passed on: the server is answered
            // that it could not be, and acts on nothing the log does not hold.
            guard await recorded({ try await log.store(line, mediaType: ProxyGate.clientAnswerMediaType) }) else {
                settings.notices?(
                    "the client's answer to the server's request \(JSONLinesProcess.key(id)) could not be recorded: not passed on")
                sendServer([
                    Self.errorAnswer(
                        id: id,
                        error: (
                            -32603,
                            "agent-eval mcp-proxy could not record the client's answer, so it was not passed on: \(writeFailure ?? "")"
                        ))
                ])
                return
            }
            await forward(line, requestId: nil)
        default:
            // Notifications.
            await forward(line, requestId: nil)
        }
    }

    /// Why a message could not be sent to the server, once one could not: a session whose client
    /// then went did not end as the client chose.
    private var serverUnreachable: String?

    /// Sends a client message on to the server (through the bridge, with `--bridge`); a request
    /// that cannot be sent is answered.
    private func forward(_ line: [UInt8], requestId: JSONValue?) async {
        var line = line
        if bridge?.isTranslating == true, let message = try? JSONParser.parse(line), let outgoing = bridge?.outgoing(message) {
            switch outgoing {
            case .send(let translated):
                line = translated
            case .drop:
                return
            case .consumed(let toServer, let fromServer):
                sendServer(toServer)
                for message in fromServer { await dispatch(message, line: JSONWriter.encode(message)) }
                return
            }
        }
        do {
            try await server.send(Data(line))
        } catch {
            serverUnreachable = serverUnreachable ?? (server.failure ?? "\(error)")
            guard let requestId else { return }
            let key = JSONLinesProcess.key(requestId)
            if case .call(let call)? = outstanding.removeValue(forKey: key) {
                await recordEnd(of: call, status: .error, error: "the call could not be sent to the server: \(error)")
            }
            await answerClient(id: requestId, error: (-32603, "agent-eval mcp-proxy: the MCP server cannot be reached: \(error)"))
        }
    }

    // MARK: The gate

    private func gate(requestId: JSONValue, params: JSONValue, line: [UInt8]) async {
        callCount += 1
        guard let name = params["name"]?.stringValue, !name.isEmpty else {
            // Refused: the summary counts it with the calls denied or refused.
            denied += 1
            await answerClient(id: requestId, error: (-32602, "agent-eval mcp-proxy: tools/call needs params.name, the tool to call"))
            return
        }
        let arguments = params["arguments"] ?? [:]
        await ensureListed()
        if let policyProblem {
            // A misspelt rule would let through what it was written to stop: fail closed.
            denied += 1
            await answerClient(id: requestId, toolError: "agent-eval mcp-proxy refused this call: \(policyProblem)")
            return
        }
        // A name the server did not list is no tool of it the policy judged: another spelling
        // of a listed one (`REFUND`, `refund `, a look-alike letter) walked around a rule on the
        // name, to a server that resolves names loosely. Unlisted (the listing failed), a call is
        // judged on the policy file's side effects, else as a write.
        if isListed && !isListingWhole && !tools.contains(where: { $0.name == name }) { await ensureListed(whole: true) }
        let unlisted =
            isListed && isListingWhole && !tools.contains { $0.name == name }
            ? PolicyDecision(
                .deny,
                reason: "the server lists no tool named \(JSONWriter.encodeString(.string(name))) (tools/list): only a listed tool is "
                    + "called, under the name the policy judges", rule: "mcp.unlisted_tool") : nil
        var judged: (callId: String, judgement: ProxyGate.Judgement, decision: PolicyDecision)?
        let isRecorded = await recorded {
            judged = try await log.judge(name: name, arguments: arguments, params: params, waiting: approvals.count, refusal: unlisted)
        }
        guard isRecorded, let (callId, judgement, decision) = judged else {
            denied += 1
            await answerClient(
                id: requestId, toolError: "agent-eval mcp-proxy could not record this call, so it was not made: \(writeFailure ?? "")")
            return
        }
        switch judgement {
        case .forward:
            await execute(requestId: requestId, callId: callId, tool: name, arguments: arguments, line: line)
        case .deny:
            denied += 1
            await answerClient(id: requestId, toolError: Self.denial(decision))
        case .ask:
            await ask(
                MCPApprovals.PendingCall(callId: callId, tool: name, arguments: arguments, rule: decision.rule, reason: decision.reason),
                requestId: requestId, line: line)
        }
    }

    static func denial(_ decision: PolicyDecision) -> String {
        "agent-eval policy denied this call" + (decision.reason.map { ": \($0)" } ?? "") + (decision.rule.map { " (rule \($0))" } ?? "")
    }

    /// Records the intent, durably, then forwards the call.
    private func execute(requestId: JSONValue, callId: String, tool: String, arguments: JSONValue, line: [UInt8]) async {
        // Durable (flushed, and fsynced when the log's policy says so) before the server sees it.
        let intended = await recorded { try await log.intend(callId: callId, tool: tool, arguments: arguments) }
        guard intended else {
            denied += 1
            await answerClient(
                id: requestId, toolError: "agent-eval mcp-proxy could not record this call, so it was not made: \(writeFailure ?? "")")
            return
        }
        allowed += 1
        let call = ForwardedCall(requestId: requestId, callId: callId, tool: tool, arguments: arguments, startUs: settings.now())
        await send(call, line: line)
    }

    /// Forwards a call's request (its first round, or a retry), its answer waited for within
    /// the call timeout.
    private func send(_ call: ForwardedCall, line: [UInt8]) async {
        let key = JSONLinesProcess.key(call.requestId)
        outstanding[key] = .call(call)
        let (clock, timeout) = (settings.clock, settings.callTimeout)
        timers[key] = Task { [weak self] in
            do { try await clock.sleep(for: timeout) } catch { return }
            await self?.timeOut(key)
        }
        await forward(Self.withoutTaskAugmentation(line), requestId: call.requestId)
    }

    /// A call's request without a 2025-11-25 client's `task` augmentation: with it the server
    /// answers a task handle and the result goes to the client through `tasks/result`, past the
    /// log (which would record the handle as the call's output). Without it the server answers
    /// the result itself, as the protocol lets every client expect of a server that does not do
    /// tasks for the request. (2026-07-28's tasks are answered, and followed, another way.)
    static func withoutTaskAugmentation(_ line: [UInt8]) -> [UInt8] {
        guard case .object(var message)? = try? JSONParser.parse(line), case .object(var params)? = message["params"],
            params["task"] != nil
        else { return line }
        params["task"] = nil
        message["params"] = .object(params)
        return JSONWriter.encode(.object(message))
    }

    // MARK: Multi-round calls

    /// A `tools/call` that carries `inputResponses` or `requestState`: the next round of the
    /// call the server asked for input (the same tool and arguments; of several, the one whose
    /// `requestState` it carries), forwarded as it came without a new decision. A retry that
    /// continues no waiting call is refused and recorded: a call denied, refused or never made
    /// has no rounds to continue.
    private func continueCall(requestId: JSONValue, params: JSONValue, message: JSONValue, line: [UInt8]) async {
        let name = params["name"]?.stringValue ?? ""
        let arguments = params["arguments"] ?? [:]
        let state = params["requestState"].flatMap { $0 == .null ? nil : $0 }
        let candidates = awaitingInput.values.filter { $0.call.tool == name && $0.call.arguments == arguments }
            .sorted { Self.callNumber($0.call.callId) < Self.callNumber($1.call.callId) }
        // The call whose state it carries; else (a state altered or made up, passed on for the
        // server to judge) the oldest of that tool and arguments — unless the state is another
        // waiting call's: a state cannot be borrowed from one call for another.
        let isBorrowed =
            state != nil
            && awaitingInput.values.contains { other in
                other.requestState == state && !candidates.contains { $0.call.callId == other.call.callId }
            }
        // Toward a 2025 server the state is the bridge's own: only the one it gave continues a call.
        let isExact = bridge?.way == .towardLegacy
        let chosen = candidates.first { $0.requestState == state } ?? (isBorrowed || isExact ? nil : candidates.first)
        guard let waiting = chosen else {
            callCount += 1
            denied += 1
            let refusal = PolicyDecision(
                .deny,
                reason: candidates.isEmpty || !isExact
                    ? "it carries inputResponses or requestState, but no call of \(name) with these arguments "
                        + "waits for input in this session: only a call the server asked for input can be continued"
                    : "its requestState is not the one agent-eval mcp-proxy --bridge gave the call of \(name) that waits for input",
                rule: "mcp.continuation")
            let isRecorded = await recorded {
                _ = try await log.judge(name: name, arguments: arguments, params: params, waiting: approvals.count, refusal: refusal)
            }
            await answerClient(
                id: requestId,
                toolError: isRecorded
                    ? "agent-eval mcp-proxy refused this call: \(refusal.reason ?? "")"
                    : "agent-eval mcp-proxy could not record this call, so it was not made: \(writeFailure ?? "")")
            return
        }
        awaitingInput[waiting.call.callId] = nil
        var call = waiting.call
        call.requestId = requestId
        call.round += 1
        let round = MCPRound(callId: call.callId, round: call.round, from: "client", message: message)
        // Kept before the server sees it, as a first round's intent is.
        guard await recorded({ try await log.store(round.bytes, mediaType: ProxyGate.roundMediaType) }) else {
            await recordEnd(
                of: call, status: .error, error: "round \(call.round) could not be recorded, so it was not sent: \(writeFailure ?? "")")
            await answerClient(
                id: requestId, toolError: "agent-eval mcp-proxy could not record this call, so it was not made: \(writeFailure ?? "")")
            return
        }
        await send(call, line: line)
    }

    /// The server asked for input on a call's round: kept, and the call waits for the client's
    /// retry — unless this was the last round the proxy lets a call take.
    private func askedForInput(_ call: ForwardedCall, message: JSONValue, line: [UInt8]) async {
        if call.round >= MCPRound.limit {
            let error =
                "the server asked for input on round \(call.round) of the call; agent-eval mcp-proxy ends a call after \(MCPRound.limit) rounds"
            await recordEnd(of: call, status: .error, error: error)
            await answerClient(id: call.requestId, toolError: "agent-eval mcp-proxy: \(error)")
            abandonBridged(call.requestId)
            return
        }
        let round = MCPRound(callId: call.callId, round: call.round, from: "server", message: message)
        guard await recorded({ try await log.store(round.bytes, mediaType: ProxyGate.roundMediaType) }) else {
            // Not kept, so not passed on: the call ends here, as one whose intent failed to record.
            await recordEnd(
                of: call, status: .error,
                error: "the server's question on round \(call.round) could not be recorded, so it was not passed on: \(writeFailure ?? "")")
            await answerClient(
                id: call.requestId,
                toolError: "agent-eval mcp-proxy could not record the server's question, so the call ends here: \(writeFailure ?? "")")
            abandonBridged(call.requestId)
            return
        }
        if let refusal = refusal(of: message["result"]?["inputRequests"], round: call.round) {
            await recordEnd(of: call, status: .error, error: refusal)
            await answerClient(id: call.requestId, toolError: "agent-eval mcp-proxy refused the server's question: \(refusal)")
            abandonBridged(call.requestId)
            return
        }
        if bridge?.way == .towardModern {
            // A 2025 client: the questions become the server's requests to it.
            await askThroughBridge(.call(call), answerId: call.requestId, result: message["result"])
            return
        }
        awaitingInput[call.callId] = AwaitingInput(
            call: call, requestState: message["result"]?["requestState"].flatMap { $0 == .null ? nil : $0 })
        await client.send(line)
    }

    /// Why the policy file does not let the server ask `asked` (a round's `inputRequests`, a
    /// task's) on `round`; nil when it may. With a policy on questions, questions it cannot read
    /// (no object of them, a method missing or unknown) are refused rather than pass unjudged.
    private func refusal(of asked: JSONValue?, round: Int) -> String? {
        let policy = settings.policy.inputRequests
        if !policy.allowsAll, let asked, asked != .null, asked.objectValue == nil {
            return
                "the server's inputRequests on round \(round) are \(asked.typeDescription), not an object of questions: not judged, so not passed on"
        }
        let questions = (asked?.objectValue.map(Array.init) ?? []).sorted { $0.key < $1.key }
        for question in questions {
            let method = question.value["method"]?.stringValue ?? ""
            let refusal =
                policy.refusal(method: method, params: question.value["params"])
                ?? (!policy.allowsAll && !InputRequestPolicy.methods.contains(method)
                    ? InputRequestPolicy.Refusal(
                        rule: "input_requests",
                        reason:
                            "the policy file judges questions, and this one's method (\(method.isEmpty ? "none" : method)) is not one it knows"
                    )
                    : nil)
            guard let refusal else { continue }
            let what = method.isEmpty ? "a question that names no method" : method
            return "the server asked for \(what) (input request \"\(question.key)\") on round \(round): \(refusal.reason) (\(refusal.rule))"
        }
        return nil
    }

    // MARK: Tasks

    /// A client's request about a task (`tasks/get`, `tasks/update`, `tasks/cancel`): true to
    /// forward it. `tasks/update` carries answers to the server's questions, so it is a round of
    /// the call that made the task — kept before the server sees it — and one for a task no call
    /// of this session made is refused, as a retry that continues no call is.
    private func taskRequest(_ method: String, taskId: String, id: JSONValue, message: JSONValue, line: [UInt8]) async -> Bool {
        guard method == "tasks/update" else { return true }
        guard var call = runningTasks[taskId], call.lastAsked != nil else {
            settings.notices?("a tasks/update for task \(taskId), which no call of this session made or which asked nothing, was refused")
            await answerClient(
                id: id,
                error: (
                    -32602,
                    "agent-eval mcp-proxy: no call of this session made the task \(taskId), or it asked nothing passed on, so it takes no answers through the proxy"
                ))
            return false
        }
        call.round += 1
        call.lastAsked = nil
        runningTasks[taskId] = call
        let round = MCPRound(callId: call.callId, round: call.round, from: "client", message: message)
        guard await recorded({ try await log.store(round.bytes, mediaType: ProxyGate.roundMediaType) }) else {
            await answerClient(
                id: id, error: (-32603, "agent-eval mcp-proxy could not record this answer, so it was not sent: \(writeFailure ?? "")"))
            return false
        }
        return true
    }

    /// The server answered a call with a task: the call stays open (its end comes with the
    /// task's), the handle is kept as a round, and the client gets it to poll.
    private func taskStarted(_ call: ForwardedCall, taskId: String, message: JSONValue, line: [UInt8]) async {
        let round = MCPRound(callId: call.callId, round: call.round, from: "server", message: message)
        guard await recorded({ try await log.store(round.bytes, mediaType: ProxyGate.roundMediaType) }) else {
            await recordEnd(
                of: call, status: .error, error: "the server's task could not be recorded, so it was not passed on: \(writeFailure ?? "")")
            await answerClient(
                id: call.requestId,
                toolError: "agent-eval mcp-proxy could not record the server's task, so the call ends here: \(writeFailure ?? "")")
            cancelTask(taskId)
            return
        }
        if let earlier = runningTasks[taskId] {
            // A task id must name one task: the call that had it cannot get its end any more.
            await recordEnd(of: earlier, status: .error, error: "the server gave its task id \(taskId) to another call (\(call.callId))")
        }
        runningTasks[taskId] = call
        await client.send(line)
    }

    /// The server's answer to the client's request about a running task: a task that ended
    /// ends its call (`completed`: the task's result is the call's; `failed`: its error;
    /// `cancelled`); one that asks for input has its questions judged as a call's round is.
    private func taskAnswered(_ taskId: String, message: JSONValue, line: [UInt8]) async {
        if let refusal = refusedTasks[taskId], message["result"] != nil {
            // The call ended when its question was refused: a server that has not taken the cancel
            // in yet, or that ran the task to its end regardless, is not heard past the log.
            await client.send(Self.cancelled(message, why: refusal))
            return
        }
        guard var call = runningTasks[taskId], let state = message["result"] else {
            await client.send(line)
            return
        }
        switch state["status"]?.stringValue {
        case "completed"?:
            runningTasks[taskId] = nil
            guard var result = state["result"]?.objectValue else {
                // The client's SDK has no result to give either: the call did not end `ok`.
                await recordEnd(of: call, status: .error, error: "the server ended its task \(taskId) completed without a result")
                break
            }
            // The task says its result is complete; the result need not say it again (as the
            // MCP tools read it).
            if result["resultType"] == nil { result["resultType"] = "complete" }
            await recordAnswer(of: call, message: ["result": .object(result)])
        case "failed"?:
            runningTasks[taskId] = nil
            await recordAnswer(of: call, message: ["error": state["error"] ?? ["message": "the task failed"]])
        case "cancelled"?:
            runningTasks[taskId] = nil
            await recordEnd(
                of: call, status: .error,
                error: "its task \(taskId) was cancelled" + (state["statusMessage"]?.stringValue.map { ": \($0)" } ?? ""))
        case "input_required"?:
            let asked = state["inputRequests"] ?? .null
            guard asked != call.lastAsked else { break }  // Asked, kept and judged at an earlier poll.
            guard call.round < MCPRound.limit else {
                runningTasks[taskId] = nil
                let error =
                    "the server asked for input on round \(call.round + 1) of the call; agent-eval mcp-proxy ends a call after \(MCPRound.limit) rounds"
                await recordEnd(of: call, status: .error, error: error)
                cancelTask(taskId)
                refusedTasks[taskId] = "agent-eval mcp-proxy: \(error)"
                await client.send(Self.cancelled(message, why: "agent-eval mcp-proxy: \(error)"))
                return
            }
            call.round += 1
            call.lastAsked = asked
            runningTasks[taskId] = call
            let round = MCPRound(callId: call.callId, round: call.round, from: "server", message: message)
            let isKept = await recorded { try await log.store(round.bytes, mediaType: ProxyGate.roundMediaType) }
            let refusal =
                isKept
                ? refusal(of: state["inputRequests"], round: call.round)
                : "the server's question on round \(call.round) could not be recorded, so it was not passed on: \(writeFailure ?? "")"
            if let refusal {
                // The task asks what may not be asked: it is cancelled, and the client told so.
                runningTasks[taskId] = nil
                await recordEnd(of: call, status: .error, error: refusal)
                cancelTask(taskId)
                refusedTasks[taskId] = "agent-eval mcp-proxy refused the server's question: \(refusal)"
                await client.send(Self.cancelled(message, why: "agent-eval mcp-proxy refused the server's question: \(refusal)"))
                return
            }
        default:
            break
        }
        await client.send(line)
    }

    /// A `tasks/get` answer told as the task's cancellation, without its questions, result or error.
    static func cancelled(_ message: JSONValue, why: String) -> [UInt8] {
        var told = message["result"]?.objectValue ?? JSONObject()
        told["status"] = "cancelled"
        told["statusMessage"] = .string(why)
        for member in ["inputRequests", "result", "error"] { told[member] = nil }
        var answer = message.objectValue ?? JSONObject()
        answer["result"] = .object(told)
        return JSONWriter.encode(JSONValue.object(answer))
    }

    /// Asks the server to cancel a task (the proxy's own request; not waited for).
    private func cancelTask(_ taskId: String) {
        var params = JSONObject([("taskId", .string(taskId))])
        if let upstreamEnvelope { params["_meta"] = upstreamEnvelope }
        let own = self.own
        let (clock, timeout) = (settings.clock, settings.callTimeout)
        Task { _ = await own.request("tasks/cancel", params: .object(params), within: timeout, on: clock) }
    }

    private func timeOut(_ key: String) async {
        guard case .call(let call)? = outstanding[key] else { return }
        outstanding[key] = nil
        timers[key] = nil
        let message =
            "the server did not answer within \(Self.seconds(settings.callTimeout)) (--call-timeout); the call may still be running there"
        await recordEnd(of: call, status: .error, error: message)
        // The protocol's way to say the proxy no longer waits; a late answer is dropped.
        let cancel: JSONValue = [
            "jsonrpc": "2.0", "method": "notifications/cancelled", "params": ["requestId": call.requestId, "reason": .string(message)],
        ]
        await forward(JSONWriter.encode(cancel), requestId: nil)
        abandonBridged(call.requestId)
        await answerClient(id: call.requestId, toolError: "agent-eval mcp-proxy: \(message)")
    }

    /// `1 s`, `0.5 s`: a timeout as the user gave it.
    static func seconds(_ duration: Duration) -> String {
        let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return value == value.rounded() ? "\(Int(value)) s" : String(format: "%.1f s", value)
    }

    // MARK: Approvals

    private func ask(_ call: MCPApprovals.PendingCall, requestId: JSONValue, line: [UInt8]) async {
        let logPath: String
        do {
            logPath = try await log.logPath()
            try MCPApprovals.ask(log: logPath, call: call)
        } catch {
            approvals[call.callId] = (Task {}, requestId)
            await settle(
                call, requestId: requestId, line: line,
                answer: MCPApprovals.Answer(
                    isGranted: false, approver: "agent-eval mcp-proxy",
                    reason: "the request for approval could not be written: \(error.localizedDescription)"))
            return
        }
        settings.notices?(
            "call \(call.callId) of \(call.tool) waits for approval (\(call.reason ?? call.rule ?? "policy")): "
                + "agent-eval approve (or deny) \(ShellWords.quoted(logPath)) \(call.callId)")
        let (clock, timeout, log, poll) = (settings.clock, settings.approvalTimeout, logPath, Duration.milliseconds(100))
        // The answer is a file another process (`approve`) writes: looked for every 100 ms, until
        // the approval timeout on the session's clock.
        let task = Task { [weak self] in
            let (found, _) = await Deadline.run(within: timeout, on: clock) { () -> MCPApprovals.Answer? in
                while !Task.isCancelled {
                    if let answer = MCPApprovals.takeAnswer(log: log, callId: call.callId) { return answer }
                    do { try await clock.sleep(for: poll) } catch { return nil }
                }
                return nil
            }
            // Cancelled: the client gave up on the call (`refuseWaiting` records it).
            if found == nil, Task.isCancelled { return }
            // One last look at the deadline: an answer written during the last interval counts.
            let answer =
                found ?? MCPApprovals.takeAnswer(log: log, callId: call.callId)
                ?? MCPApprovals.Answer(
                    isGranted: false, approver: "agent-eval mcp-proxy",
                    reason: "no approval came within \(MCPProxySession.seconds(timeout)) (--approval-timeout)")
            await self?.settle(call, requestId: requestId, line: line, answer: answer)
        }
        approvals[call.callId] = (task, requestId)
    }

    /// Refuses a call that waits for approval without its answer (the client cancelled it):
    /// recorded as refused; nothing is answered (the client gave up on it).
    private func refuseWaiting(_ callId: String, reason: String) async {
        guard let waiting = approvals.removeValue(forKey: callId) else { return }
        waiting.task.cancel()
        if let path = try? await log.logPath() { MCPApprovals.clear(log: path, callId: callId) }
        denied += 1
        _ = await recorded {
            try await log.settle(
                callId: callId, answer: MCPApprovals.Answer(isGranted: false, approver: "agent-eval mcp-proxy", reason: reason))
        }
    }

    private func settle(_ call: MCPApprovals.PendingCall, requestId: JSONValue, line: [UInt8], answer: MCPApprovals.Answer) async {
        // Answered already (cancelled by the client, or the session ended): nothing more.
        guard !isFinished, approvals.removeValue(forKey: call.callId) != nil else { return }
        if let path = try? await log.logPath() { MCPApprovals.clear(log: path, callId: call.callId) }
        let isRecorded = await recorded { try await log.settle(callId: call.callId, answer: answer) }
        if answer.isGranted && isRecorded {
            await execute(requestId: requestId, callId: call.callId, tool: call.tool, arguments: call.arguments, line: line)
        } else {
            denied += 1
            await answerClient(
                id: requestId,
                toolError: "agent-eval: this call needed approval and was refused" + (answer.reason.map { ": \($0)" } ?? ""))
        }
    }

    // MARK: The server's messages

    func fromServer(_ line: [UInt8]) async {
        guard !isFinished else { return }
        var message: JSONValue
        do {
            message = try JSONParser.parse(line)
        } catch {
            // A string cut inside an emoji (a lone surrogate escape) is repaired, not lost; any
            // other line that is not JSON is kept in the log and said, never dropped unseen.
            if let repaired = JSONParser.replacingLoneSurrogates(in: line), let read = try? JSONParser.parse(repaired) {
                settings.notices?(
                    "the server sent a line with a lone UTF-16 surrogate escape (a string cut inside a character); it is read "
                        + "with U+FFFD in its place")
                message = read
            } else {
                let isStored = await recorded { try await log.store(line, mediaType: ProxyGate.unreadableMediaType) }
                settings.notices?(
                    "the server sent a line that is not JSON (\((error as? any Diagnostic)?.message ?? "\(error)")): "
                        + (isStored ? "it is kept in the log as content" : "it could not be recorded")
                        + "; a call it may have answered ends at its --call-timeout")
                return
            }
        }
        guard bridge?.isTranslating == true, let incoming = bridge?.incoming(message) else {
            await dispatch(message, line: line)
            return
        }
        switch incoming {
        case .pass(let translated): await dispatch(translated, line: JSONWriter.encode(translated))
        case .consumed(let toServer): sendServer(toServer)
        }
    }

    /// A message of the server's (or one the bridge gives for it), handled.
    private func dispatch(_ message: JSONValue, line: [UInt8]) async {
        guard !isFinished else { return }
        if message["method"] != nil {
            if let id = message["id"] {
                // The server asks the client (sampling, elicitation, roots, ping): stored, and
                // passed on — unless it could not be stored, or the policy file does not let it
                // ask: then the proxy refuses it for the client, and keeps its refusal.
                let isStored = await recorded { try await log.store(line, mediaType: ProxyGate.serverRequestMediaType) }
                let method = message["method"]?.stringValue ?? ""
                let refusal =
                    isStored
                    ? settings.policy.inputRequests.refusal(method: method, params: message["params"]).map { "\($0.reason) (\($0.rule))" }
                    : "it could not be recorded, so it was not passed on: \(writeFailure ?? "")"
                if let refusal {
                    settings.notices?("the server asked the client for \(method), which was refused: \(refusal)")
                    let answer: JSONValue = [
                        "jsonrpc": "2.0", "id": id,
                        "error": ["code": -32600, "message": .string("agent-eval mcp-proxy refused \(method): \(refusal)")],
                    ]
                    if isStored {
                        _ = await recorded { try await log.store(JSONWriter.encode(answer), mediaType: ProxyGate.refusalMediaType) }
                    }
                    sendServer([answer])
                    return
                }
                if bridge?.way == .towardLegacy {
                    // A 2026-07-28 client is asked only in the answer to one of its requests.
                    await askedThroughBridge(message)
                    return
                }
            } else if message["method"]?.stringValue == "notifications/tools/list_changed" {
                isListed = false
                isListingWhole = false
                isRelayedFromFirstPage = false
                listingFailed = false
                listGeneration += 1
            }
            await client.send(line)
            return
        }
        guard let id = message["id"] else {
            await client.send(line)
            return
        }
        let key = JSONLinesProcess.key(id)
        // A 2026-07-28 server says who it is in every result (a client pinned to that revision
        // sends no server/discover).
        if serverInfo == nil, let result = message["result"], MCPEra.serverInfo(of: result) != nil {
            serverInfo = ServerInfo(
                result: result, name: settings.serverName, protocolVersion: clientEnvelope?[MCPEra.protocolVersionKey]?.stringValue)
            await learned()
        }
        if own.take(message) { return }
        if outstanding[key] == nil, cancelledKeys.remove(key) != nil {
            // The late answer of a call the client cancelled: recorded as cancelled, dropped; its id is free now.
            settings.notices?("the server answered request \(key) after the client cancelled it: dropped")
            return
        }
        guard let kind = outstanding.removeValue(forKey: key) else {
            settings.notices?(
                "the server answered request \(String(decoding: JSONWriter.encode(id), as: UTF8.self)), which nothing waits for (a call that timed out or was cancelled, or an id the client never sent): dropped"
            )
            return
        }
        switch kind {
        case .call(let call):
            timers.removeValue(forKey: key)?.cancel()
            if MCPEra.asksForInput(message["result"]) {
                await askedForInput(call, message: message, line: line)
                return
            }
            if message["result"]?["resultType"]?.stringValue == "task", let taskId = message["result"]?["taskId"]?.stringValue {
                await taskStarted(call, taskId: taskId, message: message, line: line)
                return
            }
            await recordAnswer(of: call, message: message)
            await client.send(line)
        case .task(let taskId):
            await taskAnswered(taskId, message: message, line: line)
        case .discover(let version):
            if let result = message["result"] {
                let supported = (result["supportedVersions"]?.arrayValue ?? []).compactMap(\.stringValue)
                serverInfo = ServerInfo(
                    result: result, name: settings.serverName,
                    protocolVersion: version.flatMap { supported.contains($0) ? $0 : nil } ?? supported.last)
                await learned()
            } else if bridge == nil, let error = message["error"] {
                settings.notices?(
                    "the server does not answer server/discover as a 2026-07-28 server (\(error["message"]?.stringValue ?? "an error")): a client that speaks only 2026-07-28 needs --bridge to use it"
                )
            }
            await client.send(line)
        case .initialize:
            if let result = message["result"] {
                // A listing tried before the server was initialized (a call sent first) failed for
                // that: the next call lists again, and the policy's tool names are checked then.
                if !isListed { listingFailed = false }
                serverInfo = ServerInfo(
                    name: result["serverInfo"]?["name"]?.stringValue ?? settings.serverName,
                    version: result["serverInfo"]?["version"]?.stringValue ?? "", protocolVersion: result["protocolVersion"]?.stringValue)
                await learned()
            } else if bridge == nil, let error = message["error"] {
                settings.notices?(
                    "the server refused initialize (\(error["message"]?.stringValue ?? "an error")): if it speaks only 2026-07-28, --bridge lets a 2025 client use it"
                )
            }
            await client.send(line)
        case .listTools(let isFirstPage, let generation):
            guard let result = message["result"], let page = try? ServedTool.tools(ofMCPListing: result) else {
                await client.send(line)
                return
            }
            // A listing asked for before the tools changed says what they were: not kept.
            if generation == listGeneration {
                tools = isFirstPage ? page : tools + page
                isListed = true
                // Whole when the pages came from the first to the last (the one without a cursor).
                if isFirstPage { isRelayedFromFirstPage = true }
                isListingWhole = isRelayedFromFirstPage && (result["nextCursor"] == nil || result["nextCursor"] == .null)
                await learned()
            }
            guard settings.hidesDenied else {
                await client.send(line)
                return
            }
            let shown = (result["tools"]?.arrayValue ?? []).filter { item in
                guard let name = item["name"]?.stringValue else { return true }
                return settings.policy.policy.discloses(toolSpec(name), actor: settings.actor, route: settings.route).isDisclosed
            }
            var filtered = result.objectValue ?? JSONObject()
            filtered["tools"] = .array(shown)
            var answer = message.objectValue ?? JSONObject()
            answer["result"] = .object(filtered)
            await client.send(JSONWriter.encode(JSONValue.object(answer)))
        case .other:
            if MCPEra.asksForInput(message["result"]) {
                // prompts/get, resources/read: their questions are judged as a call's are.
                if let refusal = refusal(of: message["result"]?["inputRequests"], round: 1) {
                    abandonBridged(id)
                    await answerClient(id: id, error: (-32603, "agent-eval mcp-proxy refused the server's question: \(refusal)"))
                    return
                }
                if bridge?.way == .towardModern {
                    await askThroughBridge(.other, answerId: id, result: message["result"])
                    return
                }
            }
            await client.send(line)
        }
    }

    // MARK: The proxy's own listing

    /// Lists the server's tools when no listing passed by yet, so each call is judged with the
    /// side effect the server gives its tool (at most 100 pages, each within the call timeout).
    private func ensureListed(whole: Bool = false) async {
        if (isListed && (isListingWhole || !whole)) || listingFailed { return }
        if let listing {
            await listing.value
            return
        }
        let task = Task { await self.listTools() }
        listing = task
        await task.value
        listing = nil
    }

    private func listTools() async {
        let generation = listGeneration
        var found: [ServedTool] = []
        var cursor: JSONValue?
        for _ in 0..<100 {
            var params = JSONObject()
            if let cursor { params["cursor"] = cursor }
            // A 2026-07-28 server needs the envelope on every request: the client's.
            if let upstreamEnvelope { params["_meta"] = upstreamEnvelope }
            guard let result = await ownRequest("tools/list", params: .object(params)),
                let page = try? ServedTool.tools(ofMCPListing: result)
            else {
                // Unlisted tools are judged on the policy file's side effects, else as writes;
                // the next call does not wait for another listing until the tools change.
                if generation == listGeneration { listingFailed = true }
                settings.notices?(
                    "the server's tools could not be listed; calls are judged on the policy file's side_effects, else as writes")
                return
            }
            found += page
            cursor = result["nextCursor"]
            if cursor == nil || cursor == .null { break }
        }
        guard generation == listGeneration else { return }
        tools = found
        isListed = true
        // Past 100 pages the rest is not known: no call is refused for a name it might hold.
        isListingWhole = cursor == nil || cursor == .null
        await learned()
    }

    /// The result of one of the proxy's own requests, or nil when it got none (an error, no
    /// answer within the call timeout or 30 s, the server gone).
    private func ownRequest(_ method: String, params: JSONValue) async -> JSONValue? {
        if isServerGone { return nil }
        isPastProbe = true
        let answer = await own.request(method, params: params, within: min(settings.callTimeout, .seconds(30)), on: settings.clock)
        return try? answer.get()
    }

    /// The server ended while it had only been sent the client's `server/discover` probe: a
    /// server of the 2025 era may exit on a request before `initialize`. The probe is answered
    /// for it, as such a server would answer a method it does not know (-32601), so the client
    /// falls back to `initialize`, and another server process is started — once a session.
    /// False when the session ends with the server instead.
    func restartAfterProbe(ended: JSONLinesProcess) async -> Bool {
        // Started again already (by the bridge's probe): the loop goes on with the new one.
        if ended !== server { return !isFinished && !Task.isCancelled }
        guard !isFinished, restarts == 0, !Task.isCancelled else { return false }
        let why = server.failure ?? "it closed its output"
        if isBridgeProbing {
            // The bridge's probe ended it: its probe gets the failure and goes on as for a 2025 server.
            guard replaceServer() else { return false }
            settings.notices?(
                "the server ended on the bridge's server/discover probe (\(why)), as a server of the 2025 era may; it was started again")
            return true
        }
        guard !isPastProbe, probes > 0, !outstanding.isEmpty,
            outstanding.values.allSatisfy({ if case .discover = $0 { true } else { false } })
        else { return false }
        // The new server first: a client that answers at once with initialize reaches it.
        guard replaceServer() else { return false }
        let unanswered = outstanding.keys.sorted()
        outstanding = [:]
        for key in unanswered {
            guard let id = try? JSONParser.parse(Array(key.utf8)) else { continue }
            let answer: JSONValue = [
                "jsonrpc": "2.0", "id": id,
                "error": [
                    "code": -32601,
                    "message": .string(
                        "Method not found: server/discover (the server ended on it: \(why); agent-eval mcp-proxy started it again: use initialize)"
                    ),
                ],
            ]
            await client.send(JSONWriter.encode(answer))
        }
        settings.notices?(
            "the server ended on the client's server/discover probe (\(why)), as a server of the 2025 era may; it was started again")
        return true
    }

    /// The server's messages ended (it failed, or the session is cancelled): the proxy's own
    /// requests get no answer now, so whatever waits for one goes on at once.
    func serverStopped() {
        isServerGone = true
        own.failAll("the server's messages ended")
    }

    // MARK: The bridge between eras

    /// The envelope the proxy's own requests to the server carry: the client's, or, toward a
    /// modern server, the bridge's; none toward a 2025 server.
    private var upstreamEnvelope: JSONValue? {
        switch bridge?.way {
        case .towardModern?: bridge?.envelope
        case .towardLegacy?: nil
        default: clientEnvelope
        }
    }

    /// Sends messages to the server in order, not waited for: the server's messages go on being
    /// read whether or not it reads.
    private func sendServer(_ messages: [JSONValue]) {
        guard !messages.isEmpty else { return }
        let server = self.server
        Task {
            for message in messages { try? await server.send(Data(JSONWriter.encode(message))) }
        }
    }

    /// A client request the proxy answers itself with `--bridge` (true when it did): the server's
    /// era is learned at the first one, then `initialize`, `ping` and `logging/setLevel` of a 2025
    /// client are answered for a modern server, and `server/discover` of a 2026-07-28 client for a
    /// 2025 server.
    private func answeredByBridge(method: String, id: JSONValue, message: JSONValue) async -> Bool {
        if bridge?.way == .unknown { await learnServerEra(opening: message) }
        switch bridge?.way {
        case .unusable(let why)?:
            if method == "tools/call" {
                // Not made: counted as refused, and the session does not end `success`.
                callCount += 1
                denied += 1
            }
            await answerClient(id: id, error: (-32603, "agent-eval mcp-proxy --bridge: \(why)"))
            return true
        case .towardModern?:
            switch method {
            case "initialize":
                await learnClient(initialize: message)
                await answerClient(id: id, result: bridge?.initializeResult ?? [:])
                return true
            case "ping", "logging/setLevel":
                // Gone in 2026-07-28: nothing to ask the server.
                await answerClient(id: id, result: [:])
                return true
            case "resources/subscribe", "resources/unsubscribe":
                await answerClient(
                    id: id,
                    error: (
                        -32601,
                        "agent-eval mcp-proxy --bridge: \(method) is not bridged (the server speaks 2026-07-28, whose subscriptions/listen replaced it)"
                    ))
                return true
            default:
                return false
            }
        case .towardLegacy?:
            switch method {
            case "server/discover":
                await answerClient(id: id, result: bridge?.discoverResult ?? [:])
                return true
            case "subscriptions/listen":
                await answerClient(
                    id: id,
                    error: (-32601, "agent-eval mcp-proxy --bridge: subscriptions/listen is not bridged (the server speaks the 2025 era)"))
                return true
            default:
                return false
            }
        default:
            return false
        }
    }

    /// Probes the server with `server/discover` (the client's envelope, or one made of its
    /// `initialize`), and sets the bridge's way: none when both speak one era; toward a modern
    /// server for a 2025 client; toward a 2025 server for a 2026-07-28 client, whose session with
    /// the server is then opened (`initialize`, `notifications/initialized`). A server that ends on
    /// the probe is started again, once a session.
    private func learnServerEra(opening message: JSONValue) async {
        let params = message["params"]
        let clientEra = MCPEra.envelope(of: params)
        let isLegacyClient = message["method"]?.stringValue == "initialize" || clientEra == nil
        let envelope = clientEra ?? MCPBridge.envelope(ofInitialize: params)
        let probed = server
        isBridgeProbing = true
        let answer = await own.request(
            "server/discover", params: ["_meta": envelope], within: settings.bridgeProbeTimeout, on: settings.clock)
        isBridgeProbing = false
        if case .failure(.timedOut) = answer {
            settings.notices?(
                "--bridge: the server did not answer server/discover within \(Self.seconds(settings.bridgeProbeTimeout)): it is taken for a 2025 server (one that starts slower may answer later and refuse what follows: give it more time with --bridge-probe-timeout)"
            )
        }
        if case .failure(.failed(let why)) = answer, probed === server, restarts == 0, !isServerGone, !isFinished, replaceServer() {
            settings.notices?(
                "the server ended on the bridge's server/discover probe (\(why)), as a server of the 2025 era may; it was started again")
        }
        let discovered: JSONValue?
        do {
            discovered = try MCPBridge.discovered(answer)
        } catch {
            bridge?.unusable(error.why)
            settings.notices?("--bridge: \(error.why)")
            return
        }
        switch (discovered, isLegacyClient) {
        case (let result?, true):
            bridge?.bridgeTowardModern(envelope: envelope, discovered: result, clientVersion: params?["protocolVersion"]?.stringValue)
            serverInfo = ServerInfo(result: result, name: settings.serverName, protocolVersion: MCPEra.statelessVersion)
            await learned()
            settings.notices?("--bridge: a 2025 client and a server of \(MCPEra.statelessVersion): the proxy speaks each one's era")
        case (nil, false):
            isPastProbe = true
            let opened = await own.request(
                "initialize", params: MCPBridge.initializeParams(envelope: envelope), within: min(settings.callTimeout, .seconds(30)),
                on: settings.clock)
            guard case .success(let result) = opened else {
                let why = if case .failure(let failure) = opened { Self.describe(failure) } else { "no answer" }
                bridge?.unusable(
                    "the server answered neither server/discover as a 2026-07-28 server nor initialize (\(why)); run its command by hand to see what it answers"
                )
                settings.notices?("--bridge: the server answered neither server/discover nor initialize (\(why))")
                return
            }
            try? await own.notify("notifications/initialized", params: nil)
            bridge?.bridgeTowardLegacy(
                initialized: result, clientVersion: envelope[MCPEra.protocolVersionKey]?.stringValue ?? MCPEra.statelessVersion)
            serverInfo = ServerInfo(
                name: result["serverInfo"]?["name"]?.stringValue ?? settings.serverName,
                version: result["serverInfo"]?["version"]?.stringValue ?? "", protocolVersion: result["protocolVersion"]?.stringValue)
            await learned()
            settings.notices?(
                "--bridge: a \(MCPEra.statelessVersion) client and a 2025 server (\(result["protocolVersion"]?.stringValue ?? "?")): the proxy speaks each one's era"
            )
        default:
            bridge?.noBridge()
        }
    }

    static func describe(_ failure: JSONRPCPeer.Failure) -> String {
        switch failure {
        case .remote(let error): "JSON-RPC error \(error.code): \(error.message)"
        case .failed(let why): why
        case .timedOut: "no answer in time"
        case .cancelled: "cancelled"
        }
    }

    /// Starts another server process in place of the one that ended (or is ended here): the
    /// reading loop goes on with it (`restartAfterProbe`).
    private func replaceServer() -> Bool {
        let next: JSONLinesProcess
        do {
            next = try spawn()
        } catch {
            return false
        }
        restarts += 1
        let ended = server
        own.failAll("the server ended")
        server = next
        own = JSONRPCPeer(server: next, idPrefix: "agent-eval-proxy-\(restarts + 1)")
        // Its messages end, so the reading loop moves to the new server.
        ended.kill()
        return true
    }

    /// Toward a modern server: the server asked for input on the client's request `answerId`;
    /// its questions go to the client as requests (or, with none, the request is retried).
    private func askThroughBridge(_ kind: Outstanding, answerId: JSONValue, result: JSONValue?) async {
        switch bridge?.ask(answerId: answerId, result: result) {
        case .askClient(let requests)?:
            if case .call = kind {
                // Kept already, as the call's round.
            } else {
                // The questions of a prompts/get or resources/read: kept as the server's requests
                // to the client, before the client sees them.
                for request in requests {
                    let bytes = JSONWriter.encode(request)
                    guard await recorded({ try await log.store(bytes, mediaType: ProxyGate.serverRequestMediaType) }) else {
                        _ = bridge?.abandon(answerId: answerId)
                        await answerClient(
                            id: answerId,
                            error: (
                                -32603,
                                "agent-eval mcp-proxy could not record the server's question, so it was not passed on: \(writeFailure ?? "")"
                            ))
                        return
                    }
                }
            }
            bridgeAsking[JSONLinesProcess.key(answerId)] = kind
            for request in requests { await client.send(JSONWriter.encode(request)) }
        case .retry(let retry)?:
            await retryThroughBridge(kind, answerId: answerId, retry: retry)
        case .fail(let why)?:
            await endBridged(kind, answerId: answerId, why: why)
        case nil:
            break
        }
    }

    /// The client answered one of the bridge's questions.
    private func bridgeAnswered(_ answered: MCPBridge.Answered) async {
        switch answered {
        case .waiting:
            break
        case .retry(let answerId, let retry):
            guard let kind = bridgeAsking.removeValue(forKey: JSONLinesProcess.key(answerId)) else { return }
            await retryThroughBridge(kind, answerId: answerId, retry: retry)
        case .fail(let answerId, let why):
            guard let kind = bridgeAsking.removeValue(forKey: JSONLinesProcess.key(answerId)) else { return }
            await endBridged(kind, answerId: answerId, why: why)
        }
    }

    /// Sends the bridge's retry of a request: a call's is its next round, kept before the server
    /// sees it, as a client's retry is.
    private func retryThroughBridge(_ kind: Outstanding, answerId: JSONValue, retry: JSONValue) async {
        guard case .call(var call) = kind else {
            outstanding[JSONLinesProcess.key(answerId)] = kind
            await forward(JSONWriter.encode(retry), requestId: answerId)
            return
        }
        call.round += 1
        let round = MCPRound(callId: call.callId, round: call.round, from: "client", message: retry)
        guard await recorded({ try await log.store(round.bytes, mediaType: ProxyGate.roundMediaType) }) else {
            _ = bridge?.abandon(answerId: answerId)
            await recordEnd(
                of: call, status: .error, error: "round \(call.round) could not be recorded, so it was not sent: \(writeFailure ?? "")")
            await answerClient(
                id: answerId, toolError: "agent-eval mcp-proxy could not record this call, so it was not made: \(writeFailure ?? "")")
            return
        }
        await send(call, line: JSONWriter.encode(retry))
    }

    /// A request the bridge could not carry on ends, with why.
    private func endBridged(_ kind: Outstanding, answerId: JSONValue, why: String) async {
        _ = bridge?.abandon(answerId: answerId)
        if case .call(let call) = kind {
            await recordEnd(of: call, status: .error, error: why)
            await answerClient(id: answerId, toolError: "agent-eval mcp-proxy --bridge: \(why)")
        } else {
            await answerClient(id: answerId, error: (-32603, "agent-eval mcp-proxy --bridge: \(why)"))
        }
    }

    /// Toward a 2025 server: its request to the client (stored, and let through by the policy)
    /// becomes the `input_required` answer of the one request it can belong to.
    private func askedThroughBridge(_ message: JSONValue) async {
        switch bridge?.serverAsked(message) {
        case .answerServer(let answer)?:
            let why = answer["error"]?["message"]?.stringValue ?? "the server's request was refused"
            settings.notices?(why.hasPrefix("agent-eval mcp-proxy ") ? String(why.dropFirst("agent-eval mcp-proxy ".count)) : why)
            sendServer([answer])
        case .answerClient(let answer)?:
            await dispatch(answer, line: JSONWriter.encode(answer))
        case .queued?, nil:
            break
        }
    }

    /// The session gave up on the request the client knows as `answerId`: the bridge answers the
    /// server's requests of it, so the server is not left waiting.
    private func abandonBridged(_ answerId: JSONValue) {
        guard bridge?.isTranslating == true else { return }
        sendServer(bridge?.abandon(answerId: answerId) ?? [])
    }

    // MARK: Recording

    private func toolSpec(_ name: String) -> ToolSpec {
        var gate = settings.gate
        gate.tools = tools
        return gate.spec(name)
    }

    /// Records the server's answer to a forwarded call, and ends the step durably.
    private func recordAnswer(of call: ForwardedCall, message: JSONValue) async {
        if let error = message["error"], error != .null {
            let code = error["code"]?.intValue.map { " \($0)" } ?? ""
            await recordEnd(of: call, status: .error, error: "JSON-RPC error\(code): \(error["message"]?.stringValue ?? "no message")")
            return
        }
        // Read as the MCP tools read it: a client of 2026-07-28 refuses a result that does not
        // say it is complete, and an SDK a result that does not follow its tool's outputSchema,
        // so the log does not call either `ok`. (A 2025 server's answer to a 2026-07-28 client,
        // through `--bridge`, was given its `resultType` on the way.)
        let outcome = ServedTool.checked(
            MCPEra.outcome(ofCallResult: message["result"], server: settings.serverName, isStateless: clientEnvelope != nil),
            against: outputSchemas[call.tool])
        await recordEnd(of: call, status: outcome.status, output: outcome.output, error: outcome.error)
    }

    private func recordEnd(of call: ForwardedCall, status: ToolStatus, output: JSONValue? = nil, error: String? = nil) async {
        let durationUs = max(0, settings.now() - call.startUs)
        _ = await recorded {
            try await log.complete(
                callId: call.callId, tool: call.tool, status: status, output: output, error: error, durationUs: durationUs)
        }
    }

    // MARK: Answers to the client

    /// The proxy's own result to a client request (with `--bridge`).
    private func answerClient(id: JSONValue, result: JSONValue) async {
        await client.send(JSONWriter.encode(["jsonrpc": "2.0", "id": id, "result": result] as JSONValue))
    }

    private func answerClient(id: JSONValue, error: (code: Int, message: String)) async {
        await client.send(JSONWriter.encode(Self.errorAnswer(id: id, error: error)))
    }

    private static func errorAnswer(id: JSONValue, error: (code: Int, message: String)) -> JSONValue {
        ["jsonrpc": "2.0", "id": id, "error": ["code": .int(error.code), "message": .string(error.message)]]
    }

    /// Refuses what the client sent before it reached the gate — a line that is not JSON, a
    /// message that is not an object, a request inside a batch — keeping both in the log: the
    /// line as it came (`ProxyGate.clientRefusedMediaType`) and the error the client was
    /// answered with (`ProxyGate.refusalMediaType`). A call the proxy could not read is then on
    /// record as refused, not missing; a line that could not be recorded is refused all the same.
    private func refuseClient(_ line: [UInt8], id: JSONValue, error: (code: Int, message: String)) async {
        let answer = Self.errorAnswer(id: id, error: error)
        let isStored = await recorded { try await log.store(line, mediaType: ProxyGate.clientRefusedMediaType) }
        if isStored {
            _ = await recorded { try await log.store(JSONWriter.encode(answer), mediaType: ProxyGate.refusalMediaType) }
        }
        await client.send(JSONWriter.encode(answer))
    }

    /// A tool error the agent's model reads (MCP puts tool failures in the result, not in a
    /// JSON-RPC error, so that the model sees them).
    private func answerClient(id: JSONValue, toolError text: String) async {
        var result: JSONValue = ["content": [["type": "text", "text": .string(text)]], "isError": true]
        // 2026-07-28: every result says what it is; a client of that era refuses one without.
        if clientEnvelope != nil { result = result.merging(["resultType": "complete"]) }
        let answer: JSONValue = ["jsonrpc": "2.0", "id": id, "result": result]
        await client.send(JSONWriter.encode(answer))
    }

    // MARK: The end

    /// Calls first, in the order they were made (`mcp-N`), then the other requests by id.
    private static func order(of entry: (key: String, kind: Outstanding)) -> (Int, String) {
        guard case .call(let call) = entry.kind else { return (Int.max, entry.key) }
        return (callNumber(call.callId), entry.key)
    }

    /// The N of a call id `mcp-N` (a call the model proposed under `record` sorts last).
    private static func callNumber(_ callId: String) -> Int {
        Int(callId.dropFirst("mcp-".count)) ?? Int.max
    }

    /// Waits until no forwarded call waits for the server's answer — each ends with its answer or
    /// at `--call-timeout` — or the wait is cancelled, or the session ends: a client that closed
    /// its end with calls in flight still has their outcomes recorded.
    func callsSettled() async {
        guard hasCallInFlight, !isFinished else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { settledWaiters.append($0) }
        } onCancel: {
            Task { await self.releaseWaiters() }
        }
    }

    private var hasCallInFlight: Bool {
        outstanding.values.contains { if case .call = $0 { true } else { false } }
    }

    private func releaseIfSettled() {
        if !settledWaiters.isEmpty && !hasCallInFlight { releaseWaiters() }
    }

    private func releaseWaiters() {
        let waiters = settledWaiters
        settledWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// Ends the session: calls still waiting are recorded as ended (and answered when the
    /// server failed), the stop is recorded and the log closed.
    func finish(_ end: End) async -> MCPProxy.Outcome {
        isFinished = true
        releaseWaiters()
        for timer in timers.values { timer.cancel() }
        timers = [:]
        for approval in approvals.values { approval.task.cancel() }
        let waiting = approvals.sorted { $0.key.localizedStandardCompare($1.key) == .orderedAscending }.map { ($0.key, $0.value.requestId) }
        approvals = [:]
        own.failAll("the session ended")
        // A client that only probed the server (`server/discover`) and went: no run to write.
        if case .clientClosed(longLine: false) = end, requests > 0, requests == probes, callCount == 0, !hasRecorded {
            outstanding = [:]
            return MCPProxy.Outcome(
                runId: settings.runId, logPath: nil, stop: RunStopped(reason: .success), calls: 0, allowed: 0, denied: 0,
                writeFailure: writeFailure)
        }
        let logPath = (try? await log.logPath()) ?? settings.logPath
        for (callId, _) in waiting { MCPApprovals.clear(log: logPath, callId: callId) }
        var stop: RunStopped
        let unfinished: String
        switch end {
        case .clientClosed(let longLine):
            stop =
                longLine
                ? RunStopped(reason: .blocked, error: "the client sent a line longer than \(JSONLinesProcess.lineLimit >> 20) MiB")
                : RunStopped(reason: .success)
            // A client that went because the server did (a message the server could not take, a
            // request it left unanswered as it ended) did not end the session as it chose.
            if !longLine, let why = serverUnreachable ?? (outstanding.isEmpty ? nil : server.failure) {
                stop = RunStopped(reason: .toolFailure, error: "MCP server \(settings.serverName): \(why)")
            }
            unfinished = "the client closed the connection before the server answered"
        case .serverEnded(let why):
            stop = RunStopped(reason: .toolFailure, error: "MCP server \(settings.serverName): \(why)")
            unfinished = "the server ended before it answered: \(why)"
        case .interrupted:
            stop = RunStopped(reason: .blocked, error: "\(RunStopped.interruptionPrefix) the proxy was stopped from outside")
            unfinished = "the proxy was stopped before the server answered"
        }
        if let policyProblem, stop.reason == .success { stop = RunStopped(reason: .blocked, error: policyProblem) }
        if case .unusable(let why)? = bridge?.way, stop.reason == .success {
            stop = RunStopped(reason: .toolFailure, error: "MCP server \(settings.serverName): --bridge: \(why)")
        }
        // In the order they were made.
        let pending = outstanding.map { ($0.key, $0.value) }.sorted { Self.order(of: $0) < Self.order(of: $1) }
        outstanding = [:]
        var unfinishedCalls = waiting.count
        for (_, kind) in pending {
            guard case .call(let call) = kind else { continue }
            unfinishedCalls += 1
            await recordEnd(of: call, status: .error, error: unfinished)
        }
        unfinishedCalls += runningTasks.count + awaitingInput.count
        unfinishedCalls += bridgeAsking.values.count { if case .call = $0 { true } else { false } }
        for (taskId, call) in runningTasks.sorted(by: { Self.callNumber($0.value.callId) < Self.callNumber($1.value.callId) }) {
            await recordEnd(
                of: call, status: .error,
                error: "the session ended while its task \(taskId) was still running (the client did not poll it to its end)")
        }
        runningTasks = [:]
        let bridged = bridgeAsking.values.compactMap { if case .call(let call) = $0 { call } else { nil } }
            .sorted { Self.callNumber($0.callId) < Self.callNumber($1.callId) }
        bridgeAsking = [:]
        for call in bridged {
            await recordEnd(
                of: call, status: .error,
                error:
                    "the server asked for input on round \(call.round) and the client did not answer the proxy's questions before the session ended"
            )
        }
        let asked = awaitingInput.values.map(\.call).sorted { Self.callNumber($0.callId) < Self.callNumber($1.callId) }
        awaitingInput = [:]
        for call in asked {
            await recordEnd(
                of: call, status: .error,
                error: "the server asked for input on round \(call.round) and the client did not retry the call before the session ended")
        }
        if case .serverEnded(let why) = end {
            let ids = pending.compactMap { try? JSONParser.parse(Array($0.0.utf8)) } + waiting.map(\.1)
            for id in ids {
                await answerClient(id: id, error: (-32603, "agent-eval mcp-proxy: the MCP server ended: \(why)"))
            }
        }
        for (callId, _) in waiting {
            _ = await recorded {
                try await log.settle(
                    callId: callId, answer: MCPApprovals.Answer(isGranted: false, approver: "agent-eval mcp-proxy", reason: unfinished))
            }
        }
        _ = await recorded { try await log.finish(stop) }
        return MCPProxy.Outcome(
            runId: settings.runId, logPath: logPath, stop: stop, calls: callCount, allowed: allowed, denied: denied,
            unfinished: unfinishedCalls, writeFailure: writeFailure)
    }
}
