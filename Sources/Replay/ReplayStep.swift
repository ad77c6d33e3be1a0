import TraceCore
public import TraceLog

/// One step of a replayed run: its events, what they changed, and what went wrong in it.
public struct ReplayStep: Sendable {
    public var step: Int
    public var events: [RecordedEvent]
    /// The state's counters before the step's first event and after its last.
    public var before: StateSummary
    public var after: StateSummary
    /// Every `step_ended` of the step, checked against the digest of the rebuilt state.
    public var digests: [DigestCheck]
    public var problems: [StepProblem]

    public init(
        step: Int, events: [RecordedEvent], before: StateSummary, after: StateSummary, digests: [DigestCheck], problems: [StepProblem]
    ) {
        self.step = step
        self.events = events
        self.before = before
        self.after = after
        self.digests = digests
        self.problems = problems
    }

    /// The sequence numbers of a step folded without its events (`ReplayFold(keepsEvents: false)`).
    var firstEventSequence: Int?
    var lastEventSequence: Int?

    public var firstSequence: Int { events.first?.event.sequence ?? firstEventSequence ?? 0 }
    public var lastSequence: Int { events.last?.event.sequence ?? lastEventSequence ?? 0 }
    /// Whether the step holds something worth stopping at (replay's "next failure").
    public var hasProblem: Bool { !problems.isEmpty }
}

/// A recorded state digest and the one replay computed.
public struct DigestCheck: Sendable, Hashable {
    public var sequence: Int
    public var recorded: String
    public var computed: String
    public var isMatch: Bool { recorded == computed }
}

/// Something in a step a developer looking for a failure wants to see.
public struct StepProblem: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case deniedCall = "denied_call"
        case toolError = "tool_error"
        case invalidDecision = "invalid_decision"
        case limit
        case failedStop = "failed_stop"
        case digestMismatch = "digest_mismatch"
        case anomaly
    }

    public var kind: Kind
    public var sequence: Int
    public var message: String
}

extension StepProblem {
    /// The problems one event shows on its own (anomalies come from the fold).
    static func problems(of event: Event) -> [StepProblem] {
        switch event.payload {
        case .verdictGiven(let verdict) where verdict.verdict == .deny:
            return [
                StepProblem(
                    kind: .deniedCall, sequence: event.sequence,
                    message: "\(verdict.tool) (\(verdict.callId)) denied" + (verdict.rule.map { " by rule \($0)" } ?? "")
                        + (verdict.reason.map { ": \($0)" } ?? ""))
            ]
        case .approvalRecorded(let approval) where !approval.isGranted:
            return [
                StepProblem(
                    kind: .deniedCall, sequence: event.sequence, message: "\(approval.callId) refused by \(approval.approver ?? "a human")")
            ]
        case .toolCompleted(let result) where result.status != .ok:
            return [
                StepProblem(
                    kind: .toolError, sequence: event.sequence,
                    message: "\(result.tool) (\(result.callId)) attempt \(result.attempt): \(result.status.rawValue)"
                        + (result.error.map { " — \($0)" } ?? ""))
            ]
        case .decisionMade(let made):
            if case .invalid(let invalid) = made.outcome {
                return [
                    StepProblem(kind: .invalidDecision, sequence: event.sequence, message: "\(invalid.kind.rawValue): \(invalid.message)")
                ]
            }
            return []
        // A conversation's ending is how it ended, not a problem; its turns running out is, like a limit.
        case .runStopped(let stop) where !stop.reason.isOrdinaryEnd:
            let kind: Kind = stop.limit != nil ? .limit : .failedStop
            return [
                StepProblem(
                    kind: kind, sequence: event.sequence,
                    message: "stopped: \(stop.reason.rawValue)" + (stop.limit.map { " (\($0.rawValue))" } ?? "")
                        + (stop.error.map { " — \($0)" } ?? ""))
            ]
        default:
            return []
        }
    }
}
