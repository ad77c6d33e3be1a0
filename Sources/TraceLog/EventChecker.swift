public import TraceCore

/// Where an event sits in its log file.
public struct EventLocation: Sendable, Hashable {
    /// The index of its gzip member, from 0.
    public var memberIndex: Int
    /// The byte offset of its gzip member in the file.
    public var memberOffset: Int
    /// Its line number in the decompressed text, from 1 (what `zcat | sed -n Np` shows).
    public var line: Int
}

/// An event read from a log, with where it was and the hash of its line.
public struct RecordedEvent: Sendable, Hashable {
    public var event: Event
    public var location: EventLocation
    /// SHA-256 (hex) of the event's line. In a version 1 log that is what the next event's
    /// `prev` must be, and every read gives it. A version 3 log links members, not lines, so a
    /// read gives it only when asked (`LogReader.Options.hashesLines`), and is "" otherwise.
    public var hash: String
    /// Whether the event is a context packet written as a delta that the read made whole
    /// (`LogReader.Options.resolvesContextPackets`): a reader that starts at a packet needs one
    /// written whole.
    public var wasWrittenAsDelta = false
}

/// Checks each line against the ones before it: JSON, envelope version, run id, dense
/// sequence numbers and the hash chain. It reports problems and keeps going, so the reader
/// can stop at the first and the verifier can list them all.
///
/// The chain is a log's format (docs/log-format.md §3), which its first line read says: in a
/// version 1 log each line links to the line before; in a version 3 log the first line of each
/// member links to the member before, whose hash the reader hands in (`endMember`).
struct EventChecker {
    let path: String
    private(set) var expectedSequence = 0
    /// The chain's head: what the next link must be. Version 1: the last line's hash;
    /// version 3: the hash of the last member that held a line.
    private(set) var lastHash: String?
    /// 1 for a log whose lines link (versions 1 and 2), 3 for one whose members link; nil
    /// until a line was read.
    private(set) var format: Int?
    /// Whether each event gets its line's hash in a version 3 log, where the chain needs none.
    var hashesLines = false
    /// The member of the last line checked (its index and byte offset), and the sequence numbers
    /// its events began and ended with: a version 3 link names the member it covers.
    private var member: (index: Int, offset: Int, first: Int?, last: Int?)?
    /// The offset and sequence numbers of the member `lastHash` is the hash of.
    private var chainedMember: (offset: Int, first: Int?, last: Int?)?

    /// Whether the reader must hand in each member's hash (`endMember`): a version 3 log.
    var chainsMembers: Bool { format == Event.memberChainVersion }

    /// Takes the hash of the member just read (its complete lines, newlines included): the
    /// link the next member's first line must carry. Only for a member that held a line.
    mutating func endMember(hash: String) {
        lastHash = hash
        isLastHashHex = true
        chainedMember = member.map { ($0.offset, $0.first, $0.last) }
    }
    /// Whether `lastHash` is 64 hex digits: always, but for a `previousHash` a caller resumed with.
    private var isLastHashHex = true
    private(set) var runId: String?
    /// The step of the last event (unknown when reading starts in the middle of a log).
    private(set) var lastStep: Int?
    /// Set after a part of the file was skipped: the next event starts a new baseline.
    var isResynchronizing = false
    /// The sizes of the last context packet's lists, to check a delta packet's copies against.
    private(set) var contextShape: ContextShape?
    /// Reading started in the middle of a log without the last packet's shape: the first delta
    /// met is taken as it is (its base was read before).
    private var trustsFirstDelta = false
    /// Whether the events it hands out keep their context packets' strings
    /// (`LogReader.Options.keepsPacketText`).
    var keepsPacketText = true

    init(path: String) {
        self.path = path
    }

