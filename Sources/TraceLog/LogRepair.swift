import Crypto
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What sealing a torn tail did.
public struct RepairReport: Sendable, Hashable {
    public var path: String
    /// Where the torn member started; everything from here was rewritten.
    public var memberOffset: Int
    public var originalSize: Int
    public var newSize: Int
    /// Complete events of the torn member, kept in the new final member.
    public var eventsKept: Int
    /// Bytes of the partial event that were cut away (decompressed).
    public var droppedBytes: Int
    /// The last event of the sealed log, if it has one.
    public var lastSequence: Int?
    /// Whether this repair finished a seal that an earlier one was stopped in the middle of
    /// (from the `<log>.seal` side file) rather than sealing a tear it found.
    public var finishedInterruptedSeal = false
}

/// Seals a torn tail in place: cuts the log back to its last complete event and finishes the
/// gzip member, so that `gzip -t` passes and `zcat` prints exactly the complete events.
///
/// Only a torn tail is repaired. A corrupt member, a broken chain or a sequence gap anywhere
/// is refused with `notRepairable`: "repairing" those would hide tampering or lose events. A
/// file of 0 bytes is `empty`, not torn: there is nothing to seal.
///
/// The rewrite is crash-safe: the sealed member is first written, with its offset, to
/// `<log>.seal` and synced (file and directory); then the log is truncated at the torn member and the sealed member
/// appended and synced; then the side file is removed. A repair interrupted at any point is
/// finished by the next `seal` (or `LogWriter.open`). A side file that is not a seal of this log
/// as it is now (`sideFile(of:)`: not a side file, or made for another log or for this one
/// before it changed) is stray: readers ignore it, verify and repair warn of it, and nothing
/// applies or removes it.
public enum LogRepair {
    /// Seals `path` if its tail is torn; returns nil when the log was already intact. Takes
    /// the log's write lock first: a log another process is writing is not touched.
    @discardableResult
    public static func seal(path: String) throws -> RepairReport? {
        let lock = try FileDescriptor.lockForWriting(path)
        return try withExtendedLifetime(lock) { try seal(lockedPath: path) }
    }

    /// `seal(path:)` for a caller that holds the write lock already.
    static func seal(lockedPath path: String) throws -> RepairReport? {
        if let finished = try finishInterruptedSeal(path: path) {
            // What the interrupted seal restored is the repair; the log is whole again.
            var last: Int?
            _ = try LogReader(path: path).forEachEvent { last = $0.event.sequence }
            var report = finished
            report.lastSequence = last
            return report
        }
        var keptLines: [UInt8] = []
        var eventsKept = 0
        var tornMemberOffset: Int?
        let summary: ReadSummary
        do {
            // Torn members are last, so collect each member's lines and keep only the last's.
            var currentMember = -1
            summary = try LogReader(path: path).forEachLine { line, recorded in
                if recorded.location.memberOffset != currentMember {
                    currentMember = recorded.location.memberOffset
                    keptLines.removeAll(keepingCapacity: true)
                    eventsKept = 0
                }
                keptLines.append(contentsOf: line)
                keptLines.append(0x0A)
                eventsKept += 1
            }
            tornMemberOffset = summary.tear?.memberOffset
            if tornMemberOffset != currentMember {
                keptLines = []
                eventsKept = 0
            }
        } catch let error as LogError
            where error.code != .unreadable && error.code != .notGzip && error.code != .empty && error.code != .eventTooLarge
        {
            // (A member over the read limit is not damage this reader saw: that error, as it is.)
            throw LogError(
                .notRepairable,
                "repair only seals a torn tail, and this log has other damage: \(error.message)",
                path: path, memberOffset: error.memberOffset, sequence: error.sequence,
                hint: "verify the log to see its damage; keep the file as evidence rather than rewriting it")
        }
        guard let tear = summary.tear, let offset = tornMemberOffset else { return nil }
        if case .stray(let why) = try sideFile(of: path) {
            // Sealing writes its own side file there: a stray one is left for its owner to judge.
            throw LogError(
                .straySeal,
                "the log is torn, but \(sideFilePath(path)) is in the way: it is not a seal of this log (\(why)), "
                    + "and sealing would replace it; both are left as they are",
                path: path, hint: "if nothing needs the side file, remove it; then repair again")
        }

        var member: [UInt8] = []
        if !keptLines.isEmpty || offset == 0 {
            // An empty member keeps an empty log a valid gzip file.
            member = try keptLines.withUnsafeBytes { try gzipMember($0) }
        }
        try writeSideFile(path: path, offset: offset, member: member)
        try applySeal(path: path, offset: offset, member: member)
        FileDescriptor.remove(sideFilePath(path))
        return RepairReport(
            path: path, memberOffset: offset, originalSize: tear.fileSize, newSize: offset + member.count,
            eventsKept: eventsKept, droppedBytes: tear.droppedBytes, lastSequence: tear.lastSequence)
    }

    static func sideFilePath(_ path: String) -> String { path + ".seal" }

    private static let sideFileMagic = "agent-eval seal v2"

