public import TraceCore
import TraceLog

extension ReplayStep {
    /// The step as replay's `--json` prints it (docs/replay.md).
    public var json: JSONValue { json(withEvents: true) }

    /// The step as replay's `--json` prints it, without `events` when `withEvents` is false (an
    /// outline of a long run's step, `agent-eval serve`).
    public func json(withEvents: Bool) -> JSONValue {
        var object = ObjectBuilder()
        object.set("step", step)
        object.set("first_seq", firstSequence)
        object.set("last_seq", lastSequence)
        if withEvents {
            object.set(
                "events",
                JSONValue.array(events.map { recorded in (try? JSONParser.parse(recorded.event.encodedLine())) ?? .null }))
        }
        object.set("state", after.json)
        object.set("changes", JSONValue.array(after.changes(since: before).map { .string($0) }))
        object.set(
            "digests",
            JSONValue.array(
                digests.map { check in
                    [
                        "seq": .int(check.sequence), "recorded": .string(check.recorded), "computed": .string(check.computed),
                        "match": .bool(check.isMatch),
                    ]
                }))
        object.set("problems", problemsJSON)
        return object.json
    }

    /// The step's problems as its JSON has them: `[{"kind", "seq", "message"}]`.
    public var problemsJSON: JSONValue {
        JSONValue.array(problems.map { ["kind": .string($0.kind.rawValue), "seq": .int($0.sequence), "message": .string($0.message)] })
    }
}