    /// A checker that picks up in the middle of a log: the next event must be `sequence`,
    /// linked to `previousHash`, of run `runId`. `format` is the chain of the log's first line
    /// (1 or 3), when the caller knows it: else the first line read here decides, as at the
    /// start, and a log whose later lines are of another version goes unnoticed from here.
    init(
        path: String, resumingAt sequence: Int, previousHash: String, runId: String, contextShape: ContextShape? = nil,
        format: Int? = nil
    ) {
        self.path = path
        self.format = format
        self.expectedSequence = sequence
        self.lastHash = previousHash
        self.isLastHashHex = ContentHash.isHex64(previousHash)
        self.runId = runId
        self.contextShape = contextShape
        self.trustsFirstDelta = contextShape == nil
    }

    /// Why the bytes after the last complete event of a torn member cannot be the start of
    /// the next event, or nil when they can. A tear cuts the next line short; it does not
    /// change it. So what is there must begin as the writer begins every line — `{"v":1,"run":`
    /// (`{"v":2,"run":` for a delta packet) with this run's id, then the expected sequence
    /// number — and as much of `"prev":"…"` as was written must be the start of the last
    /// event's hash. A changed byte in the last
    /// complete event (which no later event links to) shows here when the cut fell after the
    /// start of `prev`; a stray byte shows at once.
    ///
    /// In a version 3 log only a member's first line carries `prev`: `isFirstInMember` says
    /// whether the partial line is one (the torn member holds no complete line).
    func partialLineProblem(_ partial: UnsafeRawBufferPointer, isFirstInMember: Bool) -> String? {
        guard !partial.isEmpty else { return nil }
        // In a log whose members link, a conversation's user turn or ending is a version 4 line.
        let saysFour = partial.count > 5 && partial[5] == UInt8(ascii: "4")
        let version =
            chainsMembers || (format == nil && partial.count > 5 && partial[5] == UInt8(ascii: "3"))
            ? (saysFour ? "4" : "3") : partial.count > 5 && partial[5] == UInt8(ascii: "2") ? "2" : "1"
        var expected = Array("{\"v\":\(version),\"run\":".utf8)
        if let runId {
            expected += JSONWriter.encode(.string(runId))
            expected += Array(",\"seq\":\(expectedSequence),\"step\":".utf8)
        }
        for (index, pair) in zip(partial, expected).enumerated() where pair.0 != pair.1 {
            return "the bytes after the last complete event do not begin the next one (byte \(index) of the partial line differs)"
        }
        // A tear leaves the start of a JSON object; damage that still inflates (a flipped bit
        // near a member's end) leaves bytes no JSON text has there.
        if let problem = JSONPrefix.problem(partial) {
            return "the partial line is not the start of a JSON object: at its byte \(problem.offset), JSON expects \(problem.message)"
        }
        // A version 3 line but a member's first carries no `prev`: the envelope up to `step` is
        // all a tear can be held to.
        guard version == "1" || version == "2" || isFirstInMember else { return nil }
        let marker = Array("\"prev\":\"".utf8)
        let bytes = Array(partial)
        guard let lastHash = lastHash ?? (version == "3" || version == "4" ? ContentHash.genesis : nil),
            let start = bytes.indices.first(where: { bytes[$0...].starts(with: marker) })
        else { return nil }
        let written = bytes[(start + marker.count)...].prefix(64).prefix { $0 != UInt8(ascii: "\"") }
        let hash = Array(lastHash.utf8)
        guard hash.starts(with: written) else {
            let at = zip(written, hash).prefix { $0 == $1 }.count
            return "the partial next event's prev differs from the last complete event's hash at hex digit \(at + 1) "
                + "(\(String(decoding: written, as: UTF8.self)) is not the start of \(lastHash)): one of them was changed"
        }
        return nil
    }

