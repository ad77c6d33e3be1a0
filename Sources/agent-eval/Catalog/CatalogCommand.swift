import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `agent-eval catalog`: look after the catalog itself.
struct CatalogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog",
        abstract: "Rebuild the catalog from the logs, check it against them, or push it into a team's catalog.",
        subcommands: [Rebuild.self, Check.self, Push.self]
    )
}
