public import TraceCore

extension VerificationReport {
    /// The report as `agent-eval log verify --json` prints it.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("path", path)
        object.set("intact", isIntact)
        object.set("ending", ending.rawValue)
        object.set("event_count", eventCount)
        object.set("member_count", members.count)
        object.set("version", formatVersion)
        object.set("digests_checked", digestCount)
        object.set("digest_mismatches", JSONValue.array(digestMismatches.map { .int($0) }))
        object.set(
            "members",
            JSONValue.array(
                members.map { member in
                    var entry = ObjectBuilder()
                    entry.set("index", member.index)
                    entry.set("offset", member.offset)
                    entry.set("length", member.length)
                    entry.set("events", member.eventCount)
                    entry.set("first_seq", member.firstSequence)
                    entry.set("last_seq", member.lastSequence)
                    entry.set("complete", member.isComplete)
                    entry.set("corrupt", member.isCorrupt)
                    return entry.json
                }))
        object.set(
            "problems",
            JSONValue.array(
                problems.map { problem in
                    var entry = ObjectBuilder()
                    entry.set("code", problem.code.rawValue)
                    entry.set("message", problem.message)
                    entry.set("member_offset", problem.memberOffset)
                    entry.set("seq", problem.sequence)
                    entry.set("hint", problem.hint)
                    return entry.json
                }))
        if !warnings.isEmpty { object.set("warnings", Self.json(warnings)) }
        return object.json
    }

    /// `[{"code", "message", "hint"?, "seq"?}]`: warnings about what lies beside a log, or about
    /// an event in it (`seq`).
    static func json(_ warnings: [LogError]) -> JSONValue {
        .array(
            warnings.map { warning in
                var entry = ObjectBuilder()
                entry.set("code", warning.code.rawValue)
                entry.set("message", warning.message)
                entry.set("hint", warning.hint)
                entry.set("seq", warning.sequence)
                return entry.json
            })
    }
}

extension RepairReport {
    /// What `agent-eval log repair --json` prints for the log at `path`: `report` is nil when
    /// there was nothing to seal; `warnings` (a stray side file) are listed when there are any.
    public static func json(path: String, report: RepairReport?, warnings: [LogError] = []) -> JSONValue {
        var object = ObjectBuilder()
        object.set("path", path)
        object.set("sealed", report != nil)
        if let report {
            object.set("member_offset", report.memberOffset)
            object.set("original_size", report.originalSize)
            object.set("new_size", report.newSize)
            object.set("events_kept_in_member", report.eventsKept)
            object.set("dropped_bytes", report.droppedBytes)
            object.set("last_seq", report.lastSequence)
            object.set("finished_interrupted_seal", report.finishedInterruptedSeal)
        }
        if !warnings.isEmpty { object.set("warnings", VerificationReport.json(warnings)) }
        return object.json
    }
}