    /// How many bytes before the cut the side file binds itself to.
    static let bindingWindow = 65_536

    /// The side file's first line: where the member goes, how long it is, and what it is bound
    /// to — the hash of the bytes just before the cut and of the torn tail it replaces, and the
    /// log's size then — so that it is only ever applied to the log it was made for.
    static func sideFileHeader(offset: Int, length: Int, size: Int, before: String, torn: String) -> String {
        "\(sideFileMagic) offset=\(offset) length=\(length) size=\(size) before=\(before) torn=\(torn)\n"
    }

    /// SHA-256 (hex) of `count` bytes of the file at `offset` (fewer when the file ends first),
    /// read in pieces: a torn tail can be large.
    static func hash(of file: FileDescriptor, at offset: Int, count: Int) throws -> String {
        var hasher = SHA256()
        try forEachPiece(of: file, at: offset, count: count) { hasher.update(bufferPointer: $0) }
        return ContentHash.hex(Array(hasher.finalize()))
    }

    /// Calls `body` with the bytes of `file` from `offset`, `count` of them or up to its end, in
    /// pieces of at most 64 KiB.
    static func forEachPiece(
        of file: FileDescriptor, at offset: Int, count: Int, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var buffer = [UInt8](repeating: 0, count: max(1, min(count, 1 << 16)))
        var done = 0
        while done < count {
            let got = try buffer.withUnsafeMutableBytes { piece -> Int in
                guard let base = piece.baseAddress else { return 0 }
                return try file.read(into: base, count: min(piece.count, count - done), at: offset + done)
            }
            if got == 0 { break }
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<got])) }
            done += got
        }
    }

    /// `count` bytes of `file` at `offset`, fewer when it ends first.
    static func bytes(of file: FileDescriptor, at offset: Int, count: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        try forEachPiece(of: file, at: offset, count: count) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Whether `count` bytes of `first` at `firstOffset` are there and equal those of `second` at
    /// `secondOffset`.
    static func sameBytes(
        _ first: FileDescriptor, at firstOffset: Int, as second: FileDescriptor, at secondOffset: Int, count: Int
    ) throws -> Bool {
        var compared = 0
        var isSame = true
        try forEachPiece(of: first, at: firstOffset, count: count) { piece in
            guard isSame else { return }
            isSame = try LogRepair.bytes(of: second, at: secondOffset + compared, count: piece.count).elementsEqual(piece)
            compared += piece.count
        }
        return isSame && compared == count
    }

    /// The longest first line a side file may have: the header is about 220 bytes.
    static let maximumHeaderLength = 1024

    /// What lies at `<log>.seal`, judged against the log as it is now: the one place that
    /// decides whether a side file is a seal to finish.
    enum SideFile: Sendable, Hashable {
        case none
        /// A seal of this log, stopped after its side file was complete and synced: the log may
        /// lack the member that follows the side file's header line (`headerLength` bytes,
        /// newline included), `length` bytes to go at `offset`.
        case pending(offset: Int, headerLength: Int, length: Int)
        /// A seal's side file cut off while it was written: the log was not touched yet.
        case unfinished
        /// Not a seal of this log as it is now, and why.
        case stray(String)
    }

    /// Reads the side file beside `path` (its header line, then only what the checks need) and
    /// judges it: pending only when it is complete and bound to this log — the bytes before the
    /// cut hash as recorded, and what follows the cut is the torn tail it replaces or a prefix
    /// of the sealed member.
    static func sideFile(of path: String) throws -> SideFile {
        let sidePath = sideFilePath(path)
        guard FileDescriptor.exists(sidePath) else { return .none }
        let side = try FileDescriptor.openForReading(sidePath)
        let sideSize = try side.size()
        let head = try bytes(of: side, at: 0, count: min(sideSize, maximumHeaderLength))
        let magic = Array("\(sideFileMagic) ".utf8)
        guard let newline = head.firstIndex(of: 0x0A) else {
            // Cut off in its first line: a seal's only when what is there begins as one does.
            let isOurs = sideSize < maximumHeaderLength && (head.starts(with: magic) || magic.starts(with: head))
            return isOurs ? .unfinished : .stray("it is not a seal side file")
        }
        guard head.starts(with: magic) else { return .stray("it is not a seal side file of this version") }
        let fields = Dictionary(
            String(decoding: head[magic.count..<newline], as: UTF8.self).split(separator: " ").compactMap { part -> (String, String)? in
                let pair = part.split(separator: "=", maxSplits: 1)
                return pair.count == 2 ? (String(pair[0]), String(pair[1])) : nil
            }, uniquingKeysWith: { first, _ in first })
        guard let offset = fields["offset"].flatMap({ Int($0) }), let length = fields["length"].flatMap({ Int($0) }),
            let originalSize = fields["size"].flatMap({ Int($0) }), let before = fields["before"], let torn = fields["torn"],
            offset >= 0, length >= 0, originalSize >= offset
        else { return .stray("its first line is not a seal's") }
        let (expected, overflow) = (newline + 1).addingReportingOverflow(length)
        if !overflow && sideSize < expected { return .unfinished }
        guard !overflow, sideSize == expected else { return .stray("it holds more than the member its first line announces") }

        let log = try FileDescriptor.openForReading(path)
        let size = try log.size()
        guard size >= offset else { return .stray("the log is \(size) bytes long, shorter than the seal's offset \(offset)") }
        let windowStart = max(0, offset - bindingWindow)
        guard try hash(of: log, at: windowStart, count: offset - windowStart) == before else {
            return .stray("the bytes before byte \(offset) are not the ones it was made for")
        }
        let pending = SideFile.pending(offset: offset, headerLength: newline + 1, length: length)
        if size == originalSize, try hash(of: log, at: offset, count: size - offset) == torn { return pending }
        if size - offset <= length, try sameBytes(log, at: offset, as: side, at: newline + 1, count: size - offset) { return pending }
        return .stray("the bytes from byte \(offset) on are neither the torn tail it replaces nor part of the sealed member")
    }

    /// What readers say of the side file beside `path`: `pendingSeal` when it is a seal to
    /// finish (the log may lack what it holds: nothing is read until a repair finishes it),
    /// `straySeal` when it is not this log's or was cut off before the log was touched (a
    /// warning: it is ignored), nil when there is none. A side file that cannot be read is taken
    /// as pending: what it holds cannot be ruled out.
    static func sideFileNotice(_ path: String) -> LogError? {
        let sidePath = sideFilePath(path)
        guard FileDescriptor.exists(sidePath) else { return nil }
        let state: SideFile
        do {
            state = try sideFile(of: path)
        } catch {
            // A log that cannot be read is reported by what reads it.
            guard FileDescriptor.exists(path) else { return nil }
            return LogError(
                .pendingSeal,
                "\(sidePath) may hold a seal of this log, but it cannot be read: \((error as? LogError)?.message ?? "it cannot be opened")",
                path: path, hint: "make the side file readable, then repair the log; or, if it is not this log's, remove it")
        }
        switch state {
        case .none: return nil
        case .pending:
            return LogError(
                .pendingSeal, "a seal of this log was interrupted: \(sidePath) holds its final member, which the log may lack",
                path: path, hint: "repair the log to finish the seal; nothing is read from it until then")
        case .unfinished:
            return LogError(
                .straySeal,
                "\(sidePath) is a seal's side file cut off while it was written, before the log was touched, so it is ignored",
                path: path, hint: "repairing the log removes it")
        case .stray(let why):
            return LogError(
                .straySeal, "\(sidePath) is not a seal of this log as it is now (\(why)), so it is ignored", path: path,
                hint: "if nothing needs it, remove it")
        }
    }

    /// The warning about a side file beside `path` that readers ignore (stray, or cut off before
    /// the log was touched); nil when there is none or it is a seal to finish.
    public static func straySeal(of path: String) -> LogError? {
        sideFileNotice(path).flatMap { $0.code == .straySeal ? $0 : nil }
    }

    private static func writeSideFile(path: String, offset: Int, member: [UInt8]) throws {
        let sidePath = sideFilePath(path)
        FileDescriptor.remove(sidePath)
        let log = try FileDescriptor.openForReading(path)
        let size = try log.size()
        let windowStart = max(0, offset - bindingWindow)
        let header = Array(
            sideFileHeader(
                offset: offset, length: member.count, size: size,
                before: try hash(of: log, at: windowStart, count: offset - windowStart),
                torn: try hash(of: log, at: offset, count: size - offset)
            ).utf8)
        let side = try FileDescriptor.openForAppending(sidePath, create: true)
        try (header + member).withUnsafeBytes { try side.write($0) }
        try side.sync()
        try FileDescriptor.syncDirectory(of: sidePath)
    }

    private static func applySeal(path: String, offset: Int, member: [UInt8]) throws {
        let file = try FileDescriptor.openForUpdate(path)
        try file.truncate(to: offset)
        try file.seek(to: offset)
        try member.withUnsafeBytes { try file.write($0) }
        try file.sync()
    }

    /// Completes a seal whose side file was fully written and belongs to this log as it is now
    /// (`sideFile(of:)`); drops a side file that was not fully written (the log itself is
    /// untouched until the side file is complete and synced); leaves a stray one as it is.
    /// Returns what it restored, or nil when there was nothing to do.
    @discardableResult
    static func finishInterruptedSeal(path: String) throws -> RepairReport? {
        let sidePath = sideFilePath(path)
        switch try sideFile(of: path) {
        case .none, .stray:
            return nil
        case .unfinished:
            FileDescriptor.remove(sidePath)
            return nil
        case .pending(let offset, let headerLength, let length):
            let member = try bytes(of: try FileDescriptor.openForReading(sidePath), at: headerLength, count: length)
            let size = try FileDescriptor.openForReading(path).size()
            try applySeal(path: path, offset: offset, member: member)
            FileDescriptor.remove(sidePath)
            return RepairReport(
                path: path, memberOffset: offset, originalSize: size, newSize: offset + member.count, eventsKept: 0, droppedBytes: 0,
                lastSequence: nil, finishedInterruptedSeal: true)
        }
    }
}