    /// Checks one line; returns the event when it decodes, and every problem found. `hash`
    /// is the line's SHA-256 when a reader's helper thread computed it already.
    mutating func check(
        _ line: UnsafeRawBufferPointer, hash knownHash: String? = nil, at location: EventLocation, problems: inout [LogError]
    ) -> RecordedEvent? {
        let isFirstInMember = member?.index != location.memberIndex
        if isFirstInMember { member = (location.memberIndex, location.memberOffset, nil, nil) }
        // A line that does not decode is hashed as a version 1 line is, so that the next link
        // is checked as far as it can be.
        var hash = ""
        var linksLines = !chainsMembers
        defer {
            if linksLines {
                lastHash = hash
                isLastHashHex = true
            }
        }
        let event: Event
        do {
            event = try Event(line: line, runId: runId, previousHash: lastHash, keepsPacketText: keepsPacketText)
        } catch let error as TraceCoreError {
            if linksLines { hash = knownHash ?? ContentHash.sha256Hex(line) }
            let code: LogError.Code = error.code == .unsupportedVersion ? .unsupportedVersion : .invalidEvent
            problems.append(
                LogError(
                    code, "line \(location.line) (expected seq \(expectedSequence)) is not a valid event: \(error.message)",
                    path: path, memberOffset: location.memberOffset, sequence: expectedSequence,
                    hint: code == .unsupportedVersion ? "read it with a newer agent-eval" : nil))
            expectedSequence += 1
            return nil
        } catch {
            if linksLines { hash = knownHash ?? ContentHash.sha256Hex(line) }
            problems.append(
                LogError(
                    .invalidEvent, "line \(location.line) could not be decoded", path: path,
                    memberOffset: location.memberOffset, sequence: expectedSequence))
            expectedSequence += 1
            return nil
        }
        let lineFormat = event.version >= Event.memberChainVersion ? Event.memberChainVersion : 1
        if format == nil { format = lineFormat }
        linksLines = !chainsMembers
        if linksLines || hashesLines { hash = knownHash ?? ContentHash.sha256Hex(line) }
        if var current = member {
            current.first = current.first ?? event.sequence
            current.last = event.sequence
            member = current
        }
        if lineFormat != format {
            problems.append(
                LogError(
                    .invalidEvent,
                    "event seq \(event.sequence) is a version \(event.version) line in a log of version \(chainsMembers ? "3" : "1 and 2") lines: "
                        + "a log's lines are all version 3 (members linked), or all 1 and 2 (lines linked)",
                    path: path, memberOffset: location.memberOffset, sequence: event.sequence,
                    hint: "a log is rewritten in another version whole (agent-eval log upgrade), never line by line"))
        }

        if line.last == UInt8(ascii: "\r") {
            problems.append(
                LogError(
                    .invalidEvent, "line \(location.line) (seq \(event.sequence)) ends with a carriage return: lines end with \\n alone",
                    path: path, memberOffset: location.memberOffset, sequence: event.sequence))
        }
        // The link the chain expects is hex already, so a `prev` equal to it needs no look.
        let expectedLink = lastHash ?? ContentHash.genesis
        if let previous = event.previousHash, !(isLastHashHex && previous == expectedLink) && !ContentHash.isHex64(previous) {
            problems.append(
                LogError(
                    .invalidEvent,
                    "event seq \(event.sequence) has prev \"\(previous.prefix(70))\", which is not 64 lowercase hex digits",
                    path: path, memberOffset: location.memberOffset, sequence: event.sequence))
        }
        // Version 3: a member's first line carries the link, and no other line does.
        var carriesLink = true
        if chainsMembers && lineFormat == format {
            if isFirstInMember && event.previousHash == nil {
                problems.append(
                    LogError(
                        .brokenChain,
                        "event seq \(event.sequence) begins a gzip member but carries no prev: in a version 3 log the first line of each member links to the member before",
                        path: path, memberOffset: location.memberOffset, sequence: event.sequence,
                        hint: "the log's members were rearranged (recompressed?) after it was written"))
            } else if !isFirstInMember && event.previousHash != nil {
                problems.append(
                    LogError(
                        .brokenChain,
                        "event seq \(event.sequence) carries prev but is not the first line of its gzip member: in a version 3 log only a member's first line does (a version 3 log recompressed as one member, by zcat | gzip for one, reads so)",
                        path: path, memberOffset: location.memberOffset, sequence: event.sequence,
                        hint: "the log's members were rearranged (recompressed?) after it was written"))
            }
            carriesLink = isFirstInMember && event.previousHash != nil
        }
        if event.sequence == 0, !event.payload.isStart {
            problems.append(
                LogError(
                    .invalidEvent, "the first event must be run_started (or pipeline_started), but seq 0 is \(event.kind)", path: path,
                    memberOffset: location.memberOffset, sequence: 0))
        }
        if let lastStep, event.step < lastStep {
            problems.append(
                LogError(
                    .invalidEvent,
                    "event seq \(event.sequence) goes back to step \(event.step) after step \(lastStep): steps never decrease",
                    path: path, memberOffset: location.memberOffset, sequence: event.sequence))
        }
        lastStep = max(lastStep ?? event.step, event.step)
        if let runId, runId != event.runId {
            problems.append(
                LogError(
                    .runMismatch, "event seq \(event.sequence) belongs to run \"\(event.runId)\", but this log is run \"\(runId)\"",
                    path: path, memberOffset: location.memberOffset, sequence: event.sequence))
        }
        if runId == nil { runId = event.runId }

        var linkIsComparable = true
        if isResynchronizing {
            isResynchronizing = false
            linkIsComparable = false
        } else if event.sequence < expectedSequence {
            problems.append(
                LogError(
                    .sequenceRepeat,
                    "event seq \(event.sequence) appears again where seq \(expectedSequence) was expected: an event is duplicated or the log was spliced",
                    path: path, memberOffset: location.memberOffset, sequence: event.sequence))
            linkIsComparable = false
        } else if event.sequence > expectedSequence {
            let missing =
                event.sequence == expectedSequence + 1
                ? "seq \(expectedSequence) is missing" : "seq \(expectedSequence) to \(event.sequence - 1) are missing"
            problems.append(
                LogError(
                    .sequenceGap, "the sequence jumps to \(event.sequence): \(missing) (removed or lost)",
                    path: path, memberOffset: location.memberOffset, sequence: expectedSequence))
            linkIsComparable = false
        }

        if linkIsComparable && carriesLink, let previous = event.previousHash {
            if previous != expectedLink {
                if event.sequence == 0 {
                    problems.append(
                        LogError(
                            .brokenChain, "event seq 0 must carry 64 zeros as prev; it has \(previous.prefix(16))…",
                            path: path, memberOffset: location.memberOffset, sequence: 0))
                } else if chainsMembers {
                    let covered = chainedMember.flatMap { chained in chained.first.map { ($0, chained.last ?? $0) } }
                    let range = covered.map { $0.0 == $0.1 ? "seq \($0.0)" : "seq \($0.0) to \($0.1)" } ?? "the events before it"
                    problems.append(
                        LogError(
                            .brokenChain,
                            "the hash chain breaks between gzip members before seq \(event.sequence): the member holding \(range) hashes to \(expectedLink.prefix(16))…, but seq \(event.sequence), which begins the next member, links to \(previous.prefix(16))…; an event of \(range) was changed after it was written (or seq \(event.sequence)'s prev was)",
                            path: path, memberOffset: chainedMember?.offset ?? location.memberOffset,
                            sequence: covered?.0 ?? event.sequence - 1))
                } else {
                    problems.append(
                        LogError(
                            .brokenChain,
                            "the hash chain breaks between seq \(event.sequence - 1) and seq \(event.sequence): seq \(event.sequence - 1) hashes to \(expectedLink.prefix(16))…, but seq \(event.sequence) links to \(previous.prefix(16))…; seq \(event.sequence - 1) was changed after it was written (or seq \(event.sequence)'s prev was)",
                            path: path, memberOffset: location.memberOffset, sequence: event.sequence - 1))
                }
            }
        }
        // Events lost or repeated may include a delta's base: the next delta is not held
        // against a packet the gap hid (the gap is the problem reported).
        if !linkIsComparable { trustsFirstDelta = true }
        if case .contextBuilt(let packet) = event.payload { checkContextPacket(packet, of: event, at: location, problems: &problems) }
        expectedSequence = max(expectedSequence, event.sequence + 1)
        return RecordedEvent(event: event, location: location, hash: hash)
    }

