public import TraceCore

/// A tool implemented by a Swift closure: the library API for tools in code.
///
/// ```swift
/// let add = ClosureToolHost { arguments in
///     .int((arguments["a"]?.intValue ?? 0) + (arguments["b"]?.intValue ?? 0))
/// }
/// ```
/// The closure should honour task cancellation: the runtime cancels it on timeout. It runs on
/// the run's own thread (`ExecutorThread`), as the loop does: the calls of one step overlap
/// where they wait, so a closure that computes for long, or blocks, should do that work on a
/// thread of its own (a blocked thread delays the run, and its answer past the deadline is
/// recorded as the timeout it was).
public struct ClosureToolHost: ToolHost {
    private let body: @Sendable (ToolRequest) async throws -> ToolOutcome

    /// A tool returning JSON; a thrown error becomes a non-retryable failure.
    public init(_ body: @escaping @Sendable (JSONValue) async throws -> JSONValue) {
        self.body = { request in .ok(try await body(request.arguments)) }
    }

    /// A tool with full control over the outcome.
    public init(outcome body: @escaping @Sendable (ToolRequest) async throws -> ToolOutcome) {
        self.body = body
    }

    public func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
        try await body(request)
    }
}
