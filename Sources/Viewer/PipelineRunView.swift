import Foundation
public import Pipelines
public import TraceCore

/// The data of a pipeline run's page: the pipeline document exactly as `agent-eval pipeline
/// show --json` prints it (the state rebuilt from the log, the plan with each task's needs, the
/// digest checks and anomalies), the child run of every agent attempt as a run view, and a
/// summary of the outcome. A pipeline log is read by the pipeline fold only: its events are
/// never judged as a run's.
public struct PipelineRunView: Sendable {
    /// `{"view": "pipeline", "pipeline": <document>, "summary": {"outcome", "ok", "directory",
    /// "child_logs": [{"task", "attempt", "log"}]}, "runs": [{"log", "run" | "error"}],
    /// "runs_left_out": [log]}`; child logs are paths from the working directory.
    public var document: JSONValue
    public var pipeline: String
    public var runId: String
    /// As `pipeline show` prints it: `succeeded`, `failed at <task>`, `paused` or `interrupted`.
    public var status: String
    /// Whether the page may be green: the pipeline succeeded, every digest matched, the log
    /// has no anomaly and every child log is intact.
    public var isOK: Bool
    public var taskCount: Int
    public var eventCount: Int
    /// Child logs embedded, and child logs left out (over the budget, or not on disk).
    public var embedded: [String]
    public var leftOut: [String]
    /// Child logs missing, unreadable or not intact (`PipelineReplay.childLogProblems`).
    public var childLogProblems: [String]

    /// The pipeline's page, titled by the pipeline's name and run id.
    public var page: HTMLPage {
        HTMLPage(title: "pipeline \(pipeline) (\(runId))", data: document)
    }

    /// Replays the pipeline log at `log` and the child run of every attempt that recorded one
    /// (relative to the log's directory, where `pipeline run` writes them) that `reads` allows
    /// (`serve` shows only logs it may show: a child log linked out of its folders, or named
    /// with `..`, is left out). Throws when `log` cannot be read or is not a pipeline log.
    public static func make(
        log: String, eventBudget: Int = ReportView.defaultEventBudget, reads: (String) -> Bool = { _ in true }
    ) throws(PipelineError) -> PipelineRunView {
        let replay = try PipelineReplay(log: log)
        let state = replay.state
        let directory = (log as NSString).deletingLastPathComponent
        // Each agent attempt's child log as a path from here, in plan order.
        var childLogs: [String] = []
        var attempts: [JSONValue] = []
        for task in state.tasks {
            for attempt in task.attempts {
                guard let child = attempt.started.log else { continue }
                let path = directory.isEmpty ? child : (directory as NSString).appendingPathComponent(child)
                childLogs.append(path)
                attempts.append(["task": .string(task.id), "attempt": .int(attempt.attempt), "log": .string(path)])
            }
        }
        let (runs, embedded, leftOut) = RunView.embed(childLogs, eventBudget: eventBudget, reads: reads)
        let outcome = state.stop?.status.rawValue ?? (state.isPaused ? "paused" : "interrupted")
        let pipeline = replay.json(log: log)
        let childLogProblems = pipeline["child_log_problems"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let isOK = state.stop?.status == .succeeded && replay.mismatches.isEmpty && state.anomalies.isEmpty && childLogProblems.isEmpty
        var summary = ObjectBuilder()
        summary.set("outcome", outcome)
        summary.set("ok", isOK)
        summary.set("directory", directory.isEmpty ? "." : directory)
        summary.set("child_logs", JSONValue.array(attempts))
        var object = ObjectBuilder()
        object.set("view", "pipeline")
        object.set("pipeline", pipeline)
        object.set("summary", summary.json)
        object.set("runs", JSONValue.array(runs))
        object.set("runs_left_out", JSONValue.array(leftOut.map { .string($0) }))
        return PipelineRunView(
            document: object.json, pipeline: state.start?.pipeline ?? "", runId: state.runId ?? "",
            status: pipeline["status"]?.stringValue ?? outcome, isOK: isOK, taskCount: state.tasks.count, eventCount: replay.events.count,
            embedded: embedded, leftOut: leftOut, childLogProblems: childLogProblems)
    }
}
