import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Shell-style name patterns for config files: `*` matches any run of characters, `?` one
/// character; everything else matches itself. `delete_*` matches `delete_customer`.
public struct Glob: Sendable, Hashable, CustomStringConvertible {
    public let pattern: String
    private let characters: [Character]
    /// The pattern's bytes when it is plain ASCII without a carriage return: then a name that is
    /// too is matched byte by byte (its bytes are its characters), which is what `run` does for
    /// every file of a log directory.
    private let bytes: [UInt8]?

    public init(_ pattern: String) {
        self.pattern = pattern
        self.characters = Array(pattern)
        self.bytes = Glob.isPlainASCII(pattern.utf8) ? Array(pattern.utf8) : nil
    }

    /// Whether the pattern has no wildcard (and so names one thing).
    public var isLiteral: Bool { !characters.contains("*") && !characters.contains("?") }

    public func matches(_ text: String) -> Bool {
        if isLiteral { return text == pattern }
        if let bytes, Glob.isPlainASCII(text.utf8) {
            return Glob.match(bytes, Array(text.utf8), one: UInt8(ascii: "?"), any: UInt8(ascii: "*"))
        }
        return Glob.match(characters, Array(text), one: "?", any: "*")
    }

    public var description: String { pattern }

    /// ASCII with no `\r` (which begins the one two-byte ASCII character, `\r\n`).
    private static func isPlainASCII(_ utf8: String.UTF8View) -> Bool {
        utf8.allSatisfy { $0 < 0x80 && $0 != 0x0D }
    }

    /// Matches `input` against `pattern`, backtracking to the last `any` only.
    private static func match<Element: Equatable>(_ pattern: [Element], _ input: [Element], one: Element, any: Element) -> Bool {
        var p = 0
        var t = 0
        var star: Int?
        var resume = 0
        while t < input.count {
            if p < pattern.count, pattern[p] == one || pattern[p] == input[t] {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == any {
                star = p
                resume = t
                p += 1
            } else if let starAt = star {
                p = starAt + 1
                resume += 1
                t = resume
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == any { p += 1 }
        return p == pattern.count
    }
}

extension Glob {
    /// Whether `pattern` is a path glob (`paths(matching:)`): a part of it holds `*` or `?`, and
    /// it does not name an existing path as it is.
    public static func isPathPattern(_ pattern: String) -> Bool {
        pattern.split(separator: "/").contains { !Glob(String($0)).isLiteral } && !FileManager.default.fileExists(atPath: pattern)
    }

    /// The paths that exist and that `pattern` matches, in path order: `*` and `?` match within
    /// one part of the path (`runs/*.jsonl.gz`, `runs/*/run.jsonl.gz`), and a part that is `**`
    /// matches any number of folders, none included (`runs/**/*.jsonl.gz`); a last part `**` is
    /// `**/*`, every entry below. A glob matches no name that begins with `.`, and `**` does not
    /// go through a symbolic link to a folder (as a shell's globstar does not: a link back up
    /// would never end). The longest start of the pattern that names an existing folder as it is
    /// is taken as named, glob characters and all (a case file's folder called `proj*` joined to
    /// the pattern it gives is that folder, not its siblings). Files and folders alike, or with
    /// `skipsFolders` all but folders (and links to them): the caller says what it takes.
    public static func paths(matching pattern: String, skipsFolders: Bool = false) -> [String] {
        var parts: [String] = []
        for part in pattern.split(separator: "/").map(String.init) where !(part == "**" && parts.last == "**") { parts.append(part) }
        if parts.last == "**" { parts.append("*") }
        var base = pattern.hasPrefix("/") ? "/" : ""
        var start = 0
        while start < parts.count - 1, parts[start] != "**" {
            let folder = joined(base, parts[start])
            guard kind(folder, following: true) == S_IFDIR else { break }
            base = folder
            start += 1
        }
        var found = Set<String>()
        walk(parts[start...], under: base, skipsFolders: skipsFolders, into: &found)
        return found.sorted()
    }

    /// Whether the last part of `pattern` is `**` (every entry below): what a reader of logs
    /// takes as every log below, `*.jsonl.gz`, rather than every file.
    public static func endsInAnyDepth(_ pattern: String) -> Bool {
        pattern.split(separator: "/").last == "**"
    }

    private static func joined(_ base: String, _ name: String) -> String {
        base.isEmpty ? name : base.hasSuffix("/") ? base + name : base + "/" + name
    }

    /// The file type bits (`S_IFMT`) of `path`, of what a link leads to when `following`; nil
    /// when there is nothing there.
    private static func kind(_ path: String, following: Bool) -> mode_t? {
        var status = stat()
        guard (following ? stat(path, &status) : lstat(path, &status)) == 0 else { return nil }
        return status.st_mode & S_IFMT
    }

    /// Adds to `found` the paths under `base` ("" for the working folder) that `parts` match
    /// (with `skipsFolders`, all but the folders among them, links followed).
    private static func walk(_ parts: ArraySlice<String>, under base: String, skipsFolders: Bool, into found: inout Set<String>) {
        func entries() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: base.isEmpty ? "." : base)) ?? []).filter { !$0.hasPrefix(".") }
        }
        guard let part = parts.first else {
            if !base.isEmpty, let kind = kind(base, following: true), !skipsFolders || kind != S_IFDIR { found.insert(base) }
            return
        }
        let rest = parts.dropFirst()
        if part == "**" {
            // None: the rest here. Then each folder below, one level at a time (not through links).
            walk(rest, under: base, skipsFolders: skipsFolders, into: &found)
            for name in entries() where kind(joined(base, name), following: false) == S_IFDIR {
                walk(parts, under: joined(base, name), skipsFolders: skipsFolders, into: &found)
            }
            return
        }
        let glob = Glob(part)
        if glob.isLiteral {
            walk(rest, under: joined(base, part), skipsFolders: skipsFolders, into: &found)
            return
        }
        for name in entries() where glob.matches(name) { walk(rest, under: joined(base, name), skipsFolders: skipsFolders, into: &found) }
    }
}
