import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import ModelClients

/// The chunk scanner is a fast path: whatever a stream holds, the assembler must end exactly as
/// it does when every chunk is parsed whole — the same reply, usage and error.
@Suite("Streamed chunks read by the scanner and by the parser agree")
struct ChunkScannerTests {
    /// The assembler's end state, or the error it stopped with.
    static func outcome(of events: [String], scanner: Bool) -> String {
        var assembler = OpenAIChatAssembler()
        assembler.usesChunkScanner = scanner
        do {
            for event in events { try assembler.consume(ServerSentEvent(data: event)) }
        } catch {
            return "error: \(error.message) (retryable: \(error.isRetryable))"
        }
        let (raw, usage) = assembler.reply()
        return JSONWriter.encodeString(raw)
            + " usage \(String(describing: usage)) content \(assembler.hasContent) done \(assembler.isComplete)"
    }

    static let pieces = [
        "plain text", "", " ", "a \"quoted\" word", "back\\slash", "new\nline", "tab\there", "caf\u{e9}", "\u{1F680} rocket",
        "\u{7F}\u{1F}", "{\"order_id\": \"A-1\"}", "\\u00e9 literally", "</script>",
    ]

    static func randomChunk(_ generator: inout SeededGenerator) -> String {
        func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &generator)] }
        var delta: [(String, JSONValue)] = []
        switch Int.random(in: 0..<6, using: &generator) {
        case 0: delta.append(("content", .string(pick(pieces))))
        case 1: delta.append(("content", .null))
        case 2: delta.append(("refusal", .string(pick(pieces))))
        case 3:
            var call: [(String, JSONValue)] = [("index", .int(Int.random(in: 0..<3, using: &generator)))]
            if Bool.random(using: &generator) { call.append(("id", .string("call_\(Int.random(in: 0..<9, using: &generator))"))) }
            call.append(("type", "function"))
            var function: [(String, JSONValue)] = [("arguments", .string(pick(pieces)))]
            if Bool.random(using: &generator) { function.append(("name", .string(pick(["lookup", "caf\u{e9}", "get \"x\""])))) }
            call.append(("function", .object(JSONObject(function))))
            delta.append(("tool_calls", [.object(JSONObject(call))]))
        case 4: delta.append(("role", "assistant"))
        default: delta.append(("tool_calls", [1, "x", .null]))
        }
        var choice: [(String, JSONValue)] = [("index", 0), ("delta", .object(JSONObject(delta)))]
        choice.append(("finish_reason", Bool.random(using: &generator) ? .null : .string(pick(["stop", "tool_calls", "length"]))))
        if Bool.random(using: &generator) { choice.append(("logprobs", ["content": [["token": "a", "logprob": -0.25e-3]]])) }
        var chunk: [(String, JSONValue)] = [
            ("id", .string(pick(["chatcmpl-1", "chatcmpl-\u{e9}", "x\\y"]))), ("object", "chat.completion.chunk"),
            ("created", .int(Int.random(in: 0..<2_000_000_000, using: &generator))), ("model", "m"),
            ("choices", Bool.random(using: &generator) ? [.object(JSONObject(choice))] : [.object(JSONObject(choice)), ["index": 1]]),
        ]
        switch Int.random(in: 0..<8, using: &generator) {
        case 0: chunk.append(("usage", ["prompt_tokens": 10, "completion_tokens": .int(Int.random(in: 0..<99, using: &generator))]))
        case 1: chunk.append(("usage", .null))
        case 2: chunk.append(("system_fingerprint", .double(1.5e10)))
        case 3: chunk.append(("extra", ["deep": [[["x": true, "y": false]]]]))
        default: break
        }
        let encoded = JSONWriter.encodeString(.object(JSONObject(chunk)))
        // Whitespace as servers write it, now and then.
        return Bool.random(using: &generator) ? encoded : encoded.replacingOccurrences(of: ",\"", with: ", \"")
    }

    @Test("thousands of generated streams: the same reply, usage and flags either way")
    func generatedStreams() {
        var generator = SeededGenerator(seed: 20_261_123)
        var (chunks, scanned) = (0, 0)
        for _ in 0..<1500 {
            let events = (0..<Int.random(in: 1...12, using: &generator)).map { _ in Self.randomChunk(&generator) } + ["[DONE]"]
            #expect(Self.outcome(of: events, scanner: true) == Self.outcome(of: events, scanner: false), "\(events)")
            chunks += events.count - 1
            scanned += events.dropLast().count { ChunkScanner.scan(Array($0.utf8)) != nil }
        }
        // The fast path is taken for most of them (the rest hold escapes or non-ASCII in skipped
        // members, which it leaves to the parser), so the comparison is not of two parses.
        #expect(chunks > 8000 && scanned * 2 > chunks, "\(scanned) of \(chunks) scanned")
    }

    @Test(
        "chunks the scanner gives up on or refuses end as the parser says",
        arguments: [
            #"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#,
            #"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            #"{"choices":[{"delta":{"content":"\ud800"}}]}"#,
            #"{"choices":[{"delta":{"content":"\q"}}]}"#,
            #"{"id":"\ud800","choices":[{"delta":{"content":"a"}}]}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"a\u{01}\"}}]}",
            #"{"created":01,"choices":[{"delta":{"content":"a"}}]}"#,
            #"{"created":1.,"choices":[{"delta":{"content":"a"}}]}"#,
            #"{"created":-,"choices":[{"delta":{"content":"a"}}]}"#,
            #"{"choices":[{"delta":{"content":"a"}}]} x"#,
            #"{"choices":[{"delta":{"content":"a"}}]"#,
            #"{"choices":[{"delta":{"content":"a"}},]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":1.0,"function":{"arguments":"x"}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":"1","function":{"arguments":"x"}}]}}]}"#,
            #"{"error":{"message":"overloaded","type":"overloaded"}}"#,
            #"{"error":null}"#,
            #"[1,2]"#,
            #"{"ch\u006fices":[{"delta":{"content":"a"}}]}"#,
            #"{"choices":[{"delta":{"content":tru}}]}"#,
            #"{"choices":[{"delta":{"content":nulll}}]}"#,
        ])
    func edgeCases(chunk: String) {
        let events = [chunk, "[DONE]"]
        #expect(Self.outcome(of: events, scanner: true) == Self.outcome(of: events, scanner: false))
    }
}
