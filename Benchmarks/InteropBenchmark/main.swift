// `swift run -c release interop-benchmark [--runs N] [--write-protobuf FILE]`: the import rate of `agent-eval import`
// for a 10,000-span OTLP/JSON file and a 1,000-episode transcript file (both generated here,
// shaped like the tests' real inputs), as spans/s and messages/s (medians of N runs), and the
// process's peak memory after a 1,000- and a 20,000-episode transcript file (JSON Lines are
// streamed, so it should stay flat) and after the OTLP file; and the rate `collect` and `record` decode
// an OTLP/HTTP body at, protobuf against OTLP/JSON. docs/interop.md quotes the numbers.
import Foundation
import Interop
import TraceCore

#if canImport(Glibc)
    import Glibc
#endif

let runs = CommandLine.arguments.firstIndex(of: "--runs").flatMap { Int(CommandLine.arguments[$0 + 1]) } ?? 5
let directory = NSTemporaryDirectory() + "interop-benchmark-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

func attribute(_ key: String, _ value: JSONValue) -> JSONValue {
    let typed: JSONValue
    switch value {
    case .int(let number): typed = ["intValue": .string(String(number))]
    default: typed = ["stringValue": value]
    }
    return ["key": .string(key), "value": typed]
}

/// 100 traces of 100 spans: an agent span, 33 model calls each proposing one call, 33 tool spans, 33 more chat layers.
func otlpFile() throws -> (String, Int) {
    var spans: [JSONValue] = []
    for trace in 0..<100 {
        let traceId = String(format: "%032x", trace + 1)
        let root = String(format: "%016x", trace * 1000 + 1)
        let base = 1_790_000_000_000_000_000 + trace * 1_000_000_000
        func span(_ id: Int, parent: String?, name: String, start: Int, _ attributes: [JSONValue]) -> JSONValue {
            var object: [(String, JSONValue)] = [
                ("traceId", .string(traceId)), ("spanId", .string(String(format: "%016x", trace * 1000 + id))), ("name", .string(name)),
                ("kind", 1), ("startTimeUnixNano", .string(String(base + start * 1_000_000))),
                ("endTimeUnixNano", .string(String(base + start * 1_000_000 + 500_000))), ("attributes", .array(attributes)),
            ]
            if let parent { object.append(("parentSpanId", .string(parent))) }
            return .object(JSONObject(object))
        }
        spans.append(span(1, parent: nil, name: "invoke_agent", start: 0, [attribute("gen_ai.operation.name", "invoke_agent")]))
        for call in 0..<33 {
            let outer = String(format: "%016x", trace * 1000 + 10 + call * 3)
            spans.append(
                span(10 + call * 3, parent: root, name: "chat", start: call * 10 + 1, [attribute("gen_ai.operation.name", "chat")]))
            let output = JSONWriter.encodeString([
                [
                    "role": "assistant",
                    "parts": [
                        ["type": "tool_call", "id": .string("c\(call)"), "name": "search", "arguments": ["q": .string("query \(call)")]]
                    ],
                ]
            ])
            spans.append(
                span(
                    11 + call * 3, parent: outer, name: "chat", start: call * 10 + 2,
                    [
                        attribute("gen_ai.operation.name", "chat"), attribute("gen_ai.output.messages", .string(output)),
                        attribute("gen_ai.usage.input_tokens", 100),
                    ]))
            spans.append(
                span(
                    12 + call * 3, parent: root, name: "execute_tool", start: call * 10 + 5,
                    [
                        attribute("gen_ai.operation.name", "execute_tool"), attribute("gen_ai.tool.name", "search"),
                        attribute("gen_ai.tool.call.id", .string("c\(call)")),
                        attribute("gen_ai.tool.call.result", .string("{\"hits\": [1, 2, 3]}")),
                    ]))
        }
    }
    let request: JSONValue = [
        "resourceSpans": [["resource": ["attributes": [attribute("service.name", "bench")]], "scopeSpans": [["spans": .array(spans)]]]]
    ]
    let path = directory + "/spans.otlp.json"
    try Data(JSONWriter.encode(request)).write(to: URL(fileURLWithPath: path))
    return (path, spans.count)
}

