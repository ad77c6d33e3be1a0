import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// `model-benchmark --serve PORT_FILE`: an HTTP/1.1 server on 127.0.0.1 that answers every
/// request at once with the same short streamed Chat Completions reply (keep-alive), so the
/// clients measured against it, not the server, are the limit. It runs in its own process (the
/// benchmark starts itself with `--serve`), so its CPU time is nobody's. It stops when its
/// standard input closes.
enum LocalReplyServer {
    /// A reply of the kind an agent gets: the role, a sentence, the finish reason, usage, `[DONE]`.
    static let body: [UInt8] = {
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

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            var head = HTTPResponseHead(version: .http1_1, status: .ok)
            head.headers.add(name: "content-type", value: "text/event-stream")
            head.headers.add(name: "content-length", value: String(LocalReplyServer.body.count))
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: LocalReplyServer.body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    static func serve(portFile: String) throws -> Never {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler())
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
}
