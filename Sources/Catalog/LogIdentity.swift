import Foundation
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What tells a catalog entry whether the log it came from changed: the file's size and
/// modification time, and the SHA-256 of the bytes of its last complete gzip member as they
/// were read. A log only ever grows at its end, so a log that is longer but still has those
/// bytes at that offset grew on the same prefix; anything else is a different file.
struct LogIdentity: Sendable, Hashable {
    var stamp: FileStamp
    /// The last complete member's bytes: `[tailOffset, tailEnd)`.
    var tailOffset: Int
    var tailEnd: Int
    var tailHash: String

    /// Whether the file at `path` still has this identity (reads only the tail range).
    func matches(_ path: String, now: FileStamp) -> Bool {
        now == stamp && LogIdentity.hash(path, from: tailOffset, to: tailEnd) == tailHash
    }

    /// Whether the file at `path` grew from this identity: longer, with the same tail bytes.
    func grew(_ path: String, now: FileStamp) -> Bool {
        now.size > stamp.size && LogIdentity.hash(path, from: tailOffset, to: tailEnd) == tailHash
    }

    /// SHA-256 of `[start, end)` of the file, or nil when it cannot be read that far.
    static func hash(_ path: String, from start: Int, to end: Int) -> String? {
        guard start >= 0, end >= start else { return nil }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: end - start)
        var done = 0
        let complete = bytes.withUnsafeMutableBytes { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            while done < buffer.count {
                let count = pread(descriptor, base + done, buffer.count - done, off_t(start + done))
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return false }
                done += count
            }
            return true
        }
        return complete ? ContentHash.sha256Hex(bytes) : nil
    }
}

/// A file's size and modification time (nanoseconds).
struct FileStamp: Sendable, Hashable {
    var size: Int
    var mtimeNs: Int

    /// The stamp of the file at `path`, or nil when there is none.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        size = Int(info.st_size)
        #if canImport(Darwin)
            mtimeNs = Int(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int(info.st_mtimespec.tv_nsec)
        #else
            mtimeNs = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
        #endif
    }

    init(size: Int, mtimeNs: Int) {
        self.size = size
        self.mtimeNs = mtimeNs
    }
}
