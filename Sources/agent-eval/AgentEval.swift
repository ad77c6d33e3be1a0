import ArgumentParser

/// The `agent-eval` command: parses options, calls one library function, prints, exits.
@main
struct AgentEval: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent-eval",
        abstract: "Record, replay and evaluate LLM agent runs from their event logs.",
        discussion: """
            `agent-eval exec` runs an agent through the controlled runtime and records everything it saw and did \
            as an append-only, gzip-compressed JSONL event log (see docs/log-format.md); `agent-eval log` looks \
            at, verifies and repairs those logs.

            Exit codes: 0 success or intact, 1 damaged or failed, 2 could not run (unreadable input), 64 usage error.
            """,
        version: "0.1.0",
        subcommands: [RunCommand.self, ExecCommand.self, ReplayCommand.self, DiffCommand.self, LogCommand.self]
    )
}
