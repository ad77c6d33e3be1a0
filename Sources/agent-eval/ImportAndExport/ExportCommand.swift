import AgentRuntime
import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import Interop
import ModelClients
import TraceCore
import TraceLog

/// `agent-eval export`: our runs in other tools' formats.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export runs to other tools (OpenTelemetry traces, ATIF trajectories).",
        subcommands: [ExportOTLPCommand.self, ExportATIFCommand.self]
    )
}
