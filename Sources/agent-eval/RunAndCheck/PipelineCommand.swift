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
