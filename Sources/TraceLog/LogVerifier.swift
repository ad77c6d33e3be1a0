import TraceCore

/// Checks a whole log and lists every problem, reading on past damage where it can.
///
/// It checks each gzip member (header CRC, deflate data, CRC-32 and size of the content),
/// that members end at event boundaries, and each event (JSON, envelope version, run id,
/// dense sequence numbers, the hash chain), and every state digest the log records against the
/// state its events before it fold to (`RecordedDigests`: an event edited with the chain
/// computed again keeps the chain and breaks a digest; listed apart, `digestMismatches`, as the
/// conformance kit lists them). After a corrupt member it looks for the next member header and
/// goes on, so one flipped bit does not hide later problems (the digests are checked up to the
/// first problem: past a gap the fold is not the run's).
public enum LogVerifier {
    /// Verifies the log at `path`. Throws only when the file cannot be read at all (missing,
    /// unreadable, not gzip, or empty: 0 bytes) or not past a member over `memberContentLimit`
    /// (`eventTooLarge`, naming the member and its first event: the log was not verified);
    /// damage is reported in the result, and so is a log from which no event can be read
    /// (`noEvent`): it holds no run.
    ///
    /// With `key`, the log must be signed by it (docs/log-format.md, "Signed logs"): every
    /// `log_signed` event must check, and the last one must be final and cover the last event,
    /// so that any edit, reordering, cut or extension is reported (`bad_signature`).
    ///
    /// A file of `readsAheadFromBytes` or more is read, inflated and hashed a few members ahead
    /// on a helper thread (`LogReader.Options.readsAheadFromBytes`): the same report, sooner.
    public static func verify(
        path: String, key: LogVerificationKey? = nil, memberContentLimit: Int = LogReadLimit.memberBytes, readBufferSize: Int = 256 * 1024,
        readsAheadFromBytes: Int = LogReader.Options().readsAheadFromBytes
    ) throws -> VerificationReport {
        var scanner = MemberScanner(path: path, contentLimit: memberContentLimit, readSize: readBufferSize)
        var checker = EventChecker(path: path)
        var report = VerificationReport(path: path)
        if let notice = LogRepair.sideFileNotice(path) {
            // A seal to finish is a problem (the log may lack events); a stray side file is not.
            if notice.code == .pendingSeal { report.problems.append(notice) } else { report.warnings.append(notice) }
        }
        var offset = 0
        var index = 0
        var lineNumber = 0
        var lastCorruptProblem: Int?
        var signatures = SignatureChecks()
        var digests = RecordedDigests()

        let aheadOnAThread = MemberScanner.readsAhead(path, threshold: readsAheadFromBytes)
        scanning: while true {
            let ending: MemberScanner.Ending
            do {
                ending = try scanner.scan(from: offset, firstIndex: index, aheadOnAThread: aheadOnAThread) { scanned in
                    let (member, content, isComplete) = (scanned.member, scanned.content, scanned.isComplete)
                    var summary = MemberSummary(index: member.index, offset: member.offset, length: member.length)
                    summary.isComplete = isComplete
                    summary.decompressedBytes = content.count
                    let dropped = checker.checkLines(of: scanned, lineNumber: &lineNumber, problems: &report.problems) {
                        line, checked, problems in
                        if let recorded = checked {
                            if recorded.event.kind == LogSigner.kind {
                                // What a version 3 signature covers: the member's lines before it.
                                var head = recorded.event.previousHash
                                if head == nil, recorded.event.version >= Event.memberChainVersion, let start = content.baseAddress,
                                    let lineStart = line.baseAddress
                                {
                                    head = ContentHash.sha256Hex(
                                        UnsafeRawBufferPointer(rebasing: content[..<start.distance(to: lineStart)]))
                                }
                                signatures.check(
                                    recorded.event, head: head, key: key, path: path, memberOffset: member.offset, problems: &problems)
                            } else {
                                report.lastEventKind = recorded.event.kind
                            }
                            if problems.isEmpty && !digests.add(recorded.event) {
                                report.digestMismatches.append(recorded.event.sequence)
                            }
                            report.lastSequence = recorded.event.sequence
                            report.formatVersion = max(report.formatVersion ?? 0, recorded.event.version)
                            summary.firstSequence = summary.firstSequence ?? recorded.event.sequence
                            summary.lastSequence = recorded.event.sequence
                            // Events read: a line that is not one is a problem, not an event.
                            summary.eventCount += 1
                        }
                        return true
                    }
                    report.eventCount += summary.eventCount
                    report.decompressedBytes += content.count
                    if isComplete && dropped > 0 {
                        report.problems.append(
                            LogError(
                                .splitEvent,
                                "the gzip member ends \(dropped) bytes into an event; members must end where an event ends",
                                path: path, memberOffset: member.offset, sequence: checker.expectedSequence))
                    }
                    if !isComplete,
                        let problem = checker.partialLineProblem(
                            UnsafeRawBufferPointer(rebasing: content[(content.count - dropped)...]),
                            isFirstInMember: summary.eventCount == 0)
                    {
                        report.problems.append(
                            LogError(
                                .corruptMember,
                                "the log ends inside the gzip member at byte \(member.offset), and it is damaged, not cut off: \(problem)",
                                path: path, memberOffset: member.offset, sequence: checker.expectedSequence,
                                hint: "the log cannot be repaired in place; the events before the damage are still readable"))
                        summary.isCorrupt = true
                    } else if !isComplete {
                        report.tear = LogTear(
                            memberOffset: member.offset, fileSize: member.offset + member.length,
                            eventsInTornMember: summary.eventCount, droppedBytes: dropped,
                            lastSequence: summary.lastSequence ?? report.members.last?.lastSequence)
                    }
                    report.members.append(summary)
                    lastCorruptProblem = nil
                }
            } catch var tooLarge as LogError where tooLarge.code == .eventTooLarge && tooLarge.sequence == nil {
                // Not damage this reader saw, but a member it would not hold: the verification
                // could not be done, and says where it stopped.
                // (After a damaged stretch the next member's first event is not known.)
                if lastCorruptProblem == nil && !checker.isResynchronizing { tooLarge.sequence = checker.expectedSequence }
                if let first = report.problems.first {
                    // What was found before it is not lost with it.
                    let count = report.problems.count
                    tooLarge.message += "; before it, \(count) problem\(count == 1 ? " was" : "s were") found, the first: \(first)"
                }
                throw tooLarge
            }
            switch ending {
            case .complete:
                break scanning
            case .torn:
                // No bytes at all: not a log, as a file that is not gzip is not one.
                if report.tear?.fileSize == 0 && report.problems.isEmpty { throw LogError.empty(path) }
                if let tear = report.tear, report.eventCount == 0 && report.problems.isEmpty {
                    // Cut before its first event: sealing would keep nothing, so say that, not "repair".
                    report.problems.append(LogError.noEvent(in: path, tear: tear))
                } else if let tear = report.tear {
                    report.problems.append(
                        LogError(
                            .tornTail, tear.description, path: path, memberOffset: tear.memberOffset,
                            sequence: tear.lastSequence.map { $0 + 1 } ?? 0,
                            hint: "seal the torn tail (repair) to make the file valid gzip again; no complete event is lost"))
                }
                break scanning
            case .corrupt(let member, let reason):
                let next = try scanner.nextMemberOffset(after: member.offset + 1)
                if member.index == 0 && member.offset == 0 && next == nil && reason.contains("header") && !reason.contains("header flags") {
                    throw LogReader.corruption(path: path, member: member, reason: reason, nextSequence: 0)
                }
                var summary = MemberSummary(index: member.index, offset: member.offset, length: member.length)
                summary.isCorrupt = true
                if let previous = lastCorruptProblem {
                    // Still inside the same damaged stretch: widen the report, do not repeat it.
                    report.problems[previous].message =
                        "the gzip data from byte \(report.problems[previous].memberOffset ?? member.offset) is damaged (zlib: \(reason)); the events in it, from seq \(report.problems[previous].sequence ?? 0) on, are lost"
                } else {
                    report.problems.append(
                        LogError(
                            .corruptMember,
                            "the gzip member at byte \(member.offset) is damaged (zlib: \(reason)); the events in it, from seq \(checker.expectedSequence) on, are lost",
                            path: path, memberOffset: member.offset, sequence: checker.expectedSequence,
                            hint: "the log cannot be repaired in place; the events before and after the damage are still readable"))
                    lastCorruptProblem = report.problems.count - 1
                    report.members.append(summary)
                }
                guard let next else { break scanning }
                offset = next
                index = member.index + 1
                checker.isResynchronizing = true
            }
        }
        // Whole members holding no line (a log sealed before its first event) hold no run.
        if report.eventCount == 0 && report.problems.isEmpty { report.problems.append(LogError.noEvent(in: path, tear: nil)) }
        if key != nil { signatures.checkEnd(of: report, path: path, problems: &report.problems) }
        report.signatureCount = signatures.count
        report.digestCount = digests.checked
        report.peakBufferBytes = scanner.peakBufferBytes
        // Intact events that do not fit together (a second stop, a result for a call never
        // proposed): no writer of agent-eval writes them, and a case over the log could not
        // run. Said beside "intact", which is about the chain, so that it is not read as whole.
        for anomaly in digests.anomalies {
            report.warnings.append(
                LogError(
                    .anomalousRun, "the events do not fit together as a run: \(anomaly.message)", path: path,
                    sequence: anomaly.sequence,
                    hint: "the chain is intact, but no agent-eval writer writes this; `agent-eval replay` shows the run, and `run` "
                        + "refuses to grade it (eval.anomalous_run; a case may allow a reused call id, allowReusedCallIds)"))
        }
        return report
    }
}

