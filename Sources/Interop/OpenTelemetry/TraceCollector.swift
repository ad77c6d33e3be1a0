import Foundation
import Synchronization
public import TraceCore
import TraceLog

/// `agent-eval collect`'s store: the spans a receiver acknowledges, kept per trace, and one log
/// per trace made from them by the OpenTelemetry importer (docs/interop.md, "Collecting traces
/// live").
///
/// Each accepted request's spans are appended, per trace, to `DIR/spans/<trace id>.otlp.jsonl`
/// — one OTLP/JSON request a line, the form `agent-eval import otlp` reads — and fsynced before
/// `accept` returns, so a collector killed at any moment loses no span it acknowledged. A
/// trace's log, `DIR/<trace id>.jsonl.gz`, is written (or written again, whole) once no span of
/// it has come for the settle time, and when the collector stops. Beside the journal,
/// `<trace id>.logged` holds how many of its bytes the log was made from: a collector started on
/// a directory first writes the logs whose journals have grown past that (`recover`).
///
/// Appends to one trace's journal are serialised by that trace's lock; different traces' appends
/// run at once. A log is made from the journal's bytes up to the length last acknowledged, read
/// without holding any lock (appends only add).
public final class TraceCollector: Sendable {
    /// A trace's log, made.
    public struct Finished: Sendable {
        public var traceId: String
        /// The log written; nil when the trace could not be imported.
        public var log: String?
        public var spans: Int
        public var steps: Int
        public var calls: Int
        public var stop: StopReason?
        public var warnings: [String]
        public var error: ImportError?

        public var json: JSONValue {
            var object = ObjectBuilder()
            object.set("trace_id", traceId)
            object.set("log", log)
            object.set("spans", spans)
            object.set("steps", steps)
            object.set("calls", calls)
            object.set("stop", stop?.rawValue)
            object.set("warnings", warnings)
            object.set("error", error?.message)
            return object.json
        }
    }

    public let directory: String
    /// How long a trace stays open after its last span came.
    public let settleUs: Int
    private let now: @Sendable () -> Int

    /// One trace's journal: its acknowledged length, guarded by the mutex that serialises its appends.
    private final class Journal: Sendable {
        let length: Mutex<Int>
        init(length: Int) { self.length = Mutex(length) }
    }

    private struct State {
        var journals: [String: Journal] = [:]
        /// Traces with spans their log does not hold yet: when the last came.
        var pending: [String: Int] = [:]
        /// Requests refused because their trace had reached `maxTraceBytes`, and their bytes.
        var refused: [String: (requests: Int, bytes: Int)] = [:]
    }

    /// The most bytes one trace's journal holds (`collect --max-trace`): a trace's spans in a
    /// request that would take it past the cap are refused (the request's other traces keep
    /// theirs; a request that keeps nothing is `TraceTooLarge`, answered 413), and the trace's
    /// log says so. It bounds the memory a trace's log is made in (about three times this).
    public let maxTraceBytes: Int

    /// The default `maxTraceBytes`: 64 MiB, far more than a long agent's trace of spans.
    public static let defaultMaxTraceBytes = 64 << 20

    /// A request refused because a trace of it would pass `maxTraceBytes`.
    public struct TraceTooLarge: Error, Sendable {
        public var traceId: String
        public var limit: Int
        public var message: String {
            "trace \(traceId) holds as many bytes of spans as this collector keeps of one trace (--max-trace \(limit)): "
                + "its spans in this request are refused and not kept; the trace's log says how many were refused"
        }
    }

    // Guarded by the mutex, held only for bookkeeping (never across file I/O).
    private let state = Mutex(State())

    public init(
        directory: String, settleUs: Int, maxTraceBytes: Int = TraceCollector.defaultMaxTraceBytes, now: @escaping @Sendable () -> Int
    ) {
        self.directory = directory
        self.maxTraceBytes = maxTraceBytes
        self.settleUs = settleUs
        self.now = now
    }

    /// Where a trace's spans are kept.
    public func journalPath(of traceId: String) -> String {
        (directory as NSString).appendingPathComponent("spans/\(traceId).otlp.jsonl")
    }

    /// Where a trace's log is written.
    public func logPath(of traceId: String) -> String {
        (directory as NSString).appendingPathComponent("\(traceId).jsonl.gz")
    }

    /// Where the journal length a trace's log was made from is kept.
    private func loggedPath(of traceId: String) -> String {
        (directory as NSString).appendingPathComponent("spans/\(traceId).logged")
    }

    private func journal(_ traceId: String) -> Journal {
        state.withLock { state in
            if let journal = state.journals[traceId] { return journal }
            let journal = Journal(length: FileManager.default.fileSize(journalPath(of: traceId)))
            state.journals[traceId] = journal
            return journal
        }
    }

