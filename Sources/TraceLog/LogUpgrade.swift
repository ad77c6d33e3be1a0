public import TraceCore

/// Rewrites a log of an older version in the current one (docs/log-format.md §6): the same run
/// id and events — `kind`, `step`, `time_us` and `data`, context packets as a reader makes them
/// whole — in new members with new links. Only a log that proves what it holds is rewritten:
/// intact (not torn, not damaged) and every recorded state digest matching the fold, so that the
/// rewrite cannot launder an edit. The old log's signatures sign its old links and are left out;
/// the new log is signed when the options carry a signer. Without signatures to leave out, every
/// `step_ended` keeps its digest; with them, each is the digest of the new log's state (the fold
/// counts a signature as an unknown event), as a fork's copy does.
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
        // Of the version written already: nothing to do, torn or not.
        if let first = try LogReader(path: source).firstEvent()?.event,
            (first.version >= Event.memberChainVersion) == (writing.formatVersion == Event.memberChainVersion)
        {
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
        let old: (events: [RecordedEvent], summary: ReadSummary)
        do {
            old = try LogReader(path: source, options: reading).readAll()
        } catch let error as LogError where error.code == .tornTail {
            throw LogError(
                .tornTail, "\(error.message); a torn log is not upgraded", path: source,
                memberOffset: error.memberOffset, sequence: error.sequence)
        }
        guard let first = old.events.first?.event else { throw LogError.noEvent(in: source, tear: nil) }
        // A log of lines linked holds version 1 lines, and version 2 ones where it wrote deltas.
        let sourceVersion =
            first.version >= Event.memberChainVersion ? Event.memberChainVersion : (old.events.map(\.event.version).max() ?? 1)
        try checkDigests(of: old.events.map(\.event), path: source)
        let kept = old.events.map(\.event).filter { !isSignature($0) }
        let signaturesLeftOut = old.events.count - kept.count
        if signaturesLeftOut > 0, writing.signer != nil, sourceKey == nil {
            throw LogError(
                .badSignature,
                "the log is signed, and its signatures were not checked: signing the upgraded log would vouch for events no checked signature covers, so it is not upgraded",
                path: source, hint: "give the public key the log was signed with (--key KEY.pub), or upgrade it unsigned")
        }

        let writer = try LogWriter.create(at: destination, runId: first.runId, options: writing)
        var signaturesAdded = 0
        do {
            var state = RunState()
            var digester = StateDigester()
            for event in kept {
                var payload = event.payload
                // Without signatures left out the fold is the old one, and so is every digest.
                if signaturesLeftOut > 0 || writing.signer != nil, case .stepEnded = payload {
                    payload = .stepEnded(StepEnded(stateDigest: digester.digest(of: state)))
                }
                let written = try writer.append(payload, step: event.step, timeUs: event.timeUs)
                digester.track(RunState.reduce(into: &state, written))
                for signature in writer.takeSignatureEvents() {
                    signaturesAdded += 1
                    digester.track(RunState.reduce(into: &state, signature))
                }
            }
            try writer.close()
            signaturesAdded += writer.takeSignatureEvents().count
        } catch {
            try? writer.close()
            FileDescriptor.remove(destination)
            throw error
        }

        // Read back: the same events, and digests that match the new log's fold.
        let new: (events: [RecordedEvent], summary: ReadSummary)
        do {
            new = try LogReader(path: destination, options: reading).readAll()
            let rewritten = new.events.map(\.event).filter { !isSignature($0) }
            guard rewritten.count == kept.count else {
                throw LogError(
                    .writeFailed, "the upgraded log holds \(rewritten.count) events, the source \(kept.count)", path: destination)
            }
            for (was, now) in zip(kept, rewritten) where !sameEvent(was, now) {
                throw LogError(
                    .writeFailed, "event seq \(now.sequence) (\(now.kind)) of the upgraded log differs from the source's",
                    path: destination,
                    sequence: now.sequence)
            }
            try checkDigests(of: new.events.map(\.event), path: destination)
        } catch {
            FileDescriptor.remove(destination)
            throw error
        }
        return Report(
            source: source, destination: destination, sourceVersion: sourceVersion, destinationVersion: writing.formatVersion,
            eventCount: kept.count, signaturesLeftOut: signaturesLeftOut, signaturesAdded: signaturesAdded,
            sourceBytes: FileDescriptor.fileSize(source) ?? 0, destinationBytes: FileDescriptor.fileSize(destination) ?? 0,
            sourceMembers: old.summary.memberCount, destinationMembers: new.summary.memberCount)
    }

    static func isSignature(_ event: Event) -> Bool {
        if case .unknown(let kind, _) = event.payload { kind == LogSigner.kind } else { false }
    }

    /// The same event but for its links, its sequence number (signatures left out shift it) and
    /// its state digest (checked against the new log's fold instead).
    static func sameEvent(_ a: Event, _ b: Event) -> Bool {
        guard a.runId == b.runId, a.step == b.step, a.timeUs == b.timeUs, a.kind == b.kind else {
            return false
        }
        if case .stepEnded = a.payload, case .stepEnded = b.payload { return true }
        return a.payload == b.payload
    }

    /// Throws at the first `step_ended` whose digest is not the fold's: such a log is evidence
    /// of an edit (or of another fold), which a rewrite must not hide.
    static func checkDigests(of events: [Event], path: String) throws {
        if let event = StateDigester.foldChecking(events).mismatch {
            throw LogError(
                .digestMismatch,
                "its state digest at seq \(event.sequence) (step \(event.step)) does not match the state its events fold to, so it is not upgraded: a rewrite would hide the mismatch",
                path: path, sequence: event.sequence)
        }
    }
}
