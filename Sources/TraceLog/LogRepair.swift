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
}

/// Seals a torn tail in place: cuts the log back to its last complete event and finishes the
/// gzip member, so that `gzip -t` passes and `zcat` prints exactly the complete events.
///
/// Only a torn tail is repaired. A corrupt member, a broken chain or a sequence gap anywhere
/// is refused with `notRepairable`: "repairing" those would hide tampering or lose events.
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
        try finishInterruptedSeal(path: path)
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
        } catch let error as LogError where error.code != .unreadable && error.code != .notGzip {
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

    private static let sideFileMagic = "agent-eval seal v1"

    private static func writeSideFile(path: String, offset: Int, member: [UInt8]) throws {
        let sidePath = sideFilePath(path)
        FileDescriptor.remove(sidePath)
        let side = try FileDescriptor.openForAppending(sidePath, create: true)
        let header = Array("\(sideFileMagic) offset=\(offset) length=\(member.count)\n".utf8)
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

    /// Completes a seal whose side file was fully written; drops a side file that was not (the
    /// log itself is untouched until the side file is complete and synced).
    static func finishInterruptedSeal(path: String) throws {
        let sidePath = sideFilePath(path)
        guard FileDescriptor.exists(sidePath) else { return }
        let side = try FileDescriptor.openForReading(sidePath)
        let size = try side.size()
        var bytes = [UInt8](repeating: 0, count: size)
        let got = try bytes.withUnsafeMutableBytes { buffer -> Int in
            guard let base = buffer.baseAddress else { return 0 }
            var total = 0
            while total < size {
                let count = try side.read(into: base + total, count: size - total)
                if count == 0 { break }
                total += count
            }
            return total
        }
        guard let newline = bytes.firstIndex(of: 0x0A) else {
            FileDescriptor.remove(sidePath)
            return
        }
        let header = String(decoding: bytes[..<newline], as: UTF8.self).split(separator: " ")
        let fields = Dictionary(
            header.compactMap { part -> (String, Int)? in
                let pair = part.split(separator: "=")
                guard pair.count == 2, let value = Int(pair[1]) else { return nil }
                return (String(pair[0]), value)
            }, uniquingKeysWith: { first, _ in first })
        guard header.starts(with: sideFileMagic.split(separator: " ")), let offset = fields["offset"],
            let length = fields["length"], got == newline + 1 + length
        else {
            FileDescriptor.remove(sidePath)
            return
        }
        try applySeal(path: path, offset: offset, member: Array(bytes[(newline + 1)...]))
        FileDescriptor.remove(sidePath)
    }
}
