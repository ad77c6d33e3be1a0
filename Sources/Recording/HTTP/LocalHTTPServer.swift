import AgentRuntime
public import NIOCore
public import NIOHTTP1
import NIOPosix
import Synchronization

/// What answers the requests of a `LocalHTTPServer`: the recording gateway, the OTLP receiver.
public protocol HTTPRequestHandling: Sendable {
    /// The largest body of a request with this head taken whole; a larger one is read to its
    /// end, kept nowhere, and answered by `answerTooLarge`.
    func maxRequestBytes(for head: HTTPRequestHead) -> Int
    /// Answers one request; false when the connection must close.
    func handle(_ head: HTTPRequestHead, body: [UInt8], _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>)
        async throws -> Bool
    /// Answers a request whose body was larger than `maxRequestBytes` (413).
    func answerTooLarge(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
        -> Bool
    /// The most bytes of bodies the server holds at once over all its connections, gathered or
    /// being answered: a request whose body would take it past is read to its end, kept nowhere,
    /// and answered by `answerBusy`. Each body is within `maxRequestBytes`; this bounds how many
    /// of them are in memory together.
    var maxHeldBytes: Int { get }
    /// Answers a request whose body came while the server held `maxHeldBytes` (503: ask again).
    func answerBusy(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws -> Bool
}

extension HTTPRequestHandling {
    /// No bound but each body's own.
    public var maxHeldBytes: Int { .max }

    public func answerBusy(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
        -> Bool
    {
        try await LocalHTTPServer.answer(
            status: 503, contentType: "text/plain; charset=utf-8", body: Array("busy: ask again in a moment\n".utf8), to: head, outbound,
            headers: [("retry-after", "1")])
    }
}

/// An HTTP/1.1 server (swift-nio) on a local address: each connection's requests answered in
/// turn by one handler, each body gathered whole up to the handler's limit. The one server of
/// the recording gateway, of `agent-eval collect` and of `agent-eval serve`.
public final class LocalHTTPServer: Sendable {
    public let port: Int
    private let server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>
    private let serving: Task<Void, Never>
    /// The bytes of bodies held now, over every connection (`HTTPRequestHandling.maxHeldBytes`).
    private let held = HeldBytes()

    final class HeldBytes: Sendable {
        private let count = Mutex(0)

        /// Takes `bytes` more when that stays within `limit`; false (nothing taken) when not.
        func take(_ bytes: Int, within limit: Int) -> Bool {
            count.withLock { count in
                guard count <= limit - bytes else { return false }
                count += bytes
                return true
            }
        }

        func give(_ bytes: Int) { count.withLock { $0 -= bytes } }
    }

    /// Starts listening on `host:port` (port 0: a free one); a client that holds a connection
    /// without a request under way is cut off after `deadlines`.
    public init(
        host: String = "127.0.0.1", port: Int = 0, handler: any HTTPRequestHandling, deadlines: ClientDeadlines = .standard
    ) async throws {
        server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ClientDeadlineHandler(deadlines))
                    // Half closure: a client that asked to close gets its answer whole, then the
                    // end of the stream (`serve`), the pending writes going out first.
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                }
            }
        self.port = server.channel.localAddress?.port ?? 0
        let server = self.server
        let held = self.held
        // On the thread the caller runs on, if it has one of its own: a test's server must not
        // wait behind other tests' work on the shared pool (OwnThreadTrait).
        serving = Task(executorPreference: ExecutorThread.current) {
            try? await server.executeThenClose { inbound in
                await withDiscardingTaskGroup { group in
                    do {
                        for try await connection in inbound {
                            group.addTask { await Self.serve(connection, handler: handler, held: held) }
                        }
                    } catch {
                        return
                    }
                }
            }
        }
    }

    /// Stops listening and ends every connection.
    public func stop() async {
        try? await server.channel.close()
        serving.cancel()
        await serving.value
    }

    private static func serve(
        _ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, handler: any HTTPRequestHandling,
        held: HeldBytes
    )
        async
    {
        // The bytes this connection's body holds of the server's budget, given back however it ends.
        var taken = 0
        defer { held.give(taken) }
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body: [UInt8] = []
            var tooLarge = false
            var isBusy = false
            var limit = 0
            let maxHeld = handler.maxHeldBytes
            /// The client asked to close (`Connection: close`, HTTP/1.0): its answer was written and
            /// the output closed; what it sends until it closes its side is not read.
            var isClosing = false
            for try await part in inbound {
                if isClosing { continue }
                switch part {
                case .head(let received):
                    head = received
                    body = []
                    tooLarge = false
                    isBusy = false
                    limit = handler.maxRequestBytes(for: received)
                case .body(let buffer):
                    if body.count + buffer.readableBytes > limit {
                        tooLarge = true
                        body = []
                        held.give(taken)
                        taken = 0
                    } else if !tooLarge && !isBusy {
                        guard maxHeld == .max || held.take(buffer.readableBytes, within: maxHeld) else {
                            // The server holds all it may of other requests' bodies: this one is dropped.
                            isBusy = true
                            body = []
                            held.give(taken)
                            taken = 0
                            continue
                        }
                        if maxHeld != .max { taken += buffer.readableBytes }
                        body += buffer.readableBytesView
                    }
                case .end:
                    guard let request = head else { continue }
                    head = nil
                    let keepOpen: Bool
                    if tooLarge {
                        keepOpen = try await handler.answerTooLarge(request, outbound)
                    } else if isBusy {
                        keepOpen = try await handler.answerBusy(request, outbound)
                    } else {
                        keepOpen = try await handler.handle(request, body: body, outbound)
                    }
                    body = []
                    held.give(taken)
                    taken = 0
                    if !keepOpen { return }
                    // A client that asked to close (`Connection: close`, HTTP/1.0 without
                    // keep-alive) is sent the end of the stream after its answer: the output is
                    // closed once what is pending went out (half closure; returning here would
                    // close at once and drop it), and the connection ends when the client closes
                    // its side, or at its deadline.
                    if !request.isKeepAlive {
                        outbound.finish()
                        isClosing = true
                    }
                }
            }
        }
    }

    /// An answer with a body.
    public static func answer(
        status: Int, contentType: String, body: [UInt8], to head: HTTPRequestHead,
        _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, headers: [(String, String)] = []
    ) async throws -> Bool {
        var responseHead = HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status))
        responseHead.headers.add(name: "content-type", value: contentType)
        for (name, value) in headers { responseHead.headers.add(name: name, value: value) }
        responseHead.headers.add(name: "content-length", value: String(body.count))
        try await outbound.write(.head(responseHead))
        // A HEAD request is answered with the head a GET gets, its length included, and no body.
        if !body.isEmpty && head.method != .HEAD { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
        try await outbound.write(.end(nil))
        return true
    }
}
