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

/// `agent-eval runs`: find indexed runs.
struct RunsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runs",
        abstract: "List indexed runs that match filters, newest first, each with the command that replays it.",
        discussion: """
            Every filter given must hold. Filters about a call hold for the same call: --tool, --approval and \
            --denied. `--tool refund_order --approval none` lists runs in which a refund_order call ran with no human \
            approval, not runs whose refund was approved while some other call ran without; with several --tool, each \
            tool needs such a call. The other filters are about the run: --not-tool (no call of the tool ran; only an intact log read to its \
            run's stop can show that, so damaged, torn and running logs are left out), --stop, \
            --agent, --model, --since, --until, --status, --min-cost, --forks-of (forks of a run, agent-eval fork).

            Index logs first (`agent-eval index runs/`; `exec` and `run` index what they write). For questions the \
            filters do not cover, `agent-eval sql` runs read-only SQL over the catalog (docs/catalog.md).

            Examples:
              agent-eval runs --tool refund_order --approval none  # refunds run unapproved
              agent-eval runs --stop budget_exhausted --since 7d
              agent-eval runs --tool lookup_order --not-tool refund_order --json
            """
    )

    @OptionGroup var filters: RunFilters

    @Option(help: "Show at most this many runs.")
    var limit = 50

    @Flag(help: "Print the runs as a JSON array.")
    var json = false

    @OptionGroup var location: CatalogArguments

    func validate() throws {
        if limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let query = try filters.query(limit: limit)
        let catalog = try location.open(readOnly: true)
        let rows: [RunRow]
        do {
            rows = try catalog.runs(query)
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(.array(rows.map(\.json)))
            return
        }
        guard !rows.isEmpty else {
            say("no indexed run matches")
            return
        }
        var cells = [["STARTED (UTC)", "AGENT", "MODEL", "STOP", "STEPS", "CALLS", "TOKENS", "COST $", "STATUS", "REPLAY"]]
        for row in rows {
            var stop = row.stopReason ?? "running"
            if let limit = row.limit { stop += " (\(limit))" }
            let agent = (row.agent ?? "?") + (row.forkedFrom.map { " (fork of \($0) at \(row.forkStep ?? 0))" } ?? "")
            cells.append([
                utcTime(row.startedAtUs), agent, row.model ?? "?", stop, "\(row.steps)",
                "\(row.executedCalls)" + (row.deniedCalls > 0 ? "+\(row.deniedCalls)d" : ""), "\(row.tokens)",
                String(format: "%.4f", row.costUSD), row.status.rawValue, EvalReport.replayCommand(log: displayPath(row.path), step: nil),
            ])
        }
        for line in table(cells) { say(line) }
        if rows.count == limit { say("(the first \(limit); --limit N for more)") }
    }
}
