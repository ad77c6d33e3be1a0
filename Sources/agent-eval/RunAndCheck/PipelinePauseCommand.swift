import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct PipelinePauseCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Ask a running pipeline to pause: it starts no new task, lets running ones finish, and exits.",
        discussion: "Continue it with `agent-eval pipeline resume <directory>`.")

    @Argument(help: "The pipeline run's directory, or its pipeline.jsonl.gz.")
    var target: String

    @OptionGroup var limits: LogReadLimits

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
