import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Taking an advisory `flock` with a bounded wait, and naming who holds one: what a log's write
/// lock (`FileDescriptor.lockForWriting`) and a catalog's lock (`CatalogFileLock`) share.
///
/// `flock` has no timeout of its own; a lock let go within the wait is taken at the next try,
/// with pauses that grow from 1 ms to 32 ms. (Blocking in `flock` on another thread would need
/// a signal to give up; the waits here are short or rare.)
public enum AdvisoryLock {
    /// Takes `operation` (`LOCK_SH` or `LOCK_EX`) on `descriptor`, trying again for up to
    /// `seconds`; false when the lock is still held otherwise then.
    public static func take(_ descriptor: Int32, _ operation: Int32, waitingUpTo seconds: Double) -> Bool {
        var pauseUs: UInt32 = 1_000
        var waitedUs: Double = 0
        while flock(descriptor, operation | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, waitedUs < seconds * 1e6 else { return false }
            usleep(pauseUs)
            waitedUs += Double(pauseUs)
            pauseUs = min(pauseUs * 2, 32_000)
        }
        return true
    }

    /// The pid of a process holding a `flock` on `path` (other than `otherThan`), from
    /// /proc/locks (Linux); nil where unknown.
    public static func holder(of path: String, otherThan excluded: Int? = nil) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0, let locks = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return nil }
        let inode = ":\(info.st_ino)"
        for line in locks.split(separator: "\n") {
            // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF"
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK", fields[5].hasSuffix(inode), let pid = Int(fields[4]), pid != excluded else {
                continue
            }
            return pid
        }
        return nil
    }
}
