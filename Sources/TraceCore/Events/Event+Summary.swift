/// One-line, human-readable summaries of events, for `log cat` and replay listings.
extension Event {
    /// The final signature of a signed log, written after a stop (docs/log-format.md §8a): a log
    /// whose last event this is has a signed end; any other log's end is unproven (a copy cut
    /// after an earlier stop, its last gzip member dropped, reads the same).
    public var isFinalSignature: Bool {
        if case .unknown("log_signed", let data) = payload { return data["final"] == true }
        return false
    }

    /// `#seq step N  time  kind  details`, truncated text kept short.
    public var summaryLine: String {
        let sequenceText = "#\(sequence)".padding(toLength: 6)
        let stepText = "step \(step)".padding(toLength: 8)
        return "\(sequenceText)\(stepText)\(Event.formatTime(timeUs))  \(kind.padding(toLength: 18))\(payload.summary)"
    }

    /// RFC 3339 UTC with milliseconds, from microseconds since the epoch.
    public static func formatTime(_ microseconds: Int) -> String {
        let totalSeconds = microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000
        let millis = (microseconds - totalSeconds * 1_000_000) / 1000
        var days = totalSeconds >= 0 ? totalSeconds / 86_400 : (totalSeconds - 86_399) / 86_400
        let secondsOfDay = totalSeconds - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millisText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return
            "\(year)-\(two(month))-\(two(day))T\(two(secondsOfDay / 3600)):\(two(secondsOfDay / 60 % 60)):\(two(secondsOfDay % 60)).\(millisText)Z"
    }
}

extension EventPayload {
    /// The payload's key facts on one line.
    public var summary: String {
        switch self {
        case .runStarted(let started):
            return
                "goal=\(quoted(started.goal)) agent=\(started.agent.name) model=\(started.model.provider)/\(started.model.name) tools=\(started.tools.count)"
        case .contextBuilt(let packet):
            if let delta = packet.delta {
                return
                    "~\(packet.tokenEstimate) tokens, changes to the packet of seq \(delta.baseSequence) (read the log from its start to see it whole)"
            }
            var text =
                "~\(packet.tokenEstimate) tokens, \(packet.observations.count) observations, tools [\(packet.toolsDisclosed.joined(separator: ", "))]"
            if !packet.omitted.isEmpty {
                // A long run omits thousands: the line names the first few and counts the rest.
                let shown = packet.omitted.prefix(5).map { "\($0.id) (\($0.reason.rawValue))" }.joined(separator: ", ")
                let more = packet.omitted.count - min(5, packet.omitted.count)
                text += ", omitted " + shown + (more > 0 ? " … and \(more) more" : "")
            }
            return text
        case .decisionMade(let made):
            let usage = made.usage.map { " [\($0.input)+\($0.output) tokens]" } ?? ""
            switch made.outcome {
            case .valid(.answer(let text)): return "answer \(quoted(text))\(usage)"
            case .valid(.toolCalls(let calls)):
                return "call "
                    + calls.map { "\($0.name)(\(truncated($0.argumentsText.string, 60))) as \($0.id)" }.joined(
                        separator: ", ") + usage
            case .valid(.askHuman(let question)): return "ask human \(quoted(question))\(usage)"
            case .valid(.stop(let reason)): return "stop \(quoted(reason))\(usage)"
            case .invalid(let invalid): return "INVALID \(invalid.kind.rawValue): \(truncated(invalid.message, 80))\(usage)"
            }
        case .verdictGiven(let verdict):
            var text = "\(verdict.verdict.rawValue.uppercased()) \(verdict.tool) (\(verdict.callId))"
            if let rule = verdict.rule { text += " rule=\(rule)" }
            if let reason = verdict.reason { text += " — \(truncated(reason, 60))" }
            return text
        case .toolIntended(let intent):
            return "\(intent.tool)(\(truncated(intent.argumentsText.string, 60))) \(intent.callId) attempt \(intent.attempt)"
        case .toolCompleted(let result):
            var text =
                "\(result.status.rawValue) \(result.tool) \(result.callId) attempt \(result.attempt) in \(formatDuration(result.durationUs))"
            if let error = result.error { text += " — \(truncated(error, 60))" }
            if let output = result.output { text += " → \(truncated(JSONWriter.encodeString(output), 60))" }
            return text
        case .approvalRecorded(let approval):
            return "\(approval.isGranted ? "granted" : "refused") \(approval.callId)" + (approval.approver.map { " by \($0)" } ?? "")
        case .stepEnded(let ended):
            return "state \(ended.stateDigest.prefix(19))…"
        case .contentStored(let content):
            return "\(content.hash.prefix(19))… \(content.mediaType), \(content.byteCount) bytes"
        case .runStopped(let stopped):
            var text = stopped.reason.rawValue
            if let limit = stopped.limit { text += " (limit \(limit.rawValue))" }
            if let answer = stopped.answer { text += " answer=\(quoted(answer))" }
            if let error = stopped.error { text += " error=\(quoted(error))" }
            return text
        case .runForked(let forked):
            let edits = forked.edits.isEmpty ? "no edit" : forked.edits.map(\.summary).map { truncated($0, 80) }.joined(separator: "; ")
            return "fork of \(forked.parentRunId) after its step \(forked.step): \(edits)"
        case .userTurn(let turn):
            var text = "user turn \(turn.turn) (\(turn.source.rawValue)) \(quoted(turn.text))"
            if let ends = turn.ends { text += " ends \(ends.rawValue)" }
            if let usage = turn.usage { text += " [\(usage.input)+\(usage.output) tokens]" }
            return text
        case .pipeline(let event):
            return event.summary
        case .unknown("log_signed", let data):
            // The signature of a signed log (docs/log-format.md §8a), which the fold counts as unknown.
            let covered = data["covers_seq"]?.intValue.map { "seq 0 to \($0)" } ?? "?"
            let key = data["key_id"]?.stringValue ?? "?"
            return "signature (\(data["alg"]?.stringValue ?? "?"), key \(key)) of \(covered)\(data["final"] == true ? ", final" : "")"
        case .unknown(let kind, let data):
            return "(unknown kind \(kind), kept) \(truncated(JSONWriter.encodeString(data), 60))"
        }
    }
}

