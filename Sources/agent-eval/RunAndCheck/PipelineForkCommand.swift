import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct PipelineForkCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "fork",
        abstract: "What if a task ran again: copy a pipeline run to a new one and run a task and its dependants there.",
        discussion: """
            Reads the run's log whole (a torn or damaged one is refused) and checks its state digests, then writes \
            a new run under its own id in a new directory: every event of the parent's log, copied with its time, \
            and the parent's child logs, then pipeline_forked (naming the parent and its last line's hash), then \
            the rollback of --at and of every task downstream of it, which run again. The tasks before it are not \
            run again: their results are the parent's. The parent is not written to. Use it with --model, or \
            after changing an agent file the pipeline names, to see what a task and what depends on it would do \
            now; the pipeline file itself must be the one the run started with.

            Prints the fork's run, then each task that ended otherwise than in the parent (its status, its output).

            Exit codes as for `pipeline run` (0 the fork succeeded, 1 it failed or paused, 2 it could not be made).

            Example:
              agent-eval pipeline fork runs/release-notes-pipe-… --at write
            """)

    @Argument(help: "The pipeline run to fork: its directory, or its pipeline.jsonl.gz.")
    var target: String

    @Option(help: "The task to fork at: it and everything downstream of it run again in the fork.")
    var at: String

    @Option(help: "The directory under which the fork's directory is made (default: the one holding the parent's).")
    var out: String?

    @Option(help: "The fork's run id (default: pipe-<time>-<random>).")
    var runId: String?

    @Option(help: "The pipeline file (default: the one the run started with, as it named it).")
    var file: String?

    @OptionGroup var options: PipelineRunOptions

    @OptionGroup(title: "Model")
    var models: ModelArguments

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let outcome: PipelineOutcome
        let interrupted: Int32?
        let parent: PipelineReplay
        do {
            let run = try PipelineTarget(target)
            let started = try run.started()
            let runner = PipelineRunner(definition: try loadPipeline(file ?? started.file, models: models, printWarnings: false))
            let id = runId ?? PipelineTarget.newRunId()
            let base = out ?? (((run.directory as NSString).standardizingPath as NSString).deletingLastPathComponent)
            let directory = PipelineTarget.directory(under: base.isEmpty ? "." : base, pipeline: started.pipeline, runId: id)
            // Read before the fork runs: what it is compared with is the parent as it was forked.
            parent = try PipelineReplay(log: run.log)
            let (task, jobs, observer, log) = (at, options.jobs, options.observer, run.log)
            (outcome, interrupted) = try await withInterruption {
                try await runner.fork(log: log, at: task, directory: directory, runId: id, jobs: jobs, observe: observer)
            }
        } catch {
            throw diagnose(error)
        }
        let changes = PipelineView.changes(from: parent.state, to: outcome.state)
        if options.json {
            var object = PipelineView.json(outcome).objectValue ?? JSONObject()
            object["parent"] = .string(parent.state.runId ?? "")
            object["changes"] = .array(changes.map(\.json))
            printJSON(.object(object))
        } else {
            for line in PipelineView.lines(outcome.state, directory: (outcome.logPath as NSString).deletingLastPathComponent) { say(line) }
            for line in PipelineView.lines(changes: changes, parent: parent.state, fork: outcome.state) { say(line) }
        }
        if let interrupted { throw ExitCode(128 + interrupted) }
        throw outcome.isSucceeded ? Exit.success : Exit.failure
    }
}
