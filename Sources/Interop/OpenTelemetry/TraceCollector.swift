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
/// it has come for the settle time, and when the collector stops; a collector started on a
/// directory first makes the logs its spans are ahead of (`recover`).
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

    private struct Pending {
        var lastUs: Int
        var spans: Int
    }

    private struct State {
        /// Traces with spans their log does not hold yet.
        var pending: [String: Pending] = [:]
        /// Spans kept per trace (all of them, logged or not), for the reports.
        var spans: [String: Int] = [:]
    }

    // Guarded by the mutex; held across a journal's append and a trace's read, so a trace is
    // never read half-appended.
    private let state = Mutex(State())

    public init(directory: String, settleUs: Int, now: @escaping @Sendable () -> Int) {
        self.directory = directory
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

    /// Keeps the request's spans, each trace's on disk before this returns; the spans kept.
    public func accept(_ received: ReceivedTraces) throws -> Int {
        let at = now()
        return try state.withLock { state in
            var kept = 0
            for trace in received.traces {
                try LineJournal.append([JSONWriter.encode(trace.request)], to: journalPath(of: trace.traceId))
                state.pending[trace.traceId, default: Pending(lastUs: at, spans: 0)].lastUs = at
                state.pending[trace.traceId]?.spans += trace.spanCount
                state.spans[trace.traceId, default: 0] += trace.spanCount
                kept += trace.spanCount
            }
            return kept
        }
    }

    /// Traces with spans not yet in their log.
    public var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Writes the log of every trace quiet for the settle time.
    public func finishSettled() -> [Finished] {
        let at = now()
        let due = state.withLock { state in
            state.pending.filter { at - $0.value.lastUs >= settleUs }.keys.sorted()
        }
        return due.map(finish)
    }

    /// Writes the log of every trace with spans not yet in it (the collector is stopping).
    public func finishAll() -> [Finished] {
        state.withLock { state in state.pending.keys.sorted() }.map(finish)
    }

    /// The traces of `directory/spans` whose log is missing or older than its spans (a collector
    /// stopped before it wrote them): a line a crash tore at a journal's end is cut (it was
    /// never acknowledged), then the log is written.
    public func recover() -> [Finished] {
        let spansDirectory = (directory as NSString).appendingPathComponent("spans")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: spansDirectory)) ?? []).filter { $0.hasSuffix(".otlp.jsonl") }
        var due: [String] = []
        for name in names.sorted() {
            let traceId = String(name.dropLast(".otlp.jsonl".count))
            let journal = journalPath(of: traceId)
            let journalTime = SourceFile.modifiedUs(of: journal)
            let logTime = FileManager.default.fileExists(atPath: logPath(of: traceId)) ? SourceFile.modifiedUs(of: logPath(of: traceId)) : 0
            guard logTime < journalTime else { continue }
            _ = try? LineJournal.sealTornTail(of: journal)
            due.append(traceId)
        }
        return due.map(finish)
    }

    /// Imports a trace's kept spans and writes its log, replacing an older one.
    private func finish(_ traceId: String) -> Finished {
        let journal = journalPath(of: traceId)
        // Read whole under the lock: no append is half-way through it.
        let (bytes, spanCount): ([UInt8]?, Int) = state.withLock { state in
            state.pending[traceId] = nil
            return ((try? Data(contentsOf: URL(fileURLWithPath: journal))).map { Array($0) }, state.spans[traceId] ?? 0)
        }
        var finished = Finished(traceId: traceId, log: nil, spans: spanCount, steps: 0, calls: 0, stop: nil, warnings: [], error: nil)
        guard let bytes else {
            finished.error = ImportError(.writeFailed, "cannot read \(journal)", location: SourceLocation(path: journal))
            return finished
        }
        let file = SourceFile(path: journal, bytes: bytes, modifiedUs: now())
        do throws(ImportError) {
            let spans = try SpanReader.spans(in: try file.document(), file: file, format: .otlp)
            finished.spans = spans.count
            guard let run = try TraceImporter(file: file, format: .otlp).runs(from: spans).first?.get() else {
                throw ImportError(.badRun, "\(journal) holds no trace", location: SourceLocation(path: journal))
            }
            finished.steps = run.steps.count
            finished.calls = run.steps.reduce(0) { $0 + $1.calls.count }
            finished.stop = run.stop?.reason
            finished.warnings = run.warnings
            do {
                finished.log = try ImportWriter(directory: directory, replacesExisting: true).write(run, fileName: "\(traceId).jsonl.gz")
            } catch {
                throw error as? ImportError ?? ImportError(.writeFailed, "\(error)", location: SourceLocation(path: journal))
            }
        } catch {
            finished.error = error
        }
        return finished
    }
}
