import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct PipelineRollbackCommand: AsyncParsableCommand, ReadsLogs {
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

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let task = to
        try await options.continueRun(target, file: file, models: models) { runner, log, jobs, observer in
            try await runner.rollback(log: log, to: task, jobs: jobs, observe: observer)
        }
    }
}
