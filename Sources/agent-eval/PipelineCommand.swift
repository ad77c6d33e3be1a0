import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

/// `agent-eval pipeline`: run a DAG of agent and command tasks, each an isolated child run.
struct PipelineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipeline",
        abstract: "Run, pause, resume, roll back and inspect pipelines of agent tasks (docs/pipelines.md).",
        subcommands: [
            PipelineCheckCommand.self, PipelineRunCommand.self, PipelineResumeCommand.self, PipelinePauseCommand.self,
            PipelineRollbackCommand.self, PipelineForkCommand.self, PipelineShowCommand.self,
        ]
    )
}

/// Loading a pipeline file the way every subcommand does: model overrides and MCP servers for
/// its agents, every error and warning printed.
func loadPipeline(_ path: String, models: ModelArguments, printWarnings: Bool = true) throws -> PipelineDefinition {
    let options = try models.options()
    do throws(ConfigErrors) {
        let definition = try PipelineFile.load(path: path) { agentPath throws(ConfigError) in
            try AgentFile.load(path: agentPath, models: options, servers: MCPServers())
        }
        if printWarnings { for warning in definition.warnings { warn(warning) } }
        return definition
    } catch {
        for problem in error.errors { diagnose(problem) }
        throw Exit.unusable
    }
}

struct PipelineCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a pipeline file without running anything (an older spelling of `agent-eval check --verbose FILE`).",
        discussion: """
            Reads the whole file and every agent file it names: keys, inputs (each must name $input or an upstream \
            task), goal templates, validation, recovery policies, breakers and the graph (cycles, unknown tasks, \
            fallbacks that could not run). Errors and warnings (outputs nobody uses, tasks that lead to no output) \
            name file:line:column.

            Exit codes: 0 the file is valid (warnings allowed); 2 it has errors.
            """,
        shouldDisplay: false)

    @Argument(help: "The pipeline file (YAML or JSON).")
    var file: String

    @OptionGroup(title: "Model")
    var models: ModelArguments

    @Flag(help: "Print the plan as JSON: tasks in plan order with what each needs.")
    var json = false

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    func run() async throws {
        let definition = try loadPipeline(file, models: models)
        if json {
            printJSON([
                "pipeline": .string(definition.name), "tasks": .array(definition.plan.map(\.json)),
                "outputs": .array(definition.outputs.map { .string($0) }),
                "warnings": .array(definition.warnings.map { .string($0.description) }),
            ])
        } else {
            say(
                "\(definition.path): pipeline \(definition.name), \(definition.tasks.count) tasks, outputs \(definition.outputs.joined(separator: ", "))"
            )
            for line in definition.planLines { say("  " + line) }
            say(definition.warnings.isEmpty ? "ok" : "ok, with \(definition.warnings.count) warning(s)")
        }
    }
}

/// The flags `run`, `resume` and `rollback` share.
struct PipelineRunOptions: ParsableArguments {
    @Option(help: "How many tasks may run at once (default: the file's jobs, or the number of cores).")
    var jobs: Int?

    @Flag(
        help: """
            Print every event as it is recorded, one JSON object a line: {"event": <pipeline event>} or \
            {"task": "<id>", "attempt": <n>, "event": <child run event>}; then the summary.
            """)
    var events = false

    @Flag(help: "Print the summary as JSON.")
    var json = false

    func validate() throws {
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
    }

    /// The observer for `--events`.
    var observer: (@Sendable (PipelineUpdate) -> Void)? {
        guard events else { return nil }
        let lock = Mutex(())
        // Unbuffered: each line is out as its event is recorded.
        let output = FileHandleStream(descriptor: 1)
        return { update in
            lock.withLock { _ in
                switch update {
                case .event(let event):
                    output.write("{\"event\":" + String(decoding: event.encodedLine(), as: UTF8.self) + "}\n")
                case .childEvent(let task, let attempt, let event):
                    output.write(
                        "{\"task\":" + JSONWriter.encodeString(.string(task)) + ",\"attempt\":\(attempt),\"event\":"
                            + String(decoding: event.encodedLine(), as: UTF8.self) + "}\n")
                case .finished:
                    break
                }
            }
        }
    }

