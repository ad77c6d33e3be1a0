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
            let replaced = summary.replacedRuns.map { run -> JSONValue in
                var object = ObjectBuilder()
                object.set("path", run.path)
                object.set("run_id", run.runId)
                object.set("seen_on", run.seenOn)
                object.set("by_run_id", run.byRunId)
                return object.json
            }
            if json {
                printJSON([
                    "suite_runs": .int(summary.suiteRuns), "suite_runs_known": .int(summary.suiteRunsKnown), "runs": .int(summary.logs),
                    "runs_known": .int(summary.logsKnown), "runs_replaced": .array(replaced), "summary": .string(line),
                ])
            } else {
                say(line)
            }
            // The target keeps one run a path: another run there (another runner's, in the same
            // workspace path) is gone from it now, which is said, never only "copied".
            for run in summary.replacedRuns.prefix(20) {
                printError(
                    "warning: \(displayPath(target.path)) held run \(run.runId ?? "?")\(run.seenOn.map { " (indexed on \($0))" } ?? "") at \(run.path); "
                        + "it holds run \(run.byRunId ?? "?") there now: the catalog keeps one run a path")
            }
            if summary.replacedRuns.count > 20 { printError("warning: … and \(summary.replacedRuns.count - 20) more runs replaced so") }
        }
    }
}
