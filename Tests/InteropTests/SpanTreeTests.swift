import Foundation
import Interop
import TestSupport
import TestTags
import Testing
import TraceCore

/// The shape of a trace's span tree, as hostile or broken exporters make it: deep nesting and
/// parent cycles. The importer resolves the tree once, in linear time, without recursion.
@Suite("Importing OpenTelemetry traces: deep span trees and parent cycles")
struct SpanTreeTests {
    /// OTLP/JSON of `spans` (id, parent id, name), each a GenAI chat span with a text reply,
    /// started one millisecond after the one before it.
    static func trace(_ spans: [(id: String, parent: String?, name: String)]) -> String {
        var text = #"{"resourceSpans": [{"scopeSpans": [{"spans": ["#
        for (index, span) in spans.enumerated() {
            let start = 1_790_000_000_000_000_000 + index * 1_000_000
            text += index == 0 ? "" : ","
            text +=
                #"{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "\#(span.id)", "parentSpanId": "\#(span.parent ?? "")", "#
                + #""name": "\#(span.name)", "startTimeUnixNano": "\#(start)", "endTimeUnixNano": "\#(start + 500_000)", "attributes": ["#
                + #"{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}, "#
                + #"{"key": "gen_ai.output.messages", "value": {"stringValue": "[{\"role\": \"assistant\", \"parts\": "#
                + #"[{\"type\": \"text\", \"content\": \"reply of \#(span.name)\"}]}]"}}]}"#
        }
        return text + "]}]}]}"
    }

    static func id(_ number: Int) -> String {
        let hex = String(number, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// A chain of `depth` spans, each the parent of the next.
    static func chain(_ depth: Int) -> String {
        trace((1...depth).map { (id($0), $0 == 1 ? nil : id($0 - 1), "chat \($0)") })
    }

    static func runs(_ text: String, in directory: TemporaryDirectory, _ name: String) throws -> [ImportedRun] {
        let path = try write(text, to: directory.url.path, name)
        return try Importer.runs(in: path, options: ImportOptions(format: .otlp)).map { try $0.get() }
    }

    @Test("nested spans import in linear time: ten times the depth costs well under thirty times the time")
    func nestingScalesLinearly() throws {
        try TemporaryDirectory.with { directory in
            let small = Self.chain(300)
            let large = Self.chain(3000)
            // Nested model-call spans are one call, read from the deepest.
            let run = try #require(try Self.runs(large, in: directory, "large.json").first)
            #expect(run.steps.count == 1)
            #expect(run.steps.first?.records.count == 3000)
            #expect(run.steps.first.map { JSONWriter.encodeString($0.raw).contains("reply of chat 3000") } == true)
            func fastest(_ text: String, _ name: String) throws -> Double {
                try (0..<3).map { _ in try seconds { _ = try Self.runs(text, in: directory, name) } }.min() ?? 0
            }
            let ratio = try fastest(large, "large.json") / fastest(small, "small.json")
            #expect(ratio < 30, "3000 nested spans took \(ratio)× the time of 300")
        }
    }

    @Test("a parent cycle and a span that is its own parent are reported, each span read as a root: not merged into one call")
    func parentCycles() throws {
        try TemporaryDirectory.with { directory in
            let spans: [(id: String, parent: String?, name: String)] = [
                (Self.id(1), Self.id(3), "chat a"), (Self.id(2), Self.id(1), "chat b"), (Self.id(3), Self.id(2), "chat c"),
                (Self.id(4), Self.id(4), "chat self"), (Self.id(5), Self.id(2), "chat under b"),
            ]
            let run = try #require(try Self.runs(Self.trace(spans), in: directory, "cycle.json").first)
            let cycle = try #require(run.warnings.first { $0.contains("name each other as parents") }, "\(run.warnings)")
            for id in 1...3 { #expect(cycle.contains(Self.id(id)), "\(cycle)") }
            #expect(!cycle.contains(Self.id(5)), "\(cycle)")
            #expect(run.warnings.contains("span \(Self.id(4)) (chat self) names itself as its parent: read as a root"), "\(run.warnings)")
            // a, b, c and self are calls of their own; the span under b is part of b's call.
            #expect(run.steps.count == 4, "\(run.steps.map(\.raw))")
            #expect(run.steps.map { $0.records.count } == [1, 2, 1, 1])

            // A cycle of 2,000 spans: reported, and as quick as any 2,000 spans.
            let ring = (1...2000).map { (Self.id($0), Self.id($0 == 1 ? 2000 : $0 - 1), "chat \($0)") }
            let big = try #require(try Self.runs(Self.trace(ring), in: directory, "ring.json").first)
            #expect(big.steps.count == 2000)
            #expect(
                big.warnings.contains { $0.hasPrefix("spans \(Self.id(1)) (chat 1), \(Self.id(2)) (chat 2),") }, "\(big.warnings.prefix(2))"
            )
        }
    }

    @Test("a chain of 100,000 nested spans imports: nothing recurses per level of the tree", .atScale, .tags(.scale))
    func deepChain() throws {
        try TemporaryDirectory.with { directory in
            let run = try #require(try Self.runs(Self.chain(100_000), in: directory, "deep.json").first)
            #expect(run.steps.count == 1)
            #expect(run.steps.first?.records.count == 100_000)
        }
    }
}
