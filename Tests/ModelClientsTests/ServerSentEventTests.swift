import AgentRuntime
import Testing
import TraceCore

@testable import ModelClients

@Suite("Server-sent events and reply formats")
struct ServerSentEventTests {
    static let stream = Array(
        "event: message_start\r\ndata: {\"a\":1}\r\n\r\n: keep-alive\n\ndata: line one\ndata: line two\n\nid: 7\nretry: 10\ndata: caf\u{e9} \u{2603}\r\rdata: [DONE]\n\n"
            .utf8)

    @Test("chunks cut at every byte give the same events, multi-byte characters whole")
    func everyCut() throws {
        var whole = ServerSentEventParser()
        let expected = try whole.feed(Self.stream)
        #expect(
            expected == [
                ServerSentEvent(name: "message_start", data: "{\"a\":1}"), ServerSentEvent(data: "line one\nline two"),
                ServerSentEvent(data: "caf\u{e9} \u{2603}"), ServerSentEvent(data: "[DONE]"),
            ])
        for cut in 0...Self.stream.count {
            var parser = ServerSentEventParser()
            let events = try parser.feed(Self.stream[..<cut]) + parser.feed(Self.stream[cut...])
            #expect(events == expected, "cut at \(cut)")
        }
        var bytewise = ServerSentEventParser()
        #expect(try Self.stream.flatMap { try bytewise.feed([$0]) } == expected)
    }

    @Test("a stream cut mid-event leaves it unfinished, not delivered")
    func unfinished() throws {
        var parser = ServerSentEventParser()
        #expect(try parser.feed(Array("data: {\"x\":".utf8)).isEmpty)
        #expect(parser.hasUnfinishedEvent)
    }

    @Test("a line, or an event's data lines joined, longer than max_line_bytes is an error as its bytes arrive, however they are cut")
    func lineLimit() throws {
        // At the limit: read.
        let fitting = Array("data: \(String(repeating: "x", count: 58))\n\n".utf8)
        var parser = ServerSentEventParser(maxLineBytes: 64)
        #expect(try parser.feed(fitting) == [ServerSentEvent(data: String(repeating: "x", count: 58))])
        // A line that never ends is refused once it is past the limit, not when it ends, in
        // one chunk or a byte at a time.
        let endless = Array("data: ".utf8) + Array(repeating: UInt8(ascii: "x"), count: 100)
        for chunkSize in [1, 7, endless.count] {
            var parser = ServerSentEventParser(maxLineBytes: 64)
            var thrown: ServerSentEventParser.LineTooLong?
            var fed = 0
            while fed < endless.count, thrown == nil {
                do {
                    _ = try parser.feed(endless[fed..<min(fed + chunkSize, endless.count)])
                } catch {
                    thrown = error
                }
                fed += chunkSize
            }
            #expect(thrown?.limit == 64, "chunks of \(chunkSize)")
            #expect(fed <= 64 + chunkSize, "refused as soon as past the limit: chunks of \(chunkSize)")
        }
        // Short data lines that add up past the limit in one event: the event is refused.
        var joined = ServerSentEventParser(maxLineBytes: 64)
        #expect(throws: ServerSentEventParser.LineTooLong.self) {
            _ = try joined.feed(Array(String(repeating: "data: 0123456789\n", count: 10).utf8))
        }
        // Comments and events under the limit, one after the other, never add up.
        var many = ServerSentEventParser(maxLineBytes: 64)
        let events = try many.feed(Array(String(repeating: ": keep-alive\ndata: 0123456789\n\n", count: 100).utf8))
        #expect(events.count == 100)
    }

    static func makeParser() throws -> DecisionParser {
        DecisionParser(
            tools: ToolRegistry([
                try Tool(
                    spec: ToolSpec(
                        name: "lookup_order", description: "d",
                        inputSchema: ["type": "object", "required": ["order_id"], "properties": ["order_id": ["type": "string"]]],
                        sideEffect: .read), host: ClosureToolHost { _ in .object(JSONObject()) })
            ]))
    }

    @Test(
        "provider messages map onto decisions",
        arguments: [
            (
                "openai.chat",
                #"{"message":{"content":"Let me check.","tool_calls":[{"id":"x","function":{"name":"lookup_order","arguments":"{\"order_id\":\"A-1\"}"}}]},"finish_reason":"tool_calls"}"#,
                "tool_calls"
            ),
            ("openai.chat", #"{"message":{"content":"Done."},"finish_reason":"stop"}"#, "answer"),
            ("openai.chat", #"{"message":{"content":""},"finish_reason":"stop"}"#, "empty"),
            ("openai.chat", #"{"message":{"content":null,"refusal":"I can't."},"finish_reason":"stop"}"#, "empty"),
            ("openai.chat", #"{"message":{"content":"Half an ans"},"finish_reason":"length"}"#, "unparseable"),
            (
                "openai.chat",
                #"{"message":{"tool_calls":[{"id":"x","function":{"name":"lookup_order","arguments":"{\"order_id\":"}}]},"finish_reason":"tool_calls"}"#,
                "invalid_arguments"
            ),
            (
                "openai.chat",
                #"{"message":{"tool_calls":[{"id":"x","function":{"name":"drop_table","arguments":"{}"}}]},"finish_reason":"tool_calls"}"#,
                "unknown_tool"
            ),
            (
                "anthropic.messages",
                #"{"content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"t","name":"lookup_order","input":{"order_id":"A-1"}}],"stop_reason":"tool_use"}"#,
                "tool_calls"
            ),
            (
                "anthropic.messages",
                #"{"content":[{"type":"tool_use","id":"t","name":"lookup_order","input_json":"{\"order"}],"stop_reason":"tool_use"}"#,
                "invalid_arguments"
            ),
            ("anthropic.messages", #"{"content":[{"type":"text","text":"No."}],"stop_reason":"refusal"}"#, "empty"),
            ("anthropic.messages", #"{"content":[],"stop_reason":"end_turn"}"#, "empty"),
            ("anthropic.messages", #"{"content":[{"type":"text","text":"Delivered."}],"stop_reason":"end_turn"}"#, "answer"),
            ("openai.responses", #"{}"#, "unparseable"),
        ])
    func mapping(format: String, raw: String, expected: String) throws {
        switch try Self.makeParser().parse(raw, format: format, nextCallNumber: 1) {
        case .valid(.toolCalls(let calls)):
            #expect(expected == "tool_calls")
            #expect(calls == [ToolCall(id: "call-1", name: "lookup_order", arguments: ["order_id": "A-1"])])
        case .valid(.answer): #expect(expected == "answer")
        case .valid(let other): Issue.record("unexpected \(other)")
        case .invalid(let invalid): #expect(invalid.kind.rawValue == expected, "\(invalid.message)")
        }
    }

    @Test("a reply read on its way: an event stream under another content type is read as a stream; a JSON body as a body")
    func relabelledStream() throws {
        let chunk = { (delta: String) in
            #"data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":"# + delta + #","finish_reason":null}]}"#
                + "\n\n"
        }
        let stream = Array((chunk(#"{"role":"assistant","content":"Deliv"}"#) + chunk(#"{"content":"ered."}"#) + "data: [DONE]\n\n").utf8)
        for type in ["application/json", "text/plain", ""] {
            var reader = ReplyReader(api: .openAIChat)
            reader.take(.head(status: 200, headers: type.isEmpty ? [] : [HTTPHeader(name: "Content-Type", value: type)]))
            // Cut inside the first field name: too little to tell, until the rest comes.
            reader.take(.chunk(Array(stream[..<2])))
            #expect(!reader.isComplete)
            reader.take(.chunk(Array(stream[2...])))
            #expect(reader.isComplete, "\(type)")
            let reply = reader.finish()
            #expect(reply.isStream && reply.problem == nil, "\(type): \(String(describing: reply.problem))")
            #expect(reply.raw?["message"]?["content"] == "Delivered.", "\(String(describing: reply.raw))")
        }
        var whole = ReplyReader(api: .openAIChat)
        whole.take(.head(status: 200, headers: [HTTPHeader(name: "content-type", value: "application/json")]))
        whole.take(.chunk(Array("  \n{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Done.\"}".utf8)))
        whole.take(.chunk(Array(",\"finish_reason\":\"stop\"}]}".utf8)))
        let reply = whole.finish()
        #expect(!reply.isStream && reply.problem == nil, "\(String(describing: reply.problem))")
        #expect(reply.raw?["message"]?["content"] == "Done.")
        #expect(ReplyReader.sniff(Array("   ".utf8)) == nil && ReplyReader.sniff(Array(": ping\n".utf8)) == true)
        #expect(ReplyReader.sniff(Array("{\"data\":1}".utf8)) == false && ReplyReader.sniff(Array("ev".utf8)) == nil)
    }

    @Test("the rate window spaces requests and tokens over a minute")
    func rateWindow() {
        var window = RateWindow(requestsPerMinute: 2, tokensPerMinute: 1_000)
        #expect(window.reserve(tokens: 100, nowMs: 0) == 0)
        #expect(window.reserve(tokens: 100, nowMs: 10) == 0)
        #expect(window.reserve(tokens: 100, nowMs: 20) == 59_980)
        #expect(window.reserve(tokens: 100, nowMs: 60_000) == 0)
        var tokens = RateWindow(requestsPerMinute: nil, tokensPerMinute: 1_000)
        #expect(tokens.reserve(tokens: 600, nowMs: 0) == 0)
        #expect(tokens.reserve(tokens: 600, nowMs: 1_000) == 59_000)
        #expect(tokens.reserve(tokens: 5_000, nowMs: 60_000) == 0, "a request larger than the limit goes alone")
    }
}
