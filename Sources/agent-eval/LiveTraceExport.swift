import ArgumentParser
import Foundation
import Interop
import ModelClients
import Synchronization
import TraceCore

/// `--otlp-endpoint` on `exec` and `run`: each run's trace goes to an OTLP/HTTP collector as soon
/// as the run ends, while the log stays the record (docs/interop.md, "Live export").
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

    func validate() throws {
        if includeContent && endpoint == nil { throw ValidationError("--otlp-include-content goes with --otlp-endpoint") }
        if !(1...86_400_000).contains(timeoutMs) { throw ValidationError("--otlp-timeout-ms must be between 1 and 86400000") }
        if let endpoint, !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) {
            throw ValidationError("--otlp-endpoint must be an http:// or https:// URL, e.g. http://127.0.0.1:4318/v1/traces")
        }
    }

    /// The exporter, or nil without --otlp-endpoint; throws when the OTLP headers variable is
    /// malformed (before any run starts).
    func exporter() throws -> LiveTraceExporter? {
        guard let endpoint else { return nil }
        return LiveTraceExporter(
            endpoint: endpoint, exporter: OTLPExporter(includeContent: includeContent), headers: try otlpHeaders(), timeoutMs: timeoutMs)
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

/// Sends run traces to a collector in the background, one request per finished run (or per
/// live case: its repeats, or a pipeline's child runs), so runs never wait for the collector;
/// `finish()` waits for what is under way. A send that fails after the retries is a warning
/// naming the logs and the command that sends them again; it never changes the exit status.
final class LiveTraceExporter: Sendable {
    let endpoint: String
    private let exporter: OTLPExporter
    /// Fewer retries and a shorter timeout than `export otlp`: a collector that is down, or
    /// that drips its answer, should not hold up the end of a run by minutes.
    private let poster: HTTPPoster
    private let headers: [HTTPHeader]
    private let sends = Mutex<[Task<(sent: Int, failed: Int), Never>]>([])

    init(endpoint: String, exporter: OTLPExporter, headers: [HTTPHeader], timeoutMs: Int = 10_000) {
        self.endpoint = endpoint
        self.exporter = exporter
        self.headers = headers
        poster = HTTPPoster(maxRetries: 2, limits: HTTPPoster.limits(timeoutMs: timeoutMs))
    }

    /// Starts sending the traces of `logs` (sealed run logs).
    func send(logs: [String]) {
        guard !logs.isEmpty else { return }
        let (endpoint, exporter, poster, headers) = (self.endpoint, self.exporter, self.poster, self.headers)
        let task = Task { () -> (sent: Int, failed: Int) in
            do {
                let request = try exporter.request(logs: logs)
                _ = try await poster.post(JSONWriter.encode(request), to: endpoint, headers: headers)
                return (logs.count, 0)
            } catch {
                let names = logs.map(displayPath).joined(separator: " ")
                printError(
                    "warning: the trace\(logs.count == 1 ? "" : "s") of \(names) could not be sent to \(endpoint); "
                        + (logs.count == 1 ? "the log keeps everything" : "the logs keep everything"))
                if let diagnostic = error as? any Diagnostic {
                    warn(diagnostic)
                } else {
                    printError("warning: \(error)")
                }
                printError(
                    "hint: send again with: agent-eval export otlp \(ShellWords.command(logs.map(displayPath))) --endpoint \(ShellWords.quoted(endpoint))"
                )
                return (0, logs.count)
            }
        }
        sends.withLock { $0.append(task) }
    }

    /// Waits for every send started; how many traces went and how many did not.
    func finish() async -> LiveExportSummary {
        let tasks = sends.withLock { sends in
            defer { sends.removeAll() }
            return sends
        }
        var summary = LiveExportSummary(endpoint: endpoint)
        for task in tasks {
            let (sent, failed) = await task.value
            summary.sent += sent
            summary.failed += failed
        }
        return summary
    }
}

/// What a live export did, for the command's output.
struct LiveExportSummary {
    var endpoint: String
    var sent = 0
    var failed = 0

    var json: JSONValue { ["endpoint": .string(endpoint), "sent": .int(sent), "failed": .int(failed)] }

    var sentence: String {
        "traces: \(sent) sent to \(endpoint)" + (failed > 0 ? ", \(failed) not sent (see the warnings above)" : "")
    }

    /// `object` (a command's JSON summary) with this summary as its `otlp` member.
    func added(to object: JSONValue) -> JSONValue {
        guard case .object(var members) = object else { return object }
        members["otlp"] = json
        return .object(members)
    }
}