/// `count` episodes of 12 messages each (user, 5 × assistant call + tool result, final answer),
/// one a line, written as they are made.
func transcriptFile(episodes count: Int) throws -> (String, Int) {
    let path = directory + "/episodes-\(count).jsonl"
    _ = FileManager.default.createFile(atPath: path, contents: nil)
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    var messages = 0
    for episode in 0..<count {
        var list: [JSONValue] = [["role": "user", "content": .string("task \(episode)")]]
        for call in 0..<5 {
            let id = "call_\(call)"
            list.append([
                "role": "assistant", "content": "",
                "tool_calls": [
                    ["id": .string(id), "type": "function", "function": ["name": "lookup", "arguments": .string("{\"key\": \(call)}")]]
                ],
            ])
            list.append(["role": "tool", "tool_call_id": .string(id), "content": "{\"value\": 42}"])
        }
        list.append(["role": "assistant", "content": "done"])
        messages += list.count
        try handle.write(contentsOf: JSONWriter.encode(["id": .string("e\(episode)"), "reward": 1.0, "messages": .array(list)]) + [0x0A])
    }
    return (path, messages)
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func measure(_ name: String, _ input: String, items: Int, unit: String, format: ImportFormat, runs: Int = runs) {
    var seconds: [Double] = []
    var imported = 0
    for index in 0..<runs {
        let out = directory + "/out-\(name)-\(index)"
        let start = DispatchTime.now().uptimeNanoseconds
        let outcome = Importer.importRuns(from: [input], options: ImportOptions(format: format), writer: ImportWriter(directory: out))
        seconds.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        imported = outcome.importedCount
        try? FileManager.default.removeItem(atPath: out)
    }
    let size = (try? FileManager.default.attributesOfItem(atPath: input)[.size] as? Int) ?? 0
    print(
        String(
            format: "%@: %d %@ (%.1f MB) into %d logs: median %.3f s = %.0f %@/s (runs: %@)", name, items, unit, Double(size) / 1e6,
            imported,
            median(seconds), Double(items) / median(seconds), unit, seconds.map { String(format: "%.3f", $0) }.joined(separator: ", ")))
}

/// The process's peak resident memory so far, in MB.
func peakMB() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss / 1024
}

