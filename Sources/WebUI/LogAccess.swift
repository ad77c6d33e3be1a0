import Catalog
import ConfigFile
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Which logs the server may read: those the catalog indexes, and logs under the directories it
/// was given — a path anywhere else (`../../etc/passwd`, a symbolic link out of a directory) is
/// not read, whatever the page asked.
struct LogAccess: Sendable {
    let catalog: Catalog
    /// Resolved (`resolved`), each without a trailing slash.
    let directories: [String]

    /// The log's absolute path when it may be read, else nil.
    func allowed(_ given: String) async -> String? {
        guard let absolute = candidate(given) else { return nil }
        let real = Self.resolved(absolute)
        if Self.liesUnder(directories, resolved: real) { return absolute }
        let access = self
        return (try? await catalog.work { _ in access.isIndexed(absolute, real: real) }) == true ? absolute : nil
    }

    /// `allowed`, on the calling thread (which may block on the catalog): for work already on a
    /// thread of its own, such as a replay asking whether it may read a fork's parent.
    func allowedBlocking(_ given: String) -> String? {
        guard let absolute = candidate(given) else { return nil }
        let real = Self.resolved(absolute)
        return Self.liesUnder(directories, resolved: real) || isIndexed(absolute, real: real) ? absolute : nil
    }

    /// Whether the catalog has the log that reading `absolute` reads: its row at that path, and
    /// — when a symbolic link on the way leads elsewhere (`real`) — a row at where it leads too. A
    /// log indexed under a served folder and then replaced by a link out of it is not read
    /// through its old row.
    private func isIndexed(_ absolute: String, real: String) -> Bool {
        isIndexed(absolute) && (real == absolute || isIndexed(real))
    }

    /// Whether the catalog has a log at `absolute` (a catalog that cannot answer: no).
    private func isIndexed(_ absolute: String) -> Bool {
        Self.isIndexed(absolute, in: catalog)
    }

    /// Whether `catalog` has a log at `absolute` (a catalog that cannot answer: no).
    static func isIndexed(_ absolute: String, in catalog: Catalog) -> Bool {
        let rows = try? catalog.query("SELECT 1 FROM logs WHERE path = ? LIMIT 1", arguments: [.text(absolute)], timeout: 10).rows
        return rows?.isEmpty == false
    }

    /// The absolute path a request names, when it may be a log at all.
    private func candidate(_ given: String) -> String? {
        guard !given.isEmpty, given.hasSuffix(".jsonl.gz"), !given.contains("\0") else { return nil }
        return URL(fileURLWithPath: Catalog.absolute(given)).standardizedFileURL.path
    }

    /// Whether `path`, its links resolved, lies under one of `directories` (resolved already).
    static func liesUnder(_ directories: [String], _ path: String) -> Bool {
        liesUnder(directories, resolved: resolved(path))
    }

    private static func liesUnder(_ directories: [String], resolved real: String) -> Bool {
        directories.contains { real.hasPrefix($0 + "/") }
    }

    /// The absolute path with every symbolic link resolved. A path that does not exist (yet) has
    /// its deepest folder that does resolved, and the rest as given: a name under a link to a
    /// folder elsewhere resolves to elsewhere whether or not the file is there.
    static func resolved(_ path: String) -> String {
        if let real = realpath(path, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        let parent = (path as NSString).deletingLastPathComponent
        guard parent != path, !parent.isEmpty else { return path }
        let name = (path as NSString).lastPathComponent
        let resolvedParent = resolved(parent)
        return resolvedParent.hasSuffix("/") ? resolvedParent + name : resolvedParent + "/" + name
    }
}
