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

/// `agent-eval history CASE`: a case across suite runs.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show a case's outcome in each recorded suite run, with the commit, and how stable it is.",
        discussion: """
            Every `agent-eval run` records its results in the catalog (unless --no-catalog), with the commit and a \
            digest of each case's file (the CASE FILE column). CASE may be a glob.

            Flaky means mixed outcomes for the same case definition on the same code: a case is flaky when, among \
            the suite runs shown, it passed and did not pass with the same case file and the same commit, or when \
            one suite run's repeats disagreed. An edited case file or another commit starts a new series: a case \
            that passed, then failed after its file was edited, is not flaky but failing since that edit, and the \
            line says so. Runs outside a git repository have no commit and count as the same code.

            Exit codes: 0 shown; 1 a case shown is flaky; 2 no history for CASE.

            Example:
              agent-eval history refund-needs-approval --last 20
            """
    )

    @Argument(help: "The case id (a glob matches several).")
    var caseId: String

    @Option(help: "How many suite runs to look back over.")
    var last = 10

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var location: CatalogArguments

    func run() throws {
        let catalog = try location.open(readOnly: true)
        let histories: [CaseStability]
        do {
            histories = try catalog.caseIds(matching: caseId).map { id throws(CatalogError) in try catalog.history(caseId: id, limit: last)
            }
        } catch {
            throw diagnose(error)
        }
        guard !histories.isEmpty else {
            throw diagnose(
                CommandError(
                    "no_such_case", "the catalog has no suite run of a case matching \"\(caseId)\"",
                    hint:
                        "`agent-eval run` records results in the catalog; check the id with `agent-eval sql \"SELECT DISTINCT case_id FROM case_results\"`"
                ))
        }
        if json {
            printJSON(.array(histories.map(\.json)))
        } else {
            for history in histories {
                say(
                    "\(history.caseId): \(history.sentence)" + (history.isFlaky ? " — FLAKY" : "")
                        + (history.lastChange.map { " — " + $0 } ?? ""))
                var cells = [["SUITE RUN", "STARTED (UTC)", "COMMIT", "BRANCH", "CASE FILE", "OUTCOME", "RUNS PASSED"]]
                for entry in history.entries {
                    cells.append([
                        "#\(entry.suiteRunId)", utcTime(entry.startedAtUs), entry.gitCommit.map { String($0.prefix(10)) } ?? "-",
                        entry.gitBranch ?? "-", entry.fileDigest.map { String($0.dropFirst("sha256:".count).prefix(10)) } ?? "-",
                        entry.outcome, "\(entry.passedRuns)/\(entry.runs)",
                    ])
                }
                for line in table(cells) { say("  " + line) }
            }
        }
        if histories.contains(where: \.isFlaky) { throw Exit.failure }
    }
}
