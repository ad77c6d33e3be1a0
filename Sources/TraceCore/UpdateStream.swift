/// The one bridge from work that reports as it goes to a sequence of updates: `work` runs in a
/// task of its own and is given a function that yields an update; what it returns is the last
/// update, and a thrown error ends the sequence with it. A consumer that stops iterating
/// cancels the task (a run or a pipeline then stops with its stop recorded).
extension AsyncThrowingStream where Element: Sendable, Failure == any Error {
    public init(producing work: @escaping @Sendable (_ yield: @escaping @Sendable (Element) -> Void) async throws -> Element) {
        let (stream, continuation) = Self.makeStream()
        let task = Task {
            do {
                continuation.yield(try await work { continuation.yield($0) })
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { termination in
            if case .cancelled = termination { task.cancel() }
        }
        self = stream
    }
}

/// The same for work that cannot fail (an eval session reports its failures in its report).
extension AsyncStream where Element: Sendable {
    public init(producing work: @escaping @Sendable (_ yield: @escaping @Sendable (Element) -> Void) async -> Element) {
        let (stream, continuation) = Self.makeStream()
        let task = Task {
            continuation.yield(await work { continuation.yield($0) })
            continuation.finish()
        }
        continuation.onTermination = { termination in
            if case .cancelled = termination { task.cancel() }
        }
        self = stream
    }
}
