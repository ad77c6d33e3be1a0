import Interop
import Testing
import TraceCore

@testable import Recording

/// The recorder's span and proxy bookkeeping (`SpanLedger`, `ProxyRoster`), as values.
@Suite("Recorder parts")
struct RecorderPartsTests {
    static func span(startUs: Int, endUs: Int) -> Span {
        Span(traceId: "t", spanId: "s\(startUs)", parentId: nil, name: "chat", startUs: startUs, endUs: endUs, attributes: [:], record: [:])
    }

    @Test("a model span matches the gateway exchange whose request came while it ran (5 ms of clock slack), each exchange once")
    func exchangeMatching() {
        var ledger = SpanLedger()
        ledger.exchangeStarts = [1_000_000, 2_000_000]
        let first = ledger.matchExchange(Self.span(startUs: 999_000, endUs: 1_500_000))
        #expect(first)
        // The same exchange does not match twice.
        let again = ledger.matchExchange(Self.span(startUs: 999_000, endUs: 1_500_000))
        #expect(!again)
        // Within the slack after the span ended.
        let withinSlack = ledger.matchExchange(Self.span(startUs: 1_900_000, endUs: 1_996_000))
        #expect(withinSlack)
        #expect(ledger.exchangeStarts.isEmpty)
        ledger.exchangeStarts = [3_000_000]
        let late = ledger.matchExchange(Self.span(startUs: 3_006_000, endUs: 3_100_000))
        #expect(!late, "began after the request, past the slack")
    }

    @Test("a tool span without a call id is late when a call of its tool was proposed before it began and answered after")
    func lateToolSpans() {
        var ledger = SpanLedger()
        ledger.recentResults = [(tool: "lookup", proposedAtUs: 1_000_000, recordedAtUs: 2_000_000)]
        #expect(ledger.hasRecordedResult(ofTool: "lookup", spanStartUs: 1_500_000))
        #expect(!ledger.hasRecordedResult(ofTool: "refund", spanStartUs: 1_500_000))
        #expect(!ledger.hasRecordedResult(ofTool: "lookup", spanStartUs: 2_100_000), "began after the result was recorded")
        #expect(!ledger.hasRecordedResult(ofTool: "lookup", spanStartUs: 900_000), "began before the call was proposed")
    }

    @Test("a call a proxy judged keeps the model's call id when it matched one, else takes the next mcp-N; either is the proxy's")
    func judgedCalls() {
        var roster = ProxyRoster()
        let ids = [roster.judgedCall(proposed: nil), roster.judgedCall(proposed: "call_9"), roster.judgedCall(proposed: nil)]
        #expect(ids == ["mcp-1", "call_9", "mcp-2"])
        #expect(roster.proxiedCalls == ["mcp-1", "call_9", "mcp-2"])
    }
}
