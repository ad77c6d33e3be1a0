import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A POSIX file descriptor, closed when the value goes away. Only this module touches files.
final class FileDescriptor {
    let raw: Int32
    let path: String

    private init(raw: Int32, path: String) {
        self.raw = raw
        self.path = path
    }

    deinit { close(raw) }

    static func errorText() -> String {
        String(cString: strerror(errno))
    }

    static func openForReading(_ path: String) throws -> FileDescriptor {
        // Non-blocking: opening a FIFO for reading would wait for a writer forever. Regular files
        // ignore the flag, and nothing else is read.
        let raw = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard raw >= 0 else {
            throw LogError(
                .unreadable, "cannot open the log for reading: \(errorText())", path: path,
                hint: "check the path and the file's permissions")
        }
        let descriptor = FileDescriptor(raw: raw, path: path)
        var info = stat()
        guard fstat(raw, &info) == 0 else {
            throw LogError(.unreadable, "cannot look at the log: \(errorText())", path: path)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            return descriptor
        case S_IFDIR:
            // A folder opens, and fails only at the first read ("Is a directory"): say what it is.
            throw LogError(
                .unreadable, "this is a folder, not a log", path: path,
                hint: "give one of its logs (a .jsonl.gz file); a pipeline run's folder is read with `agent-eval pipeline show`")
        default:
            // A device (/dev/zero never ends), a pipe or a socket (a read may wait forever): a log
            // is a file, whatever a link in front of it says.
            throw LogError(
                .unreadable, "this is not a regular file (a device, a pipe or a socket), so it is not read as a log", path: path,
                hint: "give the log file itself; to read a log from a pipe, write it to a file first")
        }
    }

    /// Takes the log's write lock: an exclusive advisory lock (`flock`) held while the returned
    /// descriptor lives, released by the kernel when the process ends however it ends. Every
    /// writer, resumer and repairer takes it first, so one process at a time changes a log.
    /// A lock held elsewhere is an error naming the holder's pid where the system tells it.
    ///
    /// A lock that is let go within about a quarter of a second is waited for: a process this
    /// one spawns gets a copy of every open descriptor until it execs (close-on-exec closes
    /// them only then), so a writer that has just closed may still hold its lock for that
    /// moment through another thread's child. A writer that goes on holds it far longer.
    static func lockForWriting(_ path: String) throws -> FileDescriptor {
        let raw = open(path, O_RDONLY | O_CLOEXEC)
        guard raw >= 0 else {
            throw LogError(.unreadable, "cannot open the log to lock it: \(errorText())", path: path)
        }
        let descriptor = FileDescriptor(raw: raw, path: path)
        guard AdvisoryLock.take(raw, LOCK_EX, waitingUpTo: 0.25) else {
            let holder = lockHolder(of: path).map { " (pid \($0))" } ?? ""
            throw LogError(
                .locked, "another process\(holder) is writing to this log", path: path,
                hint: "wait for it to finish; a process that dies releases the lock by itself")
        }
        return descriptor
    }

    /// The pid holding a `flock` on `path`, from /proc/locks (Linux); nil where unknown.
    static func lockHolder(of path: String) -> Int? { AdvisoryLock.holder(of: path) }

