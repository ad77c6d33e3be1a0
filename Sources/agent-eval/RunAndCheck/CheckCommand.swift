import ArgumentParser
import EvalEngine
import Foundation
import TraceCore

/// `agent-eval check`: validate every file a project has without running anything.
struct CheckCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check case files, agent files, model scripts and pipeline files without running anything.",
        discussion: """
            Reads every .yaml, .yml and .json file under the given directories (default: the current one) and the \
            files given by name, tells them apart by their keys (a case has caseId or expected, an agent file \
            model, a model script decisions or rules, a pipeline pipeline and tasks; other files in a folder are \
            skipped), and reports every error of every file with file:line:column — not just the first.

            Then what ties them together: the agent, pipeline and logs each case names exist and load; the tools a \
            case expects are tools its agent has (or, for recorded cases, tools its logs' runs had, from each log's \
            first event); the tasks it expects are tasks of its pipeline. `agent-eval run` makes the same checks \
            first and runs nothing when one fails.

            Exit codes: 0 no errors (warnings allowed, unless --strict); 2 errors (a folder with nothing to check is \
            one); 64 usage error; 130 (143) \
            interrupted by Ctrl-C (SIGTERM), which stops it at once.

            Examples:
              agent-eval check
              agent-eval check EvalCases/ Fixtures/agents/support/agent.yaml
              agent-eval check EvalCases/ --json | jq '.files[] | select(.problems != [])'
            """)

    @Argument(help: "Directories and files to check (default: the current directory).")
    var paths: [String] = []

    @OptionGroup(title: "Model")
    var models: ModelArguments

    @Option(help: "The agent file for cases that name neither an agent nor logs (as `run --agent`).")
    var agent: String?

    @OptionGroup(title: "Judge")
    var judge: JudgeArguments

    @Flag(help: "Warnings fail the check too (exit 2).")
    var strict = false

    @Flag(name: .shortAndLong, help: "Print only problems and the summary line.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Also list the files that were skipped, and each pipeline's outputs and tasks in plan order.")
    var verbose = false

    @Flag(help: "Print the report as JSON (docs/eval-cases.md, \"Checking files\").")
    var json = false

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let options: ProjectCheck.Options
        do {
            options = ProjectCheck.Options(models: try models.options(), defaultAgent: agent, judgeModel: try judge.source())
        } catch {
            throw diagnose(error)
        }
        let report = ProjectCheck(options: options).check(paths: paths.isEmpty ? ["."] : paths)
        if json {
            printJSON(report.json)
        } else {
            for file in report.files {
                if file.isSkipped {
                    if verbose { say("\(file.path): \(file.summary ?? "skipped")") }
                    continue
                }
                if !quiet || !file.problems.isEmpty {
                    let counted = file.problems.count == 1 ? "1 problem" : "\(file.problems.count) problems"
                    say(
                        "\(file.path): "
                            + (file.problems.isEmpty ? (file.summary ?? "ok") : (file.summary.map { "\($0), " } ?? "") + counted))
                    if verbose { for line in file.details { say("  " + line) } }
                }
                // Problems go to standard error: keep them after their file's line when both
                // streams go to one place.
                fflush(nil)
                for problem in file.problems {
                    if problem.severity == .error { diagnose(problem.diagnostic) } else { warn(problem.diagnostic) }
                }
            }
            say(report.summaryLine)
        }
        throw ExitCode(report.exitStatus(strict: strict))
    }
}
