public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
public import TraceCore

/// `<benchmark> --serve PORT_FILE [--big-bytes N]`: an HTTP/1.1 server on 127.0.0.1 that
/// answers every request at once (keep-alive), so the clients measured against it, not the
/// server, are the limit: with the same short streamed Chat Completions reply, or — for a path
/// that holds `/big/` — with a Chat Completions stream of N MB (`BenchmarkStreams.chat`), sent in
/// 16 KiB chunks. It runs in its own process (the benchmark starts itself with `--serve`), so
/// its CPU time is nobody's. It stops when its standard input closes.
public enum LocalReplyServer {
    /// A reply of the kind an agent gets: the role, a sentence, the finish reason, usage, `[DONE]`.
    public static let body: [UInt8] = {
        func chunk(_ json: String) -> String { "data: " + json + "\n\n" }
        let prefix = #"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"local-model","choices":"#
        let text =
            chunk(prefix + #"[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#)
            + chunk(prefix + #"[{"index":0,"delta":{"content":"Order A-1042 was delivered on Tuesday."},"finish_reason":null}]}"#)
            + chunk(prefix + #"[{"index":0,"delta":{},"finish_reason":"stop"}]}"#)
            + chunk(prefix + #"[],"usage":{"prompt_tokens":31,"completion_tokens":12,"total_tokens":43}}"#) + "data: [DONE]\n\n"
        return Array(text.utf8)
    }()

    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let big: [UInt8]
        var isBig = false

        init(big: [UInt8]) {
            self.big = big
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                isBig = head.uri.contains("/big/")
            case .body:
                break
            case .end:
                let body = isBig ? big : LocalReplyServer.body
                var head = HTTPResponseHead(version: .http1_1, status: .ok)
                head.headers.add(name: "content-type", value: "text/event-stream")
                head.headers.add(name: "content-length", value: String(body.count))
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                var offset = 0
                while offset < body.count {
                    let end = min(offset + 16 * 1024, body.count)
                    context.write(
                        wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body[offset..<end])))), promise: nil)
                    offset = end
                }
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    /// Serves until standard input closes; `bigBytes` is the size of the `/big/` stream.
    public static func serve(portFile: String, bigBytes: Int = 1_000_000) throws -> Never {
        let big = BenchmarkStreams.chat(bytes: bigBytes)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(big: big))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress?.port ?? 0
        try String(port).write(toFile: portFile + ".tmp", atomically: true, encoding: .utf8)
        _ = rename(portFile + ".tmp", portFile)
        // Until the benchmark closes our standard input (or dies).
        _ = FileHandle.standardInput.readDataToEndOfFile()
        exit(0)
    }

    /// A running server in a child process (this executable started again with `--serve`).
    public final class Child {
        public let port: Int
        let process: Process
        let input: Pipe

        /// Starts `executable --serve PORT_FILE extraArguments…` and waits for its port.
        public init(executable: String = CommandLine.arguments[0], extraArguments: [String] = []) throws {
            let portFile = NSTemporaryDirectory() + "benchmark-server-\(getpid())-\(UUID().uuidString).port"
            process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["--serve", portFile] + extraArguments
            input = Pipe()
            process.standardInput = input
            try process.run()
            var port: Int?
            for _ in 0..<250 where port == nil {
                port = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) }
                if port == nil { usleep(20_000) }
            }
            try? FileManager.default.removeItem(atPath: portFile)
            guard let port else {
                throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "the local server did not start"])
            }
            self.port = port
        }

        /// Stops the server (closing its standard input).
        public func stop() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }
}

/// Event streams of the providers' shapes, for benchmarks.
public enum BenchmarkStreams {
    /// A Chat Completions stream of about `target` bytes: text deltas of about 40 bytes, then a
    /// tool call whose arguments come in pieces of 10 bytes, the finish reason, usage, `[DONE]`.
    public static func chat(bytes target: Int) -> [UInt8] {
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
}

/// The repository's scripts, for benchmarks that run a peer written in Python.
public enum BenchmarkScripts {
    /// The `scripts` folder of the checkout this benchmark was built from.
    public static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts")

    /// The Python of `scripts/python_venv <set>`'s environment (made on first use); nil when it
    /// cannot be made.
    public static func python(venv set: String) throws -> String? {
        let venv = Process()
        venv.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        venv.arguments = ["bash", folder.appendingPathComponent("python_venv").path, set]
        let output = Pipe()
        venv.standardOutput = output
        try venv.run()
        let path = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        venv.waitUntilExit()
        return venv.terminationStatus == 0 ? path + "/bin/python" : nil
    }

    /// Runs `python script arguments…` and returns its standard output as JSON.
    public static func runJSON(_ python: String, _ script: String, _ arguments: [String]) throws -> (status: Int32, json: JSONValue?) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [folder.appendingPathComponent(script).path] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, try? JSONParser.parse(Array(text)))
    }
}
