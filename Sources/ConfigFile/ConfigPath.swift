import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one path resolver: paths inside config files (case files, agent files, pipeline files),
/// which are relative to the file's directory, the paths handed to child processes, and the
/// catalog's keys for logs (absolute and standard).
public enum ConfigPath {
    /// `path` relative to `directory`, with `.` and `..` folded away so reports and commands show
    /// a clean path; an absolute `path` stays as it is (folded). `..` at the root stays at the
    /// root; a relative path keeps the `..` it cannot fold.
    /// The project's root folder: the nearest of `directory` and its parents that holds
    /// `.agent-eval/` (a project that has a catalog or a quarantine file already) or `.git` (a
    /// repository's root), so that a command run from a subfolder finds the project's files and
    /// does not leave new ones there; `directory` itself when none does.
    public static func projectRoot(of directory: String) -> String {
        let fileManager = FileManager.default
        var current = URL(fileURLWithPath: directory).standardizedFileURL
        while true {
            for marker in [".agent-eval", ".git"] where fileManager.fileExists(atPath: current.appendingPathComponent(marker).path) {
                return current.path
            }
            let parent = current.deletingLastPathComponent()
            if parent.path == current.path { return directory }
            current = parent
        }
    }

    public static func resolve(_ path: String, from directory: String) -> String {
        let joined = path.hasPrefix("/") || directory.isEmpty || directory == "." ? path : directory + "/" + path
        let isAbsolute = joined.hasPrefix("/")
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." {
                parts.removeLast()
            } else if part == ".." && isAbsolute {
                continue
            } else {
                parts.append(part)
            }
        }
        let folded = (isAbsolute ? "/" : "") + parts.joined(separator: "/")
        return folded.isEmpty ? "." : folded
    }

    /// `path` resolved from `directory` as `resolve` does, then made absolute against this
    /// process's working directory: for what is handed to a child process that starts in
    /// another directory (a command tool's program, its working directory), where a path
    /// relative to the caller would be looked up from the wrong place.
    public static func absolute(_ path: String, from directory: String) -> String {
        let resolved = resolve(path, from: directory)
        return resolved.hasPrefix("/") ? resolved : resolve(resolved, from: currentDirectory())
    }

    /// `path` made absolute against the working directory and standard (no empty, `.` or `..`
    /// component; symbolic links kept as they are). A path that is already so is given back as
    /// it is without being split (the catalog asks once per log of a suite).
    public static func absolute(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : currentDirectory() + "/" + path
        return isStandard(absolute) ? absolute : resolve(absolute, from: "/")
    }

    /// The working directory, straight from `getcwd` (cheaper than asking Foundation).
    public static func currentDirectory() -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(PATH_MAX) + 1) { buffer in
            guard let base = buffer.baseAddress, getcwd(base, buffer.count) != nil else { return FileManager.default.currentDirectoryPath }
            return String(decoding: UnsafeRawBufferPointer(start: base, count: strlen(base)), as: UTF8.self)
        }
    }

    /// Whether an absolute path has no empty, `.` or `..` component (no `//`, no trailing `/`):
    /// what `absolute` would give back unchanged.
    static func isStandard(_ path: String) -> Bool {
        var componentLength = 0
        var dots = 0
        for (index, byte) in path.utf8.enumerated() {
            if byte == UInt8(ascii: "/") {
                if index > 0 && (componentLength == 0 || componentLength == dots && dots <= 2) { return false }
                componentLength = 0
                dots = 0
            } else {
                if index == 0 { return false }
                componentLength += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        return path.utf8.count == 1 || !(componentLength == 0 || componentLength == dots && dots <= 2)
    }
}
