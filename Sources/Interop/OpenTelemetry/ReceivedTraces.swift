public import TraceCore

/// One OTLP export request as a receiver takes it in (`agent-eval collect`, the gateway of
/// `agent-eval record`): its spans read by the importer's mapping, split by trace, each trace
/// with the request cut down to its own spans (resources and scopes kept), which is what the
/// collector keeps and the importer reads back.
public struct ReceivedTraces: Sendable {
    public struct Trace: Sendable {
        public var traceId: String
        /// An OTLP/JSON `ExportTraceServiceRequest` holding this trace's spans only.
        public var request: JSONValue
        public var spanCount: Int

        /// The spans, read by the importer's mapping (when asked: a collector only keeps them).
        /// Reading them cannot fail: `init(request:)`, which makes every trace, refuses a request
        /// holding a span whose time is none (`SpanReader.checkTimes`), the one error reading has.
        public var spans: [Span] {
            (try? SpanReader.otlpSpans(inBatches: request["resourceSpans"]?.arrayValue ?? []).spans) ?? []
        }

        /// The request with only the spans `keep` says yes to (resources and scopes kept; a scope
        /// left with none is left out); nil when none is kept.
        public func request(keeping keep: (String) -> Bool) -> JSONValue? {
            var batches: [JSONValue] = []
            for batch in request["resourceSpans"]?.arrayValue ?? [] {
                var scopes: [JSONValue] = []
                for scope in batch["scopeSpans"]?.arrayValue ?? [] {
                    let spans = (scope["spans"]?.arrayValue ?? []).filter { SpanReader.id($0["spanId"]).map(keep) ?? false }
                    guard !spans.isEmpty else { continue }
                    var cut = scope.objectValue ?? JSONObject()
                    cut["spans"] = .array(spans)
                    scopes.append(.object(cut))
                }
                guard !scopes.isEmpty else { continue }
                var cut = batch.objectValue ?? JSONObject()
                cut["scopeSpans"] = .array(scopes)
                batches.append(.object(cut))
            }
            return batches.isEmpty ? nil : ["resourceSpans": .array(batches)]
        }
    }

    /// The traces, in the order their first span comes in the request.
    public var traces: [Trace]
    /// Spans left out for want of a trace id (32 hex digits, as OTLP makes them) or a span id.
    public var unidentified: Int

    public var spanCount: Int { traces.reduce(0) { $0 + $1.spanCount } }

    /// Reads an OTLP/JSON request (what `OTLPProtobuf` makes of a protobuf body, too).
    public init(request: JSONValue) throws(ImportError) {
        // An empty object is an empty request (protobuf's JSON mapping leaves out empty lists),
        // as an empty protobuf body is.
        let isEmpty = request.objectValue?.isEmpty == true
        guard let batches = request["resourceSpans"]?.arrayValue ?? (isEmpty ? [] : nil) else {
            throw ImportError(.wrongFormat, "the request is not an OTLP ExportTraceServiceRequest: it has no \"resourceSpans\" list")
        }
        // Each trace's batches, gathered apart and made into its request once at the end:
        // appending to a request's list in place copied the list for every scope, quadratic in
        // the scopes (or resources) holding one trace's spans.
        var ids: [String] = []
        var gathered: [[JSONValue]] = []
        var counts: [Int] = []
        var index: [String: Int] = [:]
        var unidentified = 0
        for (batchIndex, batch) in batches.enumerated() {
            let scopeKey = batch["scopeSpans"] != nil ? "scopeSpans" : "instrumentationLibrarySpans"
            let scopes = try SpanReader.list(batch[scopeKey], at: "resourceSpans[\(batchIndex)].\(scopeKey)")
            for (scopeIndex, scope) in scopes.enumerated() {
                // This scope's spans, by trace.
                var byTrace: [(String, [JSONValue])] = []
                var slot: [String: Int] = [:]
                for span in try SpanReader.list(scope["spans"], at: "resourceSpans[\(batchIndex)].\(scopeKey)[\(scopeIndex)].spans") {
                    // A trace id names files (`collect`): 16 bytes as hex, nothing else.
                    guard let traceId = SpanReader.id(span["traceId"]), traceId.utf8.count == 32,
                        traceId.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
                        let spanId = SpanReader.id(span["spanId"])
                    else {
                        unidentified += 1
                        continue
                    }
                    // A time no log can hold refuses the request here, naming the span, instead of
                    // being kept and failing the trace's import later.
                    try SpanReader.checkTimes(of: span, span: spanId, trace: traceId)
                    if let at = slot[traceId] {
                        byTrace[at].1.append(span)
                    } else {
                        slot[traceId] = byTrace.count
                        byTrace.append((traceId, [span]))
                    }
                }
                for (traceId, spans) in byTrace {
                    var cutScope = scope.objectValue ?? JSONObject()
                    cutScope["spans"] = .array(spans)
                    var cutBatch = batch.objectValue ?? JSONObject()
                    cutBatch["instrumentationLibrarySpans"] = nil
                    cutBatch["scopeSpans"] = .array([.object(cutScope)])
                    if let at = index[traceId] {
                        counts[at] += spans.count
                        gathered[at].append(.object(cutBatch))
                    } else {
                        index[traceId] = ids.count
                        ids.append(traceId)
                        gathered.append([.object(cutBatch)])
                        counts.append(spans.count)
                    }
                }
            }
        }
        traces = ids.indices.map { at in
            Trace(traceId: ids[at], request: ["resourceSpans": .array(gathered[at])], spanCount: counts[at])
        }
        self.unidentified = unidentified
    }
}

/// What a span is, as the importer reads it: a model call, a tool call, an agent, or other.
public enum SpanOperation: Sendable, Hashable {
    case chat, tool, agent, other
}

extension Span {
    /// What the span is (the GenAI conventions, OpenLLMetry's or OpenInference's attributes).
    public var operation: SpanOperation {
        switch TraceImporter.operation(of: self) {
        case .chat: .chat
        case .tool: .tool
        case .agent: .agent
        case .other: .other
        }
    }

    /// A tool span's call, as the importer reads it; nil for another span.
    public var toolCall: SpanToolCall? {
        guard operation == .tool else { return nil }
        return SpanToolCall(
            name: TraceImporter.toolName(self) ?? name, callId: TraceImporter.toolCallId(self),
            arguments: TraceImporter.toolArguments(self),
            result: TraceImporter.toolResult(self), error: error ?? string("error.type"), durationUs: max(0, endUs - startUs))
    }

    /// A model call span's reply id (`gen_ai.response.id`, or OpenInference's response body's).
    public var responseId: String? { TraceImporter.responseId(self) }
}

/// A tool call as its span tells it.
public struct SpanToolCall: Sendable {
    public var name: String
    /// The model's id of the call, when the span names it.
    public var callId: String?
    /// The arguments as the span holds them (often a JSON string); nil when it does not.
    public var arguments: JSONValue?
    /// The result as the span holds it; nil when it does not (content capture off).
    public var result: JSONValue?
    /// The error the span ended with, if it did.
    public var error: String?
    /// How long the call took, end minus start.
    public var durationUs: Int

    /// The arguments as a call records them: a JSON string parsed, none as `{}` (text that does
    /// not parse is kept as the string, as imports keep it).
    public var argumentsValue: JSONValue {
        var ignored: [String] = []
        return TranscriptImporter.arguments(arguments, call: callId ?? name, at: "span", warnings: &ignored)
    }
}
