import Crypto
public import TraceCore

/// Rewrites a log of an older version in the current one (docs/log-format.md §6): the same run
/// id and events — `kind`, `step`, `time_us` and `data`, context packets as a reader makes them
/// whole — in new members with new links. Only a log that proves what it holds is rewritten:
/// intact (not torn, not damaged) and every recorded state digest matching the fold, so that the
/// rewrite cannot launder an edit. The old log's signatures sign its old links and are left out;
/// the new log is signed when the options carry a signer. Every `step_ended` carries the digest
/// of the new log's state: the source's, but where signatures were left out or added (the fold
/// counts a signature as an unknown event), as a fork's copy does. One pass, in the memory of the
/// state alone (a log of any length), then a second that reads the new log back.
///
/// ```swift
/// let report = try LogUpgrade.upgrade(from: "old.jsonl.gz", to: "new.jsonl.gz")
/// ```
public enum LogUpgrade {
    /// What an upgrade did.
    public struct Report: Sendable, Hashable {
        public var source: String
        public var destination: String
        /// The source's version: 3, or the highest of its lines' (1, or 2 with delta packets).
        public var sourceVersion: Int
        public var destinationVersion: Int
        /// Events written (signature events aside), the same as the source's.
        public var eventCount: Int
        /// Signature events of the source left out.
        public var signaturesLeftOut: Int
        /// Signature events the new log's signer added.
        public var signaturesAdded: Int
        public var sourceBytes: Int
        public var destinationBytes: Int
        public var sourceMembers: Int
        public var destinationMembers: Int
    }

    /// Rewrites the log at `source` into a new file at `destination` (which must not exist) as
    /// `writing.formatVersion`. Throws when the source is torn, damaged, holds no event, has a
    /// state digest its events do not fold to, or is of that version already — leaving no file at
    /// `destination`. After writing, reads the new log back and checks that it holds the same
    /// events and that its digests match its fold.
    ///
    /// With `sourceKey`, the source must verify with it (every signature, and the final one
    /// after its stop). A signed source is signed anew (`writing.signer`) only so: a new
    /// signature would otherwise vouch for what no old one was checked to cover.
    public static func upgrade(
        from source: String, to destination: String, writing: LogWriter.Options = LogWriter.Options(),
        sourceKey: LogVerificationKey? = nil
    ) throws -> Report {
        guard let first = try LogReader(path: source).firstEvent()?.event else { throw LogError.noEvent(in: source, tear: nil) }
        // Of the version written already: nothing to do, torn or not. Said only of a log that
        // reads through (a damaged one is reported as such, not as one to leave alone).
        if (first.version >= Event.memberChainVersion) == (writing.formatVersion == Event.memberChainVersion) {
            _ = try LogReader(path: source).forEachEvent { _ in }
            throw LogError(
                .alreadyUpgraded, "the log is version \(writing.formatVersion) already; there is nothing to upgrade", path: source)
        }
        if let sourceKey {
            let report = try LogVerifier.verify(path: source, key: sourceKey)
            if let problem = report.problems.first {
                var refusal = problem
                refusal.message += "; the log is not upgraded"
                throw refusal
            }
        }
        var reading = LogReader.Options(resolvesContextPackets: true)
        reading.isStrict = true

        // One pass, in the memory of the state alone: each event is checked (its digest against
        // the source's fold), written, and counted into a fingerprint of what was written.
        // A faithful copy: its events are the source's, so nothing is redacted on the way (a
        // changed event would no longer match the digests the source recorded).
        var writing = writing
        writing.redactor = nil
        let writer = try LogWriter.create(at: destination, runId: first.runId, options: writing)
        var sourceFold = CheckedFold()
        var newFold = CheckedFold()
        var written = EventFingerprint()
        var lineVersion = 1
        var signaturesLeftOut = 0
        var signaturesAdded = 0
        let sourceSummary: ReadSummary
        do {
            sourceSummary = try LogReader(path: source, options: reading).forEachLine { line, recorded in
                let event = recorded.event
                guard sourceFold.add(event) else { throw digestMismatch(at: event, path: source) }
                lineVersion = max(lineVersion, event.version)
                if isSignature(event) {
                    signaturesLeftOut += 1
                    if writing.signer != nil && sourceKey == nil {
                        throw LogError(
                            .badSignature,
                            "the log is signed, and its signatures were not checked: signing the upgraded log would vouch for events no checked signature covers, so it is not upgraded",
                            path: source, hint: "give the public key the log was signed with (--key KEY.pub), or upgrade it unsigned")
                    }
                    return
                }
                // Written from what this build decodes: a member it does not know would be lost.
                if let member = try droppedMember(of: recorded, line: line) {
                    throw LogError(
                        .unknownMembers,
                        "event seq \(event.sequence) (\(event.kind)) has data member \(member), which this agent-eval does not know: "
                            + "the upgrade writes each event from what it reads, so it would drop it, and the log is not upgraded",
                        path: source, sequence: event.sequence, hint: "upgrade it with the agent-eval that wrote it, or a newer one")
                }
                // Each step end carries the digest of the new log's fold: the source's, but for
                // the signatures left out or added, which the fold counts.
                var payload = event.payload
                if case .stepEnded = payload { payload = .stepEnded(StepEnded(stateDigest: newFold.digest())) }
                _ = newFold.add(try writer.append(payload, step: event.step, timeUs: event.timeUs))
                for signature in writer.takeSignatureEvents() {
                    signaturesAdded += 1
                    _ = newFold.add(signature)
                }
                written.add(event)
            }
            try writer.close()
            signaturesAdded += writer.takeSignatureEvents().count
        } catch {
            try? writer.close()
            FileDescriptor.remove(destination)
            if let error = error as? LogError, error.code == .tornTail {
                throw LogError(
                    .tornTail, "\(error.message); a torn log is not upgraded", path: source, memberOffset: error.memberOffset,
                    sequence: error.sequence)
            }
            throw error
        }

        // Read back: the same events, and digests that match the new log's own fold.
        let newSummary: ReadSummary
        do {
            var readBack = EventFingerprint()
            var fold = CheckedFold()
            newSummary = try LogReader(path: destination, options: reading).forEachEvent { recorded in
                guard fold.add(recorded.event) else { throw digestMismatch(at: recorded.event, path: destination) }
                if !isSignature(recorded.event) { readBack.add(recorded.event) }
            }
            guard readBack == written else {
                throw LogError(
                    .writeFailed,
                    "the upgraded log does not hold the source's events (\(readBack.count) read back, \(written.count) written), so it is removed",
                    path: destination, hint: "report this: the writer and the reader disagree")
            }
        } catch {
            FileDescriptor.remove(destination)
            throw error
        }
        // A log whose lines link holds version 1 lines, and version 2 ones where it wrote deltas.
        return Report(
            source: source, destination: destination, sourceVersion: lineVersion, destinationVersion: writing.formatVersion,
            eventCount: written.count, signaturesLeftOut: signaturesLeftOut, signaturesAdded: signaturesAdded,
            sourceBytes: FileDescriptor.fileSize(source) ?? 0, destinationBytes: FileDescriptor.fileSize(destination) ?? 0,
            sourceMembers: sourceSummary.memberCount, destinationMembers: newSummary.memberCount)
    }

