import Synchronization
public import TraceCore
public import TraceLog

/// Sends run traces to a collector in the background, one request per finished run (or per
/// live case: its repeats, or a pipeline's child runs), so runs never wait for the collector;
/// `finish()` waits for what is under way. A send that fails is reported to `failed` and
/// counted; it never fails the runs (the logs keep everything). docs/interop.md, "Live export".
///
/// The request goes through `post`, which the caller gives (the CLI passes ModelClients'
/// `HTTPPoster`, with its timeouts and retries): this module does not speak HTTP.
public final class LiveTraceExporter: Sendable {
    /// Sends one OTLP/JSON body to the endpoint; throws when it was not accepted.
    public typealias Post = @Sendable (_ body: [UInt8], _ endpoint: String) async throws -> Void

    /// A send that did not go through.
    public struct Failure: Sendable {
        public var logs: [String]
        public var endpoint: String
        public var error: any Error
    }

    public let endpoint: String
    private let exporter: OTLPExporter
    private let post: Post
    private let failed: @Sendable (Failure) -> Void
    private let sends = Mutex<[Task<(sent: Int, failed: Int), Never>]>([])

    public init(endpoint: String, exporter: OTLPExporter, post: @escaping Post, failed: @escaping @Sendable (Failure) -> Void) {
        self.endpoint = endpoint
        self.exporter = exporter
        self.post = post
        self.failed = failed
    }

    /// Starts sending the traces of `logs` (sealed run logs), each with the eval outcomes given
    /// for it (`gen_ai.evaluation.result` events on its run's span).
    public func send(logs: [String], evaluations: [String: [OTLPExporter.EvaluationResult]] = [:]) {
        guard !logs.isEmpty else { return }
        var exporter = self.exporter
        exporter.evaluations.merge(evaluations) { _, given in given }
        let (endpoint, post, failed) = (self.endpoint, self.post, self.failed)
        let task = Task { () -> (sent: Int, failed: Int) in
            do {
                let request = try exporter.request(logs: logs)
                try await post(JSONWriter.encode(request), endpoint)
                return (logs.count, 0)
            } catch {
                failed(Failure(logs: logs, endpoint: endpoint, error: error))
                return (0, logs.count)
            }
        }
        sends.withLock { $0.append(task) }
    }

    /// Waits for every send started; how many traces went and how many did not.
    public func finish() async -> LiveExportSummary {
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

/// What a live export did, for a command's output.
public struct LiveExportSummary: Sendable, Hashable {
    public var endpoint: String
    public var sent = 0
    public var failed = 0

    public init(endpoint: String, sent: Int = 0, failed: Int = 0) {
        self.endpoint = endpoint
        self.sent = sent
        self.failed = failed
    }

    public var json: JSONValue { ["endpoint": .string(endpoint), "sent": .int(sent), "failed": .int(failed)] }

    public var sentence: String {
        "traces: \(sent) sent to \(endpoint)" + (failed > 0 ? ", \(failed) not sent (see the warnings above)" : "")
    }

    /// `object` (a command's JSON summary) with this summary as its `otlp` member.
    public func added(to object: JSONValue) -> JSONValue {
        guard case .object(var members) = object else { return object }
        members["otlp"] = json
        return .object(members)
    }
}

/// The exporter as the sink of finished logs: each batch (one run's log, or a live case's runs)
/// goes as one request, in the background.
extension LiveTraceExporter: FinishedLogSink {
    public func logsFinished(_ logs: [String]) async {
        send(logs: logs)
    }
}