/// One gzip member as the verifier saw it.
public struct MemberSummary: Sendable, Hashable {
    public var index: Int
    public var offset: Int
    /// Compressed length in the file.
    public var length: Int
    public var decompressedBytes = 0
    /// Lines that were events (a line that is not one is a problem, not counted).
    public var eventCount = 0
    public var firstSequence: Int?
    public var lastSequence: Int?
    public var isComplete = true
    public var isCorrupt = false
}

/// The verifier's findings.
public struct VerificationReport: Sendable, Hashable {
    public var path: String
    public var members: [MemberSummary] = []
    /// Events read, in all members (as the reference reader counts them).
    public var eventCount = 0
    public var decompressedBytes = 0
    /// Every problem, in file order.
    public var problems: [LogError] = []
    /// What is wrong beside the log but not with it: a stray `<log>.seal` side file, which
    /// readers ignore (`LogRepair.straySeal(of:)`). The log is intact with warnings.
    public var warnings: [LogError] = []
    /// Set when the file ends inside a member (also listed in `problems`).
    public var tear: LogTear?
    public var peakBufferBytes = 0
    /// The kind of the last event read (signature events aside).
    public var lastEventKind: String?
    /// The sequence number of the last event read.
    public var lastSequence: Int?
    /// `log_signed` events read.
    public var signatureCount = 0
    /// State digests checked (up to the first problem).
    public var digestCount = 0
    /// The sequence numbers of the events whose recorded state digest is not the digest of the
    /// state the events before them fold to: the chain holds, and the record does not (an event
    /// edited with the chain computed again). Not among `problems`, which say what is wrong
    /// with the file as a chain of events; `log verify` fails on either.
    public var digestMismatches: [Int] = []
    /// The log's format version (docs/log-format.md §6): the highest envelope version of its
    /// events — 3 for a log whose members link, 1 or 2 (with delta packets) for one whose lines
    /// do. Nil when no event was read.
    public var formatVersion: Int?

