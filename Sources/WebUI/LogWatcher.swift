import AgentRuntime
import ConfigFile
import Foundation
import Synchronization
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// Which logs changed under the directories `serve` watches, as the kernel says (inotify): a
/// log written, created, moved in or removed, or a call of it waiting for approval (its
/// `<log>.approvals/` folder). One thread reads the kernel's reports and wakes everyone waiting
/// on `changes`; nothing polls. Subdirectories are watched as they appear.
final class LogWatcher: Sendable {
    /// The changes so far: each log's last change, numbered in one sequence, by its path with its
    /// folder's links resolved (`key(of:)`). `rescans` counts the times the kernel's queue
    /// overflowed and changes were lost: every log must be looked at again.
    struct Changes: Sendable {
        var generation = 0
        var logs: [String: Int] = [:]
        var rescans = 0
    }

    let changes = WatchedState(Changes())
    private let descriptor: Int32
    private let wake = ChildProcess.WakePipe()
    private let state = Mutex(State())

    private struct State {
        var directories: [Int32: String] = [:]
        var stopped = false
    }

    /// Starts watching `directories` (and everything under them).
    init(directories: [String]) throws(WebError) {
        #if os(Linux)
            descriptor = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
            guard descriptor >= 0 else {
                throw WebError(.watchFailed, "cannot watch files for changes: \(String(cString: strerror(errno)))")
            }
            for directory in directories { _ = watchTree(directory) }
            JobThreads.once(name: "agent-eval serve watcher") { [self] in readReports() }
        #else
            descriptor = -1
        #endif
    }

    /// Watches the folder of `log` (a log a page follows, which may lie outside the watched
    /// trees) and returns the key its changes are kept under.
    func follow(_ log: String) -> String {
        let key = Self.key(of: log)
        add((key as NSString).deletingLastPathComponent)
        return key
    }

    /// The path a change of `log` is known by: its folder with every link resolved, and its name.
    /// Two spellings of one folder are one folder to the kernel, and one here.
    static func key(of log: String) -> String {
        let folder = (ConfigPath.absolute(log) as NSString).deletingLastPathComponent
        return LogAccess.resolved(folder) + "/" + (log as NSString).lastPathComponent
    }

    /// Stops the thread; nothing changes after.
    func stop() {
        let first = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        if first { wake.wake() }
    }

    /// The logs changed after `generation`, and the generation they bring it to.
    func changed(after generation: Int) -> (generation: Int, logs: [String]) {
        changes.withLock { changes in
            (changes.generation, changes.logs.filter { $0.value > generation }.map(\.key).sorted())
        }
    }

    /// The generation of `log`'s last change (0: none seen).
    func generation(of log: String) -> Int { changes.withLock { $0.logs[log] ?? 0 } }

    /// Watches `root` and every folder under it; the logs (and approvals folders' logs) found
    /// there, at any depth: a folder moved in brings what it holds.
    private func watchTree(_ root: String) -> [String] {
        let root = LogAccess.resolved(ConfigPath.absolute(root))
        add(root)
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var logs: [String] = []
        while let entry = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let path = root + "/" + entry
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { add(path) }
            if let log = Self.log(changedBy: path) { logs.append(log) }
        }
        return logs
    }

    /// Watches `directory` (resolved), again if it was before: the kernel gives the same watch for
    /// the same folder, and a folder made again after it was removed needs a new one.
    private func add(_ directory: String) {
        #if os(Linux)
            let mask = UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB)
            let watch = inotify_add_watch(descriptor, directory, mask)
            guard watch >= 0 else { return }
            state.withLock { $0.directories[watch] = directory }
        #endif
    }

    #if os(Linux)
        private func readReports() {
            defer { close(descriptor) }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while !state.withLock({ $0.stopped }) {
                var fds = [
                    pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.readFD, events: Int16(POLLIN), revents: 0),
                ]
                // Without a wake pipe (out of descriptors), the stop is seen within a second.
                guard poll(&fds, 2, wake.readFD >= 0 ? -1 : 1000) >= 0 || errno == EINTR else { return }
                if fds[1].revents != 0 { wake.drain() }
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                guard count > 0 else { continue }
                var logs: [String] = []
                var newDirectories: [String] = []
                var overflowed = false
                var folderLeft = false
                buffer.withUnsafeBytes { bytes in
                    var offset = 0
                    let header = MemoryLayout<inotify_event>.size
                    while offset + header <= count {
                        let watch = bytes.load(fromByteOffset: offset, as: Int32.self)
                        let mask = bytes.load(fromByteOffset: offset + 4, as: UInt32.self)
                        let length = Int(bytes.load(fromByteOffset: offset + 12, as: UInt32.self))
                        let nameBytes = bytes[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
                        offset += header + length
                        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                            overflowed = true
                            continue
                        }
                        if mask & UInt32(IN_IGNORED) != 0 {
                            // The folder is gone (or unwatched): its number may name another one later.
                            _ = state.withLock { $0.directories.removeValue(forKey: watch) }
                            continue
                        }
                        guard let directory = state.withLock({ $0.directories[watch] }) else { continue }
                        let name = String(decoding: nameBytes, as: UTF8.self)
                        let path = name.isEmpty ? directory : directory + "/" + name
                        if mask & UInt32(IN_ISDIR) != 0 && mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 {
                            newDirectories.append(path)
                        }
                        // A folder moved away (renamed, out of the tree) or removed: the logs the
                        // catalog knew in it are nowhere the kernel names, so all are looked at
                        // again. (Not a log's approvals folder, removed when its last call is
                        // settled: that is news of its log alone, below.)
                        if mask & UInt32(IN_ISDIR) != 0 && mask & UInt32(IN_MOVED_FROM | IN_DELETE) != 0,
                            !path.hasSuffix(".jsonl.gz.approvals")
                        {
                            folderLeft = true
                        }
                        if let log = Self.log(changedBy: path) { logs.append(log) }
                    }
                }
                // Logs written before the watch was in place, at any depth of a folder made or moved in.
                for directory in newDirectories { logs += watchTree(directory) }
                if !logs.isEmpty || overflowed || folderLeft {
                    changes.withLock { changes in
                        changes.generation += 1
                        for log in logs { changes.logs[log] = changes.generation }
                        if overflowed {
                            // Changes were lost: every log known is news again.
                            changes.rescans += 1
                            for log in changes.logs.keys { changes.logs[log] = changes.generation }
                        } else if folderLeft {
                            changes.rescans += 1
                        }
                    }
                }
            }
        }
    #endif

    /// The log a change at `path` is news of: the log itself, or the log whose approvals folder
    /// it is in (or is).
    static func log(changedBy path: String) -> String? {
        if path.hasSuffix(".jsonl.gz") { return path }
        let folder = (path as NSString).deletingLastPathComponent
        for candidate in [path, folder] where candidate.hasSuffix(".jsonl.gz.approvals") {
            return String(candidate.dropLast(".approvals".count))
        }
        return nil
    }
}
