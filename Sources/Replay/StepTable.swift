public import TraceCore
public import TraceLog

/// One step's entry in a step table: where its events are in the log, the state's counters at
/// its end and the result of its digest check, so that showing step N reads this entry and
/// inflates only the gzip member(s) holding the step.
public struct StepRecord: Sendable, Hashable {
    public var step: Int
    public var firstSequence: Int
    public var lastSequence: Int
    /// Where to start reading: the member holding the step's first event.
    public var position: LogReader.Position
    /// The member holding the last context packet written whole before the step's end: a
    /// step's delta packets are made whole by reading from there (or from `position`, if that
    /// comes first).
    public var packetPosition: LogReader.Position
    /// The state's counters at the step's end.
    public var after: StateSummary
    /// The digest replay computed for the step's last `step_ended` (nil without one).
    public var computedDigest: String?
    public var hasProblem: Bool
    public var hasDigestMismatch: Bool

    public init(
        step: Int, firstSequence: Int, lastSequence: Int, position: LogReader.Position, packetPosition: LogReader.Position,
        after: StateSummary, computedDigest: String?, hasProblem: Bool, hasDigestMismatch: Bool
    ) {
        self.step = step
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.position = position
        self.packetPosition = packetPosition
        self.after = after
        self.computedDigest = computedDigest
        self.hasProblem = hasProblem
        self.hasDigestMismatch = hasDigestMismatch
    }
}

/// Every step of one log, as one full replay found them: derived data, rebuilt from the log
/// whenever the log changed. Kept between commands by a `StepRecordStore` (the catalog's
/// `steps` table); without one it lives in memory for one command.
public struct StepTable: Sendable {
    public var runId: String
    public var records: [StepRecord]
    public var digestsChecked: Int
    public var digestMismatches: Int

    /// The version of what a record holds (`StepRecord.storedJSON`): a store keeps it beside
    /// the records and hands back none of another version, so they are made again.
    public static let format = 1

    public init(runId: String, records: [StepRecord], digestsChecked: Int, digestMismatches: Int) {
        self.runId = runId
        self.records = records
        self.digestsChecked = digestsChecked
        self.digestMismatches = digestMismatches
    }

    /// One full replay of `log`, remembering where every step starts. Throws the reader's
    /// errors, and `LogError.noEvent` for a log with no event.
    public static func build(log: String) throws -> StepTable {
        var builder = StepTableBuilder(log: log)
        let read = try LogReader(path: log, options: LogReader.Options(resolvesContextPackets: true)).forEachEvent { builder.add($0) }
        guard let table = try builder.finish() else { throw LogError.noEvent(in: log, tear: read.tear) }
        return table
    }
}

/// Makes a step table from the events of one read of a log, in order from its first: replay's
/// fold (`ReplayFold`) without keeping events, plus where each step can be read from.
public struct StepTableBuilder {
    private var fold: ReplayFold
    private var records: [StepRecord] = []
    private var runId = ""
    /// Where reading can start for the member being read: its start, with the chain as it stood there.
    private var member: LogReader.Position?
    /// The member of the last context packet written whole.
    private var wholePacket: LogReader.Position?
    /// Where the step being folded starts.
    private var stepStart: LogReader.Position?

    public init(log: String) {
        fold = ReplayFold(log: log, keepsEvents: false)
    }

    /// The steps finished so far.
    public var stepCount: Int { records.count }

    public mutating func add(_ recorded: RecordedEvent) {
        let event = recorded.event
        if fold.startsNewStep(event) { finishStep() }
        if runId.isEmpty { runId = event.runId }
        if member?.memberIndex != recorded.location.memberIndex {
            member = LogReader.Position(
                memberOffset: recorded.location.memberOffset, memberIndex: recorded.location.memberIndex, sequence: event.sequence,
                previousHash: event.previousHash ?? "", runId: runId)
        }
        if stepStart == nil { stepStart = member }
        // A packet written whole: not a delta as read, nor one the read made whole (the catalog's
        // indexer reads without making packets whole; replay reads with).
        if case .contextBuilt(let packet) = event.payload, packet.delta == nil, !recorded.wasWrittenAsDelta { wholePacket = member }
        fold.add(recorded)
    }

    private mutating func finishStep() {
        guard let step = fold.finishStep(), let position = stepStart else { return }
        stepStart = nil
        records.append(
            StepRecord(
                step: step.step, firstSequence: step.firstSequence, lastSequence: step.lastSequence, position: position,
                packetPosition: wholePacket ?? position, after: step.after, computedDigest: step.digests.last?.computed,
                hasProblem: step.hasProblem, hasDigestMismatch: step.digests.contains { !$0.isMatch }))
    }

