import Synchronization
public import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Lets the fold of a long log hold its results' outputs as references into the log instead of
/// as text: a state keeps every call's results, and the outputs are most of a long run's state
/// (docs/performance.md, "Fold of long runs"). An output is read back, a member at a time, when
/// something looks at it: the digest of a call that changes again, a snapshot, the judge, a
/// display. Its value, the state's equality and its digest are what they would be in memory.
///
/// The driver of a fold calls `folded(_:change:into:)` after folding each event. An output is
/// let go once a `step_ended` was folded after its member ended: the step's digest is computed
/// with the text still in memory, and only complete members are read back. The first member's
/// outputs stay, and at most about one more member's at a time (each at most 256 KiB of text).
///
///     var stored = StoredOutputs(log: path)
///     try LogReader(path: path).forEachEvent { recorded in
///         let change = RunState.reduce(into: &state, recorded.event)
///         stored.folded(recorded, change: change, into: &state)
///     }
///     if let failure = stored.store?.failure { throw failure }
public struct StoredOutputs: Sendable {
    /// The log folded.
    public let path: String
    /// Where the outputs are read back from: made when the read reaches the log's second
    /// member in a file of at least `minimumLogBytes`; nil before, and for a smaller log (a log
    /// of one member is not even looked at).
    public private(set) var store: LogOutputStore?
    /// Outputs shorter than this stay in memory: a reference costs about 70 bytes.
    public static let minimumOutputBytes = 256
    /// Logs smaller than this are folded with every output in memory: their state is small,
    /// and reading an output back costs a member's inflate.
    public static let minimumLogBytes = 4 << 20

    private struct Pending {
        var call: Int
        var result: Int
        var sequence: Int
        var member: Int
        var check: UInt64
        var count: Int
    }

    private let minimumLogBytes: Int
    private var pending: [Pending] = []
    private var pendingStart = 0
    private var memberIndex: Int?
    /// Set once the log proved smaller than `minimumLogBytes` (or could not be looked at).
    private var isOff = false

    /// Stores the outputs of a fold of `log` if the file holds at least `minimumLogBytes`
    /// (`minimumLogBytes: 0`: whatever its size).
    public init(log: String, minimumLogBytes: Int = StoredOutputs.minimumLogBytes) {
        path = log
        self.minimumLogBytes = minimumLogBytes
    }

    /// Notes one folded event (`change` is what its fold returned) and lets go of the outputs
    /// that may go now. The first member's outputs stay in memory (at most 256 KiB of text): a
    /// log of one member, the common case, costs this comparison per event.
    @inlinable
    public mutating func folded(_ recorded: RecordedEvent, change: FoldChange, into state: inout RunState) {
        guard recorded.location.memberIndex > 0 else { return }
        foldedPastFirstMember(recorded, change: change, into: &state)
    }

    @usableFromInline
    mutating func foldedPastFirstMember(_ recorded: RecordedEvent, change: FoldChange, into state: inout RunState) {
        guard !isOff else { return }
        let event = recorded.event
        if recorded.location.memberIndex != memberIndex {
            memberIndex = recorded.location.memberIndex
            let start = LogReader.Position(
                memberOffset: recorded.location.memberOffset, memberIndex: recorded.location.memberIndex, sequence: event.sequence,
                previousHash: event.previousHash ?? "", runId: event.runId)
            if store == nil {
                // The second member: only now is the file looked at.
                guard let made = LogOutputStore(path: path, minimumBytes: minimumLogBytes) else {
                    isOff = true
                    return
                }
                store = made
            }
            store?.addMember(start)
        }
        switch event.payload {
        case .toolCompleted(let completed):
            guard let call = change.call, let text = completed.outputText, text.count >= Self.minimumOutputBytes,
                let result = state.calls[call].results.indices.last, state.calls[call].results[result].outputText?.count == text.count
            else { break }
            pending.append(
                Pending(
                    call: call, result: result, sequence: event.sequence, member: recorded.location.memberIndex,
                    check: LogOutputStore.check(of: text.bytes), count: text.count))
        case .stepEnded:
            release(into: &state)
        default:
            break
        }
    }

    /// Notes that the fold dropped its state's first `count` calls (`StateDigester.settle`): their
    /// outputs are gone with them, and the others' places move up.
    public mutating func settled(calls count: Int) {
        guard count > 0 else { return }
        pending = pending[pendingStart...].compactMap { output in
            guard output.call >= count else { return nil }
            var moved = output
            moved.call -= count
            return moved
        }
        pendingStart = 0
    }

    /// Lets go of the outputs of the members before the current one.
    private mutating func release(into state: inout RunState) {
        guard let memberIndex, let store else { return }
        while pendingStart < pending.count, pending[pendingStart].member < memberIndex {
            let output = pending[pendingStart]
            state.holdOutput(
                ofCall: output.call, result: output.result,
                as: JSONText(storedIn: store, key: output.sequence, check: output.check, count: output.count))
            pendingStart += 1
        }
        // Drop what was let go once it is half the list (the current member's outputs wait).
        if pendingStart > 0 && pendingStart * 2 >= pending.count {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
    }
}

/// The outputs a fold let go of (`StoredOutputs`), read back from the log a member at a time:
/// the member's events are read again from where it starts, with its chain checked from the
/// hash before it, and each output is checked against the hash of the line it was read from.
/// A log that changed in place since (only tampering or damage does that: writers append, and
/// `log repair` cuts only a torn last member) gives no text back; the text then reads as a
/// sentence that says so, and `failure` keeps the error.
public final class LogOutputStore: JSONTextStore {
    public let path: String
    /// The file's device and inode while the fold read it: a log replaced since is not read.
    private let identity: FileIdentity

