/// Trajectory queries: the questions evals ask of a run.
extension RunState {
    /// Every call the model proposed, in order, whatever became of it.
    public var attemptedCalls: [ToolCallRecord] { calls }

    /// Calls whose tool was started at least once.
    public var executedCalls: [ToolCallRecord] { calls.filter(\.isExecuted) }

    /// Calls denied by policy or refused by a human.
    public var deniedCalls: [ToolCallRecord] { calls.filter(\.isDenied) }

    /// Calls waiting for a human's approval.
    public var callsAwaitingApproval: [ToolCallRecord] { calls.filter(\.isAwaitingApproval) }

    /// Names of executed tools in the order their calls were proposed, with repeats.
    public var executedToolNames: [String] { toolNames(executed: true) }

    /// Names of the tools of the calls that were executed, or of those that were not, in
    /// proposal order: read in place, not through copies of the calls.
    public func toolNames(executed: Bool) -> [String] {
        var names: [String] = []
        for index in calls.indices where calls[index].isExecuted == executed { names.append(calls[index].tool) }
        return names
    }

    /// The calls of one tool, in order.
    public func calls(of tool: String) -> [ToolCallRecord] { calls.filter { $0.tool == tool } }

    /// The call with this id.
    public func call(id: String) -> ToolCallRecord? { callIndex(id).map { calls[$0] } }

    /// The verdict given for a call.
    public func verdict(forCall id: String) -> VerdictGiven? { call(id: id)?.verdict }

    /// The results of every attempt of a call.
    public func results(forCall id: String) -> [ToolCompleted] { call(id: id)?.results ?? [] }

    /// Why the run stopped, once it has.
    public var stopReason: StopReason? { stop?.reason }

    /// How many steps the model decided in (`decisionSteps.count`, without the list).
    public var decisionStepCount: Int {
        var count = 0
        var last: Int?
        for decision in decisions where decision.step != last {
            count += 1
            last = decision.step
        }
        return count
    }

    /// The steps in which the model decided: a step is a decision of the agent's model, whatever
    /// else a log records between (a recording's proxy verdicts and approval waits end steps of
    /// their own; a rejected reply retried in its step does not start another). In step order.
    public var decisionSteps: [Int] {
        var steps: [Int] = []
        for decision in decisions where decision.step != steps.last { steps.append(decision.step) }
        return steps
    }

    /// The limit that stopped the run, if one did.
    public var limitFired: LimitKind? { stop?.limit }

    /// The final answer, if the run gave one.
    public var finalAnswer: String? { stop?.answer }

    /// Whether the run has stopped.
    public var isStopped: Bool { stop != nil }

    /// Executed tool calls, counted once each however many attempts they took.
    public var toolCallCount: Int { counters.executedCalls }

    /// Model decisions that were rejected.
    public var invalidDecisionCount: Int { counters.invalidDecisions }

    /// Time from the first event to the last, in microseconds.
    public var elapsedUs: Int {
        guard let startedAtUs, let lastEventAtUs else { return 0 }
        return lastEventAtUs - startedAtUs
    }
}
