import Crypto
import Foundation
import TraceCore
public import TraceLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A derived, rebuildable index from step number to position in the log, with the state's
/// counters at each step's end and the result of each digest check: showing step N reads one
/// index record and inflates only the gzip member(s) holding that step.
///
/// The log stays the source of truth. The index lives in a cache directory (not beside the
/// log), keyed by the log's absolute path; it records the log's size and modification time and
/// is rebuilt by one full replay when it is missing, stale, or from another format version.
///
/// File format (little-endian): a 96-byte header (`AEVIDX01`, version, log size, log mtime in
/// ns, record count, record size, digests checked, digest mismatches, run id length, 3 reserved),
/// then one fixed-size record per step in log order, then the run id (UTF-8). See `Record`.
public final class StepIndex {
    public let logPath: String
    public let indexPath: String?
    public let runId: String
    public let stepCount: Int
    public let digestsChecked: Int
    public let digestMismatches: Int
    private let descriptor: Int32
    private let records: [Record]?

    static let magic = Array("AEVIDX01".utf8)
    static let version = 1
    static let headerSize = 96
    static let slots = 37
    static let recordSize = slots * 8

    /// One step's entry.
    public struct Record: Sendable, Hashable {
        public var step: Int
        public var firstSequence: Int
        public var lastSequence: Int
        /// Where to start reading: the member holding the step's first event.
        public var position: LogReader.Position
        /// The state's counters at the step's end.
        public var after: StateSummary
        /// The digest replay computed for the step's last `step_ended` (nil without one).
        public var computedDigest: String?
        public var hasProblem: Bool
        public var hasDigestMismatch: Bool
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    private init(
        logPath: String, indexPath: String?, runId: String, stepCount: Int, checked: Int, mismatches: Int, descriptor: Int32,
        records: [Record]?
    ) {
        self.logPath = logPath
        self.indexPath = indexPath
        self.runId = runId
        self.stepCount = stepCount
        self.digestsChecked = checked
        self.digestMismatches = mismatches
        self.descriptor = descriptor
        self.records = records
    }

    /// The cache directory: `$AGENT_EVAL_CACHE_DIR`, else `$XDG_CACHE_HOME/agent-eval`, else
    /// `~/.cache/agent-eval`.
    public static var defaultCacheDirectory: String {
        let environment = ProcessInfo.processInfo.environment
        if let directory = environment["AGENT_EVAL_CACHE_DIR"], !directory.isEmpty { return directory }
        if let directory = environment["XDG_CACHE_HOME"], !directory.isEmpty { return directory + "/agent-eval" }
        return NSHomeDirectory() + "/.cache/agent-eval"
    }

