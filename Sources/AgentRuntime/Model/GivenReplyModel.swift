public import TraceCore

/// A model whose reply to one decision is given (`agent-eval fork --decision`): the decision
/// numbered `decisionIndex` of the run gets `reply`, parsed by the runtime like any reply, and
/// every other decision is asked of `base`.
public struct GivenReplyModel: ModelClient {
    public var base: any ModelClient
    public var decisionIndex: Int
    public var reply: ModelReply

    public init(base: any ModelClient, decisionIndex: Int, reply: ModelReply) {
        self.base = base
        self.decisionIndex = decisionIndex
        self.reply = reply
    }

    public var identity: ModelIdentity { base.identity }

    public func reply(to request: ModelRequest) async throws -> ModelReply {
        request.decisionIndex == decisionIndex ? reply : try await base.reply(to: request)
    }
}
