import ConfigFile
import Foundation
import GRDB
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
    /// after each log.
    public func index(
        paths: [String], progress: (_ log: IndexedLog, _ done: Int, _ total: Int) -> Void = { _, _, _ in }
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
        var next = 0
        while next < logs.count {
            // Unchanged logs are told apart on a read snapshot; the others are indexed a batch
            // per write transaction (one commit for many logs, the write lock held for one batch
            // at a time). An interrupted index loses at most the batch it was in: those logs
            // keep their old rows and are read again next time.
            let paths = logs[next..<min(logs.count, next + Self.logsPerTransaction)].map(Self.absolute)
            next += paths.count
            let batch = zip(paths, try unchangedLogs(at: paths)).map { (path: $0, unchanged: $1) }
            func report(_ indexed: IndexedLog) {
                summary.logs.append(indexed)
                progress(indexed, summary.logs.count, logs.count)
            }
            guard batch.contains(where: { $0.unchanged == nil }) else {
                for item in batch { item.unchanged.map(report) }
                continue
            }
            try write { db in
                let pending = PendingCallRows()
                for item in batch { report(try item.unchanged ?? index(absolute: item.path, in: db, pending: pending)) }
                try pending.write(to: db)
            }
        }
        return summary
    }
}
