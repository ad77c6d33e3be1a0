import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import TraceCore
import TraceLog

/// `agent-eval case`: work with case files.
struct CaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "case",
        abstract: "Work with eval case files (draft one from a run, bring over an ADK eval set).",
        subcommands: [CaseFromLogCommand.self, CaseFromEvalSetCommand.self]
    )
}
