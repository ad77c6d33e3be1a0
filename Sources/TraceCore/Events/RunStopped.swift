/// Why a run ended. Every run ends with exactly one.
public enum StopReason: String, JSONEnum {
    /// The agent answered or finished its task.
    case success
    /// The agent could not go on (asked a human, gave up, a dependency was missing).
    case blocked
    /// A call needs a human's approval; the run can be resumed once it is given.
    case approvalRequired = "approval_required"
    /// A limit fired; `limit` says which.
    case budgetExhausted = "budget_exhausted"
    /// The model's output was rejected too many times.
    case invalidDecision = "invalid_decision"
    /// Policy denied a call and the configuration makes that final.
    case policyDenied = "policy_denied"
    /// A tool failed and the configuration makes that final.
    case toolFailure = "tool_failure"
    // A conversation's endings (format version 4: `Event.conversationVersion`).
    /// The simulated user was done (its stop token).
    case userStop = "user_stop"
    /// The user asked for a human.
    case userTransfer = "user_transfer"
    /// The user's request was outside what the agent serves.
    case userOutOfScope = "user_out_of_scope"
    /// The agent ended the conversation (a `stop` decision).
    case agentStop = "agent_stop"
    /// The conversation reached its case's `maxTurns` with the user not done.
    case maxTurns = "max_turns"

    /// Whether a run that stopped so ended as it should end: it answered, it waits for a person, or
    /// its conversation ended the way a conversation ends (the user or the agent ended it; running
    /// out of turns is a limit, not an ending).
    public var isOrdinaryEnd: Bool {
        switch self {
        case .success, .approvalRequired, .userStop, .userTransfer, .userOutOfScope, .agentStop: return true
        case .blocked, .budgetExhausted, .invalidDecision, .policyDenied, .toolFailure, .maxTurns: return false
        }
    }

    /// Whether only a conversation ends so: a line recording it is version 4, which older
    /// readers refuse rather than misread (docs/log-format.md §6).
    public var isConversationEnding: Bool {
        switch self {
        case .userStop, .userTransfer, .userOutOfScope, .agentStop, .maxTurns: return true
        case .success, .blocked, .approvalRequired, .budgetExhausted, .invalidDecision, .policyDenied, .toolFailure: return false
        }
    }
}

/// Which budget ran out.
public enum LimitKind: String, JSONEnum {
    case maxSteps = "max_steps"
    case maxToolCalls = "max_tool_calls"
    case timeout
    case tokenBudget = "token_budget"
}

