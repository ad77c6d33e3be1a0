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
        guard !given.isEmpty, given.hasSuffix(".jsonl.gz"), !given.contains("\0") else { return nil }
        let absolute = URL(fileURLWithPath: Catalog.absolute(given)).standardizedFileURL.path
        let real = Self.resolved(absolute)
        if directories.contains(where: { real.hasPrefix($0 + "/") }) { return absolute }
        let known = try? await catalog.work { catalog throws(CatalogError) in
            try catalog.query("SELECT 1 FROM logs WHERE path = ? LIMIT 1", arguments: [.text(absolute)], timeout: 10).rows.isEmpty == false
        }
        return known == true ? absolute : nil
    }

    /// The path with every symbolic link resolved (as it is when it does not exist).
    static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }
}
