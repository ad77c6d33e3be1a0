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

    struct Rebuild: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rebuild",
            abstract: "Build the catalog again from the logs (those named, or every log it knows).",
            discussion: """
                Gives exactly the rows incremental indexing gives. Suite runs and their results are carried over from \
                the old catalog when it can be read (the logs do not hold them); the eval fact cache starts empty. \
                The new catalog replaces the old one only when it is complete. Run it when nothing else uses the \
                catalog. Use it when the catalog is damaged, from a newer agent-eval, or out of date.

                The history is carried from a catalog of any schema version (an older one is read as it is, not \
                migrated). When it cannot be read (a damaged catalog), the rebuild stops and changes nothing unless \
                --discard-history is given. A file that is not a catalog (a log, a text file, another program's \
                database) is never replaced.

                Exit codes: 0 rebuilt; 2 the file is not a catalog, its history cannot be read, or a path matches nothing.
                """
        )

        @Argument(help: "Logs, directories or globs (default: every log the old catalog knows).")
        var paths: [String] = []

        @OptionGroup var location: CatalogArguments

        @Flag(help: "Print a JSON summary.")
        var json = false

        @Option(help: "Threads reading logs while SQLite writes on another (default: the number of cores).")
        var jobs: Int?

        @OptionGroup var limits: LogReadLimits

        @Flag(
            help: """
                Go on when the old catalog's suite history cannot be read (a damaged catalog): that history is lost. \
                Without it, such a rebuild stops and changes nothing.
                """)
        var discardHistory = false

        func validate() throws { try validateReadingJobs(jobs) }

        func run() throws {
            let result: RebuildOutcome
            do {
                result = try Catalog.rebuild(
                    at: try location.resolvedPath(), from: paths, jobs: readingJobs(jobs), memberLimit: limits.memberLimit,
                    discardingUnreadableHistory: discardHistory)
            } catch {
                throw diagnose(error)
            }
            var line =
                "rebuilt \(displayPath(location.path)): \(result.summary.logs.count) logs (\(result.summary.eventsRead) events read), "
                + "\(result.suiteRuns) suite runs kept"
            if let version = result.fromSchemaVersion, version != result.toSchemaVersion {
                line += " (from schema version \(version))"
            }
            if let discarded = result.discardedHistory { printError("warning: the old suite history was discarded: \(discarded)") }
            if json {
                printJSON([
                    "logs": .int(result.summary.logs.count), "suite_runs": .int(result.suiteRuns), "summary": .string(line),
                    "discarded_history": result.discardedHistory.map(JSONValue.string) ?? .null,
                ])
            } else {
                say(line)
            }
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Report catalog rows whose log changed or vanished since it was indexed.",
            discussion:
                "Reads only each log's last member. Exit codes: 0 all current; 1 some rows are stale (index again); 2 the catalog cannot be used."
        )

        @OptionGroup var location: CatalogArguments

        @Flag(help: "Print JSON.")
        var json = false

        func run() throws {
            let catalog = try location.open(readOnly: true)
            let result: (checked: Int, stale: [StaleLog])
            do {
                result = try catalog.check()
            } catch {
                throw diagnose(error)
            }
            if json {
                printJSON(["checked": .int(result.checked), "stale": .array(result.stale.map(\.json))])
            } else {
                for stale in result.stale {
                    say("\(stale.reason.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(displayPath(stale.path))")
                }
                say(
                    "\(result.checked) log\(result.checked == 1 ? "" : "s") checked: \(result.stale.count) stale"
                        + (result.stale.isEmpty ? "" : " (run `agent-eval index` to bring them up to date)"))
            }
            if !result.stale.isEmpty { throw Exit.failure }
        }
    }
}

extension CatalogCommand {
    struct Push: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push",
            abstract: "Copy a catalog's suite runs and run rows into another catalog, typically a team's PostgreSQL one.",
            discussion: """
                For a CI job that ran with the embedded SQLite catalog: its suite runs (with their case and eval \
                results) and its indexed runs (with their calls) are copied into the catalog --to names, so `history`, \
                `runs` and `stats` there see them. Idempotent: a suite run the target holds already (same start time, \
                command line, runner, commit and shard) is not copied twice, and a run the target knows with the same \
                file identity is left as it is (one it knows with another is replaced). The fact cache and step tables \
                stay behind.

                Examples:
                  agent-eval catalog push --to postgres://ci@db.internal/agent_eval
                  agent-eval catalog push --from job/catalog.sqlite --to "$TEAM_CATALOG" --json

                Exit codes: 0 pushed; 2 a catalog cannot be opened or written.
                """
        )

        @Option(help: ArgumentHelp("The catalog to copy into: a postgres:// URL, or a file.", valueName: "url-or-path"))
        var to: String

        @Option(
            help: ArgumentHelp(
                "The catalog to copy from (default: $AGENT_EVAL_CATALOG, else the project's .agent-eval/catalog.sqlite).",
                valueName: "path-or-url"))
        var from: String?

        @Flag(help: "Print a JSON summary.")
        var json = false

        func run() throws {
            let source = from ?? Catalog.defaultPath()
            let summary: PushSummary
            let target: Catalog
            do {
                let origin = try Catalog(path: source, readOnly: true)
                target = try Catalog(path: to)
                summary = try origin.push(to: target)
            } catch {
                throw diagnose(error)
            }
            let line =
                "pushed \(displayPath(source)) → \(displayPath(target.path)): \(summary.suiteRuns) suite runs copied "
                + "(\(summary.suiteRunsKnown) there already), \(summary.logs) runs copied (\(summary.logsKnown) there already)"
            if json {
                printJSON([
                    "suite_runs": .int(summary.suiteRuns), "suite_runs_known": .int(summary.suiteRunsKnown), "runs": .int(summary.logs),
                    "runs_known": .int(summary.logsKnown), "summary": .string(line),
                ])
            } else {
                say(line)
            }
        }
    }
}
