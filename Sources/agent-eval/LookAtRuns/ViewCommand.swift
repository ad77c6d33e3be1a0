import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import Pipelines
import TraceCore
import TraceLog
import Viewer

/// `agent-eval view`: a run, or a pipeline with its child runs, as one self-contained HTML page.
struct ViewCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Write a run or a pipeline as one self-contained HTML page to look at in a browser.",
        discussion: """
            The page is made from the log alone, as replay sees it: a timeline of the steps with each context packet \
            (what went in, what was left out and why), the raw and the parsed decision, verdicts with their rules, \
            intents and results with attempts, durations and errors, approvals, the stop and the limit that fired, \
            the state at every step and every digest check; a summary of the tools (calls, errors, durations) and a \
            chart of tokens and cost over the steps. Large payloads are collapsed with their size; content stored by \
            hash opens on demand. A fork's page shows its parent, its edits and where it parts from the parent; a \
            run's page lists the forks of it the catalog knows.

            Keys on the page: n/p next and previous step, f next failure, denial or error, g jump to a step, / \
            search tool names and arguments, ? all keys. Steps have links: page.html#step-12.

            The page needs no network and no server: style, script and data are inside it (a large log's data \
            compressed), it works from file:// and as a CI artifact, and nothing in a log can run as script in it. \
            The same page for an eval report: `agent-eval run … --html FILE`; for two runs: `agent-eval diff A B --html FILE`.

            A pipeline log (or a pipeline run's directory) is drawn as its pipeline, as `pipeline show` reads it: \
            the outcome (green only when it succeeded and every digest matches), the task graph, each task's status, \
            attempts and durations, and each agent attempt's child run, embedded and linked. --step does not apply \
            to it; the page is named after the run's directory.

            Exit codes: 0 written; 2 the log cannot be read (a damaged run log's page holds the steps before the \
            damage and says where it stopped), a pipeline's child log is missing or damaged (the page is written \
            without it), or the page cannot be written; 64 usage error.

            Examples:
              agent-eval view Fixtures/runs/support-refund.jsonl.gz
              agent-eval view run.jsonl.gz --output reports/run.html --step 12 --open
              agent-eval view Fixtures/pipelines/recorded/triage-recovery/pipeline.jsonl.gz
            """
    )

    @Argument(help: "The log file (.jsonl.gz): a run's, or a pipeline's (or a pipeline run's directory).")
    var log: String

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("Where to write the page (default: the log's name with .html, in this directory).", valueName: "file"))
    var output: String?

    /// The older spelling of --output (`--out` names a directory everywhere else).
    @Option(name: .customLong("out"), help: .hidden)
    var outSpelling: String?

    /// The file to write: --output, or its older spelling.
    var out: String? { output ?? outSpelling }

    @Option(help: "Open the page at this step (the printed link ends in #step-N); runs only.")
    var step: Int?

    @Flag(help: "Open the page in the default browser (xdg-open, or open on macOS).")
    var open = false

    @Flag(help: "Print what was written as JSON: the file, its link, steps (or tasks and child runs), events and bytes.")
    var json = false

    @OptionGroup(title: "Catalog (a run's page lists the run's forks it knows)")
    var location: CatalogArguments

    @Flag(help: "Do not look in the catalog for the run's forks.")
    var noCatalog = false

    @OptionGroup var limits: LogReadLimits

    func run() throws {
        // A pipeline log is drawn as its pipeline, never judged by the rules of a run's log.
        if let pipeline = PipelineTarget.detected(log) {
            try viewPipeline(pipeline)
            return
        }
        let view: RunView
        do {
            // The run's forks, as far as the catalog knows them (none without one).
            let path = noCatalog ? nil : location.pathOrWarn()
            let catalog =
                path.map { Catalog.isServer($0) || FileManager.default.fileExists(atPath: $0) } == true
                ? path.flatMap { try? Catalog(path: $0, readOnly: true) } : nil
            view = try RunView.make(log: log) { runId in
                var query = RunQuery()
                query.forksOf = runId
                query.limit = 200
                let rows = (try? catalog?.runs(query)) ?? []
                return rows.map { RunView.Child(runId: $0.runId ?? "", log: displayPath($0.path), step: $0.forkStep ?? 0) }
            }
        } catch {
            throw diagnose(error)
        }
        // Nothing readable at all: there is no page to make.
        if let error = view.error, view.stepCount == 0 { throw diagnose(error) }
        if let step, view.stepCount > 0, !view.stepNumbers.contains(step) {
            throw diagnose(
                CommandError(
                    "no_such_step",
                    "\(log) has no step \(step); its steps are \(view.stepNumbers.first ?? 0) to \(view.stepNumbers.last ?? 0)",
                    hint: "give --step one of them, or leave it out to open the page at the first step"), exit: Exit.usage)
        }
        let path = out ?? Self.defaultPage(for: log)
        let bytes = try HTMLOutput.write(view.page, to: path)
        let link = HTMLOutput.link(to: path, fragment: step.map { "step-\($0)" })
        if json {
            var object = ObjectBuilder()
            object.set("schema", "agent-eval/view")
            object.set("version", 1)
            object.set("view", "run")
            object.set("log", log)
            object.set("html", path)
            object.set("url", link)
            object.set("steps", view.stepCount)
            object.set("events", view.eventCount)
            object.set("bytes", bytes)
            object.set("error", view.error.map { ($0 as any Diagnostic).json })
            printJSON(object.json)
        } else {
            say("wrote \(path) (\(counted(view.stepCount, "step")), \(counted(view.eventCount, "event")), \(HTMLOutput.size(bytes)))")
            say("open: \(link)")
        }
        if open { HTMLOutput.open(link) }
        if let error = view.error {
            diagnose(error)
            printError("note: the page shows the \(counted(view.stepCount, "step")) read before the damage")
            throw Exit.unusable
        }
    }

    /// The pipeline's page: its outcome, the task graph and each agent attempt's run.
    func viewPipeline(_ target: PipelineTarget) throws {
        if let step {
            throw diagnose(
                CommandError(
                    "no_such_step", "\(log) is a pipeline log: it has tasks, not steps, so there is no step \(step) to open",
                    hint: "leave --step out and open a task's run from the page, or view that run's child log with --step \(step)"),
                exit: Exit.usage)
        }
        let view: PipelineRunView
        do {
            view = try PipelineRunView.make(log: target.log)
        } catch {
            throw diagnose(error)
        }
        // pipeline run writes <out>/<pipeline>-<id>/pipeline.jsonl.gz: the directory names the run.
        let isInRunDirectory = (target.log as NSString).lastPathComponent == PipelineRunner.logName && target.directory != "."
        let named = isInRunDirectory ? target.directory : target.log
        let path = out ?? Self.defaultPage(for: named)
        let bytes = try HTMLOutput.write(view.page, to: path)
        let link = HTMLOutput.link(to: path)
        if json {
            var object = ObjectBuilder()
            object.set("schema", "agent-eval/view")
            object.set("version", 1)
            object.set("view", "pipeline")
            object.set("log", target.log)
            object.set("html", path)
            object.set("url", link)
            object.set("pipeline", view.pipeline)
            object.set("status", view.status)
            object.set("tasks", view.taskCount)
            object.set("events", view.eventCount)
            object.set("runs", view.embedded)
            object.set("runs_left_out", view.leftOut)
            object.set("child_log_problems", view.childLogProblems)
            object.set("bytes", bytes)
            printJSON(object.json)
        } else {
            say(
                "wrote \(path) (pipeline \(view.pipeline) \(view.status), \(counted(view.taskCount, "task")), "
                    + "\(counted(view.embedded.count, "child run")), \(counted(view.eventCount, "event")), \(HTMLOutput.size(bytes)))")
            say("open: \(link)")
        }
        if open { HTMLOutput.open(link) }
        // As for a damaged run log: the page is written, and the command says what it lacks.
        guard view.childLogProblems.isEmpty else {
            for problem in view.childLogProblems { printError("error: \(problem)") }
            printError("note: the page shows the pipeline without those runs; `agent-eval pipeline show` lists the same")
            throw Exit.unusable
        }
    }

    /// `runs/a.jsonl.gz` → `a.html`.
    static func defaultPage(for log: String) -> String {
        var name = (log as NSString).lastPathComponent
        for suffix in [".gz", ".jsonl", ".json"] where name.hasSuffix(suffix) { name = String(name.dropLast(suffix.count)) }
        return (name.isEmpty ? "run" : name) + ".html"
    }
}

