public import TraceCore

/// A tool host that answers from a recorded log: the result recorded for the same call id and
/// attempt, with its recorded duration. It never runs anything: a request the log cannot answer
/// (another call, other arguments, one attempt more) is a failure that says so, and is noted in
/// `unanswered` for the re-run report.
public struct RecordedToolHost: ToolHost {
    /// What the log holds for one attempt.
    public struct Entry: Sendable, Hashable {
        public var tool: String
        public var arguments: JSONValue
        public var result: ToolCompleted
        /// The body of the result's stored content, when the output was kept as content.
        public var content: [UInt8]?

        public init(tool: String, arguments: JSONValue, result: ToolCompleted, content: [UInt8]?) {
            self.tool = tool
            self.arguments = arguments
            self.result = result
            self.content = content
        }
    }

    public struct Key: Sendable, Hashable {
        public var callId: String
        public var attempt: Int

        public init(callId: String, attempt: Int) {
            self.callId = callId
            self.attempt = attempt
        }
    }

    public let entries: [Key: Entry]
    /// Requests the log could not answer, in the order they came.
    public let unanswered: UnansweredRequests

    public init(entries: [Key: Entry], unanswered: UnansweredRequests) {
        self.entries = entries
        self.unanswered = unanswered
    }

    public func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
        switch answer(request) {
        case .success(let outcome): return outcome
        case .failure(let why): return refuse(why.message, request)
        }
    }

    /// Why the log cannot answer a request.
    public struct Unanswerable: Error, Sendable {
        public var message: String
    }

    /// The recorded outcome for `request`, or why the log has none (nothing is noted).
    public func answer(_ request: ToolRequest) -> Result<ToolOutcome, Unanswerable> {
        guard let entry = entries[Key(callId: request.callId, attempt: request.attempt)] else {
            return .failure(
                Unanswerable(message: "the log has no result for \(request.callId) attempt \(request.attempt) (\(request.tool))"))
        }
        guard entry.tool == request.tool, entry.arguments == request.arguments else {
            return .failure(
                Unanswerable(
                    message:
                        "the log's \(request.callId) is \(entry.tool) \(JSONWriter.encodeString(entry.arguments)), not \(request.tool) "
                        + JSONWriter.encodeString(request.arguments)))
        }
        let result = entry.result
        var outcome = ToolOutcome(
            status: result.status, output: result.output, error: result.error, isRetryable: result.isRetryable ?? false,
            stderr: result.stderr, durationUs: result.durationUs)
        if result.outputText == nil, let content = entry.content {
            // Stored output comes back as it went in: JSON if it parses, raw bytes if not.
            if let parsed = try? JSONParser.parse(content), result.status == .ok {
                outcome.output = parsed
            } else {
                outcome.rawOutput = content
            }
        }
        return .success(outcome)
    }

    private func refuse(_ message: String, _ request: ToolRequest) -> ToolOutcome {
        unanswered.append(UnansweredRequest(callId: request.callId, attempt: request.attempt, tool: request.tool, message: message))
        return ToolOutcome(status: .refused, error: "not run: \(message)", durationUs: 0)
    }
}
