import Foundation
import Interop
import TestSupport
import TestTags
import Testing
import TraceCore

/// The OTLP/HTTP protobuf bodies `agent-eval collect` and `record` take in, decoded by the hand
/// decoder into the OTLP/JSON the importer maps.
@Suite("OTLP protobuf bodies", .ownThread)
struct OTLPProtobufTests {
    /// One trace's `count` spans, each in a scope of its own (as an exporter batching by
    /// instrumentation library sends them), in one resource.
    static func scattered(_ count: Int) -> JSONValue {
        let scopes: [JSONValue] = (0..<count).map { index in
            let span: JSONValue = [
                "traceId": .string(String(repeating: "ab", count: 16)), "spanId": .string(String(format: "%016x", index + 1)),
                "name": "execute_tool", "startTimeUnixNano": "1790000000000000000", "endTimeUnixNano": "1790000000000001000",
            ]
            return ["scope": ["name": .string("lib-\(index)")], "spans": [span]]
        }
        return ["resourceSpans": [["scopeSpans": .array(scopes)]]]
    }

    @Test("one trace's spans over many scopes decode in linear time: ten times the scopes costs well under thirty times the time")
    func scopesScaleLinearly() throws {
        let small = Self.scattered(2_000)
        let large = Self.scattered(20_000)
        let read = try ReceivedTraces(request: large)
        #expect(read.traces.count == 1 && read.traces.first?.spanCount == 20_000)
        #expect(read.traces.first?.request["resourceSpans"]?.arrayValue?.count == 20_000)
        func fastest(_ request: JSONValue) throws -> Double {
            try (0..<3).map { _ in try seconds { _ = try ReceivedTraces(request: request) } }.min() ?? 0
        }
        let ratio = try fastest(large) / fastest(small)
        #expect(ratio < 30, "20,000 scopes took \(ratio)× the time of 2,000")
    }

    @Test(
        "the official encoder's protobuf request gives the runs its OTLP/JSON gives, and is kept per trace as importable OTLP/JSON",
        .tags(.python), .needsPython)
    func decodesOfficialEncoding() async throws {
        let scratch = try TemporaryDirectory("agent-eval-otlp-protobuf")
        defer { scratch.remove() }
        try await runPython("otel_traces.py", [scratch.url.path])
        let body = Array(try Data(contentsOf: scratch.url.appendingPathComponent("genai.otlp.pb")))
        let request = try OTLPProtobuf.traceRequest(body)
        let decoded = scratch.path("decoded.otlp.json")
        try Data(JSONWriter.encode(request)).write(to: URL(fileURLWithPath: decoded))
        let (fromProtobuf, protobufStates) = try await importRuns([decoded])
        let (fromJSON, jsonStates) = try await importRuns([scratch.path("genai.otlp.json")])
        #expect(fromProtobuf.importedCount == 2 && fromJSON.importedCount == 2)
        #expect(protobufStates.map(Trajectory.init) == jsonStates.map(Trajectory.init))
        #expect(protobufStates.map(\.decisions.count) == jsonStates.map(\.decisions.count))
        #expect(protobufStates.map(\.usage.inputTokens) == jsonStates.map(\.usage.inputTokens))
        #expect(protobufStates.map { $0.start?.tools.map(\.name) ?? [] } == jsonStates.map { $0.start?.tools.map(\.name) ?? [] })
        #expect(fromProtobuf.runs.map(\.warnings) == fromJSON.runs.map(\.warnings))

        // Split by trace, each trace's request alone reads back as that trace's run.
        let received = try ReceivedTraces(request: request)
        #expect(received.traces.count == 2 && received.unidentified == 0)
        let original = try JSONParser.parse(Array(try Data(contentsOf: scratch.url.appendingPathComponent("genai.otlp.json"))))
        let spansInJSON = (original["resourceSpans"]?.arrayValue ?? []).flatMap { $0["scopeSpans"]?.arrayValue ?? [] }
            .reduce(0) { $0 + ($1["spans"]?.arrayValue?.count ?? 0) }
        #expect(received.spanCount == spansInJSON)
        for (index, trace) in received.traces.enumerated() {
            let alone = scratch.path("trace-\(index).otlp.json")
            try Data(JSONWriter.encode(trace.request)).write(to: URL(fileURLWithPath: alone))
            let (outcome, states) = try await importRuns([alone])
            #expect(outcome.importedCount == 1)
            #expect(states.map(Trajectory.init) == [Trajectory(jsonStates[index])])
        }
    }

