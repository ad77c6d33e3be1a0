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
        if Self.liesUnder(directories, absolute) { return absolute }
        let access = self
        return (try? await catalog.work { _ in access.isIndexed(absolute) }) == true ? absolute : nil
    }

    /// `allowed`, on the calling thread (which may block on the catalog): for work already on a
    /// thread of its own, such as a replay asking whether it may read a fork's parent.
    func allowedBlocking(_ given: String) -> String? {
        guard let absolute = candidate(given) else { return nil }
        return Self.liesUnder(directories, absolute) || isIndexed(absolute) ? absolute : nil
    }

    /// Whether the catalog has a log at `absolute` (a catalog that cannot answer: no).
    private func isIndexed(_ absolute: String) -> Bool {
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
        let real = resolved(path)
        return directories.contains { real.hasPrefix($0 + "/") }
    }

    /// The path with every symbolic link resolved (as it is when it does not exist).
    static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }
}
