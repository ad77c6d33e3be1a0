import AgentRuntime
import ConfigFile
import Foundation
import Interop
import Synchronization
import TraceCore
import TraceLog

/// The MCP proxies of a recorded command (`agent-eval mcp-proxy` run by an agent under `agent-eval
/// record`): each posts its gate's operations to the gateway (`POST /agent-eval/mcp`), and they are
/// recorded here, into the run's one log, on its own state (docs/mcp.md, "Under agent-eval record").
///
/// A call the agent makes through a proxy is matched to the call its model proposed — the oldest
/// open call of that tool with the same arguments that no proxy judged yet — and judged as that
/// call: its verdict, intent and result carry the model's call id, and the result the agent then
/// sends back to the model is not recorded a second time. A call no model proposed is recorded
/// as proposed by the proxy (`mcp-N`, `format: mcp.tools_call`).
extension ExchangeRecorder {
    /// The path the proxy endpoint has on the gateway.
    public static let proxyPath = "/agent-eval/mcp"

    /// Applies one operation a proxy posted; the answer to send back (`{"error": …}` when it
    /// cannot be applied, which the proxy treats as a failure to record).
    ///
    /// A call to judge that matches no proposed call while model answers are still being
    /// recorded waits for them (a streaming SDK may act on a reply's end marker before the
    /// gateway has recorded the reply), at most a second.
    func proxyOperation(_ request: JSONValue) async -> JSONValue {
        let operation: ProxyOperation
        do throws(ProxyOperation.Refused) {
            operation = try ProxyOperation(json: request)
        } catch {
            return ["error": .string(error.message)]
        }
        if case .judge(_, let name, let arguments, _, _, nil) = operation {
            await state.wait(within: .seconds(1), on: clock) { state in
                state.inFlight == 0
                    || state.recorder.map { Self.openCall(named: name, arguments: arguments, state: &state, recorder: $0) != nil } == true
            }
        }
        return apply(operation)
    }

    private func apply(_ operation: ProxyOperation) -> JSONValue {
        let now = self.now()
        return state.withLock { state -> JSONValue in
            do {
                if case .register(let registration) = operation { return register(registration, state: &state) }
                guard let number = operation.proxy, var gate = state.proxying.proxies[number] else {
                    return ["error": .string("agent-eval record's gateway knows no proxy \(operation.proxy.map(String.init) ?? "null")")]
                }
                if case .tools(_, let tools) = operation {
                    gate.tools = tools
                    state.proxying.proxies[number] = gate
                    state.proxying.proxiedTools.formUnion(gate.tools.map(\.name))
                    return ["ok": true]
                }
                if case .store(_, let message, ProxyGate.serverRequestMediaType) = operation, state.recorder == nil {
                    // Before the first model answer: kept until the run begins, so its start still
                    // names the goal, model and tools of that answer.
                    state.proxying.earlyServerRequests.append(message)
                    return ["ok": true]
                }
                // The run begins with the first model answer; a proxy call before any makes it.
                let recorder = try recorder(for: nil, state: &state, atUs: now)
                // The command ended and its run was stopped: nothing more belongs in it.
                guard recorder.state.stop == nil else {
                    return ["error": "the recorded run has stopped; the proxy's operation was not recorded"]
                }
                recorder.timeUs = now
                switch operation {
                case .register, .tools:
                    break  // answered above
                case .judge(_, let name, let arguments, let params, let waiting, let refusal):
                    // The proxy may judge before its listing reached us: its tool is proxied.
                    state.proxying.proxiedTools.insert(name)
                    let proposed = Self.openCall(named: name, arguments: arguments, state: &state, recorder: recorder)
                    let callId = state.proxying.judgedCall(proposed: proposed)
                    let (judgement, decision) = try gate.judge(
                        callId: callId, name: name, arguments: arguments, params: params, isProposed: proposed != nil, waiting: waiting,
                        refusal: refusal, on: recorder)
                    var answer = ObjectBuilder()
                    answer.set("call_id", callId)
                    answer.set("judgement", judgement.rawValue)
                    answer.set("verdict", decision.verdict)
                    answer.set("rule", decision.rule)
                    answer.set("reason", decision.reason)
                    return answer.json
                case .intend(_, let callId, let tool, let arguments):
                    try gate.intend(callId: callId, tool: tool, arguments: arguments, on: recorder)
                case .settle(_, let callId, let answer):
                    try gate.settle(
                        callId: callId, isGranted: answer.isGranted, approver: answer.approver, reason: answer.reason, on: recorder)
                case .complete(_, let callId, let tool, let status, let output, let error, let durationUs):
                    // One result per intent: a second report of the same call is not a second result.
                    if let call = recorder.state.call(id: callId), call.results.count >= call.attempts {
                        return ["ok": true]
                    }
                    // A fork shows the model its edit of this call's result: that is what is recorded.
                    let edited = fork?.editedResult(callId)
                    try gate.complete(
                        callId: callId, tool: tool, status: edited?.status ?? status, output: edited.map(\.output) ?? output,
                        error: edited.map(\.error) ?? error, durationUs: durationUs, on: recorder)
                case .store(_, let message, let mediaType):
                    try gate.store(message, mediaType: mediaType, on: recorder)
                }
                return ["ok": true]
            } catch {
                return ["error": .string("the run's log could not be written: \((error as? any Diagnostic)?.message ?? "\(error)")")]
            }
        }
    }

    /// A proxy begins: its policy (read from the file it names), its settings; answers its number
    /// and the run's log (beside which approvals are asked for).
    private func register(_ registration: ProxyOperation.Registration, state: inout State) -> JSONValue {
        var policy = PolicyFile.allowAll
        if let path = registration.policy {
            do throws(ConfigErrors) {
                policy = try PolicyFile.load(path: path)
            } catch {
                return ["error": .string("the proxy's policy file \(path) does not read: \(error.errors.first?.message ?? "")")]
            }
        }
        let gate = ProxyGate(
            policy: policy, actor: registration.actor, route: registration.route, maxToolCalls: registration.maxToolCalls,
            tokenBudget: limits.maxTokens, preApproved: registration.preApproved.map(Glob.init), serverName: registration.server)
        let number = (state.proxying.proxies.keys.max() ?? 0) + 1
        state.proxying.proxies[number] = gate
        // Absolute: the proxy runs in the agent's folder (a command case's), where a path relative
        // to agent-eval's would put its approvals where `approve` never looks.
        return ["proxy": .int(number), "log": .string(ConfigPath.absolute(logPath))]
    }

    /// The first open call (in the order the model proposed them) of tool `name` with these
    /// arguments that no proxy judged and nothing ran yet, as the log knows it.
    private static func openCall(named name: String, arguments: JSONValue, state: inout State, recorder: RunRecorder) -> String? {
        var open: Set<String> = []
        for conversation in state.book.conversations.values {
            for call in conversation.openCalls.values where call.tool == name && !state.proxying.proxiedCalls.contains(call.logId) {
                open.insert(call.logId)
            }
        }
        // Open calls are the run's latest: walk back from the end only as far as the oldest of
        // them, keeping the earliest that fits.
        var found: String?
        for call in recorder.state.calls.reversed() {
            if open.isEmpty { break }
            guard open.remove(call.id) != nil else { continue }
            if !call.isExecuted && call.arguments.equals(byValue: arguments) { found = call.id }
        }
        return found
    }
}
