import ArgumentParser
import Foundation
import Interop
import ModelClients
import TraceCore

/// `--otlp-endpoint` on `exec` and `run`: each run's trace goes to an OTLP/HTTP collector as soon
/// as the run ends (Interop's `LiveTraceExporter`), while the log stays the record (docs/interop.md,
/// "Live export").
struct LiveExportOptions: ParsableArguments {
    @Option(
        name: .customLong("otlp-endpoint"),
        help: ArgumentHelp(
            "Send each run's trace to this OTLP/HTTP traces endpoint (JSON) as the run ends, e.g. http://127.0.0.1:4318/v1/traces. "
                + "A collector that fails is a warning: the log keeps everything. Headers (an API key) come from "
                + "OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS, as the OpenTelemetry SDKs read them.",
            valueName: "url"))
    var endpoint: String?

    @Flag(
        name: .customLong("otlp-include-content"),
        help: "With --otlp-endpoint: export prompts, answers, tool arguments and results too (off by default: content may be sensitive).")
    var includeContent = false

    @Option(
        name: .customLong("otlp-timeout-ms"),
        help: ArgumentHelp(
            "With --otlp-endpoint: the longest one attempt to send a trace may take, the collector's answer included "
                + "(three attempts at most).", valueName: "ms"))
    var timeoutMs = 10_000

    @Option(
        name: .customLong("otlp-semconv"),
        help: ArgumentHelp(
            "With --otlp-endpoint: the GenAI conventions' version, latest (gen_ai_latest_experimental) or v1.36, as "
                + "`export otlp --semconv`. Default: from OTEL_SEMCONV_STABILITY_OPT_IN when set, else latest.", valueName: "version"))
    var semconv: String?

    func validate() throws {
        if includeContent && endpoint == nil { throw ValidationError("--otlp-include-content goes with --otlp-endpoint") }
        if semconv != nil && endpoint == nil { throw ValidationError("--otlp-semconv goes with --otlp-endpoint") }
        _ = try semanticConventions(semconv, option: "--otlp-semconv")
        if !(1...86_400_000).contains(timeoutMs) { throw ValidationError("--otlp-timeout-ms must be between 1 and 86400000") }
        if let endpoint, !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) {
            throw ValidationError("--otlp-endpoint must be an http:// or https:// URL, e.g. http://127.0.0.1:4318/v1/traces")
        }
    }

    /// The exporter, or nil without --otlp-endpoint; throws when the OTLP headers variable is
    /// malformed (before any run starts).
    func exporter() throws -> LiveTraceExporter? {
        guard let endpoint else { return nil }
        let headers = try otlpHeaders()
        // Fewer retries and a shorter timeout than `export otlp`: a collector that is down, or
        // that drips its answer, should not hold up the end of a run by minutes.
        let poster = HTTPPoster(maxRetries: 2, limits: HTTPPoster.limits(timeoutMs: timeoutMs))
        return LiveTraceExporter(
            endpoint: endpoint,
            exporter: OTLPExporter(includeContent: includeContent, conventions: try semanticConventions(semconv, option: "--otlp-semconv")),
            post: { body, endpoint in _ = try await poster.post(body, to: endpoint, headers: headers) },
            failed: { LiveExportOptions.report($0) })
    }

    /// A send that failed after the retries: a warning naming the logs and the command that
    /// sends them again; it never changes the exit status.
    static func report(_ failure: LiveTraceExporter.Failure) {
        let logs = failure.logs
        let names = logs.map(displayPath).joined(separator: " ")
        printError(
            "warning: the trace\(logs.count == 1 ? "" : "s") of \(names) could not be sent to \(failure.endpoint); "
                + (logs.count == 1 ? "the log keeps everything" : "the logs keep everything"))
        if let diagnostic = failure.error as? any Diagnostic {
            warn(diagnostic)
        } else {
            printError("warning: \(failure.error)")
        }
        printError(
            "hint: send again with: agent-eval export otlp \(ShellWords.command(logs.map(displayPath))) --endpoint \(ShellWords.quoted(failure.endpoint))"
        )
    }
}

/// The headers `OTEL_EXPORTER_OTLP_TRACES_HEADERS` or `OTEL_EXPORTER_OTLP_HEADERS` set, for every
/// OTLP request (`export otlp --endpoint`, `--otlp-endpoint`).
func otlpHeaders() throws -> [HTTPHeader] {
    do {
        return try OTLPHeaders.from(environment: ProcessInfo.processInfo.environment).map { HTTPHeader(name: $0.name, value: $0.value) }
    } catch {
        throw diagnose(error)
    }
}

/// The GenAI conventions' version an export follows: the option's value, else
/// OTEL_SEMCONV_STABILITY_OPT_IN's choice (`OTLPExporter.Conventions.resolve`); a usage error
/// naming the values for one it does not know.
func semanticConventions(_ value: String?, option: String) throws -> OTLPExporter.Conventions {
    guard let conventions = OTLPExporter.Conventions.resolve(flag: value, environment: ProcessInfo.processInfo.environment) else {
        throw ValidationError("\(option) must be latest (or gen_ai_latest_experimental) or v1.36, not \(ShellWords.quoted(value ?? ""))")
    }
    return conventions
}
