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
    public var calls: [ToolCallRecord] = [] {
        // A change the fold did not make itself (a loaded snapshot, a trimmed list) leaves the
        // id index to be rebuilt; the fold marks it fresh again after its own changes.
        didSet { callIds.isStale = true }
    }
    public var usage = ResourceUsage()
    /// Every content blob stored, in order.
    public var contents: [ContentReference] = []
    /// The digest carried by the last `step_ended`.
    public var lastStateDigest: String?
    /// The `run_stopped` payload, once the run has stopped.
    public var stop: RunStopped?
    /// Times a run stopped for approval was resumed by an approval.
    public var resumeCount = 0
    /// The last `run_forked` folded: this run is a fork of that parent (nil for a run that is not).
    public var forked: RunForked?
    /// A conversation's user turns, in order (empty for a run that is no conversation, whose
    /// state's JSON and digest then have no `user_turns` member at all).
    public var userTurns: [UserTurnRecord] = []
    /// Events of kinds this version does not know, skipped.
    public var unknownEventCount = 0
    /// Events that do not fit what came before (a result for a call never proposed, a tool
    /// executed without an allow verdict). The fold is total: it records them and goes on.
    public var anomalies: [Anomaly] = []
    /// Counts the fold keeps up to date as it goes (O(1) per event), so that summaries and
    /// limits never walk the lists. They are derived from `decisions` and `calls` and so are
    /// not part of the canonical JSON or the digest, which cover those lists.
    public var counters = RunCounters()
    /// Where each call id was last proposed, so the fold finds a call in constant time.
    var callIds = CallIdIndex()

    /// The state before any event.
    public init() {}

    /// The state after folding `events` in order.
    public init(folding events: some Sequence<Event>) {
        self.init()
        for event in events { RunState.reduce(into: &self, event) }
    }
}

/// One model decision as the state keeps it.
/// The newest index in `RunState.calls` of each call id. Derived from the calls, so it takes no
/// part in equality; stale after a change the fold did not make, and then rebuilt on demand.
struct CallIdIndex: Sendable, Hashable {
    var positions: [String: Int] = [:]
    var isStale = false

    static func == (lhs: CallIdIndex, rhs: CallIdIndex) -> Bool { true }
    func hash(into hasher: inout Hasher) {}
}

public struct DecisionRecord: Sendable, Hashable {
    public var step: Int
    public var sequence: Int
    public var outcome: DecisionMade.Outcome
    public var usage: TokenUsage?
    /// The decision's `aside` (`DecisionMade.isAside`): not part of the talk with the user.
    public var isAside: Bool

    public init(step: Int, sequence: Int, outcome: DecisionMade.Outcome, usage: TokenUsage?, isAside: Bool = false) {
        self.step = step
        self.sequence = sequence
        self.outcome = outcome
        self.usage = usage
        self.isAside = isAside
    }
}

/// Counts derived from the state's lists, maintained by the fold.
public struct RunCounters: Sendable, Hashable {
    /// Decisions that were rejected.
    public var invalidDecisions = 0
    /// Calls started at least once.
    public var executedCalls = 0
    /// Calls denied by policy or refused by a human.
    public var deniedCalls = 0
    /// Calls waiting for a human's approval.
    public var callsAwaitingApproval = 0
    /// Finished attempts whose status was not `ok`.
    public var failedAttempts = 0
    /// Executed calls whose last attempt did not finish `ok` (or has not finished).
    public var failedCalls = 0

    public init() {}

    /// What one call contributes to the counters.
    struct CallShare {
        var executed: Int
        var denied: Int
        var awaiting: Int
        var failed: Int
        var failedCall: Int

        /// `borrowing`: an initializer's argument is otherwise passed owned, which copied the
        /// whole record out of the state's list (a retain of each field) and released it after.
        init(_ call: borrowing ToolCallRecord) {
            executed = call.isExecuted ? 1 : 0
            denied = call.isDenied ? 1 : 0
            awaiting = call.isAwaitingApproval ? 1 : 0
            failed = call.failedAttempts
            failedCall = call.isExecuted && call.lastResult?.status != .ok ? 1 : 0
        }
    }

    /// Moves the call counters from one call's share before a change to its share after it.
    mutating func update(from before: CallShare, to after: CallShare) {
        executedCalls += after.executed - before.executed
        deniedCalls += after.denied - before.denied
        callsAwaitingApproval += after.awaiting - before.awaiting
        failedAttempts += after.failed - before.failed
        failedCalls += after.failedCall - before.failedCall
    }
}