// Transcripts first, small then 20 times larger: JSON Lines of episodes are imported a line at a
// time, so the peak should not grow with the file (what grows is the outcome's row per run).
let (transcripts, messageCount) = try transcriptFile(episodes: 1_000)
measure("transcripts", transcripts, items: messageCount, unit: "messages", format: .messages)
let afterSmall = peakMB()
let (large, largeCount) = try transcriptFile(episodes: 20_000)
measure("transcripts x20", large, items: largeCount, unit: "messages", format: .messages, runs: 1)
let afterLarge = peakMB()
let megabytes = { (path: String) in Double((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) / 1e6 }
print(
    String(
        format: "peak RSS: %d MB after the %.1f MB transcript file, %d MB after the %.1f MB one (streamed a line at a time)", afterSmall,
        megabytes(transcripts), afterLarge, megabytes(large)))
// OTLP is read whole: a trace's spans may be anywhere in the file.
let (otlp, spanCount) = try otlpFile()
measure("otlp", otlp, items: spanCount, unit: "spans", format: .otlp)
print("peak RSS: \(peakMB()) MB after the OTLP file (\(String(format: "%.1f", megabytes(otlp))) MB, read whole)")

// What `collect` and `record` do with an OTLP/HTTP body: the same 10,000 spans as protobuf's
// binary encoding (what the SDKs' exporters send by default), decoded by the hand decoder into
// OTLP/JSON, against parsing the OTLP/JSON body; both then split by trace (`ReceivedTraces`).
/// Protobuf's encoding of an OTLP/JSON request of the shape `otlpFile` makes (string and int
/// attributes), written by hand as the exporters' encoder writes it.
enum ProtobufEncoding {
    static func varint(_ value: UInt64, into bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    static func field(_ number: Int, _ content: [UInt8], into bytes: inout [UInt8]) {
        varint(UInt64(number << 3 | 2), into: &bytes)
        varint(UInt64(content.count), into: &bytes)
        bytes += content
    }

    static func hex(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).compactMap {
            UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)
        }
    }

    static func attribute(_ value: JSONValue) -> [UInt8] {
        var any: [UInt8] = []
        if let text = value["value"]?["stringValue"]?.stringValue {
            field(1, Array(text.utf8), into: &any)
        } else if let number = value["value"]?["intValue"]?.stringValue.flatMap({ Int64($0) }) {
            varint(3 << 3, into: &any)
            varint(UInt64(bitPattern: number), into: &any)
        }
        var pair: [UInt8] = []
        field(1, Array((value["key"]?.stringValue ?? "").utf8), into: &pair)
        field(2, any, into: &pair)
        return pair
    }

    static func request(_ value: JSONValue) -> [UInt8] {
        var bytes: [UInt8] = []
        for batch in value["resourceSpans"]?.arrayValue ?? [] {
            var resourceSpans: [UInt8] = []
            var resource: [UInt8] = []
            for item in batch["resource"]?["attributes"]?.arrayValue ?? [] { field(1, attribute(item), into: &resource) }
            field(1, resource, into: &resourceSpans)
            for scope in batch["scopeSpans"]?.arrayValue ?? [] {
                var scopeSpans: [UInt8] = []
                for span in scope["spans"]?.arrayValue ?? [] {
                    var message: [UInt8] = []
                    field(1, hex(span["traceId"]?.stringValue ?? ""), into: &message)
                    field(2, hex(span["spanId"]?.stringValue ?? ""), into: &message)
                    if let parent = span["parentSpanId"]?.stringValue { field(4, hex(parent), into: &message) }
                    field(5, Array((span["name"]?.stringValue ?? "").utf8), into: &message)
                    for (number, key) in [(7, "startTimeUnixNano"), (8, "endTimeUnixNano")] {
                        varint(UInt64(number << 3 | 1), into: &message)
                        let nanos = UInt64(span[key]?.stringValue ?? "") ?? 0
                        for shift in stride(from: 0, to: 64, by: 8) { message.append(UInt8((nanos >> UInt64(shift)) & 0xFF)) }
                    }
                    for item in span["attributes"]?.arrayValue ?? [] { field(9, attribute(item), into: &message) }
                    field(2, message, into: &scopeSpans)
                }
                field(2, scopeSpans, into: &resourceSpans)
            }
            field(1, resourceSpans, into: &bytes)
        }
        return bytes
    }
}

let jsonBody = Array(try Data(contentsOf: URL(fileURLWithPath: otlp)))
let protobufBody = ProtobufEncoding.request(try JSONParser.parse(jsonBody))
// `--write-protobuf FILE`: the body, for a decoder elsewhere to be measured on the same bytes.
if let index = CommandLine.arguments.firstIndex(of: "--write-protobuf"), index + 1 < CommandLine.arguments.count {
    try Data(protobufBody).write(to: URL(fileURLWithPath: CommandLine.arguments[index + 1]))
}
func timeDecoding(_ name: String, bytes: Int, _ decode: () throws -> JSONValue) throws {
    var decoding: [Double] = []
    var splitting: [Double] = []
    var spans = 0
    for _ in 0..<max(runs, 5) {
        let start = DispatchTime.now().uptimeNanoseconds
        let request = try decode()
        let decoded = DispatchTime.now().uptimeNanoseconds
        let received = try ReceivedTraces(request: request)
        decoding.append(Double(decoded - start) / 1e9)
        splitting.append(Double(DispatchTime.now().uptimeNanoseconds - decoded) / 1e9)
        spans = received.spanCount
    }
    print(
        String(
            format: "receive %@: %d spans in %.1f MB: decoded in median %.1f ms = %.0f MB/s (runs: %@); read as spans and split by "
                + "trace in %.1f ms; %.0f spans/s in all",
            name, spans, Double(bytes) / 1e6, median(decoding) * 1000, Double(bytes) / 1e6 / median(decoding),
            decoding.map { String(format: "%.1f", $0 * 1000) }.joined(separator: ", "), median(splitting) * 1000,
            Double(spans) / (median(decoding) + median(splitting))))
}
try timeDecoding("protobuf", bytes: protobufBody.count) { try OTLPProtobuf.traceRequest(protobufBody) }
try timeDecoding("OTLP/JSON", bytes: jsonBody.count) { try JSONParser.parse(jsonBody) }
