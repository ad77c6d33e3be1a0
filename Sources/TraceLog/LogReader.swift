public import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a log: streaming, member by member, in bounded memory.
///
/// Every event is checked as it is read (JSON, envelope version, run id, dense sequence,
/// hash chain); the first problem is thrown as a `LogError` naming the file, the member
/// offset and the sequence number. A file cut in the middle of a member (a crash while
/// writing) is not an error: every complete event is returned and `ReadSummary.tear` says
/// where the file was cut — unless `Options.isStrict` asks for an error. A file of 0 bytes is
/// not cut but `empty`, an error: it holds no gzip member. A read that returns no event
/// (a file cut before its first event was complete) is the caller's to judge: a tool that
/// needs a run throws `LogError.noEvent(in:tear:)`.
///
/// ```swift
/// var reader = LogReader(path: "runs/r1.jsonl.gz")
/// let summary = try reader.forEachEvent { recorded in
///     RunState.reduce(into: &state, recorded.event)
/// }
/// if let tear = summary.tear { print("torn:", tear) }
/// ```
public struct LogReader {
    /// How strictly to read.
    public struct Options: Sendable, Hashable {
        /// Throw `tornTail` instead of returning the complete events of a torn file.
        public var isStrict = false
        /// The most decompressed bytes one member may hold: the memory bound, which must be
        /// above the largest event (`LogReadLimit`: the process's limit, 64 MiB by default).
        public var memberContentLimit = LogReadLimit.memberBytes
        /// Bytes read from the file at a time.
        public var readBufferSize = 256 * 1024
        /// Inflate each member that is whole in the read buffer in one call (libdeflate); zlib
        /// inflates the others, and every torn or damaged one. Off, zlib inflates them all: the
        /// same events, the same errors.
        public var inflatesWholeMembers = true
        /// Hand out delta context packets (format version 2) made whole, as the packet the
        /// model was given: for readers that show packets (replay, the viewer). Off, a delta
        /// packet comes as it is written (`ContextBuilt.delta`), which is all the fold needs.
        public var resolvesContextPackets = false
        /// A whole read (`forEachEvent`, `forEachLine`, `readAll`, or `forEachEvent(from:)`
        /// with `readsAhead`) of at least this many bytes of file reads, inflates and hashes
        /// members on a helper thread, a few members ahead of the decoding and checking on the
        /// caller's thread: the same events, errors and summary, about 1.5 times as fast on a
        /// long log (docs/performance.md). Smaller files, random access from a position, and
        /// `firstEvent` stay on one thread; `Int.max` keeps every read on one.
        public var readsAheadFromBytes = 1 << 20
        /// Hand out context packets with their strings (goal, summaries, item ids). Off, every
        /// line is checked exactly as when on — the same events, errors and summary — but a
        /// `context_built` payload's strings come back empty, without being made: for readers
        /// that only fold (the eval facts, the catalog's indexer), where making them was about
        /// a twentieth of the read. The lists keep their sizes and the numbers their values.
        public var keepsPacketText = true
        /// Give every event its line's SHA-256 (`RecordedEvent.hash`) in a version 3 log too,
        /// whose chain links members and so needs no line's hash: for a fork, which names its
        /// parent's last copied line by it. A version 1 log's lines are always hashed.
        public var hashesLines = false

        public init(
            isStrict: Bool = false, memberContentLimit: Int = LogReadLimit.memberBytes, readBufferSize: Int = 256 * 1024,
            inflatesWholeMembers: Bool = true, resolvesContextPackets: Bool = false, readsAheadFromBytes: Int = 1 << 20,
            keepsPacketText: Bool = true, hashesLines: Bool = false
        ) {
            self.isStrict = isStrict
            self.memberContentLimit = memberContentLimit
            self.readBufferSize = readBufferSize
            self.inflatesWholeMembers = inflatesWholeMembers
            self.resolvesContextPackets = resolvesContextPackets
            self.readsAheadFromBytes = readsAheadFromBytes
            self.keepsPacketText = keepsPacketText
            self.hashesLines = hashesLines
        }
    }

    public let path: String
    public var options: Options

    public init(path: String, options: Options = Options()) {
        self.path = path
        self.options = options
    }