    /// A delta packet must build on the previous packet and copy only what that packet's lists
    /// hold; every packet's list sizes become the next delta's base.
    private mutating func checkContextPacket(
        _ packet: ContextBuilt, of event: Event, at location: EventLocation, problems: inout [LogError]
    ) {
        guard let delta = packet.delta else {
            contextShape = ContextShape(sequence: event.sequence, of: packet)
            return
        }
        let base: ContextShape
        if let contextShape, contextShape.sequence == delta.baseSequence {
            base = contextShape
        } else if trustsFirstDelta {
            base = ContextShape.unknown(at: delta.baseSequence)
        } else {
            let found = contextShape.map { "the packet before it is seq \($0.sequence)" } ?? "no context_built comes before it"
            problems.append(
                LogError(
                    .invalidEvent,
                    "event seq \(event.sequence) (context_built) is a delta on seq \(delta.baseSequence), but \(found): a delta packet builds on the log's previous context_built",
                    path: path, memberOffset: location.memberOffset, sequence: event.sequence))
            contextShape = ContextShape.unknown(at: event.sequence)
            return
        }
        trustsFirstDelta = false
        do {
            contextShape = try delta.shape(over: base, at: event.sequence)
        } catch let error as TraceCoreError {
            problems.append(
                LogError(
                    .invalidEvent, "event seq \(event.sequence) (context_built) is not a valid delta: \(error.message)", path: path,
                    memberOffset: location.memberOffset, sequence: event.sequence))
            // One bad delta is one problem: the next delta builds on this one, whatever it held.
            contextShape = ContextShape.unknown(at: event.sequence)
        } catch {
            contextShape = ContextShape.unknown(at: event.sequence)
        }
    }
}

