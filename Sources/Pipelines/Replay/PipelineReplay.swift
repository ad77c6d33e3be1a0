import Foundation
public import TraceCore
import TraceLog

/// Rebuilds a pipeline's state from its log alone and checks every recorded state digest
/// against the digest of the state folded so far, as replay does for runs.
public struct PipelineReplay: Sendable {
    public private(set) var state = PipelineState()
    /// Every event, in order.
    public private(set) var events: [Event] = []
    /// "seq N (task_finished analyze): recorded sha256:…, rebuilt sha256:…" per differing digest.
    public private(set) var mismatches: [String] = []
    public private(set) var checkedDigests = 0

    /// Whether the log at `path` is a pipeline log: its first event is `pipeline_started`. Only
    /// that event is read, so a pipeline log with a torn tail is one too; a run's log, a missing
    /// or unreadable file is not.
    public static func isPipelineLog(_ path: String) -> Bool {
        guard case .pipeline(.started)? = try? LogReader(path: path).firstEvent()?.event.payload else { return false }
        return true
    }

    public init(log path: String) throws(PipelineError) {
        var events: [Event] = []
        do {
            _ = try LogReader(path: path).forEachEvent { events.append($0.event) }
        } catch let error as LogError {
            throw PipelineError(.log, error.message, path: path, hint: error.hint)
        } catch {
            throw PipelineError(.log, "cannot read the pipeline log: \(error)", path: path)
        }
        try self.init(events: events, path: path)
    }

    /// Folds `events`, read from the log at `path`, checking each recorded digest.
    init(events: [Event], path: String) throws(PipelineError) {
        self.events = events
        guard case .pipeline(.started)? = events.first?.payload else {
            throw PipelineError(.notPipeline, "the log does not start with pipeline_started: it is not a pipeline log", path: path)
        }
        var digester = PipelineStateDigester()
        for event in events {
            let recorded: String?
            switch event.payload {
            case .pipeline(.taskFinished(let finished)): recorded = finished.stateDigest
            case .pipeline(.stopped(let stopped)): recorded = stopped.stateDigest
            default: recorded = nil
            }
            if let recorded {
                checkedDigests += 1
                let rebuilt = digester.digest(of: state)
                if rebuilt != recorded {
                    mismatches.append("seq \(event.sequence) (\(event.kind)): recorded \(recorded), rebuilt \(rebuilt)")
                }
            }
            PipelineState.reduce(into: &state, event)
        }
    }

    /// What is wrong with the child logs the attempts recorded, beside the pipeline log at
    /// `log`: a line for each that is missing, unreadable or not intact (`LogVerifier`), in plan
    /// order. A pipeline log that is whole says nothing of the runs it points to: one deleted or
    /// edited since is a run nobody can replay or trust. An attempt the pipeline's process died
    /// in (not finished, or finished as `interrupted` on resume) may have left no log, an empty
    /// one or a torn one: that is its honest record, not a problem; any other damage is.
    public func childLogProblems(log: String) -> [String] {
        let directory = (log as NSString).deletingLastPathComponent
        var problems: [String] = []
        for task in state.tasks {
            for attempt in task.attempts {
                guard let child = attempt.started.log else { continue }
                let path = directory.isEmpty ? child : (directory as NSString).appendingPathComponent(child)
                let what = "task \(task.id) attempt \(attempt.attempt): its log \(path)"
                let wasCutShort = attempt.finished == nil || attempt.finished?.errorClass == .interrupted
                guard FileManager.default.fileExists(atPath: path) else {
                    if !wasCutShort { problems.append("\(what) is missing") }
                    continue
                }
                do {
                    let report = try LogVerifier.verify(path: path)
                    let found = report.problems.filter { !(wasCutShort && $0.code == .tornTail) }
                    if let first = found.first {
                        problems.append("\(what) is not intact: \(first.message)")
                        continue
                    }
                    if let edited = report.digestMismatches.first {
                        problems.append(
                            "\(what) was edited: its state digest at seq \(edited) is not the digest of the state its events fold to")
                        continue
                    }
                    // The run the attempt started, not another log put in its place.
                    if let run = attempt.started.run, let child = try LogReader(path: path).firstEvent()?.event.runId, child != run {
                        problems.append("\(what) holds run \(child), not the run \(run) the attempt started")
                    }
                } catch let error as LogError where wasCutShort && error.code == .empty {
                    continue  // made, and the process died before its first event
                } catch {
                    problems.append("\(what) cannot be read: \((error as? LogError)?.message ?? "\(error)")")
                }
            }
        }
        return problems
    }

    /// The document `pipeline show --json` prints and the viewer's pipeline page draws:
    /// `PipelineView.json` of the rebuilt state, then the plan (each task's kind, needs,
    /// fallbacks and breaker, in plan order), the digest checks, the anomalies, the child logs'
    /// problems (`childLogProblems`) and the time from the first event to the last. `log` is the
    /// path to print as the log.
    public func json(log: String) -> JSONValue {
        var object = PipelineView.json(PipelineOutcome(logPath: log, state: state)).objectValue ?? JSONObject()
        object["plan"] = .array((state.start?.tasks ?? []).map(\.json))
        object["digests_checked"] = .int(checkedDigests)
        object["digest_mismatches"] = .array(mismatches.map { .string($0) })
        object["anomalies"] = .array(state.anomalies.map { .string($0) })
        object["child_log_problems"] = .array(childLogProblems(log: log).map { .string($0) })
        object["events"] = .int(events.count)
        if let first = events.first, let last = events.last { object["duration_us"] = .int(last.timeUs - first.timeUs) }
        return .object(object)
    }
}

