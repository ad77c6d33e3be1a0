import Synchronization
public import TraceCore

/// Where a re-run in prefix mode went live (`rerun --mode prefix`): shared by its model and its
/// tools, which serve the log while the run asks what the log's run asked and go live together
/// from the first request that differs.
public final class LiveSwitch: Sendable {
    /// When and why the run went live.
    public struct Point: Sendable, Hashable {
        /// The first live request: a model's (its step and decision number, from 0) or a tool's
        /// (its call id).
        public var step: Int?
        public var decision: Int?
        public var callId: String?
        public var reason: String

        public init(step: Int? = nil, decision: Int? = nil, callId: String? = nil, reason: String) {
            self.step = step
            self.decision = decision
            self.callId = callId
            self.reason = reason
        }
    }

    private let point = Mutex<Point?>(nil)

    public init() {}

    public var isLive: Bool { point.withLock { $0 != nil } }
    public var wentLive: Point? { point.withLock { $0 } }

    /// Goes live (the first call wins: later requests are live anyway).
    public func goLive(_ at: Point) {
        point.withLock { point in if point == nil { point = at } }
    }
}

/// A model that serves a log's recorded replies while each request is the one the log's run
/// made for that decision (`isRecordedRequest`), and asks `live` from the first that is not on.
public struct PrefixReplayModel: ModelClient {
    public var recorded: [DecisionMade]
    public var live: any ModelClient
    public var liveSwitch: LiveSwitch
    /// Whether `request` is what the log's run asked for its decision (nil), or how it differs.
    public var difference: @Sendable (ModelRequest) -> String?

    public init(
        recorded: [DecisionMade], live: any ModelClient, liveSwitch: LiveSwitch, difference: @escaping @Sendable (ModelRequest) -> String?
    ) {
        self.recorded = recorded
        self.live = live
        self.liveSwitch = liveSwitch
        self.difference = difference
    }

    public var identity: ModelIdentity { live.identity }

    public func reply(to request: ModelRequest) async throws -> ModelReply {
        if !liveSwitch.isLive {
            if request.decisionIndex >= recorded.count {
                liveSwitch.goLive(
                    LiveSwitch.Point(
                        step: request.step, decision: request.decisionIndex,
                        reason: "the log records \(recorded.count) decisions; the run asks for one more"))
            } else if let why = difference(request) {
                liveSwitch.goLive(LiveSwitch.Point(step: request.step, decision: request.decisionIndex, reason: why))
            } else {
                return ModelReply(recorded: recorded[request.decisionIndex])
            }
        }
        return try await live.reply(to: request)
    }
}

/// A tool that answers from the log while the run is not live and the log has the same call,
/// and runs `live` from the first request the log cannot answer (or once the model went live).
public struct PrefixToolHost: ToolHost {
    public var recorded: RecordedToolHost
    public var live: any ToolHost
    public var liveSwitch: LiveSwitch

    public init(recorded: RecordedToolHost, live: any ToolHost, liveSwitch: LiveSwitch) {
        self.recorded = recorded
        self.live = live
        self.liveSwitch = liveSwitch
    }

    public var timeoutGraceMs: Int { live.timeoutGraceMs }

    public func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
        if !liveSwitch.isLive {
            switch recorded.answer(request) {
            case .success(let outcome): return outcome
            case .failure(let why): liveSwitch.goLive(LiveSwitch.Point(callId: request.callId, reason: why.message))
            }
        }
        return try await live.invoke(request)
    }
}
