/// The state of one run: the single source of truth, changed only by folding events into it.
///
/// The live runtime and the replayer build it with the same `reduce(into:_:)`, so a replay
/// cannot disagree with what happened. Everything here is derived from the log; nothing comes
/// from a clock, a model or the network.
public struct RunState: Sendable, Hashable {
    public var runId: String?
    /// The `run_started` payload: goal, agent, model, policy, tools, limits.
    public var start: RunStarted?
    public var startedAtUs: Int?
    public var lastEventAtUs: Int?
    /// Events folded so far, of every kind.
    public var eventCount = 0
    /// The step of the last event folded.
    public var step = 0
    /// `step_ended` events folded.
    public var stepsCompleted = 0
    public var contextPacketCount = 0
    /// The token estimate of the last context packet.
    public var lastTokenEstimate: Int?
    /// Every model decision, valid or not, in order.
    public var decisions: [DecisionRecord] = []
    /// Every proposed tool call, in the order the model proposed them.
    public var calls: [ToolCallRecord] = []
    public var usage = ResourceUsage()
    /// Every content blob stored, in order.
    public var contents: [ContentReference] = []
    /// The digest carried by the last `step_ended`.
    public var lastStateDigest: String?
    /// The `run_stopped` payload, once the run has stopped.
    public var stop: RunStopped?
    /// Times a run stopped for approval was resumed by an approval.
    public var resumeCount = 0
    /// Events of kinds this version does not know, skipped.
    public var unknownEventCount = 0
    /// Events that do not fit what came before (a result for a call never proposed, a tool
    /// executed without an allow verdict). The fold is total: it records them and goes on.
    public var anomalies: [Anomaly] = []

    /// The state before any event.
    public init() {}

    /// The state after folding `events` in order.
    public init(folding events: some Sequence<Event>) {
        self.init()
        for event in events { RunState.reduce(into: &self, event) }
    }
}

/// One model decision as the state keeps it.
public struct DecisionRecord: Sendable, Hashable {
    public var step: Int
    public var sequence: Int
    public var outcome: DecisionMade.Outcome
    public var usage: TokenUsage?

    public init(step: Int, sequence: Int, outcome: DecisionMade.Outcome, usage: TokenUsage?) {
        self.step = step
        self.sequence = sequence
        self.outcome = outcome
        self.usage = usage
    }
}

/// One proposed tool call and everything that happened to it.
public struct ToolCallRecord: Sendable, Hashable {
    public var id: String
    public var tool: String
    /// The step whose decision proposed it.
    public var step: Int
    public var arguments: JSONValue
    public var verdict: VerdictGiven?
    public var approval: ApprovalRecorded?
    /// `tool_intended` events: attempts started.
    public var attempts = 0
    /// `tool_completed` events, one per finished attempt, in order.
    public var results: [ToolCompleted] = []

    public init(id: String, tool: String, step: Int, arguments: JSONValue) {
        self.id = id
        self.tool = tool
        self.step = step
        self.arguments = arguments
    }

    /// Whether the tool was started at least once.
    public var isExecuted: Bool { attempts > 0 }

    /// Whether policy denied it, or a human refused it.
    public var isDenied: Bool {
        verdict?.verdict == .deny || approval?.isGranted == false
    }

    /// Whether the policy gate permits running it: allowed, or approved after
    /// `approval_required`.
    public var isPermitted: Bool {
        switch verdict?.verdict {
        case .allow: return true
        case .approvalRequired: return approval?.isGranted == true
        case .deny, nil: return false
        }
    }

    /// The last finished attempt.
    public var lastResult: ToolCompleted? { results.last }
}

/// Budgets used so far.
public struct ResourceUsage: Sendable, Hashable {
    public var inputTokens = 0
    public var outputTokens = 0
    public var costUSD = 0.0
    public var modelCalls = 0
    public var modelLatencyUs = 0
    public var toolAttempts = 0
    public var toolTimeUs = 0

    public init() {}

    public var totalTokens: Int { inputTokens + outputTokens }
}

/// A stored blob as the state keeps it: the reference, not the body.
public struct ContentReference: Sendable, Hashable {
    public var hash: String
    public var mediaType: String
    public var byteCount: Int

    public init(hash: String, mediaType: String, byteCount: Int) {
        self.hash = hash
        self.mediaType = mediaType
        self.byteCount = byteCount
    }
}

/// An event that did not fit the state it was folded into.
public struct Anomaly: Sendable, Hashable {
    public var sequence: Int
    public var message: String

    public init(sequence: Int, message: String) {
        self.sequence = sequence
        self.message = message
    }
}