    /// The table, or nil when no event was added. Throws when an output could not be read back
    /// from the log (the state, and so the digests, would be incomplete).
    public mutating func finish() throws -> StepTable? {
        finishStep()
        if let failure = fold.storeFailure { throw failure }
        guard !records.isEmpty else { return nil }
        return StepTable(runId: runId, records: records, digestsChecked: fold.digestsChecked, digestMismatches: fold.digestMismatches.count)
    }
}

/// Reads a log's steps without reading the log: a step table in memory, or the rows a store
/// keeps. Positions are 0-based, in log order.
public protocol StepRecordSource {
    var runId: String { get }
    var stepCount: Int { get }
    var digestsChecked: Int { get }
    var digestMismatches: Int { get }
    func record(at position: Int) throws -> StepRecord?
    /// The position of the first record of `step`, or nil.
    func position(ofStep step: Int) throws -> Int?
    /// The position of the first record after `position` that has a problem, or nil.
    func problem(after position: Int) throws -> Int?
}

/// Where step tables are kept between commands (the catalog implements it with its `steps`
/// table). A store is an accelerator: one that fails to keep a table costs a replay next time.
public protocol StepRecordStore: Sendable {
    /// The steps kept for `log` if they were made from the file as it is now, by this
    /// `StepTable.format`; nil otherwise.
    func steps(of log: String) throws -> (any StepRecordSource)?
    /// Keeps `table`, made from `log` while it had `fingerprint`.
    func keep(_ table: StepTable, of log: String, fingerprint: LogFingerprint) throws
}

extension StepTable: StepRecordSource {
    public var stepCount: Int { records.count }

    public func record(at position: Int) -> StepRecord? {
        records.indices.contains(position) ? records[position] : nil
    }

    /// By binary search: steps never go down in a log the runtime wrote; a log whose steps do
    /// is searched linearly.
    public func position(ofStep step: Int) -> Int? {
        var low = 0
        var high = records.count
        while low < high {
            let middle = (low + high) / 2
            if records[middle].step == step {
                // The first record of the step.
                var first = middle
                while first > 0 && records[first - 1].step == step { first -= 1 }
                return first
            }
            if records[middle].step < step { low = middle + 1 } else { high = middle }
        }
        return records.firstIndex { $0.step == step }
    }

    public func problem(after position: Int) -> Int? {
        guard position + 1 < records.count else { return nil }
        return records[(position + 1)...].firstIndex { $0.hasProblem }
    }
}

extension StepRecord {
    /// What a store keeps of the record beside its step, positions in the log and problem flag:
    /// the fields by name, so a reader never takes one for another.
    public var storedJSON: JSONValue {
        var object = ObjectBuilder()
        object.set("first_seq", firstSequence)
        object.set("last_seq", lastSequence)
        object.set("member", Self.json(of: position))
        object.set("packet_member", Self.json(of: packetPosition))
        object.set("after", after.json)
        object.set("computed_digest", computedDigest)
        object.set("has_digest_mismatch", hasDigestMismatch)
        return object.json
    }

    /// The record kept as `storedJSON` for `step`; nil when a field is missing or of another type.
    public init?(step: Int, hasProblem: Bool, runId: String, storedJSON json: JSONValue) {
        guard case .int(let first)? = json["first_seq"], case .int(let last)? = json["last_seq"],
            let position = json["member"].flatMap({ Self.position(from: $0, runId: runId) }),
            let packetPosition = json["packet_member"].flatMap({ Self.position(from: $0, runId: runId) }),
            let after = json["after"].flatMap(StateSummary.init(json:)), case .bool(let mismatch)? = json["has_digest_mismatch"]
        else { return nil }
        var digest: String?
        switch json["computed_digest"] {
        case .string(let text)?: digest = text
        case .null?, nil: digest = nil
        default: return nil
        }
        self.init(
            step: step, firstSequence: first, lastSequence: last, position: position, packetPosition: packetPosition, after: after,
            computedDigest: digest, hasProblem: hasProblem, hasDigestMismatch: mismatch)
    }

    private static func json(of position: LogReader.Position) -> JSONValue {
        var object = ObjectBuilder()
        object.set("offset", position.memberOffset)
        object.set("index", position.memberIndex)
        object.set("first_seq", position.sequence)
        object.set("prev_hash", position.previousHash)
        return object.json
    }

    private static func position(from json: JSONValue, runId: String) -> LogReader.Position? {
        guard case .int(let offset)? = json["offset"], case .int(let index)? = json["index"], case .int(let sequence)? = json["first_seq"],
            case .string(let previous)? = json["prev_hash"]
        else { return nil }
        return LogReader.Position(memberOffset: offset, memberIndex: index, sequence: sequence, previousHash: previous, runId: runId)
    }
}
