/// The policy gate's answer for one tool call.
public enum Verdict: String, JSONEnum {
    case allow
    case deny
    case approvalRequired = "approval_required"
}

/// `verdict_given`: the policy gate judged one proposed call. Exactly one per call.
public struct VerdictGiven: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var callId: String
    public var tool: String
    public var verdict: Verdict
    public var reason: String?
    /// The rule that decided, by its name or position in the rules file.
    public var rule: String?

    public init(callId: String, tool: String, verdict: Verdict, reason: String? = nil, rule: String? = nil) {
        self.callId = callId
        self.tool = tool
        self.verdict = verdict
        self.reason = reason
        self.rule = rule
    }

    public init(from scanner: inout JSONScanner) throws {
        var callId: String?
        var tool: String?
        var verdict: Verdict?
        var reason: String?
        var rule: String?
        try scanner.readObject(known: verdictNames) { scanner, key in
            switch key {
            case "call_id": callId = try scanner.read()
            case "tool": tool = try scanner.read()
            case "verdict": verdict = try scanner.read()
            case "reason": reason = try scanner.readOptional()
            case "rule": rule = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.callId = try required(callId, "call_id")
        self.tool = try required(tool, "tool")
        self.verdict = try required(verdict, "verdict")
        self.reason = reason
        self.rule = rule
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("call_id", callId)
        object.set("reason", reason)
        object.set("rule", rule)
        object.set("tool", tool)
        object.set("verdict", verdict)
    }
}

/// `tool_intended`: written, and made durable, before a tool runs (write-ahead).
///
/// A log whose last event for a call is its intent says the tool may or may not have run.
public struct ToolIntended: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var callId: String
    public var tool: String
    /// The arguments, held as their canonical JSON (`ToolCall.argumentsText`).
    public var argumentsText: JSONText
    /// The arguments (parsed from `argumentsText` on each use).
    public var arguments: JSONValue {
        get { argumentsText.value }
        set { argumentsText = JSONText(newValue) }
    }
    /// 1 for the first try, 2 for the first retry, ...
    public var attempt: Int

    public init(callId: String, tool: String, arguments: JSONValue, attempt: Int) {
        self.init(callId: callId, tool: tool, argumentsText: JSONText(arguments), attempt: attempt)
    }

    public init(callId: String, tool: String, argumentsText: JSONText, attempt: Int) {
        self.callId = callId
        self.tool = tool
        self.argumentsText = argumentsText
        self.attempt = attempt
    }

    public init(from scanner: inout JSONScanner) throws {
        var callId: String?
        var tool: String?
        var arguments: JSONText?
        var attempt: Int?
        try scanner.readObject(known: intentNames) { scanner, key in
            switch key {
            case "call_id": callId = try scanner.read()
            case "tool": tool = try scanner.read()
            case "arguments": arguments = try scanner.read()
            case "attempt": attempt = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.callId = try required(callId, "call_id")
        self.tool = try required(tool, "tool")
        self.argumentsText = try required(arguments, "arguments")
        self.attempt = try required(attempt, "attempt")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("arguments", argumentsText)
        object.set("attempt", attempt)
        object.set("call_id", callId)
        object.set("tool", tool)
    }
}

/// How a tool attempt ended.
public enum ToolStatus: String, JSONEnum {
    /// It did its work; `output` holds the result.
    case ok
    /// The tool declined (a business rule, not a fault).
    case refused
    /// It failed: crashed, timed out, exited non-zero, printed what does not parse.
    case error
}

/// `tool_completed`: one attempt of a tool call ended.
public struct ToolCompleted: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var callId: String
    public var tool: String
    public var attempt: Int
    public var status: ToolStatus
    /// The result data, when small enough to hold inline, as its canonical JSON: a long run's
    /// state keeps every result, and as text each costs its size (a tree costs several times
    /// that).
    public var outputText: JSONText?
    /// `sha256:<hex>` of a `content_stored` event holding output too large or not JSON.
    public var contentHash: String?
    /// What went wrong, for `refused` and `error`.
    public var error: String?
    /// Whether the runtime may retry this failure.
    public var isRetryable: Bool?
    /// The tail of what the tool wrote to its error stream (subprocess tools).
    public var stderr: String?
    public var durationUs: Int

    public init(
        callId: String, tool: String, attempt: Int, status: ToolStatus, output: JSONValue? = nil,
        contentHash: String? = nil, error: String? = nil, isRetryable: Bool? = nil, stderr: String? = nil, durationUs: Int
    ) {
        self.callId = callId
        self.tool = tool
        self.attempt = attempt
        self.status = status
        self.outputText = output.map(JSONText.init)
        self.contentHash = contentHash
        self.error = error
        self.isRetryable = isRetryable
        self.stderr = stderr
        self.durationUs = durationUs
    }

    /// The result data, when small enough to hold inline (made from `outputText` on each use).
    public var output: JSONValue? {
        get { outputText?.value }
        set { outputText = newValue.map(JSONText.init) }
    }

    public init(from scanner: inout JSONScanner) throws {
        var callId: String?
        var tool: String?
        var attempt: Int?
        var status: ToolStatus?
        var output: JSONText?
        var contentHash: String?
        var error: String?
        var isRetryable: Bool?
        var stderr: String?
        var durationUs: Int?
        try scanner.readObject(known: resultNames) { scanner, key in
            switch key {
            case "call_id": callId = try scanner.read()
            case "tool": tool = try scanner.read()
            case "attempt": attempt = try scanner.read()
            case "status": status = try scanner.read()
            case "output": output = try JSONText(from: &scanner)
            case "content_hash": contentHash = try scanner.readOptionalHash()
            case "error": error = try scanner.readOptional()
            case "retryable": isRetryable = try scanner.readOptional()
            case "stderr": stderr = try scanner.readOptional()
            case "duration_us": durationUs = try scanner.readMeasure()
            default: try scanner.skipValue()
            }
        }
        self.callId = try required(callId, "call_id")
        self.tool = try required(tool, "tool")
        self.attempt = try required(attempt, "attempt")
        self.status = try required(status, "status")
        self.outputText = output
        self.contentHash = contentHash
        self.error = error
        self.isRetryable = isRetryable
        self.stderr = stderr
        self.durationUs = try required(durationUs, "duration_us")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("attempt", attempt)
        object.set("call_id", callId)
        object.set("content_hash", contentHash)
        object.set("duration_us", durationUs)
        object.set("error", error)
        object.set("output", outputText)
        object.set("retryable", isRetryable)
        object.set("status", status)
        object.set("stderr", stderr)
        object.set("tool", tool)
    }
}

/// `approval_recorded`: a human granted or refused a call that needed approval.
public struct ApprovalRecorded: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var callId: String
    public var isGranted: Bool
    public var approver: String?
    public var reason: String?

    public init(callId: String, isGranted: Bool, approver: String? = nil, reason: String? = nil) {
        self.callId = callId
        self.isGranted = isGranted
        self.approver = approver
        self.reason = reason
    }

    public init(from scanner: inout JSONScanner) throws {
        var callId: String?
        var isGranted: Bool?
        var approver: String?
        var reason: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "call_id": callId = try scanner.read()
            case "granted": isGranted = try scanner.read()
            case "approver": approver = try scanner.readOptional()
            case "reason": reason = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.callId = try required(callId, "call_id")
        self.isGranted = try required(isGranted, "granted")
        self.approver = approver
        self.reason = reason
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("approver", approver)
        object.set("call_id", callId)
        object.set("granted", isGranted)
        object.set("reason", reason)
    }
}

/// The member names `VerdictGiven`'s reader knows, in the order the writer writes them.
private let verdictNames = MemberNames(["call_id", "reason", "rule", "tool", "verdict"])

/// The member names `ToolIntended`'s reader knows, in the order the writer writes them.
private let intentNames = MemberNames(["arguments", "attempt", "call_id", "tool"])

/// The member names `ToolCompleted`'s reader knows, in the order the writer writes them.
private let resultNames = MemberNames([
    "attempt", "call_id", "content_hash", "duration_us", "error", "output", "retryable", "status", "stderr", "tool",
])
