public import TraceCore
public import TraceLog

/// What reading and folding one log found: everything a case check works from. A case never
/// looks at the log itself, so a cache of these (the catalog's) can stand in for reading it.
public struct LogFacts: Sendable, Hashable {
    /// The state the log folds to.
    public var state: RunState
    /// Where the file was cut, for a torn log.
    public var tear: LogTear?
    /// The first `step_ended` whose recorded digest differs from the state folded before it.
    public var digestMismatch: DigestMismatch?
    /// The byte offset of the last complete gzip member that holds an event (nil when none
    /// does): where a cache's identity hash of the log starts.
    public var lastCompleteMemberOffset: Int?
    /// The log's last event is a final signature (`Event.isFinalSignature`): its end is proven
    /// as far as its signature goes; an unsigned log's end is not (`Evidence`).
    public var endIsSigned = false

    /// Bump when the fold, the state's snapshot form or what the read records changes: every
    /// cached entry made by another version is then read again. (3: the reader refuses a
    /// measure outside 0…2^53−1, docs/log-format.md section 2; 4: `seq` and `step` too, and
    /// token and time totals saturate; 5: user turns out of order are an anomaly; 6: so are a
    /// user turn after the one that ended the conversation, and a stop the user's ending gives
    /// that no turn ended so.)
    public static let extractorVersion = 6

    public struct DigestMismatch: Sendable, Hashable {
        public var sequence: Int
        public var step: Int

        public init(sequence: Int, step: Int) {
            self.sequence = sequence
            self.step = step
        }
    }

    public init(state: RunState, tear: LogTear? = nil, digestMismatch: DigestMismatch? = nil, lastCompleteMemberOffset: Int? = nil) {
        self.state = state
        self.tear = tear
        self.digestMismatch = digestMismatch
        self.lastCompleteMemberOffset = lastCompleteMemberOffset
    }

    /// Reads and folds `log`, checking every recorded state digest on the way. Throws the
    /// reader's error for a log that cannot be read. With `storesOutputs`, a long log's outputs
    /// are held as references into it (`StoredOutputs`) and read back when a check looks at
    /// them; a caller that writes the whole state out anyway (the catalog's snapshot) passes
    /// false, since reading every output back costs a second inflate of the log.
    public static func read(_ log: String, storesOutputs: Bool = true) throws -> LogFacts {
        var fold = LogFactsFold(storingOutputsOf: storesOutputs ? log : nil)
        // The fold reads no context packet's text: it is checked, not made.
        let read = try LogReader(path: log, options: .init(keepsPacketText: false)).forEachEvent { fold.add($0) }
        // An output read back during the read (a call that changed again) that did not read
        // back: the log changed in place while it was read.
        if let failure = fold.storeFailure { throw failure }
        return fold.facts(tear: read.tear)
    }
}

/// The fold that makes a log's facts, one event at a time, from the log's first: the state,
/// every recorded state digest checked against the state folded before it, the members seen.
/// `LogFacts.read` drives it over a read of its own; the catalog's indexer gives it the events of
/// the read it makes anyway, so a log it indexes from the start has its facts without a second
/// read, and the two cannot disagree.
public struct LogFactsFold {
    /// The state after the events added so far; the indexer drops settled calls from it to keep
    /// a long log's read bounded (and then makes no facts).
    public var state = RunState()
    private var digester = StateDigester()
    private var mismatch: LogFacts.DigestMismatch?
    private var memberOffsets: (previous: Int?, current: Int?) = (nil, nil)
    private var stored: StoredOutputs?
    private var endIsSigned = false

    /// With `storingOutputsOf`, a long log's outputs are held as references into that log
    /// (`StoredOutputs`), as `LogFacts.read(_:storesOutputs:)` says.
    public init(storingOutputsOf log: String? = nil) {
        stored = log.map { StoredOutputs(log: $0) }
    }

    /// Why reading an output back from the log failed, if it did.
    public var storeFailure: LogError? { stored?.store?.failure }

    public mutating func add(_ recorded: RecordedEvent) {
        let event = recorded.event
        if mismatch == nil, case .stepEnded(let ended) = event.payload, digester.digest(of: state) != ended.stateDigest {
            mismatch = LogFacts.DigestMismatch(sequence: event.sequence, step: event.step)
        }
        let change = RunState.reduce(into: &state, event)
        digester.track(change)
        stored?.folded(recorded, change: change, into: &state)
        endIsSigned = event.isFinalSignature
        if recorded.location.memberOffset != memberOffsets.current {
            memberOffsets = (memberOffsets.current, recorded.location.memberOffset)
        }
    }

    /// The facts of the events added, for a read that ended with `tear` (nil: whole).
    public func facts(tear: LogTear?) -> LogFacts {
        let lastComplete = memberOffsets.current == tear?.memberOffset ? memberOffsets.previous : memberOffsets.current
        var facts = LogFacts(state: state, tear: tear, digestMismatch: mismatch, lastCompleteMemberOffset: lastComplete)
        facts.endIsSigned = endIsSigned
        return facts
    }
}

/// Where a suite run gets the facts of a recorded log: read from the file every time
/// (`LogFactReader`), or from a cache that knows when the file changed (the catalog).
public protocol LogFactSource: Sendable {
    func facts(for log: String) throws -> LogFacts

    /// The result of checking `log` with `check`: a cache may answer with the result it kept
    /// under `key` for the log as it is now, without the facts; it must keep only results
    /// `check` made from the facts of the log as it is now. Throws what `facts(for:)` throws.
    func result(for log: String, key: CheckKey?, check: (LogFacts) -> RunResult) throws -> RunResult

    /// Writes what the source keeps for later (a cache may write its entries in batches); the
    /// runner calls it when a suite run ends.
    func flush()

    /// Whether asking the source waits on a network (a catalog on a PostgreSQL server): the
    /// runner then asks it from a thread of its own, never from a task of the cooperative pool.
    var waitsOnNetwork: Bool { get }
}

extension LogFactSource {
    /// Checks the facts, every time.
    public func result(for log: String, key: CheckKey?, check: (LogFacts) -> RunResult) throws -> RunResult {
        check(try facts(for: log))
    }

    /// Nothing kept.
    public func flush() {}

    /// A log on disk: read where the caller is.
    public var waitsOnNetwork: Bool { false }
}

/// Reads every log in full, every time.
public struct LogFactReader: LogFactSource {
    public init() {}

    public func facts(for log: String) throws -> LogFacts { try LogFacts.read(log) }
}
