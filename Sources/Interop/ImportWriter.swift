import Foundation
public import TraceCore
import TraceLog

/// Writes imported runs as ordinary logs, through the log module's writer (never around it):
/// `run_started` with the `source`, then per step the source's records as stored content, the
/// decision, an intent and a result for every call that ran, and the step's end; then the stop.
///
/// A log is written under a temporary name and renamed when complete, so an import that
/// fails half-way leaves no log that looks like a run.
public struct ImportWriter: Sendable {
    /// The importer's name and version, in every imported log's `source.importer`.
    public static let importer = "agent-eval-import/1"
    /// Outputs larger than this (in bytes of JSON) are stored as content and referenced.
    public static let inlineOutputBytes = 16 * 1024

    /// How a tool's output goes into a log that records it from outside the runtime (imports,
    /// `record`, `mcp-proxy`): inline, or — larger than `inlineOutputBytes`, or nested deeper than
    /// a log records — as content to store and reference by its hash.
    public static func recordable(output: JSONValue?) -> (inline: JSONValue?, content: ContentStored?) {
        guard let value = output else { return (nil, nil) }
        let bytes = JSONWriter.encode(value)
        guard bytes.count > inlineOutputBytes || value.nests(deeperThan: JSONValue.recordableDepth) else { return (value, nil) }
        return (nil, ContentStored(bytes: bytes, mediaType: "application/json"))
    }

    public var directory: String
    /// Replace a log that exists already instead of reporting it.
    public var replacesExisting: Bool

    public init(directory: String, replacesExisting: Bool = false) {
        self.directory = directory
        self.replacesExisting = replacesExisting
    }

    /// The run id of an imported run: derived from where it came from, so importing the same
    /// input twice gives the same ids (and the same bytes).
    public static func runId(for source: RunSource) -> String {
        let key = [source.format, (source.file as NSString).lastPathComponent, source.id ?? ""].joined(separator: "\u{0}")
        return "imp-" + ContentHash.sha256Hex(Array(key.utf8)).prefix(16)
    }

    /// The file name of a run's log: the source file's stem and the run's id in the source, made
    /// safe for a file system.
    public static func fileName(for source: RunSource) -> String {
        let stem = ((source.file as NSString).lastPathComponent as NSString).deletingPathExtension
        let base = [stem.replacingOccurrences(of: ".jsonl", with: ""), source.id].compactMap { $0 }.joined(separator: "-")
        let safe = String(base.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" }.prefix(120))
        return (safe.isEmpty ? "run" : safe) + ".jsonl.gz"
    }

    /// Writes one run; returns the log's path.
    @discardableResult
    public func write(_ run: ImportedRun, fileName: String? = nil) throws -> String {
        let path = (directory as NSString).appendingPathComponent(fileName ?? Self.fileName(for: run.source))
        if FileManager.default.fileExists(atPath: path), !replacesExisting {
            throw ImportError(
                .outputExists, "\(path) exists already", location: SourceLocation(path: run.source.file),
                hint: "import into an empty directory, or pass --force to replace it")
        }
        let partial = path + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        do {
            try LogWriter.withWriter(creating: partial, runId: Self.runId(for: run.source)) { writer in
                try Self.record(run, into: writer)
            }
            if replacesExisting { try? FileManager.default.removeItem(atPath: path) }
            try FileManager.default.moveItem(atPath: partial, toPath: path)
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            if let error = error as? ImportError { throw error }
            throw ImportError(
                .writeFailed, "cannot write \(path): \(FileProblem.reason(of: error))", location: SourceLocation(path: run.source.file),
                cause: error as? any Diagnostic)
        }
        return path
    }

    /// Records the run's events. Times never go backwards: a source clock that does (skew between
    /// spans, a missing timestamp) is held at the last time written.
    static func record(_ run: ImportedRun, into writer: LogWriter) throws {
        // No clock: each event takes the time `at` set last, held at the latest seen.
        let recorder = RunRecorder(writer: writer, timeUs: run.startUs)
        func at(_ timeUs: Int?) {
            if let timeUs, timeUs > recorder.timeUs { recorder.timeUs = timeUs }
        }
        var stored = Set<String>()
        // As the log keeps it (redacted before it is hashed), named by the hash it keeps.
        func store(_ content: ContentStored) throws -> String {
            try recorder.store(content) { !stored.insert($0).inserted }.hash
        }
        var run = run
        run.declareCalledTools()
        try recorder.record(
            .runStarted(
                RunStarted(
                    goal: run.goal,
                    agent: AgentIdentity(
                        name: run.agentName, configDigest: ContentHash.sha256(Array("\(run.source.format):\(run.agentName)".utf8))),
                    model: run.model, policy: PolicyIdentity(name: "none (imported)"), tools: run.tools, source: run.source)))
        var turns = run.userTurns[...]
        for (index, step) in run.steps.enumerated() {
            while let next = turns.first, next.beforeStep <= index {
                try recorder.record(.userTurn(next.turn))
                turns = turns.dropFirst()
            }
            at(step.timeUs)
            let records = index == 0 ? run.preamble + step.records : step.records
            if !records.isEmpty {
                _ = try store(ContentStored(bytes: JSONWriter.encode(.array(records)), mediaType: "application/json"))
            }
            let outcome: DecisionMade.Outcome
            switch step.decision {
            case .calls(let calls): outcome = .valid(.toolCalls(calls.map(\.call)))
            case .answer(let text): outcome = .valid(.answer(text))
            case .invalid(let invalid): outcome = .invalid(invalid)
            }
            try recorder.record(
                .decisionMade(
                    DecisionMade(
                        raw: JSONWriter.encodeString(step.raw), format: step.format, outcome: outcome, usage: step.usage,
                        latencyUs: step.latencyUs, costUSD: step.costUSD)))
            for call in step.calls {
                guard let last = call.result else { continue }
                for (index, result) in (call.earlierAttempts + [last]).enumerated() {
                    at(result.timeUs)
                    try recorder.record(
                        .toolIntended(
                            ToolIntended(callId: call.call.id, tool: call.call.name, arguments: call.call.arguments, attempt: index + 1)))
                    let (output, content) = recordable(output: result.output)
                    let contentHash = try content.map(store)
                    at(result.timeUs.map { $0 + result.durationUs })
                    try recorder.record(
                        .toolCompleted(
                            ToolCompleted(
                                callId: call.call.id, tool: call.call.name, attempt: index + 1, status: result.status, output: output,
                                contentHash: contentHash, error: result.error, isRetryable: result.isRetryable,
                                durationUs: result.durationUs)))
                }
            }
            try recorder.endStep()
        }
        for (_, turn) in turns { try recorder.record(.userTurn(turn)) }
        if let stop = run.stop { try recorder.record(.runStopped(stop)) }
    }
}
