import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

/// `agent-eval quarantine`: set cases aside while they are fixed, with an owner and an end.
struct QuarantineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quarantine",
        abstract: "Set failing cases aside while they are fixed: they still run and are reported, and do not fail the gate.",
        discussion: """
            A quarantined case runs and is reported as usual; its failures and regressions do not fail `agent-eval run` \
            (they are counted as quarantined). Every entry has an owner, a reason (or an issue link) and an `until` \
            date: after that day `run` fails the case and `check` reports the entry, so nothing stays set aside by \
            accident. Entries live in the project's quarantine file, .agent-eval/quarantine.yaml in the project root \
            (docs/eval-cases.md, "Quarantine"; schema: docs/quarantine.schema.json), or as `quarantine:` in a case file.

            Examples:
              agent-eval quarantine add refund-flow --owner alice --reason https://github.com/acme/agents/issues/42 --days 14
              agent-eval quarantine list
              agent-eval quarantine release refund-flow
            """,
        subcommands: [QuarantineAddCommand.self, QuarantineListCommand.self, QuarantineReleaseCommand.self]
    )
}
