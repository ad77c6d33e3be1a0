import ConfigFile
import Foundation
import GRDB
import Synchronization
import TraceCore

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
    /// `*.jsonl.gz` (hidden entries skipped), and globs in the last component. Sorted, without
    /// duplicates. Throws for a path that matches nothing.
    public static func findLogs(_ paths: [String]) throws(CatalogError) -> [String] {
        var found = Set<String>()
        for path in paths {
            let name = (path as NSString).lastPathComponent
            var isDirectory: ObjCBool = false
            if !Glob(name).isLiteral {
                let directory = (path as NSString).deletingLastPathComponent
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory)) ?? []
                let matches = entries.filter { Glob(name).matches($0) && !$0.hasPrefix(".") }
                if matches.isEmpty { throw missing(path) }
                for entry in matches {
                    let full = directory.isEmpty ? entry : directory + "/" + entry
                    if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), isDirectory.boolValue {
                        found.formUnion(logs(under: full))
                    } else {
                        found.insert(absolute(full))
                    }
                }
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
    /// after each log, in path order, on the calling thread.
    ///
    /// Logs are taken `logsPerTransaction` at a time. While one batch is written on the calling
    /// thread (one write transaction), the next is told apart on a read snapshot (unchanged
    /// logs are not read) and its logs are read on `jobs` other threads (at least one), so the
    /// reading never waits for SQLite. A log whose row another process changed meanwhile, or
    /// that holds more calls than a read may keep, is read again inside the transaction.
    public func index(
        paths: [String], jobs: Int = 1, progress: (_ log: IndexedLog, _ done: Int, _ total: Int) -> Void = { _, _, _ in }
    ) throws(CatalogError) -> IndexSummary {
        var logs: [String]
        if paths.isEmpty {
            logs = try read { db in try String.fetchAll(db, sql: "SELECT path FROM logs WHERE status <> 'vanished' ORDER BY path") }
        } else {
            logs = try Self.findLogs(paths)
            // Known logs under the directories given that are not there any more.
            let directories = paths.filter { path in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
            }
            let present = Set(logs)
            for directory in directories {
                let prefix = Self.absolute(directory) + "/"
                let known = try read { db in
                    try String.fetchAll(
                        db, sql: "SELECT path FROM logs WHERE substr(path, 1, ?) = ? AND status <> 'vanished'",
                        arguments: [prefix.utf8.count, prefix])
                }
                logs.append(contentsOf: known.filter { !present.contains($0) })
            }
            logs = Array(Set(logs)).sorted()
        }
        var summary = IndexSummary()
        let batches = stride(from: 0, to: logs.count, by: Self.logsPerTransaction).map {
            logs[$0..<min(logs.count, $0 + Self.logsPerTransaction)].map(Self.absolute)
        }
        let jobs = max(1, jobs)
        var next = batches.first.map { prepare($0, jobs: jobs) }
        // A batch still being read when an error ends the index is waited for: it reads the catalog.
        defer { next?.waitForEnd() }
        for number in batches.indices {
            guard let preparing = next else { break }
            let batch = try preparing.result()
            next = number + 1 < batches.count ? prepare(batches[number + 1], jobs: jobs) : nil
            func report(_ indexed: IndexedLog) {
                summary.logs.append(indexed)
                progress(indexed, summary.logs.count, logs.count)
            }
            guard batch.contains(where: { $0.unchanged == nil }) else {
                for item in batch { item.unchanged.map(report) }
                continue
            }
            // One commit for many logs, the write lock held for one batch at a time. An
            // interrupted index loses at most the batch it was in: those logs keep their old
            // rows and are read again next time.
            try write { db in
                let pending = PendingCallRows()
                for item in batch {
                    report(try item.unchanged ?? index(absolute: item.path, in: db, pending: pending, prepared: item.prepared))
                }
                try pending.write(to: db)
            }
        }
        return summary
    }

    /// One batch's logs on a read snapshot: each one's row, the unchanged ones told apart, and
    /// the others read (`prepare(absolute:known:)`), on other threads.
    private func prepare(_ paths: [String], jobs: Int) -> BackgroundWork<[BatchLog]> {
        BackgroundWork { () throws(CatalogError) -> [BatchLog] in
            let known = try self.read { db in try paths.map { try StoredLog.fetch(db, path: $0) } }
            var batch = zip(paths, known).map { path, known in
                var log = BatchLog(path: path, known: known)
                if let known, let stamp = FileStamp(path: path), known.identity.matches(path, now: stamp) {
                    log.unchanged = IndexedLog(path: path, change: .unchanged, status: known.status, problem: known.problem, eventsRead: 0)
                }
                return log
            }
            let toRead = batch.indices.filter { batch[$0].unchanged == nil }
            let reads = toRead.map { (path: batch[$0].path, known: batch[$0].known) }
            let prepared = concurrentMap(reads.count, jobs: jobs) { Self.prepare(absolute: reads[$0].path, known: reads[$0].known) }
            for (index, log) in zip(toRead, prepared) { batch[index].prepared = log }
            return batch
        }
    }
}

/// A log of a batch `index(paths:)` indexes, as the batch was looked at on a read snapshot.
struct BatchLog: Sendable {
    var path: String
    var known: StoredLog?
    /// Set when its identity was unchanged: nothing to read.
    var unchanged: IndexedLog?
    /// The log read outside the transaction (nil: read it inside).
    var prepared: PreparedLog?
}

/// `body(0..<count)` on up to `jobs` threads at once (the calling one and threads of their
/// own: the shared dispatch pool may be busy with the caller's own tasks), results in order.
func concurrentMap<T: Sendable>(_ count: Int, jobs: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
    guard jobs > 1 && count > 1 else { return (0..<count).map(body) }
    let results = Mutex<[Int: T]>([:])
    let nextIndex = Atomic<Int>(0)
    let work: @Sendable () -> Void = {
        while true {
            let index = nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue
            guard index < count else { return }
            let result = body(index)
            results.withLock { $0[index] = result }
        }
    }
    let helpers = (1..<min(jobs, count)).map { _ in BackgroundWork { () throws(CatalogError) in work() } }
    work()
    for helper in helpers { helper.waitForEnd() }
    return results.withLock { results in (0..<count).compactMap { results[$0] } }
}

/// Work started on a thread of its own whose result is asked for later.
final class BackgroundWork<T: Sendable>: Sendable {
    private let outcome = Mutex<Result<T, CatalogError>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws(CatalogError) -> T) {
        let thread = Thread { [self] in
            let result: Result<T, CatalogError>
            do throws(CatalogError) {
                result = .success(try body())
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        thread.name = "agent-eval index"
        thread.start()
    }

    /// Waits for the work to end.
    func waitForEnd() {
        done.wait()
        done.signal()
    }

    /// Waits for the work, then returns what it made or throws what it threw.
    func result() throws(CatalogError) -> T {
        waitForEnd()
        guard let result = outcome.withLock({ $0 }) else {
            throw CatalogError(.cannotOpen, "an index batch ended without a result")
        }
        return try result.get()
    }
}
