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
/// finished by the next `seal` (or `LogWriter.open`).
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
        } catch let error as LogError where error.code != .unreadable && error.code != .notGzip && error.code != .empty {
            throw LogError(
                .notRepairable,
                "repair only seals a torn tail, and this log has other damage: \(error.message)",
                path: path, memberOffset: error.memberOffset, sequence: error.sequence,
                hint: "verify the log to see its damage; keep the file as evidence rather than rewriting it")
        }
        guard let tear = summary.tear, let offset = tornMemberOffset else { return nil }

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

    /// SHA-256 (hex) of `count` bytes of the file at `offset`.
    static func hash(of file: FileDescriptor, at offset: Int, count: Int) throws -> String {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = try bytes.withUnsafeMutableBytes { buffer -> Int in
            guard let base = buffer.baseAddress else { return 0 }
            var total = 0
            while total < count {
                let read = try file.read(into: base + total, count: count - total, at: offset + total)
                if read == 0 { break }
                total += read
            }
            return total
        }
        return ContentHash.sha256Hex(bytes.prefix(got))
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

    /// Completes a seal whose side file was fully written, and only when the side file
    /// belongs to this log as it is now (the bytes before the cut hash as recorded, and what
    /// follows the cut is the torn tail it replaces or a prefix of the sealed member); drops a
    /// side file that was not fully written (the log itself is untouched until the side file
    /// is complete and synced). Returns what it restored, or nil when there was nothing to do.
    @discardableResult
    static func finishInterruptedSeal(path: String) throws -> RepairReport? {
        let sidePath = sideFilePath(path)
        guard FileDescriptor.exists(sidePath) else { return nil }
        let side = try FileDescriptor.openForReading(sidePath)
        let sideSize = try side.size()
        var bytes = [UInt8](repeating: 0, count: sideSize)
        let got = try bytes.withUnsafeMutableBytes { buffer -> Int in
            guard let base = buffer.baseAddress else { return 0 }
            var total = 0
            while total < sideSize {
                let count = try side.read(into: base + total, count: sideSize - total)
                if count == 0 { break }
                total += count
            }
            return total
        }
        guard let newline = bytes.firstIndex(of: 0x0A) else {
            FileDescriptor.remove(sidePath)
            return nil
        }
        let header = String(decoding: bytes[..<newline], as: UTF8.self).split(separator: " ")
        let fields = Dictionary(
            header.compactMap { part -> (String, String)? in
                let pair = part.split(separator: "=", maxSplits: 1)
                return pair.count == 2 ? (String(pair[0]), String(pair[1])) : nil
            }, uniquingKeysWith: { first, _ in first })
        func refuse(_ why: String) -> LogError {
            LogError(
                .notRepairable, "the side file \(sidePath) does not belong to this log as it is now (\(why)); both are left as they are",
                path: path, hint: "if the side file is not this log's, move it away; then repair again")
        }
        guard header.starts(with: sideFileMagic.split(separator: " ")) else {
            throw refuse("it is not a side file of this version")
        }
        guard let offset = fields["offset"].flatMap({ Int($0) }), let length = fields["length"].flatMap({ Int($0) }),
            let originalSize = fields["size"].flatMap({ Int($0) }), let before = fields["before"], let torn = fields["torn"],
            got == newline + 1 + length
        else {
            // Cut off while it was being written: the log was not touched yet.
            FileDescriptor.remove(sidePath)
            return nil
        }
        let member = Array(bytes[(newline + 1)...])
        let log = try FileDescriptor.openForReading(path)
        let size = try log.size()
        let windowStart = max(0, offset - bindingWindow)
        guard size >= offset, try hash(of: log, at: windowStart, count: offset - windowStart) == before else {
            throw refuse("the bytes before byte \(offset) are not the ones it was made for")
        }
        var tail = [UInt8](repeating: 0, count: size - offset)
        _ = try tail.withUnsafeMutableBytes { buffer in
            try buffer.baseAddress.map { try log.read(into: $0, count: size - offset, at: offset) } ?? 0
        }
        let untouched = size == originalSize && ContentHash.sha256Hex(tail) == torn
        guard untouched || member.starts(with: tail) else {
            throw refuse("the bytes from byte \(offset) on are neither the torn tail it replaces nor part of the sealed member")
        }
        try applySeal(path: path, offset: offset, member: member)
        FileDescriptor.remove(sidePath)
        return RepairReport(
            path: path, memberOffset: offset, originalSize: size, newSize: offset + member.count, eventsKept: 0, droppedBytes: 0,
            lastSequence: nil, finishedInterruptedSeal: true)
    }
}
