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
        if liesUnder(absolute) { return absolute }
        let known = try? await catalog.work { catalog throws(CatalogError) in
            try catalog.query("SELECT 1 FROM logs WHERE path = ? LIMIT 1", arguments: [.text(absolute)], timeout: 10).rows.isEmpty == false
        }
        return known == true ? absolute : nil
    }

    /// `allowed`, on the calling thread (which may block on the catalog): for work already on a
    /// thread of its own, such as a replay asking whether it may read a fork's parent.
    func allowedBlocking(_ given: String) -> String? {
        guard let absolute = candidate(given) else { return nil }
        if liesUnder(absolute) { return absolute }
        let known = try? catalog.query("SELECT 1 FROM logs WHERE path = ? LIMIT 1", arguments: [.text(absolute)], timeout: 10)
        return known?.rows.isEmpty == false ? absolute : nil
    }

    /// The absolute path a request names, when it may be a log at all.
    private func candidate(_ given: String) -> String? {
        guard !given.isEmpty, given.hasSuffix(".jsonl.gz"), !given.contains("\0") else { return nil }
        return URL(fileURLWithPath: Catalog.absolute(given)).standardizedFileURL.path
    }

    /// Whether the path, its links resolved, lies under a directory given.
    private func liesUnder(_ absolute: String) -> Bool {
        let real = Self.resolved(absolute)
        return directories.contains { real.hasPrefix($0 + "/") }
    }

    /// The path with every symbolic link resolved (as it is when it does not exist).
    static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }
}