    /// Keeps the request's spans, each trace's on disk before this returns; the spans kept.
    /// Blocks on the disk: call it off the cooperative pool.
    public func accept(_ received: ReceivedTraces) throws -> Int {
        var kept = 0
        var refused: TraceTooLarge?
        for trace in received.traces {
            // Kept with its credentials' values replaced (`AttributeRedaction`) and, as every log
            // line is, every secret the writer's redaction finds in it (a password in a URL, a
            // connection string's): the journal is a file of its own, beside the log, and the
            // log is made from it.
            let encoded = JSONWriter.encode(AttributeRedaction.redact(trace.request))
            let line = Redactor.standard.redactContent(encoded) ?? encoded
            let journal = journal(trace.traceId)
            // A trace at its cap keeps none of this request's spans; the request's other
            // traces keep theirs. The refusal is kept beside the journal, so the trace's log
            // says so even after a restart.
            let isKept = try journal.length.withLock { length -> Bool in
                guard length + line.count + 1 <= maxTraceBytes else { return false }
                length = try LineJournal.append([line], to: journalPath(of: trace.traceId))
                return true
            }
            let at = now()
            if isKept {
                kept += trace.spanCount
            } else {
                try noteRefusal(of: trace.traceId, bytes: line.count)
                refused = TraceTooLarge(traceId: trace.traceId, limit: maxTraceBytes)
            }
            state.withLock { $0.pending[trace.traceId] = at }
        }
        // Nothing of the request kept: it is refused (413); else the spans refused are a
        // partial success's rejected spans.
        if kept == 0, let refused { throw refused }
        return kept
    }

    /// Where a trace's refusals at the cap are counted (`{"requests": N, "bytes": B}`).
    private func refusedPath(of traceId: String) -> String { directory + "/spans/" + traceId + ".refused" }

    /// The refusals at the cap of `traceId` so far.
    private func refusals(of traceId: String) -> (requests: Int, bytes: Int)? {
        if let counted = state.withLock({ $0.refused[traceId] }) { return counted }
        guard let data = FileManager.default.contents(atPath: refusedPath(of: traceId)),
            let value = try? JSONParser.parse(Array(data)), let requests = value["requests"]?.intValue,
            let bytes = value["bytes"]?.intValue
        else { return nil }
        return (requests, bytes)
    }

    /// Counts one more refusal of `traceId`, in memory and on disk.
    private func noteRefusal(of traceId: String, bytes: Int) throws {
        let before = refusals(of: traceId) ?? (0, 0)
        let now = (requests: before.requests + 1, bytes: before.bytes + bytes)
        state.withLock { $0.refused[traceId] = now }
        let text: JSONValue = ["requests": .int(now.requests), "bytes": .int(now.bytes)]
        try Data(JSONWriter.encode(text)).write(to: URL(fileURLWithPath: refusedPath(of: traceId)), options: .atomic)
    }

    /// Traces with spans not yet in their log.
    public var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Writes the log of every trace quiet for the settle time.
    public func finishSettled() -> [Finished] {
        let at = now()
        let due = state.withLock { state in
            state.pending.filter { at - $0.value >= settleUs }.keys.sorted()
        }
        return due.map(finish)
    }

    /// Writes the log of every trace with spans not yet in it (the collector is stopping).
    public func finishAll() -> [Finished] {
        state.withLock { state in state.pending.keys.sorted() }.map(finish)
    }

