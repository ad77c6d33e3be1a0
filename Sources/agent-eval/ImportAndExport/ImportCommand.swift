import AgentRuntime
import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import Interop
import ModelClients
import TraceCore
import TraceLog

/// `agent-eval import`: other tools' runs as ordinary logs.
struct ImportCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import runs from OpenTelemetry traces, ATIF trajectories, Inspect AI logs or message transcripts as agent-eval logs.",
        discussion: """
            Each run in the inputs becomes one log in --out: a trace (OTLP/JSON, Tempo's batches, a Jaeger export; \
            --group-by session or window joins traces into one run), an ATIF trajectory (v1.4 to v1.8; an embedded \
            sub-agent is a run of its own, a continuation file is followed), a sample and epoch of an Inspect eval log (.eval or .json), or an episode of a transcript file (OpenAI chat \
            messages or Anthropic messages, alone or in a result file of many episodes). The logs are ordinary: \
            verify, replay, diff, index and `agent-eval run` read them like any other. Their run_started names the \
            source (format, file, id) and the tools it declares; imported runs have no policy verdicts, and the \
            source's own record of every step is kept as stored content. A transcript that ends on a user turn (the \
            agent was cut off) is imported unfinished, and a note says so. docs/interop.md has the field mappings and \
            the stop-reason tables.

            FORMAT is otlp, jaeger, atif, inspect, messages, or auto (tell by the content; an error names the candidates \
            when it cannot). A run that cannot be imported is reported and the others still are. An .eval archive \
            that would inflate to more than --max-archive-bytes, or has an entry over --max-archive-ratio, is refused \
            before it is inflated (docs/interop.md, Limits).

            Exit codes: 0 every run imported; 1 some runs imported, some not; 2 nothing imported (unreadable or \
            wrong-format input); 64 usage error.

            Examples:
              agent-eval import auto traces.json --out imported/
              agent-eval import messages results.json --episodes-path results --out imported/
              agent-eval import inspect logs/*.eval --out imported/ --json
            """
    )

    @Argument(help: "The format: auto, otlp, jaeger, atif, inspect or messages.")
    var format: ImportFormat

    @Argument(help: "The files to import.")
    var inputs: [String]

    @Option(help: ArgumentHelp("The directory to write the logs to (created when missing).", valueName: "dir"))
    var out: String

    @Option(help: ArgumentHelp("Transcripts: the dotted path to the list of episodes in a result file (e.g. results).", valueName: "path"))
    var episodesPath: String?

    @Option(
        help: ArgumentHelp(
            "Transcripts: the key of each episode's message list (default: messages, traj, trajectory, …).", valueName: "key"))
    var messagesKey: String?

    @Option(
        help: ArgumentHelp(
            "Archives (.eval): the most the entries read from one archive may inflate to, together (default 512MiB).",
            valueName: "size"))
    var maxArchiveBytes: String?

    @Option(
        help: ArgumentHelp(
            "Archives (.eval): the most an entry over 1 MiB may inflate to per compressed byte (default 1000).", valueName: "ratio"))
    var maxArchiveRatio: Int?

    @Option(
        help: ArgumentHelp(
            "Traces: which spans make one run — trace (one trace, one run), session (the traces sharing a session.id or "
                + "gen_ai.conversation.id), window (traces of one service at most --window seconds apart: for "
                + "instrumentations with no span around the agent).", valueName: "trace|session|window"))
    var groupBy = "trace"

    @Option(help: ArgumentHelp("With --group-by window: the longest gap between two traces of one run.", valueName: "seconds"))
    var window: Double = 60

    @Flag(help: "Replace logs that exist already in --out.")
    var force = false

    @Flag(help: "Print what was imported as JSON on standard output instead of the console lines.")
    var json = false

    @Option(help: ArgumentHelp("Write what was imported as JSON to this file.", valueName: "file"))
    var jsonOut: String?

    @Flag(help: "Only errors and the summary line.")
    var quiet = false

    @OptionGroup(title: "Catalog")
    var catalog: CatalogUse

    func validate() throws {
        if inputs.isEmpty { throw ValidationError("give the files to import") }
        if let maxArchiveBytes, ArchiveBudget.byteCount(maxArchiveBytes) == nil {
            throw ValidationError("--max-archive-bytes takes a size in bytes, KiB, MiB or GiB (e.g. 2GiB), not '\(maxArchiveBytes)'")
        }
        if let maxArchiveRatio, maxArchiveRatio < 1 { throw ValidationError("--max-archive-ratio takes a whole number of 1 or more") }
        guard ["trace", "session", "window"].contains(groupBy) else {
            throw ValidationError("--group-by takes trace, session or window, not '\(groupBy)'")
        }
        guard window > 0, window <= 86_400 else {
            throw ValidationError("--window takes a number of seconds, more than 0 and at most 86400")
        }
    }

    var spanGrouping: SpanGrouping {
        switch groupBy {
        case "session": .session
        case "window": .window(Int(window * 1_000_000))
        default: .trace
        }
    }

    @OptionGroup var limits: LogReadLimits

    func run() throws {
        var budget = ArchiveBudget.standard
        if let bytes = maxArchiveBytes.flatMap(ArchiveBudget.byteCount) { budget.maxBytes = bytes }
        if let maxArchiveRatio { budget.maxRatio = maxArchiveRatio }
        let options = ImportOptions(
            format: format, episodesPath: episodesPath, messagesKey: messagesKey, archiveBudget: budget, spanGrouping: spanGrouping)
        let writer = ImportWriter(directory: out, replacesExisting: force)
        let toStandardOutput = json
        let outcome = Importer.importRuns(from: inputs, options: options, writer: writer) { run in
            if let error = run.error {
                // A run that could not be imported counts as failed (and in the exit status): an error, not a warning.
                diagnose(error)
            } else if !quiet, !toStandardOutput, let log = run.log {
                let id = run.sourceId.map { " \($0)" } ?? ""
                say(
                    "imported \(run.format)\(id) → \(displayPath(log)) (\(counted(run.steps, "step")), \(counted(run.calls, "call")), \(run.stop?.rawValue ?? "unfinished"))"
                )
                for warning in run.warnings { say("  note: \(warning)") }
            }
        }
        for error in outcome.failedInputs { diagnose(error) }
        if let index = catalog.openIfWanted() {
            for run in outcome.runs {
                guard let log = run.log else { continue }
                do { _ = try index.index(log: log) } catch { warn(error) }
            }
        }
        let text = JSONWriter.encodePretty(outcome.json)
        if json { printOutput(text) }
        if let jsonOut {
            do { try ReportFile.write(text, to: jsonOut) } catch { throw diagnose(error) }
        }
        if !toStandardOutput {
            let failed = outcome.failedCount
            say(
                "\(outcome.importedCount) run\(outcome.importedCount == 1 ? "" : "s") imported into \(displayPath(out))"
                    + (failed > 0 ? ", \(failed) failed" : ""))
        }
        if outcome.importedCount == 0 {
            // Nothing failed, yet nothing came: say why the exit status is 2.
            if outcome.failedCount == 0 && outcome.failedInputs.isEmpty {
                diagnose(
                    CommandError(
                        "nothing_imported", "\(inputs.joined(separator: ", ")) held no run to import",
                        hint: "check that the input holds what --format expects (an empty list or file holds no run)"))
            }
            throw Exit.unusable
        }
        if outcome.failedCount > 0 { throw Exit.failure }
    }
}