    /// Opens for appending; with `create`, the file must not exist yet.
    static func openForAppending(_ path: String, create: Bool) throws -> FileDescriptor {
        let flags = O_WRONLY | O_APPEND | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0)
        let raw = open(path, flags, 0o644)
        guard raw >= 0 else {
            if create && errno == EEXIST {
                throw LogError(
                    .alreadyExists, "a log already exists at this path", path: path,
                    hint: "choose a new path, or open the existing log to continue it")
            }
            throw LogError(.unreadable, "cannot open the log for writing: \(errorText())", path: path)
        }
        return FileDescriptor(raw: raw, path: path)
    }

    /// Opens a journal for appending, made if missing (`LineJournal`).
    static func openForJournal(_ path: String) throws -> FileDescriptor {
        // The owner's alone: a journal keeps what came in (spans, as they were sent).
        let raw = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard raw >= 0 else { throw LogError(.writeFailed, "cannot open the journal for appending: \(errorText())", path: path) }
        return FileDescriptor(raw: raw, path: path)
    }

    static func openForUpdate(_ path: String) throws -> FileDescriptor {
        let raw = open(path, O_RDWR | O_CLOEXEC)
        guard raw >= 0 else {
            throw LogError(.unreadable, "cannot open the log for repair: \(errorText())", path: path)
        }
        return FileDescriptor(raw: raw, path: path)
    }

    /// Reads up to `count` bytes at the current position; 0 at the end of the file.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) throws -> Int {
        while true {
            let got = Glibc_read(raw, buffer, count)
            if got >= 0 { return got }
            if errno == EINTR { continue }
            throw LogError(.unreadable, "reading the log failed: \(FileDescriptor.errorText())", path: path)
        }
    }

    /// Reads up to `count` bytes at `offset`, without moving the file position.
    func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int) throws -> Int {
        while true {
            let got = pread(raw, buffer, count, off_t(offset))
            if got >= 0 { return got }
            if errno == EINTR { continue }
            throw LogError(.unreadable, "reading the log failed: \(FileDescriptor.errorText())", path: path)
        }
    }

    /// Writes all bytes, retrying short writes and interrupts.
    func write(_ buffer: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < buffer.count {
            guard let base = buffer.baseAddress else { return }
            let wrote = Glibc_write(raw, base + offset, buffer.count - offset)
            if wrote < 0 {
                if errno == EINTR { continue }
                throw LogError(.writeFailed, "writing the log failed: \(FileDescriptor.errorText())", path: path)
            }
            offset += wrote
        }
    }

    func sync() throws {
        guard fsync(raw) == 0 else {
            throw LogError(.writeFailed, "fsync of the log failed: \(FileDescriptor.errorText())", path: path)
        }
    }

    func seek(to offset: Int) throws {
        guard lseek(raw, off_t(offset), SEEK_SET) >= 0 else {
            throw LogError(.unreadable, "seeking in the log failed: \(FileDescriptor.errorText())", path: path)
        }
    }

    func truncate(to length: Int) throws {
        guard ftruncate(raw, off_t(length)) == 0 else {
            throw LogError(.writeFailed, "truncating the log failed: \(FileDescriptor.errorText())", path: path)
        }
    }

    func size() throws -> Int {
        var info = stat()
        guard fstat(raw, &info) == 0 else {
            throw LogError(.unreadable, "cannot stat the log: \(FileDescriptor.errorText())", path: path)
        }
        return Int(info.st_size)
    }

    /// Fsyncs the directory holding `path`, so that a file just created there survives a
    /// power loss (its directory entry is data of the directory).
    static func syncDirectory(of path: String) throws {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let raw = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_CLOEXEC)
        guard raw >= 0 else {
            throw LogError(.writeFailed, "cannot open the log's directory to sync it: \(errorText())", path: path)
        }
        defer { close(raw) }
        guard fsync(raw) == 0 else {
            throw LogError(.writeFailed, "fsync of the log's directory failed: \(errorText())", path: path)
        }
    }

    /// Creates the directories leading to `path` that do not exist yet (`mkdir -p` of its
    /// parent), so a new log can be written anywhere the user names.
    static func createParentDirectories(of path: String) throws {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let directory = String(path[..<slash])
        var prefix = directory.hasPrefix("/") ? "/" : ""
        for part in directory.split(separator: "/") {
            prefix += part
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw LogError(
                    .writeFailed, "cannot create the log's directory \(prefix): \(errorText())", path: path,
                    hint: "choose a directory that can be written to")
            }
            var info = stat()
            if stat(prefix, &info) == 0 && (info.st_mode & S_IFMT) != S_IFDIR {
                throw LogError(
                    .writeFailed, "cannot create the log's directory: \(prefix) is a file, not a directory", path: path,
                    hint: "choose another place for the log")
            }
            prefix += "/"
        }
    }

    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// The size of the file at `path`, or nil when it cannot be looked at.
    static func fileSize(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }

    static func remove(_ path: String) {
        unlink(path)
    }
}

// The global read/write, not the methods above.
private func Glibc_read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(fd, buffer, count)
}

private func Glibc_write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}
