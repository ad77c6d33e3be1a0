/// Paths inside config files (case files, pipeline files) are relative to the file's directory.
public enum ConfigPath {
    /// `path` relative to `directory`, with `.` and `..` folded away so reports and commands show
    /// a clean path; an absolute `path` stays as it is.
    public static func resolve(_ path: String, from directory: String) -> String {
        let joined = path.hasPrefix("/") || directory.isEmpty ? path : directory + "/" + path
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." {
                parts.removeLast()
            } else {
                parts.append(part)
            }
        }
        return (joined.hasPrefix("/") ? "/" : "") + parts.joined(separator: "/")
    }
}
