import ConfigFile
import Foundation
import Synchronization
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The lock that keeps `catalog rebuild` from replacing a catalog file while another process
/// writes to it: an advisory lock (`flock`) on a file beside the catalog, `<catalog>.lock`,
/// which is never replaced itself.
///
/// Every process that opens a SQLite catalog for writing holds the lock shared for as long as
/// it keeps the catalog open; `rebuild` holds it exclusive from reading the old catalog's
/// history until the new file is renamed over it. Without it, a `run` that recorded its suite
/// results in the old file after the history was copied (or through a connection opened before
/// the rename) wrote them into a file that no longer had a name: lost without a word. A writer
/// takes the lock before it opens the database, so a connection it opens is to the file the
/// name holds once no rebuild runs.
///
/// The kernel releases the lock when its descriptor closes, however the process ends.
final class CatalogFileLock: Sendable {
    fileprivate let descriptor: Int32
    /// Whether the descriptor is closed (the lock let go).
    private let isReleased = Mutex(false)

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        release()
    }

    /// Lets the lock go (closing the catalog does), once.
    func release() {
        let closes = isReleased.withLock { released in
            defer { released = true }
            return !released
        }
        if closes { close(descriptor) }
    }

    /// The lock file of the catalog at `path`: beside the file the path names once its links
    /// are resolved, so that a catalog opened through a symbolic link and by its own name takes
    /// one lock. (A path that does not exist yet has its folder resolved.)
    static func path(of catalog: String) -> String {
        let absolute = ConfigPath.absolute(catalog)
        if let real = realpath(absolute, nil) {
            defer { free(real) }
            return String(cString: real) + ".lock"
        }
        let folder = (absolute as NSString).deletingLastPathComponent
        guard let real = realpath(folder, nil) else { return absolute + ".lock" }
        defer { free(real) }
        return (String(cString: real) as NSString).appendingPathComponent((absolute as NSString).lastPathComponent) + ".lock"
    }

    /// Takes the lock shared, for a process that writes to the catalog at `path`: waits up to
    /// `Catalog.busyTimeout` for a rebuild to finish, as SQLite waits for another writer.
    static func forWriting(_ path: String) throws(CatalogError) -> CatalogFileLock {
        let lock = try open(path)
        let waitedOut = AdvisoryLock.take(lock.descriptor, LOCK_SH, waitingUpTo: Catalog.busyTimeout)
        guard waitedOut else {
            throw CatalogError(
                .inUse,
                "the catalog at \(path) is being rebuilt\(holder(of: path).map { " by pid \($0)" } ?? "") and stayed so for \(Int(Catalog.busyTimeout)) s, so nothing was written to it",
                location: SourceLocation(path: path), hint: "wait for `agent-eval catalog rebuild` to finish, then run this again")
        }
        return lock
    }

    /// Takes the lock exclusive, for `rebuild`: refuses at once (after a moment's grace) while
    /// any other process has the catalog open for writing, whose writes the rename would lose.
    static func forReplacing(_ path: String) throws(CatalogError) -> CatalogFileLock {
        let lock = try open(path)
        guard AdvisoryLock.take(lock.descriptor, LOCK_EX, waitingUpTo: 0.25) else {
            throw CatalogError(
                .inUse,
                "another process\(holder(of: path).map { " (pid \($0))" } ?? "") has the catalog at \(path) open for writing: a rebuild replaces the file, so what it writes meanwhile would be lost; nothing was changed",
                location: SourceLocation(path: path),
                hint: "stop what uses the catalog (`agent-eval serve`, a `run` or an `index`), then rebuild again")
        }
        return lock
    }

    /// Opens the lock file, made if missing in a folder made if missing (as opening the catalog
    /// makes its folder). Read-write and readable by everyone who may write the catalog (0666
    /// less the umask, as SQLite makes the catalog's own files); one made by another user is
    /// opened read-only, which `flock` takes all the same.
    private static func open(_ path: String) throws(CatalogError) -> CatalogFileLock {
        let lockPath = Self.path(of: path)
        try? FileManager.default.createDirectory(
            atPath: (lockPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        var raw = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
        if raw < 0 && (errno == EACCES || errno == EROFS) { raw = Glibc.open(lockPath, O_RDONLY | O_CLOEXEC) }
        guard raw >= 0 else {
            let reason = String(cString: strerror(errno))
            throw CatalogError(
                .cannotOpen, "cannot open the catalog's lock file \(lockPath): \(reason)", location: SourceLocation(path: path),
                hint: "the catalog's folder must be writable by whoever writes to the catalog")
        }
        return CatalogFileLock(descriptor: raw)
    }

    /// A pid other than this one holding a lock on the catalog's lock file; nil where unknown.
    private static func holder(of path: String) -> Int? {
        AdvisoryLock.holder(of: Self.path(of: path), otherThan: Int(getpid()))
    }
}