/// Writing viewer pages for `view`, `run --html`, `diff --html` and `results --html`.
enum HTMLOutput {
    /// Renders `page` with the installed assets and writes it whole; returns its size.
    @discardableResult
    static func write(_ page: HTMLPage, to path: String) throws -> Int {
        let bytes: [UInt8]
        do {
            bytes = try page.render(with: try ViewerAssets.load(from: try BundledFiles.viewerAssets()))
        } catch {
            throw diagnose(CommandError("page_failed", "cannot make the page \(path): \(FileProblem.reason(of: error))"))
        }
        do {
            try ReportFile.write(bytes: bytes, to: path)
        } catch {
            throw diagnose(error)
        }
        return bytes.count
    }

    /// `file:///abs/path.html#fragment`.
    static func link(to path: String, fragment: String? = nil) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.absoluteString + (fragment.map { "#" + $0 } ?? "")
    }

    static func size(_ bytes: Int) -> String {
        bytes < 1024 ? "\(bytes) B" : bytes < 1 << 20 ? "\(bytes / 1024) KB" : String(format: "%.1f MB", Double(bytes) / 1_048_576)
    }

    /// Opens `link` in the default browser; says so when there is no way to.
    ///
    /// The one program agent-eval starts with `Foundation.Process` rather than `SpawnedProcess`,
    /// on purpose: the browser it opens must outlive agent-eval, and `SpawnedProcess` gives every
    /// child the parent-death signal and kills what is left at exit (`adoptOrphans`).
    static func open(_ link: String) {
        #if os(macOS)
            let opener: String? = "/usr/bin/open"
        #else
            let opener =
                ["/usr/bin/xdg-open", "/usr/local/bin/xdg-open", "/bin/xdg-open"].first { FileManager.default.isExecutableFile(atPath: $0) }
        #endif
        guard let opener else {
            printError("warning: cannot open a browser here (no xdg-open); open \(link) yourself")
            return
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: opener)
        process.arguments = [link]
        // Browsers print on their standard output ("Opening in existing browser session."):
        // ours may be a --json document.
        process.standardOutput = FileHandle.standardError
        do {
            try process.run()
        } catch {
            printError("warning: \(opener) could not be started (\(FileProblem.reason(of: error))); open \(link) yourself")
        }
    }
}
