import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import ModelClients
import Pipelines
import Synchronization
import TraceCore
import TraceLog

/// Loading a pipeline file the way every subcommand does: model overrides and MCP servers for
/// its agents, every error and warning printed.
func loadPipeline(_ path: String, models: ModelArguments, printWarnings: Bool = true) throws -> PipelineDefinition {
    let shelf = CassetteShelf()
    let options = try models.options(shelf: shelf)
    let servers = try models.toolServers(shelf: shelf)
    do throws(ConfigErrors) {
        let definition = try PipelineFile.load(path: path) { agentPath throws(ConfigError) in
            try AgentFile.load(path: agentPath, models: options, servers: servers)
        }
        if printWarnings { for warning in definition.warnings { warn(warning) } }
        return definition
    } catch {
        for problem in error.errors { diagnose(problem) }
        throw Exit.unusable
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
            let runner = PipelineRunner(
                definition: try loadPipeline(try file ?? Self.startedFile(of: run), models: models, printWarnings: false))
            let (jobs, observer, log) = (self.jobs, self.observer, run.log)
            (outcome, interrupted) = try await withInterruption { try await body(runner, log, jobs, observer) }
        } catch {
            throw diagnose(error)
        }
        try finish(outcome, interrupted: interrupted)
    }

    /// The pipeline file the run started with, as it was given then. A relative one was relative
    /// to the directory the run started in, which the log does not keep: when it is not found
    /// from here, the error says so and how to go on.
    static func startedFile(of run: PipelineTarget) throws -> String {
        let file = try run.started().file
        guard !file.hasPrefix("/"), !FileManager.default.fileExists(atPath: file) else { return file }
        throw CommandError(
            "pipeline_file_not_found",
            "the pipeline run started with \(file), relative to the directory it was started in, and there is no such file here",
            hint: "go on from that directory, or give the pipeline file with --file (the same bytes: the run's digest is checked)")
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