/// One proposed tool call and everything that happened to it.
///
/// `revision` counts the events that changed the call: caches of what was derived from a call
/// (the state digest's chain, the context builder's observations) key on it instead of
/// restating which fields the fold can change. It is bookkeeping, not state: equality and
/// hashing ignore it.
public struct ToolCallRecord: Sendable, Hashable {
    public var id: String
    public var tool: String
    /// The step whose decision proposed it.
    public var step: Int
    /// The arguments, held as their canonical JSON (`ToolCall.argumentsText`): the state's
    /// canonical form and its digest write them as they are.
    public var argumentsText: JSONText
    /// The arguments (parsed from `argumentsText` on each use).
    public var arguments: JSONValue {
        get { argumentsText.value }
        set { argumentsText = JSONText(newValue) }
    }
    public var verdict: VerdictGiven?
    /// A human's answer, for a call that needed one (most calls do not: held out of line, so
    /// that every other call's record is smaller by its size).
    public var approval: ApprovalRecorded? {
        get { approvalStorage?.value }
        set { approvalStorage = newValue.map(OutOfLine.init) }
    }
    private var approvalStorage: OutOfLine<ApprovalRecorded>?
    /// `tool_intended` events: attempts started.
    public var attempts = 0
    /// `tool_completed` events, one per finished attempt, in order.
    public var results: [ToolCompleted] = []
    /// Events that changed this call (see the type's summary).
    public var revision = 0

    public init(id: String, tool: String, step: Int, arguments: JSONValue) {
        self.init(id: id, tool: tool, step: step, argumentsText: JSONText(arguments))
    }

    public init(id: String, tool: String, step: Int, argumentsText: JSONText) {
        self.id = id
        self.tool = tool
        self.step = step
        self.argumentsText = argumentsText
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

    /// Whether it waits for a human's approval.
    public var isAwaitingApproval: Bool { verdict?.verdict == .approvalRequired && approval == nil }

    /// Finished attempts whose status was not `ok`.
    public var failedAttempts: Int { results.count { $0.status != .ok } }

    /// The last finished attempt.
    public var lastResult: ToolCompleted? { results.last }

    /// Whether it ran and its last finished attempt succeeded (retries stop at a success).
    public var hasSucceeded: Bool { lastResult?.status == .ok }

    public static func == (a: ToolCallRecord, b: ToolCallRecord) -> Bool {
        a.id == b.id && a.tool == b.tool && a.step == b.step && a.argumentsText == b.argumentsText && a.verdict == b.verdict
            && a.approval == b.approval && a.attempts == b.attempts && a.results == b.results
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(step)
        hasher.combine(attempts)
        hasher.combine(results.count)
    }
}

/// A value kept in storage of its own: a pointer in the record that holds it.
struct OutOfLine<Value: Sendable & Hashable>: Sendable, Hashable {
    private indirect enum Storage: Sendable, Hashable {
        case value(Value)
    }
    private let storage: Storage

    init(_ value: Value) {
        storage = .value(value)
    }

    var value: Value {
        switch storage {
        case .value(let value): return value
        }
    }
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

    public var totalTokens: Int { inputTokens.addingSaturating(outputTokens) }
}

extension RunState {
    /// Whether the run is a conversation: it recorded a user turn.
    public var isConversation: Bool { !userTurns.isEmpty }

    /// What the conversation's user (its model) cost: never part of `usage`, which is the agent's.
    public var userUsage: ResourceUsage {
        var usage = ResourceUsage()
        for record in userTurns where record.turn.source == .model {
            usage.modelCalls += 1
            usage.inputTokens = usage.inputTokens.addingSaturating(record.turn.usage?.input ?? 0)
            usage.outputTokens = usage.outputTokens.addingSaturating(record.turn.usage?.output ?? 0)
            usage.costUSD += record.turn.costUSD ?? 0
            usage.modelLatencyUs = usage.modelLatencyUs.addingSaturating(record.turn.latencyUs ?? 0)
        }
        return usage
    }
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

    /// The call id a decision proposed again, when that is this anomaly (the fold's
    /// "proposes call id "ID" a second time"); nil for any other.
    public var reusedCallId: String? {
        guard let start = message.firstRange(of: Self.reusedIdPrefix), message.hasSuffix(Self.reusedIdSuffix) else { return nil }
        let id = message[start.upperBound...].dropLast(Self.reusedIdSuffix.count)
        return id.isEmpty ? nil : String(id)
    }

    static let reusedIdPrefix = "proposes call id \""
    static let reusedIdSuffix = "\" a second time"

    public init(sequence: Int, message: String) {
        self.sequence = sequence
        self.message = message
    }
}
