import AgentRuntime
public import ArgumentParser
import Catalog
import EvalEngine
import Foundation
public import Interop
import ModelClients
import TraceCore
import TraceLog

extension ImportFormat: ExpressibleByArgument {}

/// `agent-eval import`: other tools' runs as ordinary logs.
struct ImportCommand: ParsableCommand {
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

/// `agent-eval export`: our runs in other tools' formats.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export runs to other tools (OpenTelemetry traces, ATIF trajectories).",
        subcommands: [ExportOTLPCommand.self, ExportATIFCommand.self]
    )
}

/// `agent-eval export atif`: runs as ATIF trajectories, one JSON file each.
struct ExportATIFCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "atif",
        abstract: "Export runs as ATIF v1.8 trajectories (the Agent Trajectory Interchange Format), one JSON file per run.",
        discussion: """
            Each run becomes DIR/<log name>.atif.json: the goal as the first user step, an agent step per model \
            decision with its tool calls, their results as the step's observation, its tokens and cost as \
            metrics, and the run's totals as final_metrics. The stop reason and limit, which ATIF has no field \
            for, go under extra.agent_eval; `agent-eval import atif` reads them back, so import → export → import \
            gives the same trajectory and stop (docs/interop.md, "ATIF").

            Exit codes: 0 every run written; 2 a log could not be read (the others are still written), or a \
            file exists already (--force replaces it); 64 usage error.

            Examples:
              agent-eval export atif runs/ --out atif/
            """
    )

    @Argument(help: "The logs to export: files, directories (searched for *.jsonl.gz) or globs.")
    var logs: [String]

    @Option(help: ArgumentHelp("The directory to write the trajectories to (created when missing).", valueName: "dir"))
    var out: String

    @Flag(help: "Replace trajectory files that exist already.")
    var force = false

    func validate() throws {
        if logs.isEmpty { throw ValidationError("give the logs to export") }
    }

    func run() throws {
        let paths = try findLogsOrFail(logs)
        do {
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        } catch {
            throw diagnose(
                ImportError(.writeFailed, "cannot create \(out): \(FileProblem.reason(of: error))", hint: "choose another --out"))
        }
        var written = 0
        var failed = 0
        var names = Set<String>()
        for path in paths {
            do {
                let trajectory = try ATIFExporter().trajectory(log: path)
                // Named as the log is: runs may share an id (copies of one log), logs may not share a name in one folder.
                let stem = (path as NSString).lastPathComponent.replacingOccurrences(of: ".jsonl.gz", with: "")
                // Two logs of one name (in two folders): the second gets a number.
                var name = RuntimeEnvironment.fileNameComponent(stem) + ".atif.json"
                var number = 2
                while !names.insert(name).inserted {
                    name = RuntimeEnvironment.fileNameComponent(stem) + "-\(number).atif.json"
                    number += 1
                }
                let file = (out as NSString).appendingPathComponent(name)
                if FileManager.default.fileExists(atPath: file), !force {
                    throw ImportError(.outputExists, "\(file) exists already", hint: "pass --force to replace it, or choose another --out")
                }
                try ReportFile.write(JSONWriter.encodePretty(trajectory) + "\n", to: file)
                written += 1
            } catch {
                failed += 1
                diagnose(error as? any Diagnostic ?? ImportError(.writeFailed, "\(path): \(FileProblem.reason(of: error))"))
            }
        }
        say(
            "wrote \(counted(written, "trajectory", plural: "trajectories")) to \(displayPath(out))"
                + (failed > 0 ? ", \(failed) failed" : ""))
        if failed > 0 { throw Exit.unusable }
    }
}

