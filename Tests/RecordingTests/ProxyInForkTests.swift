import AgentRuntime
import Foundation
import ModelClients
import Recording
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// A fork of a recorded run whose agent calls a tool through `agent-eval mcp-proxy`: the proxy's
/// gate at the fork point goes into the fork's log, not into the run recorded apart before it.
@Suite("a proxied call at a recorded fork's fork point is recorded in the fork", .ownThread)
struct ProxyInForkTests {
    /// A gateway recording into `log`, the parent's cassette (or `fork`'s) answering.
    final class Session: Sendable {
        let recorder: ExchangeRecorder
        let gateway: ModelGateway
        let log: String

        init(log: String, cassette: Cassette, upstream: String, fork: RecordedFork?) async throws {
            self.log = log
            let keys = RequestKeys()
            recorder = ExchangeRecorder(
                logPath: log, runId: fork == nil ? "run-parent" : "run-fork", goal: nil, agentName: "agent", command: ["agent"],
                limits: .init(), keys: keys, fork: fork, onStop: { _ in })
            let limits = RequestLimits(timeoutMs: 30_000)
            let live = ModelForwarder(transport: ModelTransports.live, limits: limits)
            let recorded = ModelForwarder(
                transport: cassette.transport(provider: "gateway", live: ModelTransports.live, keyedBy: keys.key(for:)), limits: limits)
            gateway = try await ModelGateway(
                handler: GatewayHandler(
                    upstreams: Upstreams(openAI: upstream), forwarder: fork == nil ? recorded : live,
                    prefixForwarder: fork == nil ? nil : recorded, recorder: recorder))
        }

        /// One model request; the call the model proposes, if any.
        func ask(_ messages: [JSONValue]) async throws -> (id: String, message: JSONValue)? {
            let message = try await gateway.chatMessage(messages)
            guard let id = message["tool_calls"]?.arrayValue?.first?["id"]?.stringValue else { return nil }
            return (id, message)
        }

        func proxy(_ operation: JSONValue) async throws -> JSONValue { try await gateway.proxyOperation(operation) }

        /// The agent: look the order up through the proxy, then refund it (its own tool), then answer.
        func drive() async throws {
            let proxy = try #require(try await proxy(["op": "register", "server": "shop"])["proxy"])
            _ = try await self.proxy(["op": "tools", "proxy": proxy, "tools": [["name": "lookup_order", "side_effect": "read"]]])
            var messages: [JSONValue] = [["role": "user", "content": "Refund A-1042."]]
            let lookup = try #require(try await ask(messages))
            messages.append(lookup.message)
            let judged = try await self.proxy([
                "op": "judge", "proxy": proxy, "name": "lookup_order", "arguments": ["order_id": "A-1042"], "params": [:], "waiting": 0,
            ])
            #expect(judged["call_id"]?.stringValue == lookup.id)
            _ = try await self.proxy([
                "op": "intend", "proxy": proxy, "call_id": .string(lookup.id), "tool": "lookup_order", "arguments": ["order_id": "A-1042"],
            ])
            _ = try await self.proxy([
                "op": "complete", "proxy": proxy, "call_id": .string(lookup.id), "tool": "lookup_order", "status": "ok",
                "output": ["status": "delivered"], "duration_us": 1200,
            ])
            messages.append(["role": "tool", "tool_call_id": .string(lookup.id), "content": #"{"status": "delivered"}"#])
            let refund = try #require(try await ask(messages))
            messages.append(refund.message)
            messages.append(["role": "tool", "tool_call_id": .string(refund.id), "content": #"{"refund_id": "rf-9"}"#])
            #expect(try await ask(messages) == nil)
        }

        func finish() async throws -> [RecordedEvent] {
            await gateway.stop()
            _ = try recorder.finish(.exited(0))
            return try LogReader(path: log).readAll().events
        }
    }

    @Test(arguments: [false, true])
    func theProxysGateAtTheForkPointIsTheForks(editsTheResult: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let parent = try await Session(
                log: directory.path("parent.jsonl.gz"), cassette: try Cassette(directory: directory.path("cassette"), mode: .all),
                upstream: server.baseURL("refund"), fork: nil)
            try await parent.drive()
            let parentEvents = try await parent.finish()

            // Fork after step 0, whose reply proposed the proxied lookup.
            let end = try #require(parentEvents.lastIndex { $0.event.kind == "step_ended" && $0.event.step == 0 })
            let lookupId = try #require(
                parentEvents.compactMap { recorded -> String? in
                    if case .toolIntended(let intent) = recorded.event.payload { return intent.callId }
                    return nil
                }.first)
            let edits = editsTheResult ? [ForkEdit(kind: .result, callId: lookupId, value: ["status": "lost"])] : []
            let forked = RunForked(parentRunId: "run-parent", parentHead: parentEvents[end].hash, step: 0, edits: edits)
            let fork = try RecordedFork(
                prefix: parentEvents[...end].map(\.event), forked: forked,
                cassette: try Cassette(directory: directory.path("cassette"), mode: .none))
            let session = try await Session(
                log: directory.path("fork.jsonl.gz"), cassette: fork.cassette, upstream: server.baseURL("refund"), fork: fork)
            try await session.drive()
            let events = try await session.finish().map(\.event)
            #expect(!FileManager.default.fileExists(atPath: directory.path("fork.jsonl.gz.fork-prefix")))

            var state = RunState()
            for event in events { _ = RunState.reduce(into: &state, event) }
            #expect(state.anomalies.isEmpty, "\(state.anomalies.map(\.message))")
            #expect(state.forked?.parentRunId == "run-parent")
            // The proxy's verdict and result at the fork point are in the fork, once.
            let lookup = try #require(state.calls.first)
            #expect(lookup.tool == "lookup_order" && lookup.verdict?.verdict == .allow)
            #expect(lookup.results.map(\.durationUs) == [1200])
            // With an edit, the result is what the model was shown, not what the proxy's server said.
            #expect(lookup.results.last?.output == (editsTheResult ? ["status": "lost"] : ["status": "delivered"]))
            let verdicts = events.filter { $0.kind == "verdict_given" }
            #expect(verdicts.count == 1 && (verdicts.first?.step ?? 0) >= 1, "judged after the fork point, in the fork")
            #expect(state.stop?.reason == .success)
            #expect(try LogVerifier.verify(path: directory.path("fork.jsonl.gz")).isIntact)
        }
    }
}
