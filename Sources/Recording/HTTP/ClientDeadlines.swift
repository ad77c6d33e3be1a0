import NIOCore
import NIOHTTP1

/// How long a client of a `LocalHTTPServer` may hold a connection without being answered: a
/// request must arrive whole within `requestMs` of its head, and a connection with no request
/// under way (before the first, between two) closes after `idleMs`. While an answer is being
/// written (a stream of any length) no deadline runs. Without them, a client that connects and
/// sends nothing, or trickles a request a byte a minute, held its connection, its task and up
/// to the body limit of memory for ever; enough of them took every descriptor.
public struct ClientDeadlines: Sendable, Hashable {
    public var requestMs: Int
    public var idleMs: Int

    public init(requestMs: Int, idleMs: Int) {
        self.requestMs = requestMs
        self.idleMs = idleMs
    }

    /// Five minutes for a request (a 32 MiB body on a slow link), ten idle (an SDK's pooled
    /// connection between two model calls).
    public static let standard = ClientDeadlines(requestMs: 300_000, idleMs: 600_000)
}

/// Closes the connection when a deadline of `ClientDeadlines` passes: placed after the HTTP
/// codec, it sees each request's head and end come in and each answer's end go out.
final class ClientDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let deadlines: ClientDeadlines
    private var timer: Scheduled<Void>?
    /// A request's head came and its end has not.
    private var isReadingRequest = false
    /// Requests received whole and not answered yet (a client may send the next before).
    private var unanswered = 0

    init(_ deadlines: ClientDeadlines) {
        self.deadlines = deadlines
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, deadlines.idleMs) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, deadlines.idleMs)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            isReadingRequest = true
            if unanswered == 0 { arm(context, deadlines.requestMs) }
        case .body: break
        case .end:
            isReadingRequest = false
            unanswered += 1
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            if unanswered == 0 { arm(context, isReadingRequest ? deadlines.requestMs : deadlines.idleMs) }
        }
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext, _ ms: Int) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: .milliseconds(Int64(ms))) { channel.close(promise: nil) }
    }
}
