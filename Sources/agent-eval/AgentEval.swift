import ArgumentParser

/// The `agent-eval` command: parses options, calls one library function, prints, exits.
@main
struct AgentEval: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent-eval",
        abstract: "Record, replay and evaluate LLM agent runs from their event logs.",
        discussion: """
            Runs are recorded as append-only, gzip-compressed JSONL event logs (see docs/log-format.md).

            Exit codes: 0 success or intact, 1 damaged or failed, 2 could not run (unreadable input), 64 usage error.
            """,
        version: "0.1.0",
        subcommands: [LogCommand.self]
    )
}
