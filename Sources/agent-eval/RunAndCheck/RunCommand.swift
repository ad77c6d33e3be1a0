import AgentRuntime
public import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import Interop
import MCPTools
import ModelClients
import Synchronization
import TraceCore
import TraceLog
import Viewer
import Workflows

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `agent-eval run`: check trajectories against recorded logs and live runs; gate CI.
struct RunCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run eval cases: check the trajectories of recorded logs and live runs.",
        discussion: """
            Finds every case file (.yaml, .yml, .json) under the given directories, checks the logs that recorded \
            cases name, runs live cases through the runtime (writing their logs under --out), and explains every \
            failed expectation: what was expected, what happened, at which step, and the `agent-eval replay` \
            command to look at it. A case can also run a pipeline (pipeline: <file>) or check pipeline logs, with \
            pipeline-level and per-task expectations. Case files are described in docs/eval-cases.md.

            Baselines: --update-baseline adds this run to one reviewable JSON file per case in the baseline directory \
            (default: <first directory>/.baseline; --baseline-branch compares with the catalog's history instead), \
            after comparing with it: a run in which a case regressed is not added (--replace-baseline accepts it). A \
            later run compares with it and reports regressions — a case that passed now fails, a stop reason changed, \
            a new tool is called, a new pipeline task runs, a forbidden tool is now attempted, a pass rate fell by an \
            exact test (--alpha, --min-drop, --test) — apart from failures that were already failing. Under \
            --fail-on regression a failing case the baseline does not know (or any, without a baseline) fails too, \
            and --update-baseline does not write it: quarantine it to land it failing.

            Attempts: a live case whose repeats disagree is flaky_pass or flaky_fail by its minPassRate (every attempt \
            by default); an attempt that could not run is kept apart from failures. --repeat auto runs a case again \
            only while its verdict can still change. Quarantined cases (agent-eval quarantine --help) run and are \
            reported without failing the gate until their end date. Every report leads with the verdict the exit \
            status was decided from (PASS:, FAIL:, ERROR:).

            The catalog (docs/catalog.md): the facts of recorded logs are cached per log identity, so a second run \
            over logs that did not change reads none of them; the results are recorded (see `agent-eval history`) and \
            the logs live runs write are indexed. --no-catalog turns all of that off.

            Model-graded expectations (answer: {rubric, model}, arguments: {<tool>: {rubric}}) ask a judge model for a \
            verdict and a reason, after the trajectory checks; judges served over HTTP go through --cassette like the \
            agents, --judge-model names the judge of rubrics that give none, and a judge that cannot answer makes the \
            case "could not run" (docs/eval-cases.md, "Model-graded expectations").

            Before anything runs, the case files and what they name — agents, pipelines, logs, the tools and tasks \
            they expect — are checked as `agent-eval check` does; one problem and nothing runs.

            The reports (--json-out, --junit, --markdown, --html) never replace a log or a YAML file (exit 2, the \
            file left as it was); a device or a pipe (/dev/null) is written into.

            Exit codes: 0 everything passed (per --fail-on); 1 a case failed or regressed; 2 the harness could \
            not run (a bad case file, a missing or unreadable log, a broken agent file, an unreadable baseline); \
            64 usage error; 130 (143) interrupted by Ctrl-C (SIGTERM): while the case files are read and checked, \
            at once; once cases run, live runs are stopped with their stop recorded and their logs closed, no case \
            starts after, the cases left are reported as not run (eval.interrupted), and the report of what ran is \
            written. A second signal stops at once.

            Examples:
              agent-eval run EvalCases/
              agent-eval run EvalCases/ --filter 'support-*' --junit results.xml --markdown summary.md
              agent-eval run EvalCases/ --html report.html
              agent-eval run EvalCases/ --repeat 5 --jobs 4
              agent-eval run EvalCases/ --update-baseline
              agent-eval run EvalCases/ --fail-on regression --shard 2/4
            """
    )

    @Argument(help: "Case directories or case files.")
    var paths: [String]

    @OptionGroup(title: "Model (live cases)")
    var models: ModelArguments

    @OptionGroup(title: "Judge (model-graded expectations)")
    var judge: JudgeArguments

    @Option(help: "Runs checked or executed at the same time (default: the number of cores).")
    var jobs: Int?

    @Option(
        name: .customLong("repeat"),
        help: ArgumentHelp(
            "Run each live case this many times (pass rate, pass@k, pass^k, flakiness); judge the logs of recorded cases with rubrics this many times. auto: run each live case again only while its verdict is undecided, up to --max-repeats.",
            valueName: "n|auto"))
    var repeatCount: RepeatCount = .fixed(1)

    @Option(name: .customLong("max-repeats"), help: "With --repeat auto: at most this many attempts of a live case (default 20).")
    var maxRepeatsOption: Int?

    var maxRepeats: Int { maxRepeatsOption ?? 20 }

    /// Repeats of recorded cases' judges, and of live cases unless adaptive.
    var repeats: Int {
        if case .fixed(let count) = repeatCount { return count }
        return 1
    }

    @Option(help: "k for pass@k and pass^k (default: --repeat).")
    var k: Int?

    @Option(help: "The agent file for cases that name neither an agent nor logs.")
    var agent: String?

    @Option(
        help: ArgumentHelp(
            "How conversations' model-played users speak: strict (default: their model is asked, from the cassette when it "
                + "replays) or frozen (their recorded turns are said again whatever the agent says; the first turn recorded "
                + "after another conversation is noted).", valueName: "strict|frozen"))
    var user: EvalOptions.UserMode = .strict

    @Option(help: "Where live runs write their logs (default: runs/eval-<time>-<pid>); a log that exists already is never overwritten.")
    var out: String?

    @Option(help: "Only cases whose id or a tag matches this glob (repeatable).")
    var filter: [String] = []

    @Option(help: "Only shard i of n (1-based), by a stable hash of the case id, e.g. 2/4.")
    var shard: String?

    @Flag(help: "Print the machine-readable report (docs/eval-results.md) on standard output instead of the console lines.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print only the cases that did not pass, and the summary line.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Print every run of every case, with its notes and what each judge said.")
    var verbose = false

    @Option(help: "Write the machine-readable report (docs/eval-results.md) to this file.")
    var jsonOut: String?

    @Option(help: "Write a JUnit XML report to this file.")
    var junit: String?

    @Option(help: "Write a Markdown summary to this file (for a CI job page).")
    var markdown: String?

    @Option(
        help: ArgumentHelp(
            "Write the report as one self-contained HTML page, each failed expectation linked to its step in the run (a CI artifact); each look: line gets a view: link into it.",
            valueName: "file"))
    var html: String?

    @Option(
        help: """
            The baseline directory (default: the nearest .baseline folder from the first path's folder up to the project \
            root; written to <first directory>/.baseline when there is none).
            """)
    var baseline: String?

    @Flag(
        help:
            "With --fail-on regression: run without a baseline, every case new, a failing one failing the run (by default no baseline is an error, exit 2)."
    )
    var allowNoBaseline = false

    @Flag(
        help: """
            Add this run to the baseline, one file per case: a live case's attempts and passes are summed with what \
            the file held (the sample size behind it), the tools and stop reasons seen are united; a case that could not \
            run is left as it was. The run is compared with the baseline first: when a case regressed, nothing is written.
            """)
    var updateBaseline = false

    @Flag(
        help:
            "With --update-baseline: start each case's baseline over from this run instead of adding to it, without comparing (accepts a run that regressed)."
    )
    var replaceBaseline = false

    @Option(
        help: ArgumentHelp(
            "Compare with the catalog's history on this branch instead of a baseline directory: each case's newest --baseline-runs suite runs there (outcomes, samples, stop reasons; not tools).",
            valueName: "branch"))
    var baselineBranch: String?

    @Option(help: "With --baseline-branch: how many of the branch's newest suite runs make the baseline.")
    var baselineRuns = 10

    @Option(
        help: ArgumentHelp(
            "The significance level of the exact test of a falling pass rate (cases with repeats): a fall with p below it is a regression.",
            valueName: "p"))
    var alpha = 0.05

    @Option(
        help: ArgumentHelp(
            "The smallest fall of a pass rate, baseline minus now, that can be a regression (0.1: 10 points).",
            valueName: "rate"))
    var minDrop = 0.1

    @Option(help: "The exact test of a falling pass rate: fisher (default, conservative) or barnard (more power at few repeats).")
    var test: PassRateTest = .fisher

    @Option(
        help: ArgumentHelp(
            "The quarantine file (default: .agent-eval/quarantine.yaml in the project root); see `agent-eval quarantine --help`.",
            valueName: "file"))
    var quarantine: String?

    @Option(help: "What fails the run: regression, failure or any (default).")
    var failOn: FailOn = .any

    @Flag(help: "toolsNotCalled also fails on calls that were proposed but denied.")
    var countDeniedAttempts = false

    @OptionGroup(title: "Catalog")
    var catalog: CatalogUse

    @OptionGroup(title: "OpenTelemetry")
    var otlp: LiveExportOptions

    @Flag(
        help: """
            Print GitHub Actions annotations after the summary: each case that fails the gate or could not run is an \
            ::error at its case file's line, a quarantined or flaky one a ::warning.
            """)
    var githubAnnotations = false

    @Flag(
        help: """
            After the run, flag cases whose last 10 recorded suite runs (this one included) disagree with the same \
            case file on the same commit (see `agent-eval history --help`): flaky in history even when this run \
            passed. Needs the catalog.
            """)
    var history = false

    func validate() throws {
        if repeats < 1 { throw ValidationError("--repeat must be at least 1") }
        if maxRepeats < 2 || maxRepeats > 1000 { throw ValidationError("--max-repeats must be between 2 and 1000") }
        if maxRepeatsOption != nil && repeatCount != .auto { throw ValidationError("--max-repeats goes with --repeat auto") }
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
        if let k, repeatCount == .auto {
            throw ValidationError("--k goes with a fixed --repeat; with --repeat auto the number of attempts varies (k=\(k))")
        }
        if let k, k < 1 || k > repeats { throw ValidationError("--k must be between 1 and --repeat (\(repeats))") }
        if updateBaseline && baseline == nil {
            let location = BaselineLocation(paths: paths)
            if location.found == nil && location.writeDefault == nil {
                throw ValidationError(
                    "--update-baseline needs --baseline DIR when the first path is not a directory and no .baseline folder is above it")
            }
        }
        if allowNoBaseline && failOn != .regression {
            throw ValidationError("--allow-no-baseline goes with --fail-on regression")
        }
        if !(alpha > 0 && alpha < 1) { throw ValidationError("--alpha must be above 0 and below 1, e.g. 0.05") }
        if !(minDrop >= 0 && minDrop <= 1) { throw ValidationError("--min-drop must be between 0 and 1, e.g. 0.1") }
        if replaceBaseline && !updateBaseline { throw ValidationError("--replace-baseline goes with --update-baseline") }
        if baselineBranch != nil && (baseline != nil || updateBaseline) {
            throw ValidationError("--baseline-branch compares with the catalog's history; it goes without --baseline and --update-baseline")
        }
        if baselineBranch != nil && catalog.noCatalog { throw ValidationError("--baseline-branch reads the catalog; drop --no-catalog") }
        if baselineRuns < 1 { throw ValidationError("--baseline-runs must be at least 1") }
        if history && catalog.noCatalog { throw ValidationError("--history needs the catalog; drop --no-catalog") }
        if quiet && verbose { throw ValidationError("--quiet and --verbose ask for opposite things; give one") }
        if let shard, EvalSession.Shard(shard) == nil {
            throw ValidationError("--shard takes i/n with 1 ≤ i ≤ n, e.g. 2/4; got \(shard)")
        }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let shelf = CassetteShelf()
        var request: SuiteRun.Request
        do {
            request = try self.request(shelf: shelf)
        } catch {
            throw diagnose(error)
        }
        if let missing = request.missingBaselineDirectory {
            throw diagnose(
                CommandError(
                    "missing_baseline", "the baseline directory \(missing) does not exist", hint: "write one with --update-baseline"))
        }
        let catalog = await self.catalog.openIfWanted()
        // A live case's logs are indexed as each run closes them, with their facts for its grading.
        request.options.finishedLogs = FinishedLogSinks.combining([catalog.map { IndexingSink.warning($0, keepsFacts: true) }])
        // Made before any case runs: a malformed OTLP headers variable stops the command first.
        let exporter = try otlp.exporter()
        let suite: SuiteRun
        do {
            suite = try await SuiteRun(request, catalog: catalog, exporter: exporter, shelf: shelf, notice: { printError($0) })
        } catch let failure as EvalSession.LoadFailure {
            for problem in failure.errors { diagnose(problem) }
            if failure.inCaseFiles {
                printError("\(counted(failure.errors.count, "problem")) in the case files or the files they name; nothing was run")
            }
            throw Exit.unusable
        } catch let error as EvalError where [.noCatalog, .noBaseRun, .recordNeedsCassette].contains(error.code) {
            // The codes `run` has always given these (`cli.*`, as `results comment` does).
            throw diagnose(
                CommandError(error.code.rawValue, error.message, hint: error.hint),
                exit: error.code == .recordNeedsCassette ? Exit.usage : Exit.unusable)
        } catch {
            throw diagnose(error)
        }
        let console = json ? nil : ConsoleProgress(total: suite.session.cases.count, isTerminal: isatty(1) == 1, quiet: quiet)
        let (hasBaseline, verbose, html, failOn) = (suite.session.hasBaseline, verbose, html, failOn)
        // Ctrl-C or SIGTERM stop live runs at their next step, recorded and closed; the report
        // of what ran is still printed and written.
        let (report, interrupted) = try await withInterruption {
            await suite.runCases { finished in
                let lines =
                    verbose || html != nil
                    ? EvalReport.consoleLines(
                        for: finished.result, comparison: finished.comparison, hasBaseline: hasBaseline, verbose: verbose, page: html,
                        failOn: failOn)
                    : finished.consoleLines
                console?.finished(index: finished.index, lines: lines, done: finished.done)
            }
        }
        console?.close()
        let outcome = await suite.finish(report, interruptedBy: interrupted, notice: { printError($0) }, warning: { warn($0) })
        print(outcome, interrupted: interrupted)
        if let failure = outcome.writeFailure { throw diagnose(failure) }
        if let interrupted { throw ExitCode(128 + interrupted) }
        throw ExitCode(outcome.report.exitStatus)
    }

    /// The suite run the options ask for.
    func request(shelf: CassetteShelf) throws -> SuiteRun.Request {
        var options = EvalOptions(
            jobs: jobs, repeats: repeats, defaultAgent: agent, outputDirectory: out ?? Self.defaultOutput(),
            countsDeniedAttempts: countDeniedAttempts)
        options.models = try models.options(shelf: shelf)
        options.cassetteModels = models.caseCassetteModels(shelf: shelf)
        options.commands = GatewayCommandCases(
            cassette: models.cassette, mode: models.mode, shelf: shelf, environment: ProcessInfo.processInfo.environment)
        options.judgeModel = try judge.source()
        options.userMode = user
        options.toolServers = try models.toolServers(shelf: shelf)
        options.cassetteToolServers = models.caseCassetteToolServers(shelf: shelf)
        if repeatCount == .auto { options.adaptive = AdaptiveRepeats(maxRepeats: maxRepeats) }
        var request = SuiteRun.Request(paths: paths, options: options)
        (request.filters, request.shard, request.k, request.failOn) = (filter, shard, k, failOn)
        (request.baseline, request.allowsNoBaseline) = (baseline, allowNoBaseline)
        (request.updatesBaseline, request.replacesBaseline) = (updateBaseline, replaceBaseline)
        (request.baselineBranch, request.baselineRuns) = (baselineBranch, baselineRuns)
        request.regression = RegressionPolicy(alpha: alpha, minDrop: minDrop, test: test)
        (request.quarantineFile, request.flakyHistory) = (quarantine, history)
        (request.recordMode, request.cassette) = (models.mode, models.cassette)
        (request.jsonOut, request.junit, request.markdown, request.html) = (jsonOut, junit, markdown, html)
        if let html {
            do {
                request.viewerAssets = try ViewerAssets.load(from: try BundledFiles.viewerAssets())
            } catch {
                throw CommandError("page_failed", "cannot make the page \(html): \(FileProblem.reason(of: error))")
            }
        }
        return request
    }

    /// The summary (or the JSON report) on standard output, and what `finish` wrote.
    func print(_ outcome: SuiteRun.Outcome, interrupted: Int32?) {
        // With --json, standard output holds only the report: other lines go to standard error.
        func line(_ text: String) { if json { printError(text) } else { say(text) } }
        if json {
            printJSON(outcome.json)
        } else {
            for line in outcome.history.lines { say(line) }
            if let adaptive = outcome.report.adaptive { say(adaptive.sentence) }
            if let exported = outcome.exported { say(exported.sentence) }
            say(outcome.report.summaryLine)
        }
        if githubAnnotations {
            // The runner reads both streams.
            for annotation in GitHubAnnotations.lines(from: outcome.report.json) {
                if json { printError(annotation) } else { printOutput(annotation) }
            }
        }
        if interrupted != nil {
            printError(
                "interrupted: live runs were stopped and their logs closed, and no case was started after; the report covers what ran")
        }
        if let (path, embedded) = outcome.page {
            line("report page written: \(path) (\(embedded) run\(embedded == 1 ? "" : "s") embedded)")
        }
        if let refusal = outcome.baselineRefusal {
            printError(refusal.sentence)
        } else if let (directory, update) = outcome.baselineWritten {
            var text = "baseline written: \(directory) (\(counted(update.written.count, "case")))"
            if !update.skipped.isEmpty {
                text += "; left as it was for \(update.skipped.count) that could not run: \(update.skipped.joined(separator: ", "))"
            }
            line(text)
        }
    }

    /// `runs/eval-<time>-<pid>`: live cases never write into a folder another run used.
    static func defaultOutput() -> String {
        "runs/eval-\(RuntimeEnvironment.utcStamp())-\(getpid())"
    }
}