    /// Continues the run at `target` (resume or rollback, in `body`) with its pipeline file —
    /// the one it started with unless `file` — then prints the outcome and exits.
    func continueRun(
        _ target: String, file: String?, models: ModelArguments,
        _ body: @escaping @Sendable (PipelineRunner, String, Int?, (@Sendable (PipelineUpdate) -> Void)?) async throws -> PipelineOutcome
    ) async throws -> Never {
        let outcome: PipelineOutcome
        let interrupted: Int32?
        do {
            let run = try PipelineTarget(target)
            let runner = PipelineRunner(definition: try loadPipeline(try file ?? run.started().file, models: models, printWarnings: false))
            let (jobs, observer, log) = (self.jobs, self.observer, run.log)
            (outcome, interrupted) = try await withInterruption { try await body(runner, log, jobs, observer) }
        } catch {
            throw diagnose(error)
        }
        try finish(outcome, interrupted: interrupted)
    }

    /// Prints the outcome and exits: 0 succeeded, 1 failed or paused, 128 + signal when interrupted.
    func finish(_ outcome: PipelineOutcome, interrupted: Int32?) throws -> Never {
        if json {
            printJSON(PipelineView.json(outcome))
        } else {
            for line in PipelineView.lines(outcome.state, directory: (outcome.logPath as NSString).deletingLastPathComponent) { say(line) }
        }
        if let interrupted { throw ExitCode(128 + interrupted) }
        throw outcome.isSucceeded ? Exit.success : Exit.failure
    }
}

struct PipelineRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a pipeline and record it: a pipeline log plus one child log per agent attempt.",
        discussion: """
            Ready tasks run concurrently up to --jobs; a task starts when every task it needs has settled. Each \
            task sees only its declared inputs. Failed attempts follow the task's on_error policy (retry with \
            backoff, skip with a default output, fall back to another task, or fail the pipeline); circuit \
            breakers stop tasks of a failing dependency early. The run writes <out>/<pipeline>-<id>/pipeline.jsonl.gz \
            and tasks/<task>-<attempt>.jsonl.gz beside it.

            Ctrl-C (SIGINT) or SIGTERM pause the pipeline: running agent tasks record their stop, commands are \
            killed, and `pipeline resume` continues from the last checkpoint.

            Exit codes: 0 the pipeline succeeded; 1 it failed or paused; 2 it could not run (bad pipeline or agent \
            file); 64 usage error; 130/143 interrupted.

            Example:
              agent-eval pipeline run Fixtures/pipelines/release-notes/pipeline.yaml --out runs
            """)

    @Argument(help: "The pipeline file (YAML or JSON).")
    var file: String

    @Option(help: "The pipeline's input as JSON (replaces the file's input).")
    var input: String?

    @Option(help: "The directory under which the run's directory is made.")
    var out = "runs"

    @Option(help: "The pipeline run's id (default: pipe-<time>-<random>).")
    var runId: String?

    @OptionGroup var options: PipelineRunOptions

    @OptionGroup(title: "Model")
    var models: ModelArguments

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    func run() async throws {
        let definition = try loadPipeline(file, models: models)
        var inputValue: JSONValue?
        if let input {
            do {
                inputValue = try JSONParser.parse(Array(input.utf8))
            } catch {
                throw ValidationError("--input is not JSON: \(error)")
            }
        }
        let id = runId ?? PipelineTarget.newRunId()
        let directory = PipelineTarget.directory(under: out, pipeline: definition.name, runId: id)
        let runner = PipelineRunner(definition: definition)
        let (jobs, observer, input) = (options.jobs, options.observer, inputValue)
        let outcome: PipelineOutcome
        let interrupted: Int32?
        do {
            (outcome, interrupted) = try await withInterruption {
                try await runner.start(directory: directory, runId: id, input: input, jobs: jobs, observe: observer)
            }
        } catch {
            throw diagnose(error)
        }
        try options.finish(outcome, interrupted: interrupted)
    }
}