/// The terminal and JSON forms of a pipeline's state.
public enum PipelineView {
    /// One line per task (status, attempts, output or error) and per attempt with a child log,
    /// then the pipeline's end. `directory` is where child logs are, for replay commands.
    public static func lines(_ state: PipelineState, directory: String) -> [String] {
        guard let start = state.start else { return ["not a pipeline log"] }
        var lines = ["pipeline \(start.pipeline) (\(state.runId ?? "")): \(status(of: state))"]
        if let forked = state.forked {
            lines.append("  fork of \(forked.parentRunId) (\(forked.copiedEvents) events copied)")
        }
        for task in state.tasks {
            let needs = task.plan.needs.isEmpty ? "" : " ← \(task.plan.needs.joined(separator: ", "))"
            var line = "  \(task.status.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(task.id)\(needs)"
            if let from = task.outputFrom { line += " (output from fallback \(from))" }
            if let output = task.output { line += " → \(short(JSONWriter.encodeString(output)))" }
            lines.append(line)
            for attempt in task.attempts {
                var detail = "      attempt \(attempt.attempt)"
                if attempt.isDiscarded { detail += " [discarded by rollback]" }
                if let primary = attempt.started.fallbackFor { detail += " for \(primary)" }
                if let finished = attempt.finished {
                    detail += ": \(finished.status.rawValue) in \(finished.durationUs / 1000) ms"
                    if let errorClass = finished.errorClass { detail += ", \(errorClass.rawValue)" }
                    if let error = finished.error { detail += " — \(short(error))" }
                    if let recovery = finished.recovery { detail += " → \(recovery.action.rawValue)" }
                } else {
                    detail += ": unfinished"
                }
                lines.append(detail)
                if let log = attempt.started.log {
                    lines.append("        replay: agent-eval replay \(ShellWords.quoted("\(directory)/\(log)"))")
                }
            }
        }
        for (key, breaker) in state.breakers.sorted(by: { $0.key < $1.key }) {
            lines.append("  breaker \(key): \(breaker.state.rawValue) — \(short(breaker.reason))")
        }
        for rollback in state.rollbacks {
            lines.append("  rolled back to \(rollback.to): discarded \(rollback.discarded.joined(separator: ", "))")
        }
        if let stop = state.stop {
            if let error = stop.error { lines.append("why: \(error)") }
            lines.append("outputs: \(JSONWriter.encodeString(stop.outputs))")
        } else if state.isPaused {
            lines.append("resume: agent-eval pipeline resume \(ShellWords.quoted(directory))")
        } else {
            lines.append("the log ends while tasks ran (the process stopped): agent-eval pipeline resume \(ShellWords.quoted(directory))")
        }
        lines.append("log: \(directory)/pipeline.jsonl.gz")
        return lines
    }

    static func status(of state: PipelineState) -> String {
        if let stop = state.stop { return stop.status.rawValue + (stop.task.map { " at \($0)" } ?? "") }
        return state.isPaused ? "paused" : "interrupted"
    }

    /// `{"run", "pipeline", "status", "log", "state": …}`.
    public static func json(_ outcome: PipelineOutcome) -> JSONValue {
        [
            "run": .string(outcome.runId), "pipeline": .string(outcome.state.start?.pipeline ?? ""),
            "status": .string(status(of: outcome.state)), "log": .string(outcome.logPath), "state": outcome.state.json,
            "outputs": outcome.state.stop?.outputs ?? .null,
        ]
    }

    /// A task whose outcome in a fork differs from its parent's.
    public struct Change: Sendable, Hashable {
        public var task: String
        public var parentStatus: String
        public var status: String
        public var parentOutput: JSONValue?
        public var output: JSONValue?

        public var json: JSONValue {
            var object = ObjectBuilder()
            object.set("task", task)
            object.set("parent_status", parentStatus)
            object.set("status", status)
            object.set("parent_output", parentOutput)
            object.set("output", output)
            return object.json
        }
    }

    /// The tasks of `fork` whose status or output differ from `parent`'s, in plan order.
    public static func changes(from parent: PipelineState, to fork: PipelineState) -> [Change] {
        fork.tasks.compactMap { task in
            let before = parent.task(task.id)
            guard before?.status != task.status || before?.output != task.output else { return nil }
            return Change(
                task: task.id, parentStatus: before?.status.rawValue ?? "absent", status: task.status.rawValue,
                parentOutput: before?.output,
                output: task.output)
        }
    }

    /// The lines `pipeline fork` prints for `changes`: one per task, its output when it changed.
    public static func lines(changes: [Change], parent: PipelineState, fork: PipelineState) -> [String] {
        let stops = (status(of: parent), status(of: fork))
        guard !changes.isEmpty else {
            return [
                "against the parent: every task ended as it did ("
                    + (stops.0 == stops.1 ? stops.1 : "the parent \(stops.0), the fork \(stops.1)") + ")"
            ]
        }
        var lines = [
            "against the parent (\(stops.0) → \(stops.1)): \(changes.count) task\(changes.count == 1 ? "" : "s") ended otherwise"
        ]
        for change in changes {
            var line = "  \(change.task): \(change.parentStatus)"
            line += change.status == change.parentStatus ? ", output changed" : " → \(change.status)"
            lines.append(line)
            if change.parentOutput != change.output {
                lines.append("      was: \(change.parentOutput.map { short(JSONWriter.encodeString($0)) } ?? "no output")")
                lines.append("      now: \(change.output.map { short(JSONWriter.encodeString($0)) } ?? "no output")")
            }
        }
        return lines
    }

    static func short(_ text: String) -> String {
        let flat = text.replacingOccurrences(of: "\n", with: "⏎")
        return flat.count > 120 ? String(flat.prefix(119)) + "…" : flat
    }
}
