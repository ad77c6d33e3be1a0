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

extension CatalogCommand {
    struct Rebuild: ParsableCommand, ReadsLogs {
        static let configuration = CommandConfiguration(
            commandName: "rebuild",
            abstract: "Build the catalog again from the logs (those named, or every log it knows).",
            discussion: """
                Gives exactly the rows incremental indexing gives. Suite runs and their results are carried over from \
                the old catalog when it can be read (the logs do not hold them); the eval fact cache starts empty. \
                The new catalog replaces the old one only when it is complete. While another process has the \
                catalog open for writing (serve, a run, an index), it stops with exit 2 and changes nothing; a writer \
                that starts during a rebuild waits for it. Use it when the catalog is damaged, from a newer agent-eval, or out of date.

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
            // A damaged log is in the catalog as such: say which, and why, as index does.
            let damaged = result.summary.logs.filter { $0.status == .damaged }
            if !damaged.isEmpty { line += "; \(damaged.count) damaged" }
            if let discarded = result.discardedHistory { printError("warning: the old suite history was discarded: \(discarded)") }
            if json {
                printJSON([
                    "logs": .int(result.summary.logs.count), "suite_runs": .int(result.suiteRuns), "summary": .string(line),
                    "discarded_history": result.discardedHistory.map(JSONValue.string) ?? .null,
                    "damaged": .array(
                        damaged.map { ["path": .string($0.path), "problem": $0.problem.map(JSONValue.string) ?? .null] }),
                ])
            } else {
                for log in damaged {
                    say("damaged  \(displayPath(log.path))")
                    if let problem = log.problem { say("         problem: \(problem)") }
                }
                say(line)
            }
        }
    }
}
