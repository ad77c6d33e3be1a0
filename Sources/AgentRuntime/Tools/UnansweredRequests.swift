import Synchronization

/// A tool request that a recorded log could not answer, and why.
public struct UnansweredRequest: Sendable, Hashable {
    public var callId: String
    public var attempt: Int
    public var tool: String
    /// What the log holds instead (no result for that attempt, or another call).
    public var message: String

    public init(callId: String, attempt: Int, tool: String, message: String) {
        self.callId = callId
        self.attempt = attempt
        self.tool = tool
        self.message = message
    }
}

/// A thread-safe list of the requests a recorded log could not answer.
public final class UnansweredRequests: Sendable {
    // The requests are guarded by the mutex.
    private let requests = Mutex<[UnansweredRequest]>([])

    public init() {}

    public func append(_ request: UnansweredRequest) { requests.withLock { $0.append(request) } }

    public var all: [UnansweredRequest] { requests.withLock { $0 } }

    /// The request refused for this attempt of this call, if one was.
    public func request(callId: String, attempt: Int) -> UnansweredRequest? {
        requests.withLock { $0.first { $0.callId == callId && $0.attempt == attempt } }
    }
}
