import Foundation

/// Paths inside config files (case files, agent files, pipeline files) are relative to the
/// file's directory. This is the one resolver for them.
public enum ConfigPath {
    /// `path` relative to `directory`, with `.` and `..` folded away so reports and commands show
    /// a clean path; an absolute `path` stays as it is.
    public static func resolve(_ path: String, from directory: String) -> String {
        let joined = path.hasPrefix("/") || directory.isEmpty || directory == "." ? path : directory + "/" + path
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." {
                parts.removeLast()
            } else {
                parts.append(part)
            }
        }
        let folded = (joined.hasPrefix("/") ? "/" : "") + parts.joined(separator: "/")
        return folded.isEmpty ? "." : folded
    }

    /// `path` resolved from `directory` as `resolve` does, then made absolute against this
    /// process's working directory: for what is handed to a child process that starts in
    /// another directory (a command tool's program, its working directory), where a path
    /// relative to the caller would be looked up from the wrong place.
    public static func absolute(_ path: String, from directory: String) -> String {
        let resolved = resolve(path, from: directory)
        return resolved.hasPrefix("/") ? resolved : resolve(resolved, from: FileManager.default.currentDirectoryPath)
    }
}
