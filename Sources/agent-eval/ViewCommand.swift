import ArgumentParser
import Foundation
import TraceCore
import Viewer

/// `agent-eval view`: a run as one self-contained HTML page.
struct ViewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Write a run as one self-contained HTML page to look at in a browser.",
        discussion: """
            The page is made from the log alone, as replay sees it: a timeline of the steps with each context packet \
            (what went in, what was left out and why), the raw and the parsed decision, verdicts with their rules, \
            intents and results with attempts, durations and errors, approvals, the stop and the limit that fired, \
            the state at every step and every digest check; a summary of the tools (calls, errors, durations) and a \
            chart of tokens and cost over the steps. Large payloads are collapsed with their size; content stored by \
            hash opens on demand.

            Keys on the page: n/p next and previous step, f next failure, denial or error, g jump to a step, / \
            search tool names and arguments, ? all keys. Steps have links: page.html#step-12.

            The page needs no network and no server: style, script and data are inside it (a large log's data \
            compressed), it works from file:// and as a CI artifact, and nothing in a log can run as script in it. \
            The same page for an eval report: `agent-eval run … --html FILE`; for two runs: `agent-eval diff A B --html FILE`.

            Exit codes: 0 written; 2 the log cannot be read (a damaged log's page holds the steps before the damage \
            and says where it stopped) or the page cannot be written; 64 usage error.

            Examples:
              agent-eval view Fixtures/runs/support-refund.jsonl.gz
              agent-eval view run.jsonl.gz --out reports/run.html --step 12 --open
            """
    )

    @Argument(help: "The log file (.jsonl.gz).")
    var log: String

    @Option(help: ArgumentHelp("Where to write the page (default: the log's name with .html, in this directory).", valueName: "file"))
    var out: String?

    @Option(help: "Open the page at this step (the printed link ends in #step-N).")
    var step: Int?

    @Flag(help: "Open the page in the default browser (xdg-open, or open on macOS).")
    var open = false

    @Flag(help: "Print what was written as JSON: the file, its link, steps, events and bytes.")
    var json = false

    func run() throws {
        let view: RunView
        do {
            view = try RunView.make(log: log)
        } catch {
            throw diagnose(error)
        }
        // Nothing readable at all: there is no page to make.
        if let error = view.error, view.stepCount == 0 { throw diagnose(error) }
        if let step, view.stepCount > 0, !view.stepNumbers.contains(step) {
            printError("error: \(log) has no step \(step); its steps are \(view.stepNumbers.first ?? 0) to \(view.stepNumbers.last ?? 0)")
            printError("hint: give --step one of them, or leave it out to open the page at the first step")
            throw Exit.usage
        }
        let path = out ?? Self.defaultPage(for: log)
        let bytes = try HTMLOutput.write(view.page, to: path)
        let link = HTMLOutput.link(to: path, fragment: step.map { "step-\($0)" })
        if json {
            var object = ObjectBuilder()
            object.set("schema", "agent-eval/view")
            object.set("version", 1)
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
            printError("note: the page shows the \(view.stepCount) steps read before the damage")
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
            printError("error: cannot make the page \(path): \(error)")
            throw Exit.unusable
        }
        do {
            try writeReport(bytes: bytes, to: path)
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
        do {
            try process.run()
        } catch {
            printError("warning: \(opener) could not be started (\(error.localizedDescription)); open \(link) yourself")
        }
    }
}