    /// Opens the index of `log`, building (and caching) it first when needed. `rebuilt` says
    /// whether it had to be built.
    public static func open(log: String, cacheDirectory: String? = StepIndex.defaultCacheDirectory) throws -> (
        index: StepIndex, rebuilt: Bool
    ) {
        let absolute = URL(fileURLWithPath: log).standardizedFileURL.path
        var info = stat()
        guard stat(absolute, &info) == 0 else {
            throw LogError(.unreadable, "cannot read \(log): \(String(cString: strerror(errno)))", path: log)
        }
        let size = Int(info.st_size)
        #if canImport(Darwin)
            let mtime = Int(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int(info.st_mtimespec.tv_nsec)
        #else
            let mtime = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
        #endif
        let indexPath = cacheDirectory.map { $0 + "/index/" + ContentHash.sha256Hex(Array(absolute.utf8)) + ".idx" }
        if let indexPath, let index = openExisting(indexPath, log: log, size: size, mtime: mtime) {
            return (index, false)
        }
        let built = try build(log: log)
        if let indexPath {
            // A cache that cannot be written is no error: the index is only an accelerator.
            if (try? write(built, to: indexPath, size: size, mtime: mtime)) != nil,
                let index = openExisting(indexPath, log: log, size: size, mtime: mtime)
            {
                return (index, true)
            }
        }
        let index = StepIndex(
            logPath: log, indexPath: nil, runId: built.runId, stepCount: built.records.count, checked: built.checked,
            mismatches: built.mismatches, descriptor: -1, records: built.records)
        return (index, true)
    }

    struct Built {
        var runId: String
        var records: [Record]
        var checked: Int
        var mismatches: Int
    }

    /// One full replay, remembering where every step starts.
    static func build(log: String) throws -> Built {
        var records: [Record] = []
        var member: LogReader.Position?
        var runId = ""
        let replay = try Replayer(path: log).replay { step, _ in
            var position: LogReader.Position?
            for recorded in step.events {
                let event = recorded.event
                if runId.isEmpty { runId = event.runId }
                if member?.memberIndex != recorded.location.memberIndex {
                    // Reading can only start at a member's start, with the chain as it stood there.
                    member = LogReader.Position(
                        memberOffset: recorded.location.memberOffset, memberIndex: recorded.location.memberIndex, sequence: event.sequence,
                        previousHash: event.previousHash, runId: runId)
                }
                if position == nil { position = member }
            }
            if let position {
                records.append(
                    Record(
                        step: step.step, firstSequence: step.firstSequence, lastSequence: step.lastSequence, position: position,
                        after: step.after, computedDigest: step.digests.last?.computed, hasProblem: step.hasProblem,
                        hasDigestMismatch: step.digests.contains { !$0.isMatch }))
            }
            return true
        }
        return Built(runId: runId, records: records, checked: replay.digestsChecked, mismatches: replay.digestMismatches.count)
    }

    // MARK: Reading and writing the file

    static func write(_ built: Built, to path: String, size: Int, mtime: Int) throws {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headerSize + built.records.count * recordSize + built.runId.utf8.count)
        func put(_ value: Int) { withUnsafeBytes(of: Int64(value).littleEndian) { bytes.append(contentsOf: $0) } }
        bytes.append(contentsOf: magic)
        let run = Array(built.runId.utf8)
        for value in [version, size, mtime, built.records.count, recordSize, built.checked, built.mismatches, run.count, 0, 0, 0] {
            put(value)
        }
        for record in built.records {
            let recordStart = bytes.count
            let s = record.after
            for value in [
                record.step, record.firstSequence, record.lastSequence, record.position.memberOffset, record.position.memberIndex,
                record.position.sequence,
            ] { put(value) }
            bytes.append(contentsOf: rawDigest(record.position.previousHash))
            for value in [
                s.eventCount, s.step, s.stepsCompleted, s.contextPackets, s.decisions, s.invalidDecisions, s.calls, s.executedCalls,
                s.deniedCalls, s.awaitingApproval, s.toolAttempts, s.failedAttempts, s.inputTokens, s.outputTokens, s.costMicroUSD,
                s.modelLatencyUs, s.toolTimeUs, s.contents, s.anomalies, s.resumes,
                s.stopReason.map { StopReason.allCases.firstIndex(of: $0) ?? -1 } ?? -1,
                s.limit.map { LimitKind.allCases.firstIndex(of: $0) ?? -1 } ?? -1,
            ] { put(value) }
            put((record.hasProblem ? 1 : 0) | (record.hasDigestMismatch ? 2 : 0) | (record.computedDigest != nil ? 4 : 0))
            bytes.append(contentsOf: record.computedDigest.map(rawDigest) ?? [UInt8](repeating: 0, count: 32))
            precondition(bytes.count - recordStart == recordSize, "an index record is \(recordSize) bytes")
        }
        bytes.append(contentsOf: run)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        // Write aside and rename, so a reader never sees half an index.
        let temporary = path + ".\(getpid()).tmp"
        try Data(bytes).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw LogError(.writeFailed, "cannot write the step index \(path)", path: path)
        }
    }