/// `run_stopped`: the last event of a run.
public struct RunStopped: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var reason: StopReason
    /// The limit that fired, for `budget_exhausted`.
    public var limit: LimitKind?
    /// The final answer, for `success`.
    public var answer: String?
    /// What went wrong, when an error ended the run.
    public var error: String?

    /// How the runtime's `error` begins when the run was stopped from outside (Ctrl-C, SIGTERM,
    /// a cancelled task) rather than ending on its own.
    public static let interruptionPrefix = "interrupted:"

    /// The run was stopped from outside, not by its own loop.
    public var isInterruption: Bool { reason == .blocked && (error ?? "").hasPrefix(Self.interruptionPrefix) }

    /// How `error` begins when the agent's model ended the run rather than the agent: its last
    /// request failed (nothing listening, an HTTP error, a reply that does not parse) or was still
    /// unanswered when a time limit ran out. Such a run shows what the harness could not get, not
    /// what the agent does, so no expectation can pass on it (docs/eval-cases.md, "Evidence").
    public static let modelFailurePrefix = "model failed:"

    /// How `error` begins when a conversation's simulated user could not give a turn (an empty,
    /// malformed or refused reply, its model failing, a script with nothing to say): the run
    /// shows what the simulator could not do, never the agent's failure (docs/conversations.md).
    public static let simulatorFaultPrefix = "user simulator failed:"

    /// The run ended because its simulated user could not go on (see `simulatorFaultPrefix`).
    public var isSimulatorFault: Bool { (error ?? "").hasPrefix(Self.simulatorFaultPrefix) }

    /// What follows `modelFailurePrefix` when an imported trace does not hold the reply of the
    /// run's last model call (its exporter captured no message content): how the run ended is
    /// not known, so no case can be judged over it.
    public static let replyNotCapturedPhrase = "the reply of the run's last model call was not captured"

    /// What the error of a `blocked` stop the runtime made for a fault of its own holds (not the
    /// agent's choice to stop): the log could take no more, the runtime itself failed, or an
    /// approved call could not be run from a log that keeps its arguments redacted. Such a run was
    /// cut short, and what it would have done after is unproven (`Evidence`).
    public static let runtimeFaultPhrases = [
        "the run could not be recorded further", "the runtime failed", "the runtime ended the loop without a stop reason",
        "was approved, but the log keeps its arguments redacted",
    ]

    /// The runtime stopped the run for a fault of its own (`runtimeFaultPhrases`).
    public var isRuntimeFault: Bool { reason == .blocked && Self.runtimeFaultPhrases.contains { (error ?? "").contains($0) } }

    /// The run ended because its model did not answer (see `modelFailurePrefix`).
    public var isModelFailure: Bool { (error ?? "").hasPrefix(Self.modelFailurePrefix) }

    /// What `error` says when a recorded command (`record`, a `command:` case) was killed by a
    /// signal, followed by its number: it crashed, or something outside (the OOM killer) ended it.
    public static let commandKilledPhrase = "the command was killed by signal "
    /// What `error` says when a recorded command exited with a status other than 0, followed by it.
    public static let commandFailedPhrase = "the command exited with status "

    /// The run ended because its program ended abnormally (`commandKilledPhrase`,
    /// `commandFailedPhrase`), not on an answer of its own: what it would have done after is
    /// unknown, like a run a limit cut short (docs/eval-cases.md, "Evidence").
    public var isAbnormalCommandEnd: Bool {
        guard reason == .blocked, let error else { return false }
        return error.contains(Self.commandKilledPhrase) || error.contains(Self.commandFailedPhrase)
    }

    public init(reason: StopReason, limit: LimitKind? = nil, answer: String? = nil, error: String? = nil) {
        self.reason = reason
        self.limit = limit
        self.answer = answer
        self.error = error
    }

    public init(from scanner: inout JSONScanner) throws {
        try self.init(from: &scanner, version: Event.conversationVersion)
    }

    /// Reads a stop of an event of envelope `version`: a conversation's ending needs version 4.
    public init(from scanner: inout JSONScanner, version: Int) throws {
        var reason: StopReason?
        var limit: LimitKind?
        var answer: String?
        var error: String?
        try scanner.readObject(known: stopNames) { scanner, key in
            switch key {
            case "reason": reason = try scanner.read()
            case "limit": limit = try scanner.readOptional()
            case "answer": answer = try scanner.readOptional()
            case "error": error = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.reason = try required(reason, "reason")
        if self.reason.isConversationEnding, version < Event.conversationVersion {
            throw TraceCoreError(
                .invalidField, "is \"\(self.reason.rawValue)\", a conversation's ending, which only a version 4 line may record",
                fieldPath: "reason")
        }
        self.limit = limit
        self.answer = answer
        self.error = error
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("answer", answer)
        object.set("error", error)
        object.set("limit", limit)
        object.set("reason", reason)
    }
}

/// `step_ended`: a step is over; carries the digest of the state as it stands.
///
/// `stateDigest` is `RunState.digest` of the state folded from every event before this one.
public struct StepEnded: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var stateDigest: String

    public init(stateDigest: String) {
        self.stateDigest = stateDigest
    }

    public init(from scanner: inout JSONScanner) throws {
        var stateDigest: String?
        try scanner.readObject(known: stepEndedNames) { scanner, key in
            switch key {
            case "state_digest": stateDigest = try scanner.readHash()
            default: try scanner.skipValue()
            }
        }
        self.stateDigest = try required(stateDigest, "state_digest")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("state_digest", stateDigest)
    }
}

/// The member names `RunStopped`'s reader knows, in the order the writer writes them.
private let stopNames = MemberNames(["answer", "error", "limit", "reason"])

/// The member names `StepEnded`'s reader knows, in the order the writer writes them.
private let stepEndedNames = MemberNames(["state_digest"])