    /// Calls `body` with each event in order; returns what was read and how the file ended.
    public func forEachEvent(_ body: (RecordedEvent) throws -> Void) throws -> ReadSummary {
        try walk(readsAhead: true) { _, recorded in
            try body(recorded)
            return true
        }
    }

    /// Calls `body` with each event's line bytes (no newline) and the decoded event. The bytes
    /// are valid only during the call.
    public func forEachLine(_ body: (UnsafeRawBufferPointer, RecordedEvent) throws -> Void) throws -> ReadSummary {
        try walk(readsAhead: true) { line, recorded in
            try body(line, recorded)
            return true
        }
    }

    /// Reads every event into memory. For small logs and tests; prefer `forEachEvent`.
    public func readAll() throws -> (events: [RecordedEvent], summary: ReadSummary) {
        var events: [RecordedEvent] = []
        let summary = try forEachEvent { events.append($0) }
        return (events, summary)
    }

    /// The log's first event (its `run_started` or `pipeline_started`), checked as every event
    /// is, reading no further than it: what comes later, damage included, is not looked at.
    /// Nil for a log that holds no event; throws `empty` for a file of 0 bytes.
    public func firstEvent() throws -> RecordedEvent? {
        struct Stop: Error {}
        var first: RecordedEvent?
        do {
            _ = try walk { _, recorded in
                first = recorded
                throw Stop()
            }
        } catch is Stop {}
        return first
    }

    /// Where to pick a log up in the middle: a member's start, and what the event chain looks
    /// like just before it (from an index built by an earlier full read).
    public struct Position: Sendable, Hashable {
        public var memberOffset: Int
        public var memberIndex: Int
        /// The sequence number of the member's first event.
        public var sequence: Int
        /// The hash of the event before it (64 zeros for the first event of the log).
        public var previousHash: String
        public var runId: String
        /// The sizes of the lists of the last context packet before it, to check a delta
        /// packet's copies against; nil takes the first delta's copies as they are.
        public var contextShape: ContextShape?
        /// The context packets as a read from the start had them just before it (the last whole
        /// packet), for a read that makes delta packets whole (`Options.resolvesContextPackets`)
        /// to go on from there; nil passes the deltas before the first whole packet as they are.
        /// Its packet's shape serves as `contextShape` when that is nil.
        public var packets: ContextPacketResolver?

        public init(
            memberOffset: Int, memberIndex: Int, sequence: Int, previousHash: String, runId: String, contextShape: ContextShape? = nil,
            packets: ContextPacketResolver? = nil
        ) {
            self.memberOffset = memberOffset
            self.memberIndex = memberIndex
            self.sequence = sequence
            self.previousHash = previousHash
            self.runId = runId
            self.contextShape = contextShape
            self.packets = packets
        }
    }

    /// Reads from `position` on, checking the chain from there, until `body` returns false or
    /// the log ends. Only the members read are inflated: random access for replay. A caller
    /// that reads on to the end (the catalog picking up a grown log) passes `readsAhead`, so
    /// that a large rest of the file is read ahead on a helper thread as a whole read is.
    ///
    /// Every event handed out is covered by a link before the read stops: in a version 1 log
    /// the event `body` returned false for carries the link of the one before; in a version 3
    /// log, unless that event begins its member, the rest of its member is passed over (hashed,
    /// not decoded) and the next member's first line, which links to it, is read and checked —
    /// so that an edit of an event shown is found as it is in a whole read. `stopsAtOnce`
    /// skips that: for a caller that checks what it reads by other means (`StoredOutputs`).
    @discardableResult
    public func forEachEvent(
        from position: Position, readsAhead: Bool = false, stopsAtOnce: Bool = false, _ body: (RecordedEvent) throws -> Bool
    ) throws -> ReadSummary {
        struct Stop: Error {}
        do {
            return try walk(from: position, readsAhead: readsAhead) { _, recorded in
                let goesOn = try body(recorded)
                if !goesOn && stopsAtOnce { throw Stop() }
                return goesOn
            }
        } catch is Stop {
            return ReadSummary()
        } catch is LinkChecked {
            return ReadSummary()
        }
    }

