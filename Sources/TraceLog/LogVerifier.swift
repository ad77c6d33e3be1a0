import TraceCore

/// Checks a whole log and lists every problem, reading on past damage where it can.
///
/// It checks each gzip member (header CRC, deflate data, CRC-32 and size of the content),
/// that members end at event boundaries, and each event (JSON, envelope version, run id,
/// dense sequence numbers, the hash chain). After a corrupt member it looks for the next
/// member header and goes on, so one flipped bit does not hide later problems.
public enum LogVerifier {
    /// Verifies the log at `path`. Throws only when the file cannot be read at all (missing,
    /// unreadable, or not gzip); damage is reported in the result.
    public static func verify(
        path: String, memberContentLimit: Int = 1 << 30, readBufferSize: Int = 256 * 1024
    ) throws -> VerificationReport {
        var scanner = MemberScanner(path: path, contentLimit: memberContentLimit, readSize: readBufferSize)
        var checker = EventChecker(path: path)
        var report = VerificationReport(path: path)
        if let pending = LogReader.pendingSeal(path) { report.problems.append(pending) }
        var offset = 0
        var index = 0
        var lineNumber = 0
        var lastCorruptProblem: Int?

        scanning: while true {
            let ending = try scanner.scan(from: offset, firstIndex: index) { member, content, isComplete in
                var summary = MemberSummary(index: member.index, offset: member.offset, length: member.length)
                summary.isComplete = isComplete
                summary.decompressedBytes = content.count
                let dropped = LineSplitter.forEachLine(in: content) { line in
                    lineNumber += 1
                    let location = EventLocation(memberIndex: member.index, memberOffset: member.offset, line: lineNumber)
                    if let recorded = checker.check(line, at: location, problems: &report.problems) {
                        report.lastEventKind = recorded.event.kind
                        summary.firstSequence = summary.firstSequence ?? recorded.event.sequence
                        summary.lastSequence = recorded.event.sequence
                    }
                    summary.eventCount += 1
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
                    let problem = checker.partialLineProblem(UnsafeRawBufferPointer(rebasing: content[(content.count - dropped)...]))
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
            switch ending {
            case .complete:
                break scanning
            case .torn:
                if let tear = report.tear {
                    report.problems.append(
                        LogError(
                            .tornTail, tear.description, path: path, memberOffset: tear.memberOffset,
                            sequence: tear.lastSequence.map { $0 + 1 } ?? 0,
                            hint: "seal the torn tail (repair) to make the file valid gzip again; no complete event is lost"))
                }
                break scanning
            case .corrupt(let member, let reason):
                let next = try scanner.nextMemberOffset(after: member.offset + 1)
                if member.index == 0 && member.offset == 0 && next == nil && reason.contains("header") {
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
        report.peakBufferBytes = scanner.peakBufferBytes
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
    public var eventCount = 0
    public var decompressedBytes = 0
    /// Every problem, in file order.
    public var problems: [LogError] = []
    /// Set when the file ends inside a member (also listed in `problems`).
    public var tear: LogTear?
    public var peakBufferBytes = 0
    /// The kind of the last event read.
    public var lastEventKind: String?

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
        return lastEventKind == "run_stopped" ? .complete : .unfinished
    }
}
