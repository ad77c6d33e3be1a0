public import TraceCore
import TraceLog

extension Replayer.Result {
    /// The whole replay as `agent-eval replay --json` prints it (docs/replay.md): the steps
    /// (each `ReplayStep.json`, collected while replaying), the final state, the checks.
    public func json(log: String, steps: [JSONValue]) -> JSONValue {
        var verification = ObjectBuilder()
        verification.set("digests_checked", digestsChecked)
        verification.set(
            "digest_mismatches",
            JSONValue.array(
                digestMismatches.map { ["seq": .int($0.sequence), "recorded": .string($0.recorded), "computed": .string($0.computed)] }))
        verification.set("tear", read.tear.map { "\($0)" })
        var object = ObjectBuilder()
        object.set("schema", "agent-eval/replay")
        object.set("version", 1)
        object.set("log", log)
        object.set("run_id", state.runId)
        object.set("steps", JSONValue.array(steps))
        object.set("final_state", StateSummary(state).json)
        object.set("verification", verification.json)
        return object.json
    }

    /// What `replay --json` prints when reading stops at damage: the steps read before it.
    public static func partialJSON(log: String, steps: [JSONValue], error: any Diagnostic) -> JSONValue {
        ["schema": "agent-eval/replay", "version": 1, "log": .string(log), "steps": .array(steps), "error": error.json]
    }
}

extension ReplayStep {
    /// One step as `agent-eval replay --step N --json` prints it (docs/replay.md).
    public func document(log: String, runId: String, fullState: RunState?) -> JSONValue {
        var object = ObjectBuilder()
        object.set("schema", "agent-eval/replay-step")
        object.set("version", 1)
        object.set("log", log)
        object.set("run_id", runId)
        object.set("step", json)
        object.set("full_state", fullState?.json)
        return object.json
    }
}