    @Test("a double attribute that is NaN or infinite reads as protobuf's JSON mapping writes it, a string, not null")
    func nonFiniteDoubles() throws {
        /// A length-delimited field.
        func field(_ number: UInt8, _ bytes: [UInt8]) -> [UInt8] {
            var length: [UInt8] = []
            var left = bytes.count
            repeat {
                length.append(UInt8(left & 0x7F) | (left >= 0x80 ? 0x80 : 0))
                left >>= 7
            } while left > 0
            return [number << 3 | 2] + length + bytes
        }
        func fixed64(_ number: UInt8, _ bits: UInt64) -> [UInt8] {
            [number << 3 | 1] + (0..<8).map { UInt8(truncatingIfNeeded: bits >> (8 * $0)) }
        }
        func attribute(_ key: String, _ value: Double) -> [UInt8] {
            field(9, field(1, Array(key.utf8)) + field(2, fixed64(4, value.bitPattern)))
        }
        let span =
            field(1, [UInt8](repeating: 0xAB, count: 16)) + field(2, [UInt8](repeating: 0x01, count: 8)) + field(5, Array("chat m".utf8))
            + fixed64(7, 1_790_000_000_000_000_000) + fixed64(8, 1_790_000_000_500_000_000) + attribute("nan", .nan)
            + attribute("up", .infinity) + attribute("down", -.infinity) + attribute("plain", 0.5)
        let body = field(1, field(2, field(2, span)))
        let request = try OTLPProtobuf.traceRequest(body)
        let decoded = request["resourceSpans"]?.arrayValue?.first?["scopeSpans"]?.arrayValue?.first?["spans"]?.arrayValue?.first
        let values = (decoded?["attributes"]?.arrayValue ?? []).map { ($0["key"]?.stringValue ?? "", $0["value"]?["doubleValue"]) }
        #expect(values.map(\.0) == ["nan", "up", "down", "plain"])
        #expect(values.map(\.1) == ["NaN", "Infinity", "-Infinity", 0.5])
    }

    @Test("a body cut short, one with a wire type no trace message has, and values nested past the limit are errors naming the byte")
    func hostileBodies() throws {
        // A request holding one tool span with two string attributes, encoded by hand.
        func attribute(_ key: String, _ value: String) -> [UInt8] {
            Field.bytes(9, Field.bytes(1, Array(key.utf8)) + Field.bytes(2, Field.bytes(1, Array(value.utf8))))
        }
        let span =
            Field.bytes(1, [UInt8](repeating: 0xAB, count: 16)) + Field.bytes(2, [UInt8](repeating: 0xCD, count: 8))
            + Field.bytes(5, Array("execute_tool ping".utf8)) + attribute("gen_ai.operation.name", "execute_tool")
            + attribute("gen_ai.tool.name", "ping")
        let whole = Field.bytes(1, Field.bytes(2, Field.bytes(2, span)))
        let request = try OTLPProtobuf.traceRequest(whole)
        let spans = try ReceivedTraces(request: request).traces.first?.spans ?? []
        #expect(spans.count == 1)
        #expect(spans.first?.traceId == String(repeating: "ab", count: 16))
        #expect(spans.first?.string("gen_ai.tool.name") == "ping")
        #expect(spans.first?.operation == .tool)

        for cut in [whole.count - 1, whole.count / 2, 3] {
            #expect {
                try OTLPProtobuf.traceRequest(Array(whole.prefix(cut)))
            } throws: { error in
                "\(error)".contains("cut short") && "\(error)".contains("at byte")
            }
        }
        #expect {
            try OTLPProtobuf.traceRequest([0x0B, 0x00])  // field 1, wire type 3 (a group)
        } throws: { error in
            "\(error)".contains("wire type 3") && "\(error)".contains("at byte 0")
        }
        // An attribute value of lists in lists, 100 deep: refused, not a stack overflow.
        var value = Field.bytes(1, Array("leaf".utf8))
        for _ in 0..<100 { value = Field.bytes(5, Field.bytes(1, value)) }
        let deepAttribute = Field.bytes(9, Field.bytes(1, Array("deep".utf8)) + Field.bytes(2, value))
        let deep = Field.bytes(1, Field.bytes(2, Field.bytes(2, span + deepAttribute)))
        #expect {
            try OTLPProtobuf.traceRequest(deep)
        } throws: { error in
            "\(error)".contains("nest deeper than \(OTLPProtobuf.maxDepth) levels")
        }
    }

    /// Protobuf's length-delimited fields, for bodies made by hand.
    enum Field {
        static func bytes(_ number: Int, _ content: [UInt8]) -> [UInt8] {
            varint(UInt64(number << 3 | 2)) + varint(UInt64(content.count)) + content
        }

        static func varint(_ value: UInt64) -> [UInt8] {
            var value = value
            var bytes: [UInt8] = []
            while value >= 0x80 {
                bytes.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            return bytes + [UInt8(value)]
        }
    }
}
