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
/// is rebuilt by one full replay when it is missing, stale, or lacks a field this version needs.
///
/// File format (little-endian): a 72-byte header (`AEVIDX02`, then eight 64-bit integers:
/// format version, log size, log mtime in ns, record count, record size, digests checked,
/// digest mismatches, trailer size), one fixed-size record per step in log order, then a JSON
/// trailer `{"run_id", "fields": [[name, slots]...], "enums": {name: [raw values]}}`. A record
/// is the fields in the trailer's order, each `slots` 8-byte words; enumerations are stored as
/// indexes into the trailer's list of raw values. Fields are found by name, never by position,
/// so adding, removing or reordering fields (or enum cases) cannot misread an old index.
public final class StepIndex {
    public let logPath: String
    public let indexPath: String?
    public let runId: String
    public let stepCount: Int
    public let digestsChecked: Int
    public let digestMismatches: Int
    private let descriptor: Int32
    private let records: [Record]?

    static let magic = Array("AEVIDX02".utf8)
    static let version = 2
    static let headerSize = 72
    /// Where each of `Field.all` sits in this file's records (byte offsets), and their size.
    private let layout: [Int]
    private let recordSize: Int
    private let enumNames: [String: [String]]

    /// One step's entry.
    public struct Record: Sendable, Hashable {
        public var step: Int
        public var firstSequence: Int
        public var lastSequence: Int
        /// Where to start reading: the member holding the step's first event.
        public var position: LogReader.Position
        /// The member holding the last context packet written whole before the step's end: a
        /// step's delta packets are made whole by reading from there (or from `position`, if
        /// that comes first).
        public var packetPosition: LogReader.Position
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
        records: [Record]?, layout: [Int] = [], recordSize: Int = 0, enumNames: [String: [String]] = [:]
    ) {
        self.layout = layout
        self.recordSize = recordSize
        self.enumNames = enumNames
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
        guard let stamp = FileStamp(path: absolute) else {
            let reason = errno == 0 ? "it is not a file" : String(cString: strerror(errno))
            throw LogError(.unreadable, "cannot read \(log): \(reason)", path: log)
        }
        let (size, mtime) = (stamp.size, stamp.mtimeNs)
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
        var wholePacket: LogReader.Position?
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
                // Replay hands out packets made whole; a line below the delta version was whole.
                if case .contextBuilt = event.payload, event.version < Event.deltaVersion { wholePacket = member }
            }
            if let position {
                records.append(
                    Record(
                        step: step.step, firstSequence: step.firstSequence, lastSequence: step.lastSequence, position: position,
                        packetPosition: wholePacket ?? position, after: step.after, computedDigest: step.digests.last?.computed,
                        hasProblem: step.hasProblem, hasDigestMismatch: step.digests.contains { !$0.isMatch }))
            }
            return true
        }
        return Built(runId: runId, records: records, checked: replay.digestsChecked, mismatches: replay.digestMismatches.count)
    }

    // MARK: Reading and writing the file

    /// Writes the index file. `fields` and `enumNames` are the format's table; tests pass
    /// others to prove that readers find fields and enum values by name.
    static func write(
        _ built: Built, to path: String, size: Int, mtime: Int, fields: [Field] = Field.all,
        enumNames: [(key: String, value: [String])] = Field.enumNames
    ) throws {
        let recordSize = fields.reduce(0) { $0 + $1.slots * 8 }
        let names = Dictionary(uniqueKeysWithValues: enumNames.map { ($0.key, $0.value) })
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headerSize + built.records.count * recordSize + 4096)
        var trailer = ObjectBuilder()
        trailer.set("run_id", built.runId)
        trailer.set("fields", JSONValue.array(fields.map { [.string($0.name), .int($0.slots)] }))
        trailer.set("enums", JSONValue.object(JSONObject(enumNames.map { ($0.key, JSONValue.array($0.value.map { .string($0) })) })))
        let trailerBytes = JSONWriter.encode(trailer.json)
        bytes.append(contentsOf: magic)
        for value in [version, size, mtime, built.records.count, recordSize, built.checked, built.mismatches, trailerBytes.count] {
            appendInt(value, to: &bytes)
        }
        for record in built.records {
            for field in fields { field.write(record, &bytes, names) }
        }
        bytes.append(contentsOf: trailerBytes)
        let folder = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // Only into a real directory of our own: a cache folder that is a link, or another
        // user's, could point the write anywhere.
        var info = stat()
        guard lstat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid() else {
            throw LogError(.writeFailed, "the step index folder \(folder) is not a directory of this user's", path: path)
        }
        // Write aside and rename, so a reader never sees half an index. The temporary file is
        // created new (O_EXCL) and never through a link (O_NOFOLLOW): a planted file or link
        // there makes the write fail instead of overwriting what it points to.
        let temporary = path + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let descriptor = openFile(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw LogError(.writeFailed, "cannot create the step index \(temporary): \(String(cString: strerror(errno)))", path: path)
        }
        let written = bytes.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let count = Glibc_write(descriptor, base + offset, buffer.count - offset)
                if count <= 0 { return false }
                offset += count
            }
            return true
        }
        close(descriptor)
        guard written, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw LogError(.writeFailed, "cannot write the step index \(path)", path: path)
        }
    }

    /// An index file that fits this log and has every field this version reads, or nil.
    static func openExisting(_ path: String, log: String, size: Int, mtime: Int) -> StepIndex? {
        let descriptor = openFile(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var isOpen = false
        defer { if !isOpen { close(descriptor) } }
        var header = [UInt8](repeating: 0, count: headerSize)
        let valid = header.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, headerSize, 0) } == headerSize
        func value(_ slot: Int) -> Int { Self.int(header, at: 8 + slot * 8) }
        guard valid, Array(header[0..<8]) == magic, value(0) == version, value(1) == size, value(2) == mtime else { return nil }
        let (count, recordSize, trailerSize) = (value(3), value(4), value(7))
        guard count >= 0, recordSize > 0, trailerSize > 0, trailerSize < 1 << 20 else { return nil }
        var trailerBytes = [UInt8](repeating: 0, count: trailerSize)
        let trailerRead = trailerBytes.withUnsafeMutableBytes {
            pread(descriptor, $0.baseAddress, $0.count, off_t(headerSize + count * recordSize))
        }
        guard trailerRead == trailerSize, let trailer = try? JSONParser.parse(trailerBytes), case .string(let runId)? = trailer["run_id"],
            case .array(let fields)? = trailer["fields"], case .object(let enums)? = trailer["enums"]
        else { return nil }
        // Where each field sits in this file; a field this version needs and the file lacks
        // (or has at another width) means the index is from another version: rebuild it.
        var offsets: [String: (offset: Int, slots: Int)] = [:]
        var offset = 0
        for field in fields {
            guard case .array(let pair) = field, pair.count == 2, case .string(let name) = pair[0], case .int(let slots) = pair[1],
                slots > 0
            else { return nil }
            offsets[name] = (offset, slots)
            offset += slots * 8
        }
        guard offset == recordSize else { return nil }
        var layout: [Int] = []
        for field in Field.all {
            guard let found = offsets[field.name], found.slots == field.slots else { return nil }
            layout.append(found.offset)
        }
        var names: [String: [String]] = [:]
        for member in enums {
            guard case .array(let list) = member.value else { return nil }
            names[member.key] = list.compactMap { if case .string(let text) = $0 { text } else { nil } }
        }
        isOpen = true
        return StepIndex(
            logPath: log, indexPath: path, runId: runId, stepCount: count, checked: value(5), mismatches: value(6), descriptor: descriptor,
            records: nil, layout: layout, recordSize: recordSize, enumNames: names)
    }

    /// The record at `position` (0-based, in log order).
    public func record(at position: Int) -> Record? {
        guard position >= 0, position < stepCount else { return nil }
        if let records { return records[position] }
        var bytes = [UInt8](repeating: 0, count: recordSize)
        let offset = off_t(Self.headerSize + position * recordSize)
        guard bytes.withUnsafeMutableBytes({ pread(descriptor, $0.baseAddress, recordSize, offset) }) == recordSize else {
            return nil
        }
        let start = LogReader.Position(memberOffset: 0, memberIndex: 0, sequence: 0, previousHash: ContentHash.genesis, runId: runId)
        var record = Record(
            step: 0, firstSequence: 0, lastSequence: 0, position: start, packetPosition: start, after: StateSummary(),
            computedDigest: nil, hasProblem: false, hasDigestMismatch: false)
        for (field, offset) in zip(Field.all, layout) { field.read(&record, bytes, offset, enumNames) }
        return record
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
        let start = record.packetPosition.memberOffset < record.position.memberOffset ? record.packetPosition : record.position
        let reader = LogReader(path: logPath, options: LogReader.Options(resolvesContextPackets: true))
        try reader.forEachEvent(from: start) { recorded in
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

    static func appendInt(_ value: Int, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: Int64(value).littleEndian) { bytes.append(contentsOf: $0) }
    }

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

extension StepIndex {
    /// One field of an index record: its name in the file, its width in 8-byte words, and
    /// how it is written and read. `all` is the one table both directions use.
    struct Field: Sendable {
        var name: String
        var slots: Int
        var write: @Sendable (Record, inout [UInt8], [String: [String]]) -> Void
        var read: @Sendable (inout Record, [UInt8], Int, [String: [String]]) -> Void

        static func int(_ name: String, _ path: any WritableKeyPath<Record, Int> & Sendable) -> Field {
            Field(name: name, slots: 1, write: { record, bytes, _ in appendInt(record[keyPath: path], to: &bytes) }) {
                record, bytes, offset, _ in
                record[keyPath: path] = StepIndex.int(bytes, at: offset)
            }
        }

        static func flag(_ name: String, _ path: any WritableKeyPath<Record, Bool> & Sendable) -> Field {
            Field(name: name, slots: 1, write: { record, bytes, _ in appendInt(record[keyPath: path] ? 1 : 0, to: &bytes) }) {
                record, bytes, offset, _ in record[keyPath: path] = StepIndex.int(bytes, at: offset) != 0
            }
        }

        /// A `sha256:` digest as 32 raw bytes; all zeros stand for none.
        static func digest(_ name: String, _ path: any WritableKeyPath<Record, String?> & Sendable) -> Field {
            Field(name: name, slots: 4, write: { record, bytes, _ in bytes.append(contentsOf: rawDigest(record[keyPath: path] ?? "")) }) {
                record, bytes, offset, _ in
                let raw = bytes[offset..<offset + 32]
                record[keyPath: path] = raw.allSatisfy { $0 == 0 } ? nil : "sha256:" + ContentHash.hex(raw)
            }
        }

        /// Where reading can start: a member's offset, index and first `seq`, and the hash before it.
        static func position(_ prefix: String, _ path: any WritableKeyPath<Record, LogReader.Position> & Sendable) -> [Field] {
            func int(_ name: String, _ member: any WritableKeyPath<LogReader.Position, Int> & Sendable) -> Field {
                Field(
                    name: prefix + name, slots: 1,
                    write: { record, bytes, _ in appendInt(record[keyPath: path][keyPath: member], to: &bytes) }
                ) {
                    record, bytes, offset, _ in record[keyPath: path][keyPath: member] = StepIndex.int(bytes, at: offset)
                }
            }
            return [
                int("_offset", \.memberOffset), int("_index", \.memberIndex), int("_first_seq", \.sequence),
                Field(
                    name: prefix + "_prev_hash", slots: 4,
                    write: { record, bytes, _ in bytes.append(contentsOf: rawDigest(record[keyPath: path].previousHash)) }
                ) {
                    record, bytes, offset, _ in record[keyPath: path].previousHash = ContentHash.hex(bytes[offset..<offset + 32])
                },
            ]
        }

        /// An enumeration, stored as the index of its raw value in the file's list for `name`.
        static func enumeration<E: RawRepresentable<String> & CaseIterable & Sendable>(
            _ name: String, _ path: any WritableKeyPath<Record, E?> & Sendable
        ) -> Field {
            Field(
                name: name, slots: 1,
                write: { record, bytes, names in
                    appendInt(record[keyPath: path].flatMap { names[name]?.firstIndex(of: $0.rawValue) } ?? -1, to: &bytes)
                }
            ) { record, bytes, offset, names in
                let index = StepIndex.int(bytes, at: offset)
                let values = names[name] ?? []
                record[keyPath: path] = values.indices.contains(index) ? E(rawValue: values[index]) : nil
            }
        }

        /// The raw values each enumeration field's indexes refer to, as written.
        static let enumNames: [(key: String, value: [String])] = [
            ("stop_reason", StopReason.allCases.map(\.rawValue)), ("limit", LimitKind.allCases.map(\.rawValue)),
        ]

        static let all: [Field] =
            [
                .int("step", \.step), .int("first_seq", \.firstSequence), .int("last_seq", \.lastSequence),
            ]
            + position("member", \.position) + position("packet_member", \.packetPosition)
            + [
                .int("event_count", \.after.eventCount), .int("state_step", \.after.step), .int("steps_completed", \.after.stepsCompleted),
                .int("context_packets", \.after.contextPackets), .int("decisions", \.after.decisions),
                .int("invalid_decisions", \.after.invalidDecisions), .int("calls", \.after.calls),
                .int("executed_calls", \.after.executedCalls),
                .int("denied_calls", \.after.deniedCalls), .int("awaiting_approval", \.after.awaitingApproval),
                .int("tool_attempts", \.after.toolAttempts), .int("failed_attempts", \.after.failedAttempts),
                .int("input_tokens", \.after.inputTokens), .int("output_tokens", \.after.outputTokens),
                .int("cost_micro_usd", \.after.costMicroUSD), .int("model_latency_us", \.after.modelLatencyUs),
                .int("tool_time_us", \.after.toolTimeUs), .int("contents", \.after.contents), .int("anomalies", \.after.anomalies),
                .int("resumes", \.after.resumes), .enumeration("stop_reason", \.after.stopReason), .enumeration("limit", \.after.limit),
                .flag("has_problem", \.hasProblem), .flag("has_digest_mismatch", \.hasDigestMismatch),
                .digest("computed_digest", \.computedDigest),
            ]
    }
}

#if canImport(Glibc)
    private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 { Glibc.open(path, flags, mode) }
    private func Glibc_write(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int { Glibc.write(fd, pointer, count) }
#elseif canImport(Darwin)
    private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 { Darwin.open(path, flags, mode) }
    private func Glibc_write(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int { Darwin.write(fd, pointer, count) }
#endif
