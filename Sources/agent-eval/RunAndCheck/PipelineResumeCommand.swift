import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct PipelineResumeCommand: AsyncParsableCommand, ReadsLogs {
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

    @OptionGroup var limits: LogReadLimits

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