extension PipelineEvent {
    /// The event's key facts on one line.
    public var summary: String {
        switch self {
        case .started(let started):
            return "pipeline \(started.pipeline) (\(started.tasks.count) tasks, jobs \(started.jobs)) from \(started.file)"
        case .taskStarted(let started):
            var text = "\(started.task) attempt \(started.attempt)"
            if let primary = started.fallbackFor { text += " (fallback for \(primary))" }
            if started.isProbe { text += " (breaker probe)" }
            if let run = started.run { text += " run \(run)" }
            return text + " input \(truncated(JSONWriter.encodeString(started.input), 60))"
        case .taskFinished(let finished):
            var text = "\(finished.status.rawValue) \(finished.task) attempt \(finished.attempt) in \(formatDuration(finished.durationUs))"
            if let errorClass = finished.errorClass { text += " \(errorClass.rawValue)" }
            if let error = finished.error { text += " — \(truncated(error, 60))" }
            if let recovery = finished.recovery {
                text += " → \(recovery.action.rawValue)"
                if let delay = recovery.delayMs { text += " after \(delay)ms" }
                if let fallback = recovery.fallback { text += " to \(fallback)" }
            }
            if let output = finished.output { text += " output \(truncated(JSONWriter.encodeString(output), 60))" }
            return text
        case .breakerChanged(let changed):
            return "breaker \(changed.breaker) \(changed.state.rawValue) (\(changed.failures) failures) — \(truncated(changed.reason, 60))"
        case .paused(let paused):
            return "paused — \(truncated(paused.reason, 60))"
        case .resumed(let resumed):
            return "resumed after \(resumed.after)"
        case .rolledBack(let rolledBack):
            return "rolled back to \(rolledBack.to), discarding \(rolledBack.discarded.joined(separator: ", "))"
        case .forked(let forked):
            return "forked from \(forked.parentRunId) (\(forked.copiedEvents) events copied)"
        case .stopped(let stopped):
            var text = stopped.status.rawValue
            if let task = stopped.task { text += " at \(task)" }
            if let error = stopped.error { text += " error=\(quoted(error))" }
            return text
        }
    }
}

private func quoted(_ text: String) -> String {
    JSONWriter.encodeString(.string(truncated(text, 60)))
}

private func truncated(_ text: String, _ limit: Int) -> String {
    text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
}

private func formatDuration(_ microseconds: Int) -> String {
    if microseconds < 1000 { return "\(microseconds)µs" }
    if microseconds < 1_000_000 { return "\(microseconds / 1000)ms" }
    let tenths = microseconds / 100_000
    return "\(tenths / 10).\(tenths % 10)s"
}

extension String {
    fileprivate func padding(toLength length: Int) -> String {
        count >= length ? self + " " : self + String(repeating: " ", count: length - count)
    }
}
