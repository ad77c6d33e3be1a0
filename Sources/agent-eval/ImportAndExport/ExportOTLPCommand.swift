import AgentRuntime
import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import Interop
import ModelClients
import TraceCore
import TraceLog

/// `agent-eval export otlp`: runs as OTLP/JSON traces, to a file or a collector.
struct ExportOTLPCommand: AsyncParsableCommand, ReadsLogs {
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
              agent-eval export otlp runs/*.jsonl.gz --output traces.json --include-content
              agent-eval export otlp runs/ --endpoint http://127.0.0.1:4318/v1/traces
            """
    )

    @Argument(help: "The logs to export: files, directories (searched for *.jsonl.gz) or globs.")
    var logs: [String]

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("Write the OTLP/JSON request to this file; - for standard output.", valueName: "file"))
    var output: String?

    /// The older spelling of --output (`--out` names a directory everywhere else).
    @Option(name: .customLong("out"), help: .hidden)
    var outSpelling: String?

    /// The file to write: --output, or its older spelling.
    var out: String? { output ?? outSpelling }

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
        if out == nil, endpoint == nil { throw ValidationError("give --output FILE or --endpoint URL (or both)") }
        _ = try semanticConventions(semconv, option: "--semconv")
        if let endpoint, !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) {
            throw ValidationError("--endpoint must be an http:// or https:// URL, e.g. http://127.0.0.1:4318/v1/traces")
        }
    }

    @OptionGroup var limits: LogReadLimits

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
