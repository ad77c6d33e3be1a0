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

/// `agent-eval index`: add logs to the catalog, reading only what changed.
struct IndexCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Index logs into the catalog: runs, tool calls, verdicts, approvals, tokens, cost.",
        discussion: """
            Directories are searched recursively for *.jsonl.gz; globs work in any part of a path, and ** matches any number of folders (runs/**/support-*.jsonl.gz). A log whose \
            size, modification time and last gzip member are unchanged is not read again; a log that grew on the same \
            prefix (a run still being written, a run resumed after an approval) is read only from its last member on. \
            Logs the catalog knows under a directory given that are gone are marked vanished. With no paths, every log \
            the catalog knows is checked again.

            A damaged log is indexed with its status and problem (what was read before the damage is kept); a torn \
            one (a crash, or a run still being written) with where it was cut. Each log stands on its own: one that \
            cannot be read or stored (damage, a gzip member over --max-member-mib, which bounds the memory a log \
            can take) is reported by name with its reason and the others are indexed. Lines are printed once their \
            batch is committed, so a slow reader of the output never holds the catalog's write lock.

            The catalog is derived from the logs and can always be rebuilt (`agent-eval catalog rebuild`). \
            Schema, views and example queries: docs/catalog.md.

            Exit codes: 0 indexed (whatever the logs' status: a damaged or oversized log is reported, not fatal); \
            2 a path does not exist or a glob matches nothing, or the catalog cannot be used. A folder with no log \
            in it is indexed (0 logs): the logs the catalog knew under it are marked vanished.

            Examples:
              agent-eval index runs/
              agent-eval index 'runs/eval-*' --json
            """
    )

    @Argument(help: "Logs, directories of logs, or globs.")
    var paths: [String] = []

    @OptionGroup var location: CatalogArguments

    @Flag(help: "Print one JSON object per log, then a summary object.")
    var json = false

    @Flag(name: [.short, .long], help: "Print only the summary line.")
    var quiet = false

    @Option(help: "Threads reading logs while SQLite writes on another (default: the number of cores).")
    var jobs: Int?

    @OptionGroup var limits: LogReadLimits

    func validate() throws { try validateReadingJobs(jobs) }

    func run() throws {
        let catalog = try location.open()
        let isTerminal = isatty(2) == 1
        let summary: IndexSummary
        do {
            summary = try catalog.index(paths: paths, jobs: readingJobs(jobs), memberLimit: limits.memberLimit) { log, done, total in
                if json {
                    var object = ObjectBuilder()
                    object.set("path", log.path)
                    object.set("change", log.change.rawValue)
                    object.set("status", log.status.rawValue)
                    object.set("problem", log.problem)
                    object.set("events_read", log.eventsRead)
                    printJSON(object.json)
                } else if !quiet && (log.change != .unchanged || log.status == .damaged) {
                    if isTerminal { FileHandleStream.standardError.write("\r\u{1B}[K") }
                    var line =
                        "\(log.change.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(log.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(displayPath(log.path))"
                    if log.eventsRead > 0 { line += " (\(log.eventsRead) event\(log.eventsRead == 1 ? "" : "s") read)" }
                    say(line)
                    if let problem = log.problem, log.status == .damaged || (log.status == .vanished && problem != IndexedLog.gone) {
                        say("          problem: \(problem)")
                    }
                    if log.problemCode == "log.event_too_large" {
                        say(
                            "          hint: a log you trust may be indexed with a higher --max-member-mib (now \(limits.memberLimit >> 20))"
                        )
                    }
                }
                if isTerminal && !json && !quiet && done < total {
                    FileHandleStream.standardError.write("\r\u{1B}[K[\(done)/\(total)] indexing…")
                }
            }
        } catch {
            throw diagnose(error)
        }
        if isTerminal && !json && !quiet { FileHandleStream.standardError.write("\r\u{1B}[K") }
        let line =
            "\(summary.logs.count) log\(summary.logs.count == 1 ? "" : "s"): \(summary.count(.added)) added, \(summary.count(.grew)) grew, "
            + "\(summary.count(.reindexed)) reindexed, \(summary.count(.unchanged)) unchanged, \(summary.count(IndexedLog.Change.vanished)) vanished; "
            + "\(summary.count(.torn)) torn, \(summary.count(.damaged)) damaged; \(summary.eventsRead) events read → \(displayPath(catalog.path))"
        if json {
            var object = ObjectBuilder()
            object.set("summary", line)
            object.set("logs", summary.logs.count)
            for change in [IndexedLog.Change.added, .grew, .reindexed, .unchanged, .vanished] {
                object.set(change.rawValue, summary.count(change))
            }
            object.set("events_read", summary.eventsRead)
            object.set("catalog", catalog.path)
            printJSON(object.json)
        } else {
            say(line)
        }
    }
}
