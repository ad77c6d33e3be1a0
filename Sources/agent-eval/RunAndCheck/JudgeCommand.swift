import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

/// `agent-eval judge`: check the judges of model-graded expectations.
struct JudgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "judge",
        abstract: "Check the judge models of model-graded expectations against people's verdicts.",
        subcommands: [JudgeCalibrateCommand.self]
    )
}
