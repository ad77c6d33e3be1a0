import CLibdeflate
import Crypto
import Foundation
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What tells data derived from a log (the catalog's entries, the check cache) whether the log it
/// came from changed: the file's size and
/// modification time, and a checksum of the end of its last complete gzip member as it was
/// read (`hash` over `tailRange`). A log only ever grows at its end, so a log that is longer but
/// still has those bytes at that offset grew on the same prefix; anything else is a different
/// file.
public struct LogFingerprint: Sendable, Hashable {
    public var stamp: FileStamp
    /// The hashed bytes, `[tailOffset, tailEnd)`: the end of the last complete member.
    public var tailOffset: Int
    public var tailEnd: Int
    public var tailHash: String

    public init(stamp: FileStamp, tailOffset: Int, tailEnd: Int, tailHash: String) {
        self.stamp = stamp
        self.tailOffset = tailOffset
        self.tailEnd = tailEnd
        self.tailHash = tailHash
    }

    /// The one way an identity is made: the file at `path` as `stamp` found it, known by the end
    /// of its last complete member `[lastCompleteMember, end)` (`tailRange`): the member before a
    /// torn one or before where a later read picks up, the last one of a whole log, or the whole
    /// file from 0 for a log never read on. The indexer, the fact cache and the step store all
    /// make theirs here, so that the same file read the same way has the same identity. Nil when
    /// the file cannot be read that far.
    public static func of(_ path: String, stamp: FileStamp, lastCompleteMember: Int, end: Int) -> LogFingerprint? {
        let tail = tailRange(memberOffset: lastCompleteMember, end: end)
        guard let hash = hash(path, from: tail.offset, to: tail.end) else { return nil }
        return LogFingerprint(stamp: stamp, tailOffset: tail.offset, tailEnd: tail.end, tailHash: hash)
    }

    /// Bytes of the last complete member the identity hashes, at most.
    public static let tailBytes = 4096

    /// The range hashed for a last complete member `[memberOffset, end)`: its last `tailBytes`
    /// (all of it when shorter). They end with the member's gzip trailer, the CRC-32 and length
    /// of everything the member holds, so rewriting the member with other events changes them;
    /// what they do not see is damage to the member's earlier compressed bytes that leaves the
    /// trailer as it was, as the identity does not see an edit of an earlier member. Hashing the
    /// whole member (usually 20–250 KiB) made reading it the largest cost of a suite run over
    /// unchanged logs.
    public static func tailRange(memberOffset: Int, end: Int) -> (offset: Int, end: Int) {
        (max(memberOffset, end - tailBytes), end)
    }

    /// Whether the file at `path` still has this identity (reads only the tail range).
    public func matches(_ path: String, now: FileStamp) -> Bool {
        now == stamp && LogFingerprint.hash(path, from: tailOffset, to: tailEnd) == tailHash
    }

    /// Whether the file at `path` grew from this identity: longer, with the same tail bytes.
    public func grew(_ path: String, now: FileStamp) -> Bool {
        now.size > stamp.size && LogFingerprint.hash(path, from: tailOffset, to: tailEnd) == tailHash
    }

    /// The CRC-32 and Adler-32 of `[start, end)` of the file, as 16 hex digits, or nil when
    /// it cannot be read that far. Both are computed by libdeflate in one pass over the bytes
    /// (a few GB/s). Together with the size and the modification time in nanoseconds, 64 bits
    /// over the end of the last member, trailer included, are what a change would have to
    /// collide with; this is a check for accidents, as a build cache's is, not against someone
    /// forging a log. (Earlier builds stored a SHA-256 here: 64 digits never equal 16, so such
    /// an entry is simply read again once.)
    public static func hash(_ path: String, from start: Int, to end: Int) -> String? {
        var crc: UInt32 = 0
        var adler: UInt32 = 1
        let read = forEachChunk(of: path, from: start, to: end) { chunk in
            crc = libdeflate_crc32(crc, chunk.baseAddress, chunk.count)
            adler = libdeflate_adler32(adler, chunk.baseAddress, chunk.count)
        }
        return read ? hex(crc) + hex(adler) : nil
    }

    /// A log's content identity: `sha256:` and the SHA-256 of the file's first `length` bytes
    /// (its gzip members as written), or nil when it cannot be read that far. The same log has
    /// the same content hash wherever it lies — another path, another machine, a fresh checkout
    /// that gave it a new modification time — which is how a catalog shared by many machines
    /// knows it (docs/catalog.md). BoringSSL hashes with the processor's SHA extensions where
    /// there are some (about 2 GB/s here), so hashing a log costs a small part of reading it.
    public static func contentHash(_ path: String, length: Int) -> String? {
        var hasher = SHA256()
        guard forEachChunk(of: path, from: 0, to: length, { hasher.update(bufferPointer: $0) }) else { return nil }
        return "sha256:" + ContentHash.hex(Array(hasher.finalize()))
    }

    /// Calls `body` with the bytes `[start, end)` of the file at `path`, a read buffer at a
    /// time; false when the file cannot be opened or read that far.
    private static func forEachChunk(of path: String, from start: Int, to end: Int, _ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        guard start >= 0, end >= start else { return false }
        // Non-blocking: a FIFO put where a log was must not hold the open forever.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard let chunk = readBuffers.pointer else { return false }
        var offset = start
        while offset < end {
            let count = pread(descriptor, chunk, min(readBufferSize, end - offset), off_t(offset))
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return false }
            body(UnsafeRawBufferPointer(start: chunk, count: count))
            offset += count
        }
        return true
    }

    /// Bytes `hash` reads at a time.
    private static let readBufferSize = 16 * 1024

    /// Each thread's read buffer for `hash`, made on its first use and kept for the thread's
    /// life. A buffer per call came from the heap (`withUnsafeTemporaryAllocation` puts only
    /// 1 KiB on the stack), and a worker thread's arena hands 16 KiB back to the kernel when it
    /// is freed, so every log's check faulted in four zeroed pages again.
    private static let readBuffers = PerThread(
        make: { UnsafeMutableRawPointer.allocate(byteCount: readBufferSize, alignment: 64) }, free: { $0?.deallocate() })

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

/// Which file a path names: its device and inode, the same through every name it has (a
/// symbolic link, a hard link, `./` and `..` in the path). Two paths name one file when their
/// identities are equal; one stat, where resolving a path's links walks each of its folders.
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64

    /// The identity of the file at `path` (links followed), or nil when there is none.
    public init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        self.init(info)
    }

    /// The identity and size of the file at `path` (links followed), from one stat; nil when
    /// there is none.
    public static func withSize(path: String) -> (identity: FileIdentity, size: Int)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (FileIdentity(info), Int(info.st_size))
    }

    init(_ info: stat) {
        // `dev_t` is signed on some systems: its bits, whatever their sign.
        device = UInt64(truncatingIfNeeded: info.st_dev)
        inode = UInt64(truncatingIfNeeded: info.st_ino)
    }
}

/// A file's size and modification time (nanoseconds).
public struct FileStamp: Sendable, Hashable {
    public var size: Int
    public var mtimeNs: Int

    /// The stamp of the file at `path`, or nil when there is none.
    /// (`errno` then says why, or is 0 when the path is there but not a regular file).
    public init?(path: String) {
        var info = stat()
        errno = 0
        guard stat(path, &info) == 0 else { return nil }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            errno = 0
            return nil
        }
        size = Int(info.st_size)
        #if canImport(Darwin)
            mtimeNs = Int(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int(info.st_mtimespec.tv_nsec)
        #else
            mtimeNs = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
        #endif
    }

    public init(size: Int, mtimeNs: Int) {
        self.size = size
        self.mtimeNs = mtimeNs
    }
}