    /// The chain of the log, as its first line says (1: lines linked, 3: members linked), for a
    /// read that starts in the middle: the log's version is its first line's, not that of the
    /// first line such a read meets (a version 1 log with version 3 members appended is
    /// damaged). Every line begins `{"v":N,` (docs/log-format.md §2), so only the first
    /// compressed bytes are inflated; nil when they do not begin so (then the first line read
    /// decides, and a whole read reports what is wrong at the start).
    private func chainFormat() -> Int? {
        guard let start = MemberScanner.firstBytes(of: path, memberAt: 0) else { return nil }
        let prefix = Array(#"{"v":"#.utf8)
        guard start.starts(with: prefix) else { return nil }
        let digits = start.dropFirst(prefix.count).prefix { (0x30...0x39).contains($0) }
        guard !digits.isEmpty, digits.count < 4, start.count > prefix.count + digits.count,
            start[prefix.count + digits.count] == UInt8(ascii: ","), let version = Int(String(decoding: digits, as: UTF8.self))
        else { return nil }
        return version >= Event.memberChainVersion ? Event.memberChainVersion : 1
    }

    /// Thrown once the link covering every event handed out was checked, to end a read `body`
    /// asked to stop.
    private struct LinkChecked: Error {}

    /// Reads from `position` (the start when nil); `readsAhead` allows a helper thread when
    /// the rest of the file is large (`Options.readsAheadFromBytes`), for reads that go on to
    /// the end.
    /// `body` returns false when it wants no more events: the read then ends once a link covers
    /// every event handed out (`forEachEvent(from:)`).
    private func walk(
        from position: Position? = nil, readsAhead: Bool = false, _ body: (UnsafeRawBufferPointer, RecordedEvent) throws -> Bool
    ) throws -> ReadSummary {
        if let pending = LogReader.pendingSeal(path) { throw pending }  // a stray side file is ignored
        let aheadOnAThread =
            readsAhead && MemberScanner.readsAhead(path, from: position?.memberOffset ?? 0, threshold: options.readsAheadFromBytes)
        var scanner = MemberScanner(path: path, contentLimit: options.memberContentLimit, readSize: options.readBufferSize)
        scanner.inflatesWholeMembers = options.inflatesWholeMembers
        var checker =
            position.map {
                EventChecker(
                    path: path, resumingAt: $0.sequence, previousHash: $0.previousHash, runId: $0.runId,
                    contextShape: $0.contextShape ?? $0.packets?.lastShape,
                    format: $0.memberOffset > 0 ? chainFormat() : nil)
            } ?? EventChecker(path: path)
        checker.keepsPacketText = options.keepsPacketText
        checker.hashesLines = options.hashesLines
        var resolver = options.resolvesContextPackets ? (position?.packets ?? ContextPacketResolver(startsMidLog: position != nil)) : nil
        var summary = ReadSummary()
        var problems: [LogError] = []
        var lineNumber = position?.sequence ?? 0
        var lastSequence: Int?
        /// `body` wants no more events, and the read waits for the next member's link.
        var waitsForLink = false

        /// The member a read waiting for a link goes on to, once it tried the next member's first
        /// line alone (`MemberScanner.firstLine`) and could not use it.
        struct NextMember: Error {
            var offset: Int
            var index: Int
        }
        var from = (offset: position?.memberOffset ?? 0, index: position?.memberIndex ?? 0)
        var ending = MemberScanner.Ending.complete
        scanning: while true {
            do {
                // The scan is written here, not in a local function: what its closures change
                // (the summary, the checker, the line number) is then checked for exclusive
                // access when compiled, not at every event.
                let triesFirstLine = from.offset == (position?.memberOffset ?? 0)
                ending = try scanner.scan(from: from.offset, firstIndex: from.index, aheadOnAThread: aheadOnAThread) { scanned in
                    let (member, content, isComplete) = (scanned.member, scanned.content, scanned.isComplete)
                    summary.memberCount += 1
                    summary.decompressedBytes += content.count
                    var eventsInMember = 0
                    let dropped = try checker.checkLines(of: scanned, lineNumber: &lineNumber, problems: &problems) {
                        line, checked, problems in
                        guard problems.isEmpty, var recorded = checked.take() else { throw problems[0] }
                        // This member's first line links to the member the last event handed out is in.
                        if waitsForLink { throw LinkChecked() }
                        if var packets = resolver {
                            defer { resolver = packets }
                            do {
                                if case .contextBuilt(let packet) = recorded.event.payload, packet.delta != nil {
                                    recorded.wasWrittenAsDelta = true
                                }
                                recorded.event = try packets.resolve(recorded.event)
                            } catch let error as TraceCoreError {
                                throw LogError(
                                    .invalidEvent,
                                    "event seq \(recorded.event.sequence) (context_built) cannot be made whole: \(error.message)",
                                    path: path, memberOffset: member.offset, sequence: recorded.event.sequence,
                                    hint: "a delta packet needs the packets before it: read the log from its start")
                            }
                        }
                        summary.eventCount += 1
                        eventsInMember += 1
                        lastSequence = recorded.event.sequence
                        guard try body(line, recorded) else {
                            // Version 1: this event's link covered the one before. Version 3: one that
                            // begins a member covered the member before; else the next member's will.
                            if recorded.event.version < Event.memberChainVersion || eventsInMember == 1 { throw LinkChecked() }
                            waitsForLink = true
                            return false
                        }
                        return true
                    }
                    summary.lastHash = checker.lastHash
                    if isComplete {
                        if dropped > 0 {
                            throw LogError(
                                .splitEvent,
                                "the gzip member ends \(dropped) bytes into an event (line \(lineNumber + 1)); members must end at an event's end",
                                path: path, memberOffset: member.offset, sequence: checker.expectedSequence,
                                hint: "verify the log for a full report of its damage")
                        }
                    } else {
                        if let problem = checker.partialLineProblem(
                            UnsafeRawBufferPointer(rebasing: content[(content.count - dropped)...]), isFirstInMember: eventsInMember == 0)
                        {
                            throw LogError(
                                .corruptMember,
                                "the log ends inside the gzip member at byte \(member.offset), and it is damaged, not cut off: \(problem)",
                                path: path, memberOffset: member.offset, sequence: checker.expectedSequence,
                                hint: "verify the log for a full report; repair seals only a clean tear")
                        }
                        summary.tear = LogTear(
                            memberOffset: member.offset, fileSize: member.offset + member.length,
                            eventsInTornMember: eventsInMember, droppedBytes: dropped, lastSequence: lastSequence)
                    }
                    // Waiting for the next member's link, which its first line alone gives.
                    if waitsForLink && isComplete && triesFirstLine {
                        throw NextMember(offset: member.offset + member.length, index: member.index + 1)
                    }
                }
                break scanning
            } catch var tooLarge as LogError where tooLarge.code == .eventTooLarge && tooLarge.sequence == nil {
                // The member over the limit begins with the event after the last one read.
                tooLarge.sequence = checker.expectedSequence
                throw tooLarge
            } catch let next as NextMember {
                // The link is the next member's first line: inflate only as far as it.
                guard let line = MemberScanner.firstLine(of: path, memberAt: next.offset, limit: options.memberContentLimit) else {
                    // None there, or not that way: the end of the log, or a read of the member
                    // as any read does it (its first line's check then ends the read).
                    if let size = FileDescriptor.fileSize(path), next.offset >= size { return ReadSummary() }
                    from = (next.offset, next.index)
                    continue scanning
                }
                let location = EventLocation(memberIndex: next.index, memberOffset: next.offset, line: lineNumber + 1)
                var probe = checker
                var found: [LogError] = []
                _ = line.withUnsafeBytes { probe.check($0, at: location, problems: &found) }
                if found.isEmpty { return ReadSummary() }
                // Something is wrong: read the member as any read does, which says what, where.
                from = (next.offset, next.index)
                continue scanning
            }
        }

        summary.peakBufferBytes = scanner.peakBufferBytes
        summary.wholeMemberCount = scanner.wholeMemberCount
        switch ending {
        case .complete:
            break
        case .torn:
            // No bytes at all is no member, not a member cut off: nothing to seal, no event.
            if summary.tear?.fileSize == 0 { throw LogError.empty(path) }
            if options.isStrict, let tear = summary.tear {
                throw LogError(
                    .tornTail, tear.description, path: path, memberOffset: tear.memberOffset,
                    sequence: tear.lastSequence.map { $0 + 1 } ?? 0,
                    hint: "seal the torn tail (repair) to make the file valid gzip again; no complete event is lost")
            }
        case .corrupt(let member, let reason):
            throw LogReader.corruption(path: path, member: member, reason: reason, nextSequence: checker.expectedSequence)
        }
        return summary
    }

    /// The error for a log whose seal was interrupted: what the log holds now is not all it
    /// holds; the side file has the rest until a repair finishes the seal. Nil when there is no
    /// side file or it is not this log's (`LogRepair.sideFile(of:)`).
    static func pendingSeal(_ path: String) -> LogError? {
        LogRepair.sideFileNotice(path).flatMap { $0.code == .pendingSeal ? $0 : nil }
    }

    static func corruption(path: String, member: MemberScanner.Member, reason: String, nextSequence: Int) -> LogError {
        // A gzip header with flags no log member carries (`gzip FILE` writes the file's name) is
        // damage to a log (docs/log-format.md §1.1), not a file that is no gzip.
        if member.offset == 0 && member.index == 0 && reason.contains("header") && !reason.contains("header flags") {
            return LogError(
                .notGzip, "the file is not a gzip-compressed log (zlib: \(reason))", path: path, memberOffset: 0,
                hint: "agent-eval logs are gzip-compressed JSONL, usually named *.jsonl.gz")
        }
        return LogError(
            .corruptMember,
            "the gzip member at byte \(member.offset) is damaged (zlib: \(reason)); its events, from seq \(nextSequence) on, cannot be trusted",
            path: path, memberOffset: member.offset, sequence: nextSequence,
            hint: "verify the log to see everything that is damaged; repair does not rewrite a damaged middle")
    }
}

/// What a read saw.
public struct ReadSummary: Sendable, Hashable {
    public var memberCount = 0
    /// The members inflated whole in one call (libdeflate) rather than streamed (zlib).
    public var wholeMemberCount = 0
    public var eventCount = 0
    /// Bytes of JSONL text after decompression.
    public var decompressedBytes = 0
    /// The chain's head: the `prev` the next event must carry, or in a version 3 log the next
    /// member's first event — the hash of the last complete event's line (version 1), or of the
    /// complete lines of the last member that held one (version 3; of a torn member, those it
    /// keeps once sealed).
    public var lastHash: String?
    /// Set when the file ends inside a member.
    public var tear: LogTear?
    /// The largest buffer the reader held, input chunk included.
    public var peakBufferBytes = 0

