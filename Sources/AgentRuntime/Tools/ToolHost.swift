public import TraceCore

/// One attempt of one tool call, as a host receives it.
public struct ToolRequest: Sendable, Hashable {
    public var callId: String
    public var tool: String
    /// Arguments, already validated against the tool's input schema.
    public var arguments: JSONValue
    /// 1 for the first attempt, 2 for the first retry…
    public var attempt: Int
    /// How long the attempt may take; hosts that run outside this process enforce it themselves.
    public var timeoutMs: Int

    public init(callId: String, tool: String, arguments: JSONValue, attempt: Int, timeoutMs: Int) {
        self.callId = callId
        self.tool = tool
        self.arguments = arguments
        self.attempt = attempt
        self.timeoutMs = timeoutMs
    }
}

/// What one attempt produced.
public struct ToolOutcome: Sendable, Hashable {
    public var status: ToolStatus
    /// The result, when it is JSON.
    public var output: JSONValue?
    /// Output that is not JSON (kept as content so nothing is lost), with its media type.
    public var rawOutput: [UInt8]?
    /// What went wrong, for `error` and `refused`.
    public var error: String?
    /// Whether trying again may succeed.
    public var isRetryable: Bool
    /// What the tool wrote to its error stream, for the record.
    public var stderr: String?
    /// The attempt's duration when the host knows it better than the runtime's measurement
    /// (a replayed result keeps its recorded duration).
    public var durationUs: Int?

    public init(
        status: ToolStatus, output: JSONValue? = nil, rawOutput: [UInt8]? = nil, error: String? = nil,
        isRetryable: Bool = false, stderr: String? = nil, durationUs: Int? = nil
    ) {
        self.status = status
        self.output = output
        self.rawOutput = rawOutput
        self.error = error
        self.isRetryable = isRetryable
        self.stderr = stderr
        self.durationUs = durationUs
    }

    /// A successful result.
    public static func ok(_ output: JSONValue) -> ToolOutcome { ToolOutcome(status: .ok, output: output) }

    /// A failure, retryable or not.
    public static func failure(_ message: String, isRetryable: Bool = false) -> ToolOutcome {
        ToolOutcome(status: .error, error: message, isRetryable: isRetryable)
    }
}

/// Runs tool calls: in this process, in a subprocess, or from fixtures.
///
/// A host may throw; the runtime records a thrown error as a failed attempt, so a throwing
/// host never ends a run without its stop event.
public protocol ToolHost: Sendable {
    func invoke(_ request: ToolRequest) async throws -> ToolOutcome

    /// How long past a request's timeout the runtime waits before cancelling the attempt
    /// itself, for hosts that enforce the timeout on their own work and report it (a
    /// subprocess host kills its process group and says so). 0 for hosts that rely on
    /// cancellation.
    var timeoutGraceMs: Int { get }
}

extension ToolHost {
    public var timeoutGraceMs: Int { 0 }
}
