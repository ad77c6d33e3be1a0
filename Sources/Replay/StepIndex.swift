import Foundation
import TraceCore
import TraceLog

/// Step N of a log without replaying the log: the log's step table (from a `StepRecordStore`
/// when it keeps one made from the file as it is now, else made by one full replay and given
/// to the store), and the step's events read from the member(s) holding them.
///
/// The log stays the source of truth: the table is derived data, made again whenever the log
/// changed.
public final class StepIndex {
    public let logPath: String
    private let source: any StepRecordSource

    public var runId: String { source.runId }
    public var stepCount: Int { source.stepCount }
    public var digestsChecked: Int { source.digestsChecked }
    public var digestMismatches: Int { source.digestMismatches }

    public init(log: String, source: any StepRecordSource) {
        logPath = log
        self.source = source
    }

    /// Opens the step table of `log`: the one `store` keeps when it fits the file, else one made
    /// by a full replay (and kept in `store`, when there is one). `rebuilt` says whether it had
    /// to be made. A store that cannot be read or written is passed by: it only saves time.
    public static func open(log: String, store: (any StepRecordStore)?) throws -> (index: StepIndex, rebuilt: Bool) {
        if let store, let kept = try? store.steps(of: log) { return (StepIndex(log: log, source: kept), false) }
        guard let before = FileStamp(path: log) else {
            let reason = errno == 0 ? "it is not a file" : String(cString: strerror(errno))
            throw LogError(.unreadable, "cannot read \(log): \(reason)", path: log)
        }
        let table = try StepTable.build(log: log)
        // Kept only when the file did not change while it was read.
        if let store, let now = FileStamp(path: log), now == before {
            if let fingerprint = LogFingerprint.of(log, stamp: now, lastCompleteMember: 0, end: now.size) {
                try? store.keep(table, of: log, fingerprint: fingerprint)
            }
        }
        return (StepIndex(log: log, source: table), true)
    }

    /// The record at `position` (0-based, in log order); nil past the end or when the store
    /// cannot be read.
    public func record(at position: Int) -> StepRecord? {
        guard position >= 0, position < stepCount else { return nil }
        return try? source.record(at: position)
    }

    /// The position of `step` in log order.
    public func position(ofStep step: Int) -> Int? {
        try? source.position(ofStep: step)
    }

    /// Step `step`, read from the log by way of its record: only its member(s) are inflated.
    public func replayStep(_ step: Int) throws -> ReplayStep? {
        guard let index = position(ofStep: step), let record = record(at: index) else { return nil }
        let before = index > 0 ? (self.record(at: index - 1)?.after ?? StateSummary()) : StateSummary()
        var events: [RecordedEvent] = []
        let start = record.packetPosition.memberOffset < record.position.memberOffset ? record.packetPosition : record.position
        let reader = LogReader(path: logPath, options: LogReader.Options(resolvesContextPackets: true))
        try reader.forEachEvent(from: start) { recorded in
            if recorded.event.sequence > record.lastSequence { return false }
            if recorded.event.sequence >= record.firstSequence { events.append(recorded) }
            return true
        }
        var digests: [DigestCheck] = []
        var problems: [StepProblem] = []
        for recorded in events {
            problems.append(contentsOf: StepProblem.problems(of: recorded.event))
            if case .stepEnded(let ended) = recorded.event.payload, let computed = record.computedDigest {
                let check = DigestCheck(sequence: recorded.event.sequence, recorded: ended.stateDigest, computed: computed)
                digests.append(check)
                if !check.isMatch {
                    problems.append(
                        StepProblem(
                            kind: .digestMismatch, sequence: check.sequence,
                            message: "the recorded state digest differs from the rebuilt state's"))
                }
            }
        }
        if record.after.anomalies > before.anomalies {
            problems.append(
                StepProblem(
                    kind: .anomaly, sequence: record.firstSequence,
                    message: "\(record.after.anomalies - before.anomalies) anomalies (see the full replay)"))
        }
        return ReplayStep(step: record.step, events: events, before: before, after: record.after, digests: digests, problems: problems)
    }

    /// The first step after `step` (in log order) that has a problem.
    public func nextProblem(after step: Int) -> Int? {
        guard let start = position(ofStep: step), let found = try? source.problem(after: start) else { return nil }
        return record(at: found)?.step
    }
}