/// Prints each case's lines in case order as soon as every earlier case is done, so output is
/// the same run after run; on a terminal, a status line shows progress meanwhile.
final class ConsoleProgress: Sendable {
    private struct State {
        var pending: [Int: [String]] = [:]
        var nextIndex = 0
        var done = 0
    }

    private let state = Mutex(State())
    private let total: Int
    private let isTerminal: Bool
    private let quiet: Bool
    private let colours: Bool

    init(total: Int, isTerminal: Bool, quiet: Bool = false) {
        self.total = total
        self.isTerminal = isTerminal
        self.quiet = quiet
        self.colours = isTerminal && TerminalStyle.isEnabled(descriptor: 1)
    }

    func finished(index: Int, lines: [String], done: Int) {
        state.withLock { state in
            state.pending[index] = lines
            state.done = done
            var output = isTerminal ? "\r\u{1B}[K" : ""
            while let ready = state.pending.removeValue(forKey: state.nextIndex) {
                state.nextIndex += 1
                if quiet && ready.first?.hasPrefix("✔") == true { continue }
                var text = terminalSafe(ready.joined(separator: "\n"))
                if colours, let mark = text.first,
                    let colour = ["✔": TerminalStyle.green, "✘": TerminalStyle.red, "!": TerminalStyle.yellow][mark]
                {
                    text = TerminalStyle.paint(String(mark), colour) + text.dropFirst()
                }
                output += text + "\n"
            }
            if isTerminal && state.done < total { output += "[\(state.done)/\(total)] running…" }
            FileHandleStream(descriptor: 1).write(output)
        }
    }

    func close() {
        if isTerminal { FileHandleStream(descriptor: 1).write("\r\u{1B}[K") }
    }
}

extension FailOn: ExpressibleByArgument {}
extension EvalOptions.UserMode: ExpressibleByArgument {}

/// `--repeat N` or `--repeat auto`.
enum RepeatCount: ExpressibleByArgument, Equatable, CustomStringConvertible {
    var description: String {
        switch self {
        case .fixed(let count): "\(count)"
        case .auto: "auto"
        }
    }

    var defaultValueDescription: String { description }

    case fixed(Int)
    case auto

    init?(argument: String) {
        if argument == "auto" {
            self = .auto
        } else if let count = Int(argument) {
            self = .fixed(count)
        } else {
            return nil
        }
    }
}
extension PassRateTest: ExpressibleByArgument {}
