import AgentRuntime
public import TraceCore

extension Rerun.Report {
    /// The report as `agent-eval rerun --json` prints it (docs/replay.md).
    public func json(log: String, agent: String) -> JSONValue {
        var object = ObjectBuilder()
        object.set("schema", "agent-eval/rerun")
        object.set("version", 1)
        object.set("log", log)
        object.set("agent", agent)
        object.set("identical", divergence == nil)
        object.set("recorded_events", recordedEvents)
        object.set("new_events", newEvents)
        if let divergence {
            var entry = ObjectBuilder()
            entry.set("step", divergence.step)
            entry.set("seq", divergence.sequence)
            entry.set("kind", divergence.kind)
            entry.set("field", divergence.fieldPath)
            entry.set("recorded", divergence.recorded)
            entry.set("new", divergence.new)
            entry.set("cause", divergence.cause)
            object.set("divergence", entry.json)
        }
        object.set("unanswered", JSONValue.array(unanswered.map { .string($0.message) }))
        object.set("recorded_stop", recordedStop?.reason)
        object.set("new_stop", newStop?.reason)
        object.set("mode", mode.rawValue)
        if mode == .prefix {
            object.set("new_log", newLog)
            if let live = wentLive {
                var entry = ObjectBuilder()
                entry.set("step", live.step)
                entry.set("decision", live.decision.map { $0 + 1 })
                entry.set("call_id", live.callId)
                entry.set("reason", live.reason)
                object.set("went_live", entry.json)
            }
            object.set("diff", diff?.json(left: log, right: newLog))
        }
        return object.json
    }
}