extension EventChecker {
    /// Checks every complete line of one scanned member in order, calling `body` with each line,
    /// its event (nil for a line that is none; `body` may move it out) and the problems so far;
    /// then, in a version 3 log, takes the member's hash as the next member's link. Returns the bytes after the
    /// last complete line (a partial line, or a line a member split). When `body` returns
    /// false, the member's other lines are passed over: counted, not decoded (their bytes are
    /// in the member's hash, which the next member's link checks).
    mutating func checkLines(
        of scanned: ScannedMember, lineNumber: inout Int, problems: inout [LogError],
        _ body: (UnsafeRawBufferPointer, inout RecordedEvent?, inout [LogError]) throws -> Bool
    ) rethrows -> Int {
        var lineInMember = 0
        var hasher = LineHasher(content: scanned.content)
        let member = scanned.member
        var passesOver = false
        let dropped = try LineSplitter.forEachLine(in: scanned.content) { line in
            if passesOver {
                lineInMember += 1
                lineNumber += 1
                expectedSequence += 1
                self.member?.last = expectedSequence - 1
                // A packet passed over may be the next delta's base: that delta is taken as it is.
                contextShape = nil
                trustsFirstDelta = true
                return
            }
            // A version 3 log's lines are hashed only when asked; the first line of a log is,
            // until it says which version the log is.
            let hash = scanned.lineHashes?[lineInMember] ?? (chainsMembers && !hashesLines ? nil : hasher.hash(of: line))
            lineInMember += 1
            lineNumber += 1
            let location = EventLocation(memberIndex: member.index, memberOffset: member.offset, line: lineNumber)
            // Handed over to be moved out (`take()`), not copied: a copy retained every field.
            var recorded = check(line, hash: hash, at: location, problems: &problems)
            passesOver = try !body(line, &recorded, &problems)
        }
        if chainsMembers && lineInMember > 0 { endMember(hash: scanned.linkHash()) }
        return dropped
    }
}
