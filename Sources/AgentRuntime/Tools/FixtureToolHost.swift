public import TraceCore

/// A tool whose answers are declared in the agent file, for deterministic evals: the first
/// response whose `when` matches the arguments is given, with errors and delays on demand.
public struct FixtureToolHost: ToolHost {
    /// One declared answer.
    public struct Response: Sendable, Hashable {
        /// Arguments this response is for: every key given must be present with an equal
        /// value (nested objects compare the same way); nil matches any arguments.
        public var when: JSONValue?
        public var output: JSONValue?
        /// Makes the response a failure with this message.
        public var error: String?
        public var isRetryable: Bool
        /// The first this-many attempts of each call fail (retryable) before `output` is
        /// given: a flaky tool, deterministically.
        public var failAttempts: Int
        /// How long each attempt takes, in milliseconds (really waited, so timeouts fire).
        public var delayMs: Int

        public init(
            when: JSONValue? = nil, output: JSONValue? = nil, error: String? = nil, isRetryable: Bool = false,
            failAttempts: Int = 0, delayMs: Int = 0
        ) {
            self.when = when
            self.output = output
            self.error = error
            self.isRetryable = isRetryable
            self.failAttempts = failAttempts
            self.delayMs = delayMs
        }
    }

    public var responses: [Response]

    public init(responses: [Response]) {
        self.responses = responses
    }

    public func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
        guard let response = responses.first(where: { $0.when.map { request.arguments.contains($0) } ?? true }) else {
            return .failure(
                "the fixture tool \"\(request.tool)\" has no response for the arguments \(JSONWriter.encodeString(request.arguments))")
        }
        if response.delayMs > 0 { try await Task.sleep(for: .milliseconds(response.delayMs)) }
        if request.attempt <= response.failAttempts {
            return .failure(response.error ?? "temporary failure (attempt \(request.attempt))", isRetryable: true)
        }
        if let error = response.error, response.failAttempts == 0 {
            return .failure(error, isRetryable: response.isRetryable)
        }
        return .ok(response.output ?? .null)
    }
}
