import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import TraceCore
import Viewer

/// `agent-eval results`: work with the JSON reports `run` writes.
struct ResultsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "results",
        abstract: "Work with the JSON reports of `agent-eval run`: merge CI shards' reports, write a pull-request comment.",
        subcommands: [ResultsMergeCommand.self, ResultsCommentCommand.self]
    )
}
