import Foundation
public import Interop
import Synchronization
import TraceCore
import TraceLog

/// The OpenTelemetry spans a recorded command exports (`agent-eval record` points its
/// `OTEL_EXPORTER_OTLP_ENDPOINT` at the gateway), merged into the run the gateway records
/// (docs/record.md, "OpenTelemetry spans"):
///
/// - a **model span** (`chat`, an LLM span) is the gateway's own model call seen from inside the
///   agent: it matches a recorded answer by its response id, or else by time (the span covers
///   the exchange), and adds nothing — the call is recorded once, from the wire. A model span
///   that matches no recorded answer is a call that did not pass through the gateway (a client
///   with its base URL set in code): it is counted, said in the summary, and kept with the spans;
/// - a **tool span** of a call the model proposed and whose result is not recorded yet gives that
///   result its measured duration and its error (the result itself still comes from what the
///   agent sends back to the model); at the end of the run it records the result of a call the
///   agent never sent back. A tool span of a call that no model proposed (a tool the agent's own
///   code runs) is recorded as a call of its own, in a step of its own (`format: otlp.span`). A
///   tool span that comes after its call's result was recorded is counted as late;
/// - every span but the matched model spans is stored in the log as it came (content
///   `application/vnd.otlp.spans+json`), so nothing the exporter was told is kept is lost.
extension ExchangeRecorder: SpanSink {
    /// What became of the spans.
    public struct SpanCounts: Sendable, Hashable {
        public var spans = 0
        /// Model spans that match a recorded answer (not recorded again).
        public var modelMatched = 0
        /// Model spans that match none: calls that did not pass through the gateway.
        public var modelUnmatched = 0
        /// Tool spans that gave a proposed call its duration and error.
        public var toolTimed = 0
        /// Tool spans recorded as calls no model proposed.
        public var toolCalls = 0
        /// Tool spans that came after their call's result was recorded.
        public var toolLate = 0
    }

    /// The spans so far.
    public var spanCounts: SpanCounts { state.withLock { $0.spanCounts } }

    /// `content_stored`'s media type for the spans kept.
    public static let spansMediaType = "application/vnd.otlp.spans+json"

