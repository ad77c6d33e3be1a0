// `swift run -c release interop-benchmark [--runs N]`: the import rate of `agent-eval import`
// for a 10,000-span OTLP/JSON file and a 1,000-episode transcript file (both generated here,
// shaped like the tests' real inputs), as spans/s and messages/s (medians of N runs), and the
// process's peak memory after a 1,000- and a 20,000-episode transcript file (JSON Lines are
// streamed, so it should stay flat) and after the OTLP file. docs/interop.md quotes the numbers.
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