    public init() {}
}

/// The SHA-256 of each line of one member's content, asked for in order: each is hashed
/// together with the line after it (`ContentHash.sha256HexPair`), so a member's lines cost about
/// half of hashing them one by one.
struct LineHasher {
    let content: UnsafeRawBufferPointer
    /// The offset in `content` of the line hashed ahead, and its hash.
    private var ahead: (offset: Int, hash: String)?

    init(content: UnsafeRawBufferPointer) {
        self.content = content
    }

    /// The hash of `line`, a complete line of `content` (without its newline).
    mutating func hash(of line: UnsafeRawBufferPointer) -> String {
        guard let base = content.baseAddress, let start = line.baseAddress else { return ContentHash.sha256Hex(line) }
        let offset = base.distance(to: start)
        if let ahead, ahead.offset == offset { return ahead.hash }
        let nextStart = offset + line.count + 1
        guard nextStart < content.count, let newline = memchr(base + nextStart, 0x0A, content.count - nextStart) else {
            return ContentHash.sha256Hex(line)
        }
        let next = UnsafeRawBufferPointer(start: base + nextStart, count: base.distance(to: UnsafeRawPointer(newline)) - nextStart)
        let (hash, nextHash) = ContentHash.sha256HexPair(line, next)
        ahead = (nextStart, nextHash)
        return hash
    }
}

/// Splits member content into lines.
enum LineSplitter {
    /// Calls `body` with each complete line (without its newline); returns the number of bytes
    /// after the last newline.
    static func forEachLine(
        in content: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) rethrows -> Int {
        guard let base = content.baseAddress else { return 0 }
        var start = 0
        while start < content.count {
            guard let newline = memchr(base + start, 0x0A, content.count - start) else { break }
            let end = base.distance(to: UnsafeRawPointer(newline))
            try body(UnsafeRawBufferPointer(start: base + start, count: end - start))
            start = end + 1
        }
        return content.count - start
    }
}
