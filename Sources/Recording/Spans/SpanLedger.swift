import Interop
import TraceCore

/// What the recorder knows of the command's OpenTelemetry spans (`ExchangeRecorder+Spans`), as
/// a value of its own: the counts, the tool spans waiting for their call's result, the
/// gateway's exchanges no model span matched yet, the spans merged.
struct SpanLedger {
    /// The command's OpenTelemetry spans (`ExchangeRecorder+Spans`): what became of them.
    var spanCounts = ExchangeRecorder.SpanCounts()
    /// Tool spans seen: once there are, a request waits for the spans of the results it carries.
    var toolSpansSeen = 0
    /// Whether a request waited once for tool spans that the command may not send at all.
    var probedToolSpans = false
    /// Tool spans of open calls, by the call's source id: their duration and error go into
    /// the result when it is recorded.
    var spanResults: [String: SpanToolCall] = [:]
    /// When the gateway received the requests of the answers recorded that no model span
    /// matched yet (the latest): a model span that matches one is the gateway's own call.
    var exchangeStarts: [Int] = []
    /// Calls recorded from tool spans that no model proposed (`span-N`).
    var spanCallCount = 0
    /// Spans that came before the run began: merged when it does.
    var earlySpans: [(trace: ReceivedTraces.Trace, spans: [Span])] = []
    /// Model spans that matched no recorded answer yet, each with its request (for storing).
    var waitingModelSpans: [(span: Span, request: JSONValue)] = []
    /// Every span merged, by id: a span sent again is merged once.
    var mergedSpanIds = Set<String>()
    /// Tool spans merged (span id → tool), and the parents they name (parent id → tool): a
    /// span around or inside one of the same tool is the same call.
    var toolLayers: [String: String] = [:]
    var toolLayerParents: [String: String] = [:]
    /// The latest results recorded from what the agent sent back: the tool, when the call was
    /// proposed and when its result was recorded (for tool spans without a call id that come late).
    var recentResults: [(tool: String, proposedAtUs: Int, recordedAtUs: Int)] = []

    /// How far apart two processes' clocks may be when a span is compared with the gateway's times.
    static let clockSlackUs = 5_000

    /// Whether a model span is an answer the gateway recorded: the span was running when the
    /// gateway received the exchange's request (the SDK opens it before it sends, and closes it
    /// once it has read the answer). Each recorded exchange matches one span. (The gateway does
    /// not read providers' response ids, so time is the one key; a call that bypassed the gateway
    /// at the very moment of a gateway request may take that request's match, and the gateway's
    /// own span is then the one counted as unmatched: the counts stay right.)
    mutating func matchExchange(_ span: Span) -> Bool {
        guard
            let index = exchangeStarts.firstIndex(where: {
                $0 >= span.startUs - Self.clockSlackUs && $0 <= span.endUs + Self.clockSlackUs
            })
        else { return false }
        exchangeStarts.remove(at: index)
        return true
    }

    /// Whether a tool span without a call id is of a call whose result was recorded already: a
    /// call of its tool proposed before the span started whose result was recorded after it
    /// started.
    func hasRecordedResult(ofTool tool: String, spanStartUs: Int) -> Bool {
        recentResults.contains {
            $0.tool == tool && $0.proposedAtUs <= spanStartUs + Self.clockSlackUs && $0.recordedAtUs + Self.clockSlackUs >= spanStartUs
        }
    }
}
