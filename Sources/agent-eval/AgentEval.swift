import ArgumentParser

/// The `agent-eval` command: parses options, calls one library function, prints, exits.
@main
struct AgentEval: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent-eval",
        abstract: "Record, replay and evaluate LLM agent runs from their event logs.",
        discussion: """
            `agent-eval run EvalCases/` checks trajectories — tools called and not called, order, arguments, \
            verdicts, stop reason — against recorded logs and live runs, and gates CI on regressions. \
            `agent-eval exec` runs an agent through the controlled runtime and records everything it saw and did \
            as an append-only, gzip-compressed JSONL event log (docs/log-format.md). `agent-eval replay` rebuilds a \
            run from its log and steps through it; `agent-eval rerun` re-drives the current runtime with a log; \
            `agent-eval diff` compares two runs; `agent-eval log` prints, \
            verifies and repairs logs. `agent-eval index` adds logs to the SQLite catalog, where `runs`, `history`, \
            `stats` and `sql` find runs, a case's history and numbers (docs/catalog.md). `agent-eval results merge` \
            joins the reports of CI shards.

            Exit codes: 0 passed (success, intact, identical), 1 failed (a case failed or regressed, a run did not \
            succeed, a log is damaged, runs diverge), 2 could not run (bad input), 64 usage error.
            """,
        version: "0.3.0 (commit \(buildCommit))",
        subcommands: [
            RunCommand.self, ExecCommand.self, ReplayCommand.self, RerunCommand.self, DiffCommand.self, LogCommand.self, IndexCommand.self,
            RunsCommand.self, HistoryCommand.self, StatsCommand.self, SQLCommand.self, CatalogCommand.self,
            ResultsCommand.self, ImportCommand.self, ExportCommand.self, CaseCommand.self, PipelineCommand.self, InitCommand.self,
            CheckCommand.self,
        ]
    )
}
