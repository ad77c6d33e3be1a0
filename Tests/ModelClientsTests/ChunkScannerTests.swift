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
            (
                "choices",
                pick([
                    [.object(JSONObject(choice))], [.object(JSONObject(choice)), ["index": 1]],
                    [["index": 1], .object(JSONObject(choice))],
                ])
            ),
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
            scanned += events.dropLast().count { ChunkScanner.scan($0) != nil }
        }
        // The fast path is taken for most of them (the rest hold escapes or non-ASCII in skipped
        // members, which it leaves to the parser), so the comparison is not of two parses.
        #expect(chunks > 8000 && scanned * 2 > chunks, "\(scanned) of \(chunks) scanned")
    }

    /// The Messages assembler's end state for `events` (name, data), or its error.
    static func anthropicOutcome(of events: [(String, String)], scanner: Bool) -> String {
        var assembler = AnthropicMessagesAssembler()
        assembler.usesChunkScanner = scanner
        do {
            for (name, data) in events { try assembler.consume(ServerSentEvent(name: name, data: data)) }
        } catch {
            return "error: \(error.message) (retryable: \(error.isRetryable))"
        }
        let (raw, usage) = assembler.reply()
        return JSONWriter.encodeString(raw)
            + " usage \(String(describing: usage)) content \(assembler.hasContent) done \(assembler.isComplete)"
    }

    @Test("Messages streams: content_block_delta read by the scanner ends as when parsed whole")
    func anthropicStreams() {
        var generator = SeededGenerator(seed: 11_23)
        func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &generator)] }
        func event(_ value: JSONValue) -> String { JSONWriter.encodeString(value) }
        var (deltas, scanned) = (0, 0)
        for _ in 0..<800 {
            var events: [(String, String)] = [
                ("message_start", event(["type": "message_start", "message": ["usage": ["input_tokens": 9, "output_tokens": 1]]]))
            ]
            let blocks = Int.random(in: 1...3, using: &generator)
            for index in 0..<blocks {
                let isTool = Bool.random(using: &generator)
                let block: JSONValue =
                    isTool ? ["type": "tool_use", "id": "toolu_1", "name": "lookup", "input": [:]] : ["type": "text", "text": ""]
                events.append(
                    ("content_block_start", event(["type": "content_block_start", "index": .int(index), "content_block": block])))
            }
            for _ in 0..<Int.random(in: 1...10, using: &generator) {
                let index = Int.random(in: 0...blocks, using: &generator)  // now and then a block that never started
                var delta: [(String, JSONValue)] = []
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: delta = [("type", "text_delta"), ("text", .string(pick(Self.pieces)))]
                case 1: delta = [("type", "input_json_delta"), ("partial_json", .string(pick(Self.pieces)))]
                case 2: delta = [("type", "thinking_delta"), ("thinking", "hm")]
                default: delta = [("type", "text_delta"), ("text", .null)]
                }
                var members: [(String, JSONValue)] = [
                    ("type", "content_block_delta"), ("index", .int(index)), ("delta", .object(JSONObject(delta))),
                ]
                if Bool.random(using: &generator) { members.append(("extra", ["a": [1, 2.5, "\u{e9}"]])) }
                let text = event(.object(JSONObject(members)))
                events.append(
                    ("content_block_delta", Bool.random(using: &generator) ? text : text.replacingOccurrences(of: ":", with: ": ")))
                deltas += 1
                if ChunkScanner.scanBlockDelta(events.last?.1 ?? "") != nil { scanned += 1 }
            }
            events.append(
                ("message_delta", event(["type": "message_delta", "delta": ["stop_reason": "end_turn"], "usage": ["output_tokens": 7]])))
            events.append(("message_stop", event(["type": "message_stop"])))
            #expect(Self.anthropicOutcome(of: events, scanner: true) == Self.anthropicOutcome(of: events, scanner: false), "\(events)")
        }
        #expect(deltas > 2000 && scanned * 2 > deltas, "\(scanned) of \(deltas) scanned")
        // Deltas the scanner leaves to the parser, or that it refuses, end the same way too.
        let start = ("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#)
        for data in [
            #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"index":1}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud800"}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}"#,
            #"{"index":0,"delta":{"type":"text_delta","text":"no type member"}}"#,
            #"{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"a"}}"#,
        ] {
            let events = [start, ("content_block_delta", data)]
            #expect(Self.anthropicOutcome(of: events, scanner: true) == Self.anthropicOutcome(of: events, scanner: false), "\(data)")
        }
    }

    @Test("a reply with several choices (n above 1, pieces interleaved) is choice 0's alone; \"error\": null is no error")
    func choiceZeroAndNullError() {
        func chunk(_ index: Int, _ text: String, finish: String? = nil) -> String {
            let choice: JSONValue = [
                "index": .int(index), "delta": ["content": .string(text)], "finish_reason": finish.map(JSONValue.string) ?? .null,
            ]
            return JSONWriter.encodeString(["id": "c", "choices": [choice], "error": .null])
        }
        let events = [
            chunk(1, "BBB "), chunk(0, "AAA "), chunk(1, "bbb", finish: "stop"), chunk(0, "aaa", finish: "stop"),
            #"{"id":"c","choices":[{"index":1,"delta":{"content":"x"}},{"index":0,"delta":{"content":"!"}}]}"#, "[DONE]",
        ]
        for scanner in [true, false] {
            let outcome = Self.outcome(of: events, scanner: scanner)
            #expect(outcome.hasPrefix(#"{"finish_reason":"stop","message":{"content":"AAA aaa!","#), "\(outcome)")
        }
        // Not streamed: the choice with index 0, wherever it stands.
        var whole = OpenAIChatAssembler()
        let body: JSONValue = [
            "choices": [
                ["index": 1, "message": ["role": "assistant", "content": "second"], "finish_reason": "stop"],
                ["index": 0, "message": ["role": "assistant", "content": "first"], "finish_reason": "stop"],
            ],
            "error": .null,
        ]
        #expect(throws: Never.self) { try whole.consume(whole: body) }
        #expect(whole.reply().raw["message"]?["content"] == "first")
    }

    @Test("Messages usage counts the prompt cache's tokens with the input's, from message_start and from message_delta")
    func anthropicCacheTokens() throws {
        func usage(_ events: [(String, JSONValue)]) throws -> TokenUsage? {
            var assembler = AnthropicMessagesAssembler()
            for (name, value) in events { try assembler.consume(ServerSentEvent(name: name, data: JSONWriter.encodeString(value))) }
            return assembler.reply().usage
        }
        let start: JSONValue = [
            "type": "message_start",
            "message": [
                "usage": ["input_tokens": 5, "cache_read_input_tokens": 50_000, "cache_creation_input_tokens": 7, "output_tokens": 1]
            ],
        ]
        let block: JSONValue = ["type": "content_block_start", "index": 0, "content_block": ["type": "text", "text": "hi"]]
        let end: JSONValue = ["type": "message_delta", "delta": ["stop_reason": "end_turn"], "usage": ["output_tokens": 3]]
        let stop: JSONValue = ["type": "message_stop"]
        let events = [("message_start", start), ("content_block_start", block), ("message_delta", end), ("message_stop", stop)]
        #expect(try usage(events) == TokenUsage(input: 50_012, output: 3))
        let later: JSONValue = [
            "type": "message_delta", "delta": ["stop_reason": "end_turn"],
            "usage": ["input_tokens": 5, "cache_read_input_tokens": 60_000, "output_tokens": 4],
        ]
        #expect(try usage([events[0], events[1], ("message_delta", later), events[3]]) == TokenUsage(input: 60_005, output: 4))
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