    static func openExisting(_ path: String, log: String, size: Int, mtime: Int) -> StepIndex? {
        let descriptor = openFile(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var header = [UInt8](repeating: 0, count: headerSize)
        let valid = header.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, headerSize, 0) } == headerSize
        func value(_ slot: Int) -> Int { Self.int(header, at: 8 + slot * 8) }
        guard valid, Array(header[0..<8]) == magic, value(0) == version, value(1) == size, value(2) == mtime, value(4) == recordSize
        else {
            close(descriptor)
            return nil
        }
        let count = value(3)
        var run = [UInt8](repeating: 0, count: value(7))
        let runRead = run.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(headerSize + count * recordSize)) }
        guard runRead == run.count else {
            close(descriptor)
            return nil
        }
        return StepIndex(
            logPath: log, indexPath: path, runId: String(decoding: run, as: UTF8.self), stepCount: count, checked: value(5),
            mismatches: value(6), descriptor: descriptor, records: nil)
    }

    /// The record at `position` (0-based, in log order).
    public func record(at position: Int) -> Record? {
        guard position >= 0, position < stepCount else { return nil }
        if let records { return records[position] }
        var bytes = [UInt8](repeating: 0, count: Self.recordSize)
        let offset = off_t(Self.headerSize + position * Self.recordSize)
        guard bytes.withUnsafeMutableBytes({ pread(descriptor, $0.baseAddress, Self.recordSize, offset) }) == Self.recordSize else {
            return nil
        }
        func slot(_ index: Int) -> Int { Self.int(bytes, at: index * 8) }
        var summary = StateSummary()
        let base = 10
        summary.eventCount = slot(base)
        summary.step = slot(base + 1)
        summary.stepsCompleted = slot(base + 2)
        summary.contextPackets = slot(base + 3)
        summary.decisions = slot(base + 4)
        summary.invalidDecisions = slot(base + 5)
        summary.calls = slot(base + 6)
        summary.executedCalls = slot(base + 7)
        summary.deniedCalls = slot(base + 8)
        summary.awaitingApproval = slot(base + 9)
        summary.toolAttempts = slot(base + 10)
        summary.failedAttempts = slot(base + 11)
        summary.inputTokens = slot(base + 12)
        summary.outputTokens = slot(base + 13)
        summary.costMicroUSD = slot(base + 14)
        summary.modelLatencyUs = slot(base + 15)
        summary.toolTimeUs = slot(base + 16)
        summary.contents = slot(base + 17)
        summary.anomalies = slot(base + 18)
        summary.resumes = slot(base + 19)
        let stop = slot(base + 20)
        summary.stopReason = StopReason.allCases.indices.contains(stop) ? StopReason.allCases[stop] : nil
        let limit = slot(base + 21)
        summary.limit = LimitKind.allCases.indices.contains(limit) ? LimitKind.allCases[limit] : nil
        let flags = slot(base + 22)
        return Record(
            step: slot(0), firstSequence: slot(1), lastSequence: slot(2),
            position: LogReader.Position(
                memberOffset: slot(3), memberIndex: slot(4), sequence: slot(5), previousHash: ContentHash.hex(bytes[48..<80]), runId: runId),
            after: summary,
            computedDigest: flags & 4 != 0 ? "sha256:" + ContentHash.hex(bytes[(base + 23) * 8..<(base + 23) * 8 + 32]) : nil,
            hasProblem: flags & 1 != 0, hasDigestMismatch: flags & 2 != 0)
    }

    /// The position of `step` in log order, by binary search (steps never go down in a log
    /// the runtime wrote; a log whose steps do is searched linearly).
    public func position(ofStep step: Int) -> Int? {
        var low = 0
        var high = stepCount
        while low < high {
            let middle = (low + high) / 2
            guard let record = record(at: middle) else { return nil }
            if record.step == step { return middle }
            if record.step < step { low = middle + 1 } else { high = middle }
        }
        return (0..<stepCount).first { record(at: $0)?.step == step }
    }

    /// Step `step`, read from the log by way of the index: only its member(s) are inflated.
    public func replayStep(_ step: Int) throws -> ReplayStep? {
        guard let index = position(ofStep: step), let record = record(at: index) else { return nil }
        let before = index > 0 ? (self.record(at: index - 1)?.after ?? StateSummary()) : StateSummary()
        var events: [RecordedEvent] = []
        try LogReader(path: logPath).forEachEvent(from: record.position) { recorded in
            if recorded.event.sequence > record.lastSequence { return false }
            if recorded.event.sequence >= record.firstSequence { events.append(recorded) }
            return true
        }
        var digests: [DigestCheck] = []
        var problems: [StepProblem] = []
        for recorded in events {
            problems.append(contentsOf: StepProblem.problems(of: recorded.event))
            if case .stepEnded(let ended) = recorded.event.payload, let computed = record.computedDigest {
                let check = DigestCheck(sequence: recorded.event.sequence, recorded: ended.stateDigest, computed: computed)
                digests.append(check)
                if !check.isMatch {
                    problems.append(
                        StepProblem(
                            kind: .digestMismatch, sequence: check.sequence,
                            message: "the recorded state digest differs from the rebuilt state's"))
                }
            }
        }
        if record.after.anomalies > before.anomalies {
            problems.append(
                StepProblem(
                    kind: .anomaly, sequence: record.firstSequence,
                    message: "\(record.after.anomalies - before.anomalies) anomalies (see the full replay)"))
        }
        return ReplayStep(step: record.step, events: events, before: before, after: record.after, digests: digests, problems: problems)
    }

    /// The first step after `step` (in log order) that has a problem.
    public func nextProblem(after step: Int) -> Int? {
        guard let start = position(ofStep: step) else { return nil }
        return ((start + 1)..<stepCount).first { record(at: $0)?.hasProblem == true }.flatMap { record(at: $0)?.step }
    }

    // MARK: Bytes

    static func int(_ bytes: [UInt8], at offset: Int) -> Int {
        var value: Int64 = 0
        withUnsafeMutableBytes(of: &value) { target in
            for index in 0..<8 { target[index] = bytes[offset + index] }
        }
        return Int(Int64(littleEndian: value))
    }

    /// A hash's 32 bytes (zeros for anything that is not one: a record stays fixed-size).
    static func rawDigest(_ text: String) -> [UInt8] {
        guard let bytes = ContentHash.bytes(hex: text), bytes.count == 32 else { return [UInt8](repeating: 0, count: 32) }
        return bytes
    }
}

#if canImport(Glibc)
    private func openFile(_ path: String, _ flags: Int32) -> Int32 { Glibc.open(path, flags) }
#elseif canImport(Darwin)
    private func openFile(_ path: String, _ flags: Int32) -> Int32 { Darwin.open(path, flags) }
#endif