    /// The traces of `directory/spans` whose journal holds more than their log was made from (a
    /// collector stopped before it wrote them): a line a crash tore at a journal's end is cut
    /// first (it was never acknowledged), a journal left empty is removed, then the log is written.
    /// A journal whose spans do not import is moved aside (`.unreadable`) and reported.
    public func recover() -> [Finished] {
        let spansDirectory = (directory as NSString).appendingPathComponent("spans")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: spansDirectory)) ?? []).filter { $0.hasSuffix(".otlp.jsonl") }
        var due: [String] = []
        for name in names.sorted() {
            let traceId = String(name.dropLast(".otlp.jsonl".count))
            let journal = journalPath(of: traceId)
            _ = try? LineJournal.sealTornTail(of: journal)
            let size = FileManager.default.fileSize(journal)
            if size == 0 {
                try? FileManager.default.removeItem(atPath: journal)
                try? FileManager.default.removeItem(atPath: loggedPath(of: traceId))
                continue
            }
            let logged = (try? String(contentsOfFile: loggedPath(of: traceId), encoding: .utf8)).flatMap {
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            guard logged != size || !FileManager.default.fileExists(atPath: logPath(of: traceId)) else { continue }
            due.append(traceId)
        }
        // A journal that does not import is moved aside, once: every later start would fail on it.
        return due.map { traceId in
            var finished = finish(traceId)
            if let error = finished.error {
                let journal = journalPath(of: traceId)
                let aside = journal + ".unreadable"
                if (try? FileManager.default.moveItem(atPath: journal, toPath: aside)) != nil {
                    state.withLock { _ = $0.journals.removeValue(forKey: traceId) }
                    finished.error = ImportError(
                        error.code, error.message + "; the journal is moved aside to \(aside): repair it and move it back, or remove it",
                        location: error.location, hint: error.hint)
                }
            }
            return finished
        }
    }

    /// Imports a trace's acknowledged spans and writes its log, replacing an older one.
    private func finish(_ traceId: String) -> Finished {
        let path = journalPath(of: traceId)
        // Taken off the pending list first: a span that comes while the log is written makes
        // the trace pending again, and its log is written again.
        state.withLock { _ = $0.pending.removeValue(forKey: traceId) }
        let length = journal(traceId).length.withLock { $0 }
        var finished = Finished(traceId: traceId, log: nil, spans: 0, steps: 0, calls: 0, stop: nil, warnings: [], error: nil)
        guard let data = FileManager.default.contents(atPath: path), data.count >= length else {
            if length == 0, let refused = refusals(of: traceId) {
                finished.error = ImportError(
                    .badRun,
                    "every request of trace \(traceId) (\(refused.requests), \(refused.bytes) bytes) was refused at --max-trace "
                        + "(\(maxTraceBytes) bytes): no span was kept, so no log is written",
                    location: SourceLocation(path: path))
                return finished
            }
            finished.error = ImportError(.writeFailed, "cannot read \(path)", location: SourceLocation(path: path))
            return finished
        }
        let file = SourceFile(path: path, bytes: Array(data.prefix(length)), modifiedUs: now())
        do throws(ImportError) {
            // An exporter that resends a request (after a timeout, or a 503 for another trace
            // of it) sends its spans again: each span once, the last copy (`SpanReader.spans`,
            // as `import otlp` of the journal reads them).
            let read = try SpanReader.spans(in: try file.document(), file: file, format: .otlp)
            finished.spans = read.spans.count
            guard var run = try read.noted(TraceImporter(file: file, format: .otlp).runs(from: read.spans)).first?.get() else {
                throw ImportError(.badRun, "\(path) holds no trace", location: SourceLocation(path: path))
            }
            // Spans refused at the cap: the log says so (`run_started.source.metadata.collect`),
            // so a run that looks complete is known to be cut.
            if let refused = refusals(of: traceId) {
                var metadata = run.source.metadata?.objectValue ?? JSONObject()
                metadata["collect"] = [
                    "max_trace_bytes": .int(maxTraceBytes), "refused_requests": .int(refused.requests),
                    "refused_bytes": .int(refused.bytes),
                ]
                run.source.metadata = .object(metadata)
                run.warnings.append(
                    "\(counted(refused.requests, "request")) (\(refused.bytes) bytes) of this trace were refused: it had reached "
                        + "--max-trace (\(maxTraceBytes) bytes), so the log lacks their spans")
                run.leaveUnfinished(because: "the trace lacks the spans of \(counted(refused.requests, "refused request"))")
            }
            if let open = run.openBecause {
                // The trace is still open: its run is written unfinished (no stop), so a case over
                // it cannot pass on what it has not done yet; more of it writes the log again.
                run.stop = nil
                run.source.stop = "open"
                run.warnings.append(
                    "the trace is still open (\(open): a span is exported when it ends, a parent after its children): the run is "
                        + "written unfinished, and written again when more of it comes")
            }
            finished.steps = run.steps.count
            finished.calls = run.steps.reduce(0) { $0 + $1.calls.count }
            finished.stop = run.stop?.reason
            finished.warnings = run.warnings
            do {
                finished.log = try ImportWriter(directory: directory, replacesExisting: true).write(run, fileName: "\(traceId).jsonl.gz")
                try Data(String(length).utf8).write(to: URL(fileURLWithPath: loggedPath(of: traceId)), options: .atomic)
            } catch {
                throw error as? ImportError ?? ImportError(.writeFailed, "\(error)", location: SourceLocation(path: path))
            }
        } catch {
            finished.error = error
        }
        return finished
    }
}

extension FileManager {
    /// The size of the file at `path`, 0 when there is none.
    fileprivate func fileSize(_ path: String) -> Int {
        ((try? attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }
}
