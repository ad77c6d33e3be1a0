import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import TraceCore
import Viewer

/// `agent-eval results comment`: the Markdown a pull request gets.
struct ResultsCommentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "comment",
        abstract: "Write the Markdown comment for a pull request from the head run's report (and the base branch's).",
        discussion: """
            Reads the head branch's results document (`agent-eval run --json-out FILE`, or a merged one) and, with \
            --base, the base branch's (or, with --base-branch, each case's newest result the catalog recorded on \
            that branch: a suite run of some cases, a --filter or a shard, hides none of the others), and writes a comment: the verdict in one line (the one the head run's exit \
            status was decided with), then regressions with the failing step and the `look:` command, cases newly \
            failing or newly flaky against the base, cases still failing, cases that could not run, fixed ones, \
            quarantined ones (those ending within a week flagged), tokens and agent time against the base, and a link \
            to the HTML report. It starts with a hidden marker line, so a CI script can find its earlier comment and \
            edit it. It posts nothing: docs/ci.md's recipes post it with `gh pr comment` or the GitLab API.

            Exit codes: 0 written; 2 a report cannot be read; 64 usage error. The comment's verdict is the head \
            run's, but this command does not gate: `run` and `results merge` do.

            Examples:
              agent-eval results comment reports/results.json --base base/results.json --output reports/comment.md
              agent-eval results comment merged.json --report-link "$ARTIFACT_URL" | gh pr comment 42 --body-file -
            """)

    @Argument(help: "The head run's JSON report.")
    var head: String

    @Option(
        help: ArgumentHelp("The base branch's JSON report, to tell what this change made newly fail, flaky or fixed.", valueName: "file"))
    var base: String?

    @Option(
        help: ArgumentHelp(
            "Or: the base is each case's newest result the catalog recorded on this branch (what the catalog keeps of it).",
            valueName: "branch"
        ))
    var baseBranch: String?

    @OptionGroup(title: "Catalog")
    var catalog: CatalogArguments

    @Option(help: ArgumentHelp("A link to the head run's HTML report (`run --html`), shown at the end.", valueName: "url"))
    var reportLink: String?

    @Option(help: "At most this many cases per section (default 20); the rest are counted.")
    var maxCases = 20

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("Write the comment to this file instead of standard output.", valueName: "file"))
    var output: String?

    /// The older spelling of --output (`--out` names a directory everywhere else).
    @Option(name: .customLong("out"), help: .hidden)
    var outSpelling: String?

    /// The file to write: --output, or its older spelling.
    var out: String? { output ?? outSpelling }

    func validate() throws {
        if maxCases < 1 { throw ValidationError("--max-cases must be at least 1") }
        if base != nil && baseBranch != nil { throw ValidationError("give --base FILE or --base-branch BRANCH, not both") }
    }

    func run() throws {
        var baseReport: JSONValue?
        if let baseBranch {
            let catalog = try self.catalog.open(readOnly: true)
            do {
                guard let found = try catalog.latestCaseReport(branch: baseBranch) else {
                    throw diagnose(
                        CommandError(
                            "no_base_run", "the catalog \(displayPath(self.catalog.path)) has no suite run on branch \(baseBranch)",
                            hint: "record one: run the cases on \(baseBranch) with the catalog (the default), or give --base FILE"))
                }
                baseReport = found.report
                let runs = found.suiteRunIds
                let cases = found.report["cases"]?.arrayValue?.count ?? 0
                printError(
                    "base: each case's newest result on \(baseBranch) (\(cases == 1 ? "1 case" : "\(cases) cases"), from suite run"
                        + (runs.count == 1 ? " #\(runs[0])" : "s " + runs.map { "#\($0)" }.joined(separator: ", ")) + ")")
            } catch {
                throw diagnose(error)
            }
        }
        let comment: PullRequestComment
        do {
            if let base { baseReport = try ResultsMerge.readReport(base) }
            comment = PullRequestComment(
                head: try ResultsMerge.readReport(head), base: baseReport, reportLink: reportLink, maxCases: maxCases)
        } catch {
            throw diagnose(error)
        }
        let text = comment.markdown
        if let out {
            do {
                try ReportFile.write(text, to: out)
            } catch {
                throw diagnose(error)
            }
            printError("comment written: \(out)")
        } else {
            printOutput(text, terminator: "")
        }
    }
}
