import ConfigFile
import Foundation
import Synchronization
import TraceCore
import TraceLog

/// What `index` did over many logs.
public struct IndexSummary: Sendable {
    /// Every log looked at, in path order.
    public var logs: [IndexedLog] = []

    public func count(_ change: IndexedLog.Change) -> Int { logs.count { $0.change == change } }
    public func count(_ status: LogStatus) -> Int { logs.count { $0.status == status } }
    /// Events read in all.
    public var eventsRead: Int { logs.reduce(0) { $0 + $1.eventsRead } }
}

extension Catalog {
    /// The logs `paths` name: files as given, directories searched recursively for
    /// `*.jsonl.gz` (hidden entries skipped), and globs (`Glob.paths(matching:)`: in any part,
    /// `**` for any number of folders; a last part `**` for the logs below). Sorted, without
    /// duplicates. Throws for a path that matches nothing.
    public static func findLogs(_ paths: [String]) throws(CatalogError) -> [String] {
        var found = Set<String>()
        for path in paths {
            var isDirectory: ObjCBool = false
            if Glob.isPathPattern(path) {
                // `runs/**` matches every entry below already: its logs, not its other files.
                let anyDepth = Glob.endsInAnyDepth(path)
                let matches = Glob.paths(matching: path)
                var named = Set<String>()
                for full in matches {
                    if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), isDirectory.boolValue {
                        if !anyDepth { named.formUnion(logs(under: full)) }
                    } else if !anyDepth || full.hasSuffix(".jsonl.gz") {
                        named.insert(absolute(full))
                    }
                }
                if matches.isEmpty || anyDepth && named.isEmpty { throw missing(path) }
                found.formUnion(named)
            } else if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
                if isDirectory.boolValue { found.formUnion(logs(under: path)) } else { found.insert(absolute(path)) }
            } else {
                throw missing(path)
            }
        }
        return found.sorted()
    }

    private static func missing(_ path: String) -> CatalogError {
        CatalogError(
            .missingPath, "\(path) does not exist", location: SourceLocation(path: path), hint: "give a log, a directory of logs or a glob")
    }

    /// Every `*.jsonl.gz` under `directory`, recursively, hidden entries skipped.
    static func logs(under directory: String) -> [String] {
        let root = absolute(directory)
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var logs: [String] = []
        while let entry = walker.nextObject() as? String {
            let name = (entry as NSString).lastPathComponent
            if name.hasPrefix(".") {
                walker.skipDescendants()
                continue
            }
            if name.hasSuffix(".jsonl.gz") { logs.append(root + "/" + entry) }
        }
        return logs
    }

    /// Indexes every log `paths` name (see `findLogs`); with no paths, every log the catalog
    /// holds already (so vanished ones are marked). Logs under a directory given that the
    /// catalog holds but the directory no longer does are marked vanished. Calls `progress`
    /// for each log, in path order, on the calling thread, once the batch it was in is
    /// committed: never while the write lock is held, so a slow reader of the output (a pipe
    /// nobody drains) cannot keep other processes from writing.
    ///
    /// Each log stands on its own: one the reader rejects (damage, a member over `memberLimit`
    /// decompressed bytes — a decompression bomb) is indexed as `damaged` with the reader's
    /// error, and one whose rows SQLite refuses is recorded `damaged` with SQLite's reason while
    /// the rest of its batch is written again without it. Only a failure of the catalog itself
    /// (locked past the busy timeout, full, damaged) stops the index.
    ///
    /// Logs are taken `logsPerTransaction` at a time. While one batch is written on the calling
    /// thread (one write transaction), the next is told apart on a read snapshot (unchanged
    /// logs are not read) and its logs are read on `jobs` other threads (at least one), so the
    /// reading never waits for SQLite. A log whose row another process changed meanwhile, or
    /// that holds more calls than a read may keep, is read again inside the transaction.
    /// The logs the catalog knows (seen from this machine, not vanished) under `directories`:
    /// with the logs found there now, those gone since (`index(paths:)` marks them vanished).
    public func knownLogs(under directories: [String]) throws(CatalogError) -> [String] {
        var known: [String] = []
        for directory in directories {
            let prefix = Self.absolute(directory) + "/"
            known += try read { db in
                let seen = Self.seenHere(db)
                return try db.column(
                    "SELECT path FROM logs WHERE \(db.dialect.hasPrefix("path")) AND status <> 'vanished'\(seen.condition)",
                    [prefix] + seen.arguments, as: String.self)
            }
        }
        return known
    }

    public func index(
        paths: [String], jobs: Int = 1, memberLimit: Int = Catalog.defaultMemberLimit,
        progress: (_ log: IndexedLog, _ done: Int, _ total: Int) -> Void = { _, _, _ in }
    ) throws(CatalogError) -> IndexSummary {
        var logs: [String]
        if paths.isEmpty {
            logs = try read { db in
                let seen = Self.seenHere(db)
                return try db.column(
                    "SELECT path FROM logs WHERE status <> 'vanished'\(seen.condition) ORDER BY path", seen.arguments, as: String.self)
            }
        } else {
            logs = try Self.findLogs(paths)
            // Known logs under the directories given that are not there any more.
            let directories = paths.filter { path in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
            }
            let present = Set(logs)
            logs.append(contentsOf: try knownLogs(under: directories).filter { !present.contains($0) })
            logs = Array(Set(logs)).sorted()
        }
        var summary = IndexSummary()
        let batches = stride(from: 0, to: logs.count, by: Self.logsPerTransaction).map {
            logs[$0..<min(logs.count, $0 + Self.logsPerTransaction)].map(Self.absolute)
        }
        // More readers than a batch has logs would wait for nothing.
        // Threads kept until the index ends: a reader keeps its buffers and inflaters per thread
        // (`ThreadSlot`), which a thread per batch would make again.
        let readers = WorkerThreads<@Sendable () -> Void>(
            count: min(max(1, jobs), Self.logsPerTransaction), name: "agent-eval index reader"
        ) { $0() }
        defer { readers.cancelAndWait() }
        var next: PendingBatch?
        if let first = batches.first { next = try start(first, on: readers, memberLimit: memberLimit) }
        for number in batches.indices {
            guard let current = next else { break }
            // The next batch is read while this one is written.
            next = number + 1 < batches.count ? try start(batches[number + 1], on: readers, memberLimit: memberLimit) : nil
            let batch = current.wait()
            let indexed =
                batch.contains(where: { $0.unchanged == nil || $0.touch != nil })
                ? try write(batch, memberLimit: memberLimit) : batch.compactMap(\.unchanged)
            // Said once the batch is committed: output that blocks holds no lock.
            for log in indexed {
                summary.logs.append(log)
                progress(log, summary.logs.count, logs.count)
            }
        }
        return summary
    }

    /// The runner or host this process indexes on (`logs.seen_on`): the name a suite run
    /// records as its runner (`place(in:)`).
    static let seenOn: String? = SuiteRunInfo.place(in: ProcessInfo.processInfo.environment).runner

    /// A condition (` AND …`, to follow others) that keeps, in a catalog many machines share
    /// (PostgreSQL), the rows of logs this machine saw last (and rows that name no machine, from
    /// before schema 11): the only ones whose files it can
    /// look for (`index` with no paths, marking vanished logs, `catalog check`). Another
    /// runner's log is not gone because this one lacks the file. Empty for a SQLite catalog,
    /// one machine's.
    static func seenHere(_ db: any SQLConnection) -> (condition: String, arguments: [(any SQLArgument)?]) {
        guard db.dialect == .postgres else { return ("", []) }
        // Rows from before schema 11 say no machine: every machine looks after them.
        guard let seenOn else { return (" AND seen_on IS NULL", []) }
        return (" AND (seen_on = ? OR seen_on IS NULL)", [seenOn])
    }

    /// Writes one batch's logs in one transaction and returns what became of each. One commit
    /// for many logs, the write lock held for one batch at a time: an interrupted index loses at
    /// most the batch it was in (those logs keep their old rows and are read again next time).
    /// A log whose rows SQLite refuses rolls the batch back; it is written again with that log
    /// recorded as `damaged` instead (each such log once, so this ends).
    private func write(_ batch: [BatchLog], memberLimit: Int) throws(CatalogError) -> [IndexedLog] {
        var failed: [String: String] = [:]
        while true {
            let outcome = try writeRollingBack { db in
                let pending = PendingCallRows()
                var indexed: [IndexedLog] = []
                // The rows as they are under the write lock, looked up together.
                let rows = try StoredLog.fetch(db, paths: batch.filter { $0.unchanged == nil || $0.touch != nil }.map(\.path))
                for item in batch {
                    if let (known, now) = item.touch {
                        // Its new stamp taken when the row is still the one it was compared
                        // with; else (another process changed it meanwhile) looked at again here.
                        if let current = rows[item.path], current.id == known.id, current.identity == known.identity,
                            let unchanged = item.unchanged
                        {
                            try current.touch(path: item.path, now: now, in: db)
                            indexed.append(unchanged)
                        } else {
                            indexed.append(
                                try attributing(to: item.path, in: db) {
                                    try index(
                                        absolute: item.path, in: db, pending: pending, memberLimit: memberLimit,
                                        row: .found(rows[item.path]))
                                })
                        }
                    } else if let unchanged = item.unchanged {
                        indexed.append(unchanged)
                    } else if let problem = failed[item.path] {
                        indexed.append(try Self.recordFailure(of: item.path, problem: problem, in: db))
                    } else {
                        indexed.append(
                            try attributing(to: item.path, in: db) {
                                try index(
                                    absolute: item.path, in: db, pending: pending, prepared: item.prepared, memberLimit: memberLimit,
                                    row: .found(rows[item.path]))
                            })
                    }
                }
                try attributing(to: batch[batch.count - 1].path, in: db) { try pending.write(to: db) }
                return indexed
            }
            switch outcome {
            case .success(let indexed):
                return indexed
            case .failure(let failure):
                guard failed[failure.path] == nil else {
                    throw CatalogError(
                        .queryFailed, "the catalog at \(path) refused even the damaged entry of \(failure.path): \(failure.problem)",
                        location: SourceLocation(path: path))
                }
                failed[failure.path] = failure.problem
            }
        }
    }

    /// Starts looking at one batch's logs: their rows from one read snapshot (here), then on
    /// `readers`, each log found unchanged or read (`prepare(absolute:known:)`).
    private func start(_ paths: [String], on readers: WorkerThreads<@Sendable () -> Void>, memberLimit: Int) throws(CatalogError)
        -> PendingBatch
    {
        let rows = try read { db in try StoredLog.fetch(db, paths: paths) }
        let known = paths.map { rows[$0] }
        let batch = PendingBatch(paths.map { BatchLog(path: $0) })
        for (index, path) in paths.enumerated() {
            let known = known[index]
            batch.group.enter()
            readers.submit {
                let log = Self.prepare(absolute: path, known: known, memberLimit: memberLimit)
                batch.logs.withLock { $0[index] = log }
                batch.group.leave()
            }
        }
        return batch
    }
}

/// A log of a batch `index(paths:)` indexes, as the batch was looked at on a read snapshot.
struct BatchLog: Sendable {
    var path: String
    /// Set when its identity was unchanged, or its bytes were (then `touch` is set): nothing to read.
    var unchanged: IndexedLog?
    /// A log whose bytes are those of its row (`StoredLog.holdsSameContent`) though its stamp
    /// changed: the row, and the stamp it takes.
    var touch: (known: StoredLog, now: FileStamp)?
    /// The log read outside the transaction (nil: read it inside).
    var prepared: PreparedLog?
}

/// A batch whose logs are being looked at on the index's reader threads.
final class PendingBatch: Sendable {
    let logs: Mutex<[BatchLog]>
    let group = DispatchGroup()

    init(_ logs: [BatchLog]) { self.logs = Mutex(logs) }

    /// Waits until every log of the batch was looked at.
    func wait() -> [BatchLog] {
        group.wait()
        return logs.withLock { $0 }
    }
}