    /// The events a rewrite keeps, as a count and a SHA-256 over each one's kind, step, time and
    /// data (a step end's digest aside: it is the new log's), with packets as made whole.
    struct EventFingerprint: Equatable {
        private(set) var count = 0
        private var hasher = SHA256()
        private var line = JSONWriter(capacity: 4096)

        mutating func add(_ event: Event) {
            line.removeAll()
            line.writeRaw("[")
            line.write(event.kind)
            line.writeRaw(",")
            line.write(event.step)
            line.writeRaw(",")
            line.write(event.timeUs)
            if case .stepEnded = event.payload {
            } else {
                line.writeRaw(",")
                event.payload.writeData(to: &line)
            }
            line.writeRaw("]\n")
            line.withUnsafeBytes { hasher.update(bufferPointer: $0) }
            count += 1
        }

        static func == (a: EventFingerprint, b: EventFingerprint) -> Bool {
            a.count == b.count && Array(a.hasher.finalize()) == Array(b.hasher.finalize())
        }
    }

    /// The first member of the line's `data` (a dotted path, `decision.confidence`) that the
    /// event as decoded does not write back, or nil: what a rewrite would lose. Only members are
    /// compared, not values (a default a newer build writes, `"limits":{}`, is no loss), and a
    /// member that is null, empty or false is no loss either; a packet written as a delta is
    /// compared as the delta it was.
    static func droppedMember(of recorded: RecordedEvent, line: UnsafeRawBufferPointer) throws -> String? {
        guard case .object(let object) = try JSONParser.parse(line), let data = object["data"] else { return nil }
        // A member of the envelope a newer writer added: no event this build writes holds it.
        if let member = object.members.first(where: { !Event.envelopeKeys.contains($0.key) }) { return member.key }
        let payload = recorded.wasWrittenAsDelta ? try Event(line: line).payload : recorded.event.payload
        var writer = JSONWriter(capacity: line.count)
        payload.writeData(to: &writer)
        return firstMissing(in: data, from: try JSONParser.parse(writer.bytes), at: "")
    }

    private static func firstMissing(in source: JSONValue, from kept: JSONValue, at path: String) -> String? {
        switch (source, kept) {
        case (.object(let source), .object(let kept)):
            for member in source {
                let name = path.isEmpty ? member.key : path + "." + member.key
                guard let value = kept[member.key] else {
                    // Absent, null, empty and false say the same (docs/log-format.md §4): the
                    // writer leaves such a member out, and nothing is lost.
                    if isEmpty(member.value) { continue }
                    return name
                }
                if let missing = firstMissing(in: member.value, from: value, at: name) { return missing }
            }
        case (.array(let source), .array(let kept)) where source.count == kept.count:
            for (index, (element, keptElement)) in zip(source, kept).enumerated() {
                if let missing = firstMissing(in: element, from: keptElement, at: "\(path)[\(index)]") { return missing }
            }
        default: break
        }
        return nil
    }

    private static func isEmpty(_ value: JSONValue) -> Bool {
        switch value {
        case .null, .bool(false): true
        case .array(let elements): elements.isEmpty
        case .object(let members): members.isEmpty
        default: false
        }
    }

    static func digestMismatch(at event: Event, path: String) -> LogError {
        LogError(
            .digestMismatch,
            "its state digest at seq \(event.sequence) (step \(event.step)) does not match the state its events fold to, so it is not upgraded: a rewrite would hide the mismatch",
            path: path, sequence: event.sequence)
    }

    static func isSignature(_ event: Event) -> Bool {
        if case .unknown(let kind, _) = event.payload { kind == LogSigner.kind } else { false }
    }
}
