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

            A row is what the log held when it was indexed. Each row's file is looked at as it is listed: STATUS says \
            "(file changed)" for a log whose bytes changed since (the row, and the filters it matched, are of the older \
            bytes: index it again), "(file grew)" for a run's log still being written, and "(file gone)" for one no \
            longer there; --json gives each run's "file": as_indexed, changed, grew, vanished, or elsewhere (indexed last on another machine of a shared catalog, not \
            looked at here).

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
            rows = try catalog.runs(query, looksAtFiles: true)
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
        var changed: [String] = []
        var grown: [String] = []
        for row in rows {
            // A row is what the log held when it was indexed: one whose file differs now says so.
            var status = row.status.rawValue
            switch row.file {
            case .changed?:
                status += " (file changed)"
                changed.append(row.path)
            case .grew?:
                status += " (file grew)"
                grown.append(row.path)
            case .vanished? where row.status != .vanished:
                status += " (file gone)"
            default: break
            }
            var stop = row.stopReason ?? "running"
            if let limit = row.limit { stop += " (\(limit))" }
            let agent = (row.agent ?? "?") + (row.forkedFrom.map { " (fork of \($0) at \(row.forkStep ?? 0))" } ?? "")
            cells.append([
                utcTime(row.startedAtUs), agent, row.model ?? "?", stop, "\(row.steps)",
                "\(row.executedCalls)" + (row.deniedCalls > 0 ? "+\(row.deniedCalls)d" : ""), "\(row.tokens)",
                String(format: "%.4f", row.costUSD), status, EvalReport.replayCommand(log: displayPath(row.path), step: nil),
            ])
        }
        for line in table(cells) { say(line) }
        func logs(_ paths: [String]) -> String {
            paths.prefix(3).map { ShellWords.quoted(displayPath($0)) }.joined(separator: " ") + (paths.count > 3 ? " …" : "")
        }
        if !changed.isEmpty {
            say(
                "(file changed): the log changed since it was indexed, so its row (and the filters it matched) "
                    + "is of its older bytes; `agent-eval index \(logs(changed))` reads it again")
        }
        if !grown.isEmpty {
            say(
                "(file grew): the run's log was still being written; its row holds what the log had when it was indexed, "
                    + "and `agent-eval index \(logs(grown))` reads what it added")
        }
        if rows.count == limit { say("(the first \(limit); --limit N for more)") }
    }
}