    public func keep(_ received: ReceivedTraces) async throws -> Int {
        let spans = received.traces.flatMap(\.spans)
        // A tool span for a call whose model answer is still being recorded waits for it, at
        // most a second (as a proxy's call does).
        let toolCalls = spans.compactMap(\.toolCall)
        if !toolCalls.isEmpty {
            for _ in 0..<100 {
                let settled = state.withLock { state in
                    state.inFlight == 0 || toolCalls.allSatisfy { Self.openCall(for: $0, state: state) != nil }
                }
                if settled { break }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        let at = now()
        try state.withLock { state in
            let recorder = try recorder(for: nil, state: &state, atUs: at)
            guard recorder.state.stop == nil else { return }
            var kept: [JSONValue] = []
            var counts = state.spanCounts
            counts.spans += spans.count
            for span in spans {
                switch span.operation {
                case .chat:
                    if Self.matchesExchange(span, state: state) {
                        counts.modelMatched += 1
                        continue
                    }
                    counts.modelUnmatched += 1
                case .tool:
                    guard let call = span.toolCall else { break }
                    state.toolSpansSeen += 1
                    if let open = Self.openCall(for: call, state: state) {
                        state.spanResults[open] = call
                        counts.toolTimed += 1
                    } else if let id = call.callId, recorder.state.call(id: id) != nil {
                        counts.toolLate += 1
                    } else {
                        clock.now = at
                        try recordUnproposed(call, span: span, recorder: recorder, state: &state)
                        counts.toolCalls += 1
                    }
                case .agent, .other:
                    break
                }
                kept.append(span.record)
            }
            state.spanCounts = counts
            if !kept.isEmpty {
                clock.now = at
                let request: JSONValue = ["resourceSpans": [["scopeSpans": [["spans": .array(kept)]]]]]
                _ = try store(
                    ContentStored(bytes: JSONWriter.encode(request), mediaType: Self.spansMediaType), recorder: recorder, state: &state)
            }
            try recorder.writer.flush(sync: false)
        }
        return spans.count
    }

    /// Before a request's results are recorded: when the command sends tool spans, waits (at
    /// most `toolSpanWaitMs`) for those of the calls whose results the request carries, so that
    /// the results are recorded with their measured duration and error. A command that sends
    /// spans but no tool spans (a model client's instrumentation alone) pays the wait once.
    func awaitToolSpans(for exchange: Exchange) async {
        let view = ModelRequestView(api: exchange.api, body: exchange.body)
        let ids = view.results.map(\.callId)
        guard !ids.isEmpty else { return }
        // Waits once the command has sent tool spans — or, the first time results come back
        // after spans of any kind came, once, to learn whether it sends tool spans at all.
        let isProbe = state.withLock { state in
            let isProbe = state.toolSpansSeen == 0 && state.spanCounts.spans > 0 && !state.probedToolSpans
            if isProbe { state.probedToolSpans = true }
            return isProbe
        }
        for _ in 0..<(Self.toolSpanWaitMs / 10) {
            let waiting = state.withLock { state in
                (state.toolSpansSeen > 0 || isProbe)
                    && ids.contains { id in
                        state.spanResults[id] == nil && state.openCallOwner[id]?.isEmpty == false
                            && !state.proxiedTools.contains(Self.openTool(id, state: state) ?? "")
                    }
            }
            if !waiting { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// How long a request waits for the tool spans of the results it carries.
    static let toolSpanWaitMs = 500

    /// The source id of the open call a tool span ran: the one with its call id, else the oldest
    /// open call of its tool (with the same arguments, when the span has them).
    static func openCall(for call: SpanToolCall, state: borrowing State) -> String? {
        if let id = call.callId {
            return state.openCallOwner[id]?.isEmpty == false && state.spanResults[id] == nil ? id : nil
        }
        let arguments: JSONValue? = call.arguments == nil ? nil : call.argumentsValue
        var best: (id: String, atUs: Int)?
        for conversation in state.conversations.values {
            for (id, open) in conversation.openCalls where open.tool == call.name && state.spanResults[id] == nil {
                if let best, best.atUs <= open.atUs { continue }
                if let arguments, let proposed = state.recorder?.state.call(id: open.logId)?.arguments,
                    !proposed.equals(byValue: arguments)
                {
                    continue
                }
                best = (id, open.atUs)
            }
        }
        return best?.id
    }

    private static func openTool(_ id: String, state: borrowing State) -> String? {
        guard let number = state.openCallOwner[id]?.first else { return nil }
        return state.conversations[number]?.openCalls[id]?.tool
    }

    /// Whether a model span is an answer the gateway recorded: by response id, else by time.
    static func matchesExchange(_ span: Span, state: borrowing State) -> Bool {
        if let id = span.responseId, state.replyIds.contains(id) { return true }
        // The span runs around the exchange: it starts before the gateway saw the request and
        // ends after the answer (a few milliseconds' slack for the clocks of two processes).
        let slackUs = 5_000
        return state.exchangeTimes.contains { $0.startUs >= span.startUs - slackUs && $0.endUs <= span.endUs + slackUs }
    }

    /// A tool call no model proposed, recorded from its span: the call, its intent, its result.
    private func recordUnproposed(_ call: SpanToolCall, span: Span, recorder: RunRecorder, state: inout State) throws {
        state.spanCallCount += 1
        var id = call.callId ?? "span-\(state.spanCallCount)"
        if recorder.state.call(id: id) != nil { id = "span-\(state.spanCallCount)" }
        let arguments = call.argumentsValue
        try recorder.record(
            .decisionMade(
                DecisionMade(
                    raw: JSONWriter.encodeString(span.record), format: "otlp.span",
                    outcome: .valid(.toolCalls([ToolCall(id: id, name: call.name, arguments: arguments)])))))
        try recorder.record(.toolIntended(ToolIntended(callId: id, tool: call.name, arguments: arguments, attempt: 1)))
        try recordResult(callId: id, tool: call.name, from: call, text: nil, recorder: recorder, state: &state)
        try recorder.endStep()
    }

    /// A call's result from its span (and the text the agent sent back, when it did).
    func recordResult(callId: String, tool: String, from call: SpanToolCall, text: String?, recorder: RunRecorder, state: inout State)
        throws
    {
        let resultText = text ?? call.result.map { $0.stringValue ?? JSONWriter.encodeString($0) }
        var imported = ImportedResult.fromContent(resultText ?? "", isError: call.error != nil, durationUs: call.durationUs)
        if resultText == nil { imported.output = nil }
        if let error = call.error { imported.error = error }
        var output = imported.output
        var contentHash: String?
        if let value = output {
            let bytes = JSONWriter.encode(value)
            if bytes.count > Self.inlineOutputBytes || value.nests(deeperThan: JSONValue.recordableDepth) {
                contentHash = try store(ContentStored(bytes: bytes, mediaType: "application/json"), recorder: recorder, state: &state)
                output = nil
            }
        }
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: callId, tool: tool, attempt: 1, status: imported.status, output: output, contentHash: contentHash,
                    error: imported.error, durationUs: call.durationUs)))
    }

    /// At the end: the calls the agent ran (their spans say so) but never sent back to the model.
    func recordSpanResultsLeft(recorder: RunRecorder, state: inout State) throws {
        var left: [(atUs: Int, id: String, logId: String, tool: String, call: SpanToolCall)] = []
        for conversation in state.conversations.values {
            for (id, open) in conversation.openCalls {
                if let call = state.spanResults[id] { left.append((open.atUs, id, open.logId, open.tool, call)) }
            }
        }
        guard !left.isEmpty else { return }
        for entry in left.sorted(by: { ($0.atUs, $0.logId) < ($1.atUs, $1.logId) }) {
            state.spanResults[entry.id] = nil
            try recordResult(callId: entry.logId, tool: entry.tool, from: entry.call, text: nil, recorder: recorder, state: &state)
        }
        try recorder.endStep()
    }
}
