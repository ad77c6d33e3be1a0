public import TraceCore

extension TrajectoryDiff.StepSketch {
    /// One line for a step: its calls with verdicts and results (or its decisions), and tokens;
    /// what the user said in it first (two steps that differ only in the user's words differ).
    public var summary: String {
        let calls = calls.map { call in
            "\(call.tool)(\(StepRenderer.cut(JSONWriter.encodeString(call.arguments), to: 40))) \(call.verdict)"
                + (call.results.isEmpty ? "" : " " + call.results.joined(separator: ","))
        }
        // Each user line cut on its own: a long one would push the calls past the line's cut.
        let text =
            calls.isEmpty
            ? (decisions.isEmpty ? "(no decision)" : decisions.joined(separator: "; "))
            : (userLines.map { StepRenderer.cut($0, to: 40) } + calls).joined(separator: "; ")
        return StepRenderer.cut(text, to: 100) + " [\(tokens) tokens]"
    }
}

extension TrajectoryDiff {
    /// The diff as `agent-eval diff --json` prints it (docs/replay.md), for logs `left`, `right`.
    public func json(left: String, right: String) -> JSONValue {
        var object = ObjectBuilder()
        object.set("schema", "agent-eval/diff")
        object.set("version", 1)
        object.set("left", left)
        object.set("right", right)
        object.set("same", isSame)
        if let first {
            var entry = ObjectBuilder()
            entry.set("left_step", first.leftStep)
            entry.set("right_step", first.rightStep)
            entry.set("path", first.path)
            entry.set("left", first.left)
            entry.set("right", first.right)
            entry.set("call_id", first.callId)
            entry.set("field", first.field)
            object.set("first_divergence", entry.json)
        }
        object.set(
            "rows",
            JSONValue.array(
                rows.map { row in
                    var entry = ObjectBuilder()
                    entry.set("left_step", row.left?.step)
                    entry.set("right_step", row.right?.step)
                    entry.set("same", row.isSame)
                    entry.set("left", row.left?.summary)
                    entry.set("right", row.right?.summary)
                    return entry.json
                }))
        var summary = ObjectBuilder()
        summary.set("left_stop", leftStop?.reason)
        summary.set("right_stop", rightStop?.reason)
        summary.set("left_tokens", leftState.totalTokens)
        summary.set("right_tokens", rightState.totalTokens)
        summary.set("left_duration_us", leftDurationUs)
        summary.set("right_duration_us", rightDurationUs)
        object.set("summary", summary.json)
        let problems: JSONValue = [
            "left": .array(leftProblems.map { JSONValue.string($0) }), "right": .array(rightProblems.map { JSONValue.string($0) }),
        ]
        object.set("problems", problems)
        return object.json
    }
}