    private struct Members: ~Copyable {
        var starts: [LogReader.Position] = []
        /// The outputs of the member read last, by sequence, with their lines' checks.
        var cached: (member: Int, outputs: [Int: (bytes: [UInt8], check: UInt64)])?
        var failure: LogError?
        /// Members that did not read back: not tried again.
        var failedMembers: Set<Int> = []
        /// Members read back so far (for tests and benchmarks).
        var reads = 0
    }

    private let members = Mutex(Members())

    /// A store for the log at `path` as it is now; nil when it holds fewer than `minimumBytes`
    /// or cannot be looked at.
    init?(path: String, minimumBytes: Int) {
        var info = stat()
        guard stat(path, &info) == 0, Int(info.st_size) >= minimumBytes else { return nil }
        self.path = path
        identity = FileIdentity(info)
    }

    /// The first error met reading an output back, if any.
    public var failure: LogError? { members.withLock { $0.failure } }

    /// How many times a member was read back.
    public var memberReads: Int { members.withLock { $0.reads } }

    /// Notes where a member starts; a member noted already is not noted again (a fold that
    /// goes on from a copy made at a member's start, `ReplayFollower`, passes it again).
    func addMember(_ start: LogReader.Position) {
        members.withLock {
            guard let last = $0.starts.last, last.memberIndex >= start.memberIndex else {
                $0.starts.append(start)
                return
            }
        }
    }

    /// A check of an output's text, to see that what is read back is what was let go of (the
    /// same process computes both, so the hasher's seed is the same).
    static func check(of text: [UInt8]) -> UInt64 {
        var hasher = Hasher()
        text.withUnsafeBytes { hasher.combine(bytes: $0) }
        return UInt64(bitPattern: Int64(hasher.finalize()))
    }

    public func text(at key: Int, check: UInt64) -> [UInt8]? {
        members.withLock { members -> [UInt8]? in
            // The member holding event `key`: the last one starting at or before it.
            var low = 0
            var high = members.starts.count
            while low < high {
                let middle = (low + high) / 2
                if members.starts[middle].sequence <= key { low = middle + 1 } else { high = middle }
            }
            let member = low - 1
            guard member >= 0, !members.failedMembers.contains(member) else { return nil }
            if members.cached?.member != member {
                let end = member + 1 < members.starts.count ? members.starts[member + 1].sequence : Int.max
                do throws(LogError) {
                    members.cached = (member, try readOutputs(from: members.starts[member], before: end))
                    members.reads += 1
                } catch {
                    if members.failure == nil { members.failure = error }
                    members.failedMembers.insert(member)
                    members.cached = nil
                    return nil
                }
            }
            guard let output = members.cached?.outputs[key] else {
                if members.failure == nil {
                    members.failure = LogError(
                        .corruptMember, "event \(key) no longer holds the output it held when the log was read", path: path,
                        memberOffset: members.starts[member].memberOffset, sequence: key, hint: Self.hint)
                }
                return nil
            }
            guard output.check == check else {
                if members.failure == nil {
                    members.failure = LogError(
                        .corruptMember, "the line of event \(key) changed since the log was read: its hash differs", path: path,
                        memberOffset: members.starts[member].memberOffset, sequence: key, hint: Self.hint)
                }
                return nil
            }
            return output.bytes
        }
    }

    private static let hint =
        "a log changes in place only by damage or tampering: verify the log for a full report, then read it again"

    public func unavailableText(at key: Int) -> String {
        let reason = failure.map { "\($0)" } ?? "it could not be read"
        return "agent-eval: the output of event \(key) could not be read back from \(path): \(reason)"
    }

    /// The outputs of the events from `start` up to (not including) sequence `end`.
    private func readOutputs(from start: LogReader.Position, before end: Int) throws(LogError) -> [Int: (bytes: [UInt8], check: UInt64)] {
        if FileIdentity(path: path) != identity {
            throw LogError(
                .unreadable, "the log was replaced or removed since it was read", path: path, memberOffset: start.memberOffset,
                hint: Self.hint)
        }
        var outputs: [Int: (bytes: [UInt8], check: UInt64)] = [:]
        let reader = LogReader(path: path, options: LogReader.Options(keepsPacketText: false))
        do {
            // The text read back is checked against the text let go of (`check`); no link needed.
            try reader.forEachEvent(from: start, stopsAtOnce: true) { recorded in
                let sequence = recorded.event.sequence
                guard sequence < end else { return false }
                if case .toolCompleted(let completed) = recorded.event.payload, let text = completed.outputText {
                    outputs[sequence] = (text.bytes, Self.check(of: text.bytes))
                }
                return sequence + 1 < end
            }
        } catch var error as LogError {
            error.message = "an output the fold let go of could not be read back: " + error.message
            error.hint = Self.hint
            throw error
        } catch {
            throw LogError(.unreadable, "\(error)", path: path, memberOffset: start.memberOffset, hint: Self.hint)
        }
        return outputs
    }
}
