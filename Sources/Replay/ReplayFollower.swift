public import TraceCore
public import TraceLog

/// Replays a log that is still being written, again and again, reading each time only what is
/// new: the fold as it was at the start of the last member read is kept with that member's
/// position, and the next read goes on from there (the member may have been open, and has
/// grown since). What it gives is what a `Replayer` reading the whole log gives — the same
/// steps, the same digests checked, the same state — without the cost of the whole log each time:
/// a page that follows a run (`agent-eval serve`) reads about one member per change, and holds
/// one fold of the run's open part (`ReplayFold(settles:)`), whatever the length of the run. The
/// state it gives is that open part, and `Replayer.Result.settled` what was dropped from it
/// (with it, the whole run's counts and summary); an event that names a dropped call (an id
/// proposed again, a late result) makes it fold the log again from its start, keeping all.
///
///     var follower = ReplayFollower(path: path)
///     let result = try follower.read(restarting: { shown.removeAll() }) { step, _, _ in shown[step.step] = step }
///     // … the log grew …
///     let later = try follower.read(restarting: { shown.removeAll() }) { step, _, _ in shown[step.step] = step }
///
/// Each read hands `body` every step from the one in progress at the kept member's start on
/// (a step handed out before may come again, grown or not: a caller keeps steps by number),
/// with its place among the log's steps (from 0) and the state at its end.
/// A log that was replaced (another file at the path), cut shorter than the kept position, or
/// whose read from there fails, is read again from its start: `restarting` is called before
/// any read from the start but the first, and the steps come again from the first. A read from
/// the start reports the log's errors as `Replayer` does. Logs only grow (writers append; `log
/// repair` writes a torn last member again as it was): a log changed in place before the kept
/// member, which only damage or tampering does, is not read again — `log verify` finds it.
public struct ReplayFollower: Sendable {
    public let path: String

    /// Where the next read goes on from, and what the fold was there.
    private struct Checkpoint: Sendable {
        var position: LogReader.Position
        var fold: ReplayFold
        var endIsSigned: Bool
    }

    private var checkpoint: Checkpoint?
    /// The file the checkpoint was made in: a file put in its place is read from its start.
    private var identity: FileIdentity?
    /// How many reads began at the log's start (for tests and benchmarks).
    public private(set) var readsFromStart = 0
    /// Whether the fold settles (`ReplayFold(settles:)`): it holds the open part of the run, not
    /// the run. Off for good once an event named a call it had dropped: the log is then folded
    /// again whole, as it is from then on.
    public private(set) var settles = true

    /// Met by a settling fold that cannot go on (`ReplayFold.needsWholeState`).
    private struct NeedsWholeState: Error {}

    /// Member starts at most this far before the file's end (as it was when a read began), or
    /// twice the largest member read so far if that is more, are where a copy of the fold is
    /// kept (a writer closes members at 256 KiB of text, about 40 KiB compressed). Copying the
    /// fold at every member of a long log would cost a copy of its state each time. A last
    /// member that starts further from the end keeps nothing: the next read starts at the start.
    static let keepsFoldWithin = 256 << 10

    public init(path: String) {
        self.path = path
    }

    /// Reads what is new (the whole log the first time); see the type's notes.
    @discardableResult
    public mutating func read(restarting: () -> Void = {}, _ body: (_ step: ReplayStep, _ ordinal: Int, _ state: RunState) throws -> Void)
        throws -> Replayer.Result
    {
        let found = FileIdentity.withSize(path: path)
        if let kept = checkpoint, let found, let identity, identity == found.identity,
            found.size >= kept.position.memberOffset
        {
            do {
                return try read(from: kept, fileSize: found.size, body)
            } catch is LogError {
                // Read again from the start, which says what is wrong if something is.
            } catch is NeedsWholeState {
                return try readWhole(fileSize: found.size, restarting: restarting, body)
            }
        }
        checkpoint = nil
        identity = found?.identity
        if readsFromStart > 0 { restarting() }
        readsFromStart += 1
        do {
            return try read(from: nil, fileSize: found?.size ?? 0, body)
        } catch is NeedsWholeState {
            return try readWhole(fileSize: found?.size ?? 0, restarting: restarting, body)
        }
    }

    /// Folds the log again from its start without settling, after a settling fold met an event it
    /// could not fold as the whole state would (the steps handed out come again).
    private mutating func readWhole(
        fileSize: Int, restarting: () -> Void, _ body: (_ step: ReplayStep, _ ordinal: Int, _ state: RunState) throws -> Void
    ) throws -> Replayer.Result {
        settles = false
        checkpoint = nil
        restarting()
        readsFromStart += 1
        return try read(from: nil, fileSize: fileSize, body)
    }

    private mutating func read(
        from kept: Checkpoint?, fileSize: Int, _ body: (_ step: ReplayStep, _ ordinal: Int, _ state: RunState) throws -> Void
    ) throws
        -> Replayer.Result
    {
        // Kept for as long as the log is followed: it holds the open part of the run (it
        // settles), and its outputs go back to the log whatever its size, as a long log's do.
        var fold = kept?.fold ?? ReplayFold(log: path, minimumLogBytes: 0, settles: settles)
        var endIsSigned = kept?.endIsSigned ?? false
        var packets = kept?.position.packets ?? ContextPacketResolver()
        var member = kept?.position.memberIndex
        var latest = kept
        let reader = LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true))
        var memberStart = kept?.position.memberOffset
        var largestMember = 0
        func each(_ recorded: RecordedEvent) throws {
            if recorded.location.memberIndex != member {
                member = recorded.location.memberIndex
                if let memberStart { largestMember = max(largestMember, recorded.location.memberOffset - memberStart) }
                memberStart = recorded.location.memberOffset
                latest = nil
                if recorded.location.memberOffset >= fileSize - max(Self.keepsFoldWithin, 2 * largestMember) {
                    let position = LogReader.Position(
                        memberOffset: recorded.location.memberOffset, memberIndex: recorded.location.memberIndex,
                        sequence: recorded.event.sequence, previousHash: recorded.event.previousHash ?? "", runId: recorded.event.runId,
                        packets: packets)
                    latest = Checkpoint(position: position, fold: fold, endIsSigned: endIsSigned)
                }
            }
            if fold.startsNewStep(recorded.event), let step = fold.finishStep() { try body(step, fold.stepsReplayed - 1, fold.state) }
            fold.add(recorded)
            if fold.needsWholeState { throw NeedsWholeState() }
            // The packet made whole (as the reader made it) is what the next delta builds on.
            if case .contextBuilt = recorded.event.payload { _ = try? packets.resolve(recorded.event) }
            endIsSigned = recorded.event.isFinalSignature
        }
        var result = Replayer.Result(state: RunState(), read: ReadSummary())
        if let kept {
            result.read = try reader.forEachEvent(from: kept.position) { recorded in
                try each(recorded)
                return true
            }
        } else {
            result.read = try reader.forEachEvent(each)
        }
        // The step in progress is handed out as it is now; the kept fold goes on with it.
        var ended = fold
        if let step = ended.finishStep() { try body(step, ended.stepsReplayed - 1, ended.state) }
        if ended.stepsReplayed == 0 { throw LogError.noEvent(in: path, tear: result.read.tear) }
        if let failure = fold.storeFailure { throw failure }
        checkpoint = latest
        result.state = ended.state
        result.settled = ended.settled
        result.digestsChecked = ended.digestsChecked
        result.digestMismatches = ended.digestMismatches
        result.stepsReplayed = ended.stepsReplayed
        result.endIsSigned = endIsSigned
        return result
    }
}
