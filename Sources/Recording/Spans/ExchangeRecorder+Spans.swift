import AgentRuntime
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
///   agent: it matches a recorded exchange by time (it was running when the gateway received the
///   request), one span an exchange, and adds nothing — the call is recorded once, from the wire. A model span
///   that matches no recorded answer is a call that did not pass through the gateway (a client
///   with its base URL set in code): it is counted, said in the summary, and kept with the spans;
/// - a **tool span** of a call the model proposed and whose result is not recorded yet gives that
///   result its measured duration and its error (the result itself still comes from what the
///   agent sends back to the model); at the end of the run it records the result of a call the
///   agent never sent back. A tool span of a call that no model proposed (a tool the agent's own
///   code runs) is recorded as a call of its own, in a step of its own (`format: otlp.span`). A
///   tool span that comes after its call's result was recorded is counted as late;
/// - every span but the matched model spans is stored in the log as it came, with its resource
///   and scope (content `application/vnd.otlp.spans+json`), flushed as the log's steps are.
///   Spans that come before the first model answer wait for it (the run's start names that
///   answer's goal, model and tools); a span sent again (an exporter's retry) is merged once.
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
    public var spanCounts: SpanCounts { state.withLock { $0.spans.spanCounts } }

    /// `content_stored`'s media type for the spans kept.
    public static let spansMediaType = "application/vnd.otlp.spans+json"

    public func keep(_ received: ReceivedTraces) async throws -> Int {
        // A tool span for a call whose model answer is still being recorded waits for it, at
        // most a second (as a proxy's call does).
        // Each trace's spans read once, for the wait and the merge.
        let arrived = received.traces.map { (trace: $0, spans: $0.spans) }
        let toolSpans = arrived.flatMap(\.spans).filter { $0.operation == .tool }
        if !toolSpans.isEmpty {
            await state.wait(within: .seconds(1), on: clock) { [self] state in
                state.inFlight == 0
                    || onRunClock(toolSpans).allSatisfy { span in
                        span.toolCall.map { Self.openCall(for: $0, startUs: span.startUs, state: state) != nil } ?? true
                    }
            }
        }
        let at = now()
        try state.withLock { state in
            // A fork past its fork point runs on its parent's clock (`forkShift`): its spans too,
            // moved as the lock is taken (the fork may have been made while they waited).
            let traces = arrived.map { (trace: $0.trace, spans: onRunClock($0.spans)) }
            // Before the first model answer the run has not begun (its start names that answer's
            // goal, model and tools): the spans wait for it.
            guard let recorder = state.recorder else {
                state.spans.earlySpans += traces
                return
            }
            guard recorder.state.stop == nil else { return }
            try merge(traces, at: at, recorder: recorder, state: &state)
        }
        return received.spanCount
    }

    /// `spans` on the run's clock: moved back by a fork's shift (`forkShift`), when there is one.
    func onRunClock(_ spans: [Span]) -> [Span] {
        let shift = forkShift.load(ordering: .relaxed)
        guard shift != 0 else { return spans }
        return spans.map { span in
            var span = span
            span.startUs -= shift
            span.endUs -= shift
            return span
        }
    }

    /// Merges spans into the run, by the rules above; stores what is kept.
    func merge(_ traces: [(trace: ReceivedTraces.Trace, spans: [Span])], at: Int, recorder: RunRecorder, state: inout State) throws {
        var counts = state.spans.spanCounts
        for (trace, spans) in traces {
            var kept = Set<String>()
            for span in spans {
                // An exporter that resends a request sends its spans again: each is merged once.
                guard state.spans.mergedSpanIds.insert(span.spanId).inserted else { continue }
                counts.spans += 1
                var keep = true
                switch span.operation {
                case .chat:
                    // A model span may come before the gateway has recorded its answer: one that
                    // matches none yet waits for the answers to come, and is told at the end.
                    keep = false
                    if Self.matchExchange(span, state: &state) {
                        counts.modelMatched += 1
                    } else if let request = trace.request(keeping: { $0 == span.spanId }) {
                        state.spans.waitingModelSpans.append((span, request))
                    }
                case .tool:
                    guard let call = span.toolCall else { break }
                    // A span around (or inside) a tool span of the same tool already merged: a
                    // framework's layer and the tool's own, one call.
                    let isLayer =
                        span.parentId.flatMap { state.spans.toolLayers[$0] } == call.name
                        || state.spans.toolLayerParents[span.spanId] == call.name
                    state.spans.toolLayers[span.spanId] = call.name
                    if let parent = span.parentId { state.spans.toolLayerParents[parent] = call.name }
                    if isLayer { break }
                    state.spans.toolSpansSeen += 1
                    if let open = Self.openCall(for: call, startUs: span.startUs, state: state) {
                        state.spans.spanResults[open] = call
                        counts.toolTimed += 1
                    } else if Self.isRecordedAlready(call, span: span, recorder: recorder, state: state) {
                        counts.toolLate += 1
                    } else if let forkPoint = fork?.prefix.last?.timeUs, span.startUs <= forkPoint {
                        // A call of a fork's program from before its fork point: the copied
                        // prefix holds the parent's, and this one is its retracing.
                        counts.toolLate += 1
                    } else {
                        recorder.timeUs = at
                        try recordUnproposed(call, span: span, recorder: recorder, state: &state)
                        counts.toolCalls += 1
                    }
                case .agent, .other:
                    break
                }
                if keep { kept.insert(span.spanId) }
            }
            if let request = trace.request(keeping: kept.contains) {
                recorder.timeUs = at
                _ = try store(
                    ContentStored(bytes: JSONWriter.encode(request), mediaType: Self.spansMediaType), recorder: recorder, state: &state)
            }
        }
        state.spans.spanCounts = counts
        try recorder.writer.flush(sync: false)
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
            let isProbe = state.spans.toolSpansSeen == 0 && state.spans.spanCounts.spans > 0 && !state.spans.probedToolSpans
            if isProbe { state.spans.probedToolSpans = true }
            return isProbe
        }
        await state.wait(within: Self.toolSpanWait, on: clock) { state in
            !(state.spans.toolSpansSeen > 0 || isProbe)
                || !ids.contains { id in
                    state.spans.spanResults[id] == nil && state.book.openCallOwner[id]?.isEmpty == false
                        && !state.proxying.proxiedTools.contains(Self.openTool(id, state: state) ?? "")
                }
        }
    }

    /// How long a request waits for the tool spans of the results it carries.
    static let toolSpanWait = Duration.milliseconds(500)

    /// After an answer is recorded: the model spans that came before it and match it.
    func matchWaitingModelSpans(state: inout State) {
        guard !state.spans.waitingModelSpans.isEmpty else { return }
        var matched = 0
        state.spans.waitingModelSpans = state.spans.waitingModelSpans.filter { waiting in
            guard Self.matchExchange(waiting.span, state: &state) else { return true }
            matched += 1
            return false
        }
        state.spans.spanCounts.modelMatched += matched
    }

    /// At the end: the model spans no answer matched are calls that did not pass through the
    /// gateway; counted, and stored with the spans.
    func storeUnmatchedModelSpans(recorder: RunRecorder, state: inout State) throws {
        guard !state.spans.waitingModelSpans.isEmpty else { return }
        let batches = state.spans.waitingModelSpans.flatMap { $0.request["resourceSpans"]?.arrayValue ?? [] }
        state.spans.spanCounts.modelUnmatched += state.spans.waitingModelSpans.count
        state.spans.waitingModelSpans = []
        let request: JSONValue = ["resourceSpans": .array(batches)]
        _ = try store(ContentStored(bytes: JSONWriter.encode(request), mediaType: Self.spansMediaType), recorder: recorder, state: &state)
    }

    /// How far apart two processes' clocks may be when a span is compared with the gateway's times.
    static let clockSlackUs = SpanLedger.clockSlackUs

    /// The source id of the open call a tool span ran: the one with its call id, else the oldest
    /// open call of its tool proposed before the span started — with the same arguments when the
    /// span has them and one such call is open, else any. Calls a proxy judged are the proxy's.
    static func openCall(for call: SpanToolCall, startUs: Int, state: borrowing State) -> String? {
        func isFree(_ id: String, logId: String, tool: String) -> Bool {
            state.spans.spanResults[id] == nil && !state.proxying.proxiedTools.contains(tool)
                && !state.proxying.proxiedCalls.contains(logId)
        }
        if let id = call.callId {
            guard let number = state.book.openCallOwner[id]?.first, let open = state.book.conversations[number]?.openCalls[id] else {
                return nil
            }
            return isFree(id, logId: open.logId, tool: open.tool) ? id : nil
        }
        let arguments: JSONValue? = call.arguments == nil ? nil : call.argumentsValue
        var sameArguments: (id: String, atUs: Int)?
        var sameTool: (id: String, atUs: Int)?
        for conversation in state.book.conversations.values {
            for (id, open) in conversation.openCalls
            where open.tool == call.name && open.atUs <= startUs + clockSlackUs && isFree(id, logId: open.logId, tool: open.tool) {
                if sameTool.map({ $0.atUs > open.atUs }) ?? true { sameTool = (id, open.atUs) }
                if let arguments, let proposed = state.recorder?.state.call(id: open.logId)?.arguments, proposed.equals(byValue: arguments),
                    sameArguments.map({ $0.atUs > open.atUs }) ?? true
                {
                    sameArguments = (id, open.atUs)
                }
            }
        }
        return (sameArguments ?? sameTool)?.id
    }

    /// Whether a tool span is of a call whose result is recorded already: by its call id, or (a
    /// span without one) a call of its tool proposed before the span started whose result was
    /// recorded after it started.
    static func isRecordedAlready(_ call: SpanToolCall, span: Span, recorder: RunRecorder, state: borrowing State) -> Bool {
        if let id = call.callId { return recorder.state.call(id: id) != nil }
        return state.spans.hasRecordedResult(ofTool: call.name, spanStartUs: span.startUs)
    }

    private static func openTool(_ id: String, state: borrowing State) -> String? {
        guard let number = state.book.openCallOwner[id]?.first else { return nil }
        return state.book.conversations[number]?.openCalls[id]?.tool
    }

    static func matchExchange(_ span: Span, state: inout State) -> Bool { state.spans.matchExchange(span) }

    /// A tool call no model proposed, recorded from its span: the call, its intent, its result.
    private func recordUnproposed(_ call: SpanToolCall, span: Span, recorder: RunRecorder, state: inout State) throws {
        state.spans.spanCallCount += 1
        var id = call.callId ?? "span-\(state.spans.spanCallCount)"
        if recorder.state.call(id: id) != nil { id = "span-\(state.spans.spanCallCount)" }
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
        if let edited = fork?.editedResult(callId) {
            // The model was shown the fork's edit: that is the result, the span gives its duration.
            try recordCompleted(callId: callId, tool: tool, edited, durationUs: call.durationUs, recorder: recorder, state: &state)
            return
        }
        let resultText = text ?? call.result.map { $0.stringValue ?? JSONWriter.encodeString($0) }
        var imported = ImportedResult.fromContent(resultText ?? "", isError: call.error != nil, durationUs: call.durationUs)
        if resultText == nil { imported.output = nil }
        if let error = call.error { imported.error = error }
        try recordCompleted(callId: callId, tool: tool, imported, durationUs: call.durationUs, recorder: recorder, state: &state)
    }

    /// At the end: the calls the agent ran (their spans say so) but never sent back to the model,
    /// and the model spans that matched no answer.
    func recordSpanResultsLeft(recorder: RunRecorder, state: inout State) throws {
        try storeUnmatchedModelSpans(recorder: recorder, state: &state)
        var left: [(atUs: Int, id: String, logId: String, tool: String, call: SpanToolCall)] = []
        for conversation in state.book.conversations.values {
            for (id, open) in conversation.openCalls {
                if let call = state.spans.spanResults[id] { left.append((open.atUs, id, open.logId, open.tool, call)) }
            }
        }
        guard !left.isEmpty else { return }
        for entry in left.sorted(by: { ($0.atUs, $0.logId) < ($1.atUs, $1.logId) }) {
            state.spans.spanResults[entry.id] = nil
            try recordResult(callId: entry.logId, tool: entry.tool, from: entry.call, text: nil, recorder: recorder, state: &state)
        }
        try recorder.endStep()
    }
}