/// `agent-eval export otlp`: runs as OTLP/JSON traces, to a file or a collector.
struct ExportOTLPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "otlp",
        abstract: "Export runs as OpenTelemetry traces (OTLP/JSON) to a file or an OTLP/HTTP collector.",
        discussion: """
            One trace per run: an invoke_agent root span with the stop reason and limit, a chat span per model \
            decision (approvals as its events; each policy verdict an apply_guardrail span under it, with a \
            gen_ai.guardrail.result event in the policy's own words), an execute_tool span per call that ran (each \
            attempt as an event), with the GenAI semantic conventions' attribute names. Prompts, answers, tool \
            arguments and results are exported only with --include-content, as the conventions recommend. \
            `agent-eval import otlp` reads the export back (docs/interop.md). --results REPORT adds each run's eval \
            outcome from an `agent-eval run` report (--json-out) as gen_ai.evaluation.result events on its \
            invoke_agent span: the case (score 1 or 0, label pass, fail or error) and each expectation it failed.

            --semconv chooses the conventions' version. latest (the default; also gen_ai_latest_experimental): \
            gen_ai.provider.name, content as structured gen_ai.input.messages, gen_ai.output.messages, \
            gen_ai.system_instructions and gen_ai.tool.definitions, tool arguments and results on execute_tool, verdicts \
            as apply_guardrail spans. v1.36: what GenAI instrumentations emit unless opted in: gen_ai.system, content as \
            gen_ai.system.message, gen_ai.user.message, gen_ai.assistant.message, gen_ai.tool.message and gen_ai.choice \
            events, verdicts as agent_eval.policy.verdict events. Without --semconv, OTEL_SEMCONV_STABILITY_OPT_IN \
            decides when it is set, as for the OpenTelemetry instrumentations: gen_ai_latest_experimental in its list \
            gives latest, a list without it v1.36.

            --endpoint posts to an OTLP/HTTP collector (JSON encoding), e.g. http://127.0.0.1:4318/v1/traces; \
            connection errors, 429 and 5xx are retried with backoff. Each attempt, the collector's answer included, \
            ends at --timeout-ms, and reads at most --max-reply-bytes of answer. Headers (a collector's API key) come from \
            OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS (key=value,key2=value2, values \
            percent-encoded), as the OpenTelemetry SDKs read them, so secrets stay off the command line.

            Examples:
              agent-eval export otlp runs/*.jsonl.gz --out traces.json --include-content
              agent-eval export otlp runs/ --endpoint http://127.0.0.1:4318/v1/traces
            """
    )

    @Argument(help: "The logs to export: files, directories (searched for *.jsonl.gz) or globs.")
    var logs: [String]

    @Option(help: ArgumentHelp("Write the OTLP/JSON request to this file; - for standard output.", valueName: "file"))
    var out: String?

    @Option(help: ArgumentHelp("Post to this OTLP/HTTP traces endpoint (JSON encoding).", valueName: "url"))
    var endpoint: String?

    @Flag(help: "Export prompts, answers, tool arguments and results (off by default: content may be sensitive).")
    var includeContent = false

    @Option(
        help: ArgumentHelp(
            "The GenAI conventions' version: latest (gen_ai_latest_experimental) or v1.36. Default: from "
                + "OTEL_SEMCONV_STABILITY_OPT_IN when set, else latest.", valueName: "version"))
    var semconv: String?

    @Option(
        help: ArgumentHelp(
            "An `agent-eval run` report (--json-out): each exported run's outcome and failed expectations as "
                + "gen_ai.evaluation.result events on its invoke_agent span.", valueName: "file"))
    var results: String?

    @Option(help: "Retries for a collector that fails or is not reachable.")
    var retries = 4

    @Option(help: ArgumentHelp("The longest one attempt may take, the collector's answer included.", valueName: "ms"))
    var timeoutMs = 30_000

    @Option(help: ArgumentHelp("The most bytes of a collector's answer read.", valueName: "bytes"))
    var maxReplyBytes = RequestLimits.defaultMaxReplyBytes

    func validate() throws {
        if logs.isEmpty { throw ValidationError("give the logs to export") }
        if !(1...86_400_000).contains(timeoutMs) { throw ValidationError("--timeout-ms must be between 1 and 86400000") }
        if !RequestLimits.byteLimitRange.contains(maxReplyBytes) {
            throw ValidationError(
                "--max-reply-bytes must be between \(RequestLimits.byteLimitRange.lowerBound) and \(RequestLimits.byteLimitRange.upperBound)"
            )
        }
        if out == nil, endpoint == nil { throw ValidationError("give --out FILE or --endpoint URL (or both)") }
        _ = try semanticConventions(semconv, option: "--semconv")
        if let endpoint, !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) {
            throw ValidationError("--endpoint must be an http:// or https:// URL, e.g. http://127.0.0.1:4318/v1/traces")
        }
    }

    func run() async throws {
        // The same rules as `index`: files, directories searched for *.jsonl.gz, globs.
        let paths = try findLogsOrFail(logs)
        let request: JSONValue
        do {
            var evaluations: [String: [OTLPExporter.EvaluationResult]] = [:]
            if let results {
                let report = try ResultsMerge.read(results)
                guard report["cases"]?.arrayValue != nil else {
                    throw ImportError(
                        .wrongFormat, "\(results) is not an agent-eval run report: it has no \"cases\" list",
                        location: SourceLocation(path: results), hint: "write one with agent-eval run … --json-out FILE")
                }
                func absolute(_ path: String) -> String { URL(fileURLWithPath: path).standardizedFileURL.path }
                var byLog: [String: [OTLPExporter.EvaluationResult]] = [:]
                for (log, found) in OTLPExporter.EvaluationResult.fromReport(report) { byLog[absolute(log), default: []] += found }
                for path in paths { evaluations[path] = byLog[absolute(path)] }
                if evaluations.values.allSatisfy(\.isEmpty) {
                    warn(
                        ImportError(
                            .unreadableLog, "\(results) names none of the exported logs: no eval outcomes are exported",
                            location: SourceLocation(path: results)))
                }
            }
            let conventions = try semanticConventions(semconv, option: "--semconv")
            request = try OTLPExporter(includeContent: includeContent, conventions: conventions, evaluations: evaluations).request(
                logs: paths)
        } catch {
            throw diagnose(error)
        }
        let bytes = JSONWriter.encode(request)
        if let out {
            if out == "-" {
                printOutput(String(decoding: bytes, as: UTF8.self))
            } else {
                do { try ReportFile.write(bytes: bytes, to: out) } catch { throw diagnose(error) }
                say("wrote \(paths.count) trace\(paths.count == 1 ? "" : "s") to \(out)")
            }
        }
        if let endpoint {
            do {
                let poster = HTTPPoster(maxRetries: retries, limits: HTTPPoster.limits(timeoutMs: timeoutMs, maxReplyBytes: maxReplyBytes))
                let response = try await poster.post(bytes, to: endpoint, headers: try otlpHeaders())
                let retried = response.attempts.isEmpty ? "" : " after \(response.attempts.count) failed attempts"
                if out != "-" {
                    say("sent \(paths.count) trace\(paths.count == 1 ? "" : "s") to \(endpoint) (HTTP \(response.status))\(retried)")
                }
            } catch {
                throw diagnose(error)
            }
        }
    }
}
