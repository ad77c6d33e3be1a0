// Client-side cost of a streamed reply: a 1 MB OpenAI-style event stream (text deltas of
// about 40 bytes, then a tool call whose arguments come in 2,000 pieces) handed to
// `HTTPModelClient` in 16 KiB chunks by an in-memory transport, so no network or server
// pacing is measured: SSE parsing, JSON of every event, assembly and the final message.
//
//   swift run -c release model-benchmark [--megabytes 1] [--repetitions 9]
//
// Prints MB/s for each repetition and the median.
import AgentRuntime
import Foundation
import ModelClients
import TraceCore

struct MemoryTransport: ModelTransport {
    let stream: [UInt8]

    func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws {
        try receive([.head(status: 200, headers: [HTTPHeader(name: "content-type", value: "text/event-stream")])])
        var offset = 0
        while offset < stream.count {
            let end = min(offset + 16 * 1024, stream.count)
            try receive([.chunk(Array(stream[offset..<end]))])
            offset = end
        }
    }
}

func makeStream(bytes target: Int) -> [UInt8] {
    func chunk(_ delta: JSONValue, finish: String? = nil) -> String {
        let value: JSONValue = [
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [["index": 0, "delta": delta, "finish_reason": finish.map(JSONValue.string) ?? .null]],
        ]
        return "data: " + JSONWriter.encodeString(value) + "\n\n"
    }
    var text = chunk(["role": "assistant", "content": ""])
    let half = target / 2
    while text.utf8.count < half { text += chunk(["content": "The order shipped on Tuesday, "]) }
    text += chunk(["tool_calls": [["index": 0, "id": "call_1", "type": "function", "function": ["name": "lookup", "arguments": ""]]]])
    text += chunk(["tool_calls": [["index": 0, "function": ["arguments": "{\"note\":\""]]]])
    while text.utf8.count < target { text += chunk(["tool_calls": [["index": 0, "function": ["arguments": "abcdefghij"]]]]) }
    text += chunk(["tool_calls": [["index": 0, "function": ["arguments": "\"}"]]]])
    text += chunk([:], finish: "tool_calls")
    text += "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":20}}\n\ndata: [DONE]\n\n"
    return Array(text.utf8)
}

var megabytes = 1.0
var repetitions = 9
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--megabytes": megabytes = arguments.next().flatMap(Double.init) ?? megabytes
    case "--repetitions": repetitions = arguments.next().flatMap(Int.init) ?? repetitions
    default:
        FileHandle.standardError.write(Data("usage: model-benchmark [--megabytes N] [--repetitions N]\n".utf8))
        exit(64)
    }
}

let stream = makeStream(bytes: Int(megabytes * 1_000_000))
let client = HTTPModelClient(settings: ModelSettings(provider: .openai, name: "m"), transport: MemoryTransport(stream: stream))
let request = ModelRequest(
    instructions: "", packet: ContextBuilt(goal: "g", stateSummary: "", tokenEstimate: 1), tools: [], observations: [], feedback: nil,
    decisionIndex: 0, step: 1)
var rates: [Double] = []
for repetition in 1...repetitions {
    let clock = ContinuousClock()
    let start = clock.now
    let reply = try await client.reply(to: request)
    let elapsed = start.duration(to: clock.now).components
    let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    precondition(reply.raw.contains("abcdefghij") && reply.usage?.output == 20, "the benchmark stream was not assembled")
    let rate = Double(stream.count) / seconds / 1e6
    rates.append(rate)
    print(String(format: "repetition %d: %.1f MB/s (%d bytes in %.2f ms)", repetition, rate, stream.count, seconds * 1000))
}
print(String(format: "median: %.1f MB/s of event stream", rates.sorted()[rates.count / 2]))
