import ArgumentParser
import ConfigFile
import TraceCore
import TraceLog

/// `agent-eval log`: look at, check and seal event logs.
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Print, verify, repair and upgrade event logs (.jsonl.gz).",
        subcommands: [Cat.self, Verify.self, Repair.self, Upgrade.self, Keygen.self]
    )
}