    public init(path: String) {
        self.path = path
    }

    /// No problem of any kind.
    public var isIntact: Bool { problems.isEmpty }

    /// How the log ends.
    public enum Ending: String, Sendable {
        /// Intact, every member closed, and the last event is `run_stopped`.
        case complete
        /// Intact and every member closed, but the last event is not `run_stopped`: a run
        /// still going, or one whose writer stopped between events.
        case unfinished
        /// The file ends inside a gzip member (a write was cut off).
        case torn
        /// Damage other than a torn tail.
        case damaged
    }

    public var ending: Ending {
        if tear != nil { return .torn }
        if !isIntact { return .damaged }
        return lastEventKind == "run_stopped" || lastEventKind == "pipeline_stopped" ? .complete : .unfinished
    }
}

/// What the verifier checks of `log_signed` events as it reads them, and of the log's end.
struct SignatureChecks {
    var count = 0
    var lastCovered: Int?
    var lastIsFinal = false

    /// `head` is what the signature must cover: the event's `prev` (version 1), or the hash of
    /// its member's lines before it (version 3).
    mutating func check(
        _ event: Event, head expectedHead: String?, key: LogVerificationKey?, path: String, memberOffset: Int, problems: inout [LogError]
    ) {
        count += 1
        guard let key else { return }
        guard case .unknown(_, let data) = event.payload, case .string(let keyId)? = data["key_id"],
            case .int(let covered)? = data["covers_seq"], case .string(let head)? = data["head"], case .bool(let isFinal)? = data["final"],
            case .string(let encoded)? = data["signature"], let signature = Base64.decode(encoded)
        else {
            problems.append(
                LogError(
                    .badSignature, "the signature event seq \(event.sequence) is malformed", path: path, memberOffset: memberOffset,
                    sequence: event.sequence))
            return
        }
        let problem: String? =
            if keyId != key.keyId {
                "it was made with another key: the log's key id is \(keyId), the key given is \(key.keyId)"
            } else if covered != event.sequence - 1 || head != expectedHead {
                "it does not cover the event before it"
            } else if !key.isValid(signature: signature, runId: event.runId, sequence: covered, head: head, isFinal: isFinal) {
                "it does not check: the events it covers were changed"
            } else {
                nil
            }
        if let problem {
            problems.append(
                LogError(
                    .badSignature, "the signature at seq \(event.sequence) is not valid: \(problem)", path: path,
                    memberOffset: memberOffset,
                    sequence: event.sequence))
        }
        lastCovered = event.sequence
        lastIsFinal = isFinal
    }

    func checkEnd(of report: VerificationReport, path: String, problems: inout [LogError]) {
        guard let lastCovered else {
            problems.append(LogError(.badSignature, "the log is not signed", path: path, hint: "sign runs with exec --sign-key"))
            return
        }
        if let last = report.lastSequence, last > lastCovered {
            problems.append(
                LogError(
                    .badSignature, "events seq \(lastCovered + 1) to \(last) come after the last signature: the log was extended",
                    path: path, sequence: lastCovered + 1))
        } else if !lastIsFinal {
            problems.append(
                LogError(
                    .badSignature,
                    "the log ends with a member signature, not the final one after a stop: its end (after seq \(lastCovered)) was cut off",
                    path: path, sequence: lastCovered))
        }
    }
}
