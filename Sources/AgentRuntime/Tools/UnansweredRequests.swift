import Synchronization

/// A thread-safe list of the requests a recorded log could not answer.
public final class UnansweredRequests: Sendable {
    // The messages are guarded by the mutex.
    private let messages = Mutex<[String]>([])

    public init() {}

    public func append(_ message: String) { messages.withLock { $0.append(message) } }

    public var all: [String] { messages.withLock { $0 } }
}