struct PipelineResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Continue a paused or interrupted pipeline from its last checkpoint.",
        discussion: """
            Tasks that settled are not run again. An attempt that started and did not finish is settled first: an \
            agent run that stopped on its own is taken as it ended; one cut short runs again — unless a draft or \
            write tool's intent has no recorded result, which may have run: then the attempt fails as \
            `interrupted` and the task's on_error policy for that class decides (fail, by default). A command task \
            runs again — but never beside a copy the earlier run left running: when its process (or one it started) \
            still runs, resume refuses (exit 2, naming the pid) or, with --wait, waits for it to end.

            Exit codes as for `pipeline run`; 2 also when a command of the earlier run still runs (without --wait).
            """)

    @Argument(help: "The pipeline run's directory, or its pipeline.jsonl.gz.")
    var target: String

    @Option(help: "The pipeline file (default: the one the run started with).")
    var file: String?

    @Flag(help: "When a command the earlier run started still runs, wait for it to end instead of refusing.")
    var wait = false

    @OptionGroup var options: PipelineRunOptions

    @OptionGroup(title: "Model")
    var models: ModelArguments

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    func run() async throws {
        let leftovers: LeftoverPolicy =
            wait
            ? .wait { running in
                for process in running {
                    printError("waiting for task \(process.task)'s command from the earlier run to end (\(process.description))")
                }
            } : .refuse
        let target = self.target
        try await options.continueRun(target, file: file, models: models) { runner, log, jobs, observer in
            do {
                return try await runner.resume(log: log, jobs: jobs, leftovers: leftovers, observe: observer)
            } catch let error as PipelineError where error.code == .stillRunning && !error.message.hasPrefix("interrupted") {
                var error = error
                error.hint = error.hint?.replacingOccurrences(
                    of: "wait for it to end", with: "wait for it to end (`agent-eval pipeline resume \(ShellWords.quoted(target)) --wait`)")
                throw error
            }
        }
    }
}

struct PipelineRollbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollback",
        abstract: "Discard a task's and its descendants' results and run them again, keeping the old branch in the log.",
        discussion: """
            Records pipeline_rolled_back (the discarded tasks), then runs like resume. The discarded attempts stay in \
            the pipeline log and their child logs stay on disk: `pipeline show` lists them as discarded.

            Exit codes as for `pipeline run`.
            """)

    @Argument(help: "The pipeline run's directory, or its pipeline.jsonl.gz.")
    var target: String

    @Option(help: "The task to roll back to: it and everything downstream of it run again.")
    var to: String

    @Option(help: "The pipeline file (default: the one the run started with).")
    var file: String?

    @OptionGroup var options: PipelineRunOptions

    @OptionGroup(title: "Model")
    var models: ModelArguments

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    func run() async throws {
        let task = to
        try await options.continueRun(target, file: file, models: models) { runner, log, jobs, observer in
            try await runner.rollback(log: log, to: task, jobs: jobs, observe: observer)
        }
    }
}

struct PipelineForkCommand: AsyncParsableCommand {
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

struct PipelinePauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Ask a running pipeline to pause: it starts no new task, lets running ones finish, and exits.",
        discussion: "Continue it with `agent-eval pipeline resume <directory>`.")

    @Argument(help: "The pipeline run's directory, or its pipeline.jsonl.gz.")
    var target: String

    func run() async throws {
        do {
            let run = try PipelineTarget(target)
            try PipelineRunner.requestPause(directory: run.directory)
            say(
                "pause requested: \(run.directory) pauses once its running tasks finish; continue with `agent-eval pipeline resume \(ShellWords.quoted(run.directory))`"
            )
        } catch {
            throw diagnose(error)
        }
    }
}

struct PipelineShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show a pipeline run from its log: each task's status, attempts and child runs, with digest checks.",
        discussion: """
            Rebuilds the pipeline state from the log alone and checks every recorded state digest. Each agent \
            attempt lists the command that replays its child run step by step.

            Each child log is verified too: one that is missing, unreadable or not intact is listed.

            Exit codes: 0 shown, every digest matches and every child log is intact; 1 a digest differs, the log has \
            anomalies or a child log is missing or damaged; 2 unreadable.
            """)

    @Argument(help: "The pipeline run's directory, or its pipeline.jsonl.gz.")
    var target: String

    @Flag(help: "Print the state as JSON.")
    var json = false

    func run() async throws {
        let replay: PipelineReplay
        let run: PipelineTarget
        do {
            run = try PipelineTarget(target)
            replay = try PipelineReplay(log: run.log)
        } catch {
            throw diagnose(error)
        }
        let childProblems: [String]
        if json {
            let document = replay.json(log: run.log)
            childProblems = document["child_log_problems"]?.arrayValue?.compactMap(\.stringValue) ?? []
            printJSON(document)
        } else {
            for line in PipelineView.lines(replay.state, directory: run.directory) { say(line) }
            say(replay.mismatches.isEmpty ? "digests: \(replay.checkedDigests) checked, all match" : "DIGESTS DIFFER:")
            for mismatch in replay.mismatches + replay.state.anomalies { say("  \(mismatch)") }
            childProblems = replay.childLogProblems(log: run.log)
            if !childProblems.isEmpty { say("CHILD LOGS:") }
            for problem in childProblems { say("  \(problem)") }
        }
        throw replay.mismatches.isEmpty && replay.state.anomalies.isEmpty && childProblems.isEmpty ? Exit.success : Exit.failure
    }
}
