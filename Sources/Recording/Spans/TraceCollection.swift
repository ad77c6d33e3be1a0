public import AgentRuntime
import Foundation
public import Interop
import TraceLog

/// `agent-eval collect`'s work: a `TraceCollector` with its folder, the traces an earlier
/// collector kept but did not write, and the tick that writes each trace's log once it has
/// settled — on the injected clock, until the task is cancelled (the command's signal).
///
/// ```swift
/// let collection = try TraceCollection(collector: collector)
/// let recovered = await collection.recover()
/// let server = try await TraceServer(host: "127.0.0.1", port: 4318, receiver: collection.receiver(maxRequestBytes: 20 << 20))
/// let written = await collection.collect { batch in show(batch) }  // until cancelled
/// await server.stop()
/// let last = await collection.finishAll()
/// ```
public struct TraceCollection: Sendable {
    public let collector: TraceCollector
    /// How often settled traces are looked for: a quarter of the settle time, between 50 and
    /// 500 ms.
    public let tick: Duration
    private let clock: any Clock<Duration>

    /// Makes the collector's folder (and its `spans/` journal folder); a `RecordingError`
    /// naming the folder when it cannot.
    public init(collector: TraceCollector, settleSeconds: Double, clock: any Clock<Duration> = RuntimeEnvironment.live.clock)
        throws(RecordingError)
    {
        self.collector = collector
        self.clock = clock
        tick = .milliseconds(Int((max(0.05, min(0.5, settleSeconds / 4)) * 1000).rounded()))
        let out = collector.directory
        do {
            try FileManager.default.createDirectory(atPath: out + "/spans", withIntermediateDirectories: true)
        } catch {
            throw RecordingError(
                .unwritable, "cannot create \(out)/spans: \(FileProblem.reason(of: error))",
                hint: "choose a directory you can write with --out")
        }
    }

    /// The receiver that keeps requests' spans in the collector.
    public func receiver(maxRequestBytes: Int) -> TraceReceiver {
        TraceReceiver(sink: collector, maxRequestBytes: maxRequestBytes)
    }

    /// Writes the traces an earlier collector in the same folder kept but did not write.
    public func recover() async -> [TraceCollector.Finished] {
        await CollectorWork.run { [collector] in collector.recover() }
    }

    /// Writes each trace's log once it has settled, every `tick`, handing each batch written to
    /// `written` as it is; returns them all once the task is cancelled.
    public func collect(_ written: @escaping @Sendable ([TraceCollector.Finished]) -> Void) async -> [TraceCollector.Finished] {
        var all: [TraceCollector.Finished] = []
        while !Task.isCancelled {
            try? await clock.sleep(for: tick)
            let done = await CollectorWork.run { [collector] in collector.finishSettled() }
            if !done.isEmpty { written(done) }
            all += done
        }
        return all
    }

    /// Writes every trace left, settled or not (after the server stopped).
    public func finishAll() async -> [TraceCollector.Finished] {
        await CollectorWork.run { [collector] in collector.finishAll() }
    }
}
