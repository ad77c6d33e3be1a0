public import TraceCore

extension RunOutcome {
    /// The outcome as `agent-eval exec --json` prints it.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("run_id", runId)
        object.set("log", logPath)
        object.set("stop_reason", stop.reason)
        object.set("limit", stop.limit)
        object.set("answer", stop.answer)
        object.set("error", stop.error)
        object.set("steps", steps)
        object.set("tool_calls", state.toolCallCount)
        object.set("denied_calls", state.counters.deniedCalls)
        object.set("failed_calls", state.counters.failedCalls)
        object.set("invalid_decisions", state.invalidDecisionCount)
        object.set(
            "tokens", JSONValue.object(JSONObject([("input", .int(state.usage.inputTokens)), ("output", .int(state.usage.outputTokens))])))
        object.set("awaiting_approval", JSONValue.array(state.callsAwaitingApproval.map { .string($0.id) }))
        return object.json
    }
}
