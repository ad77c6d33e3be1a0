import Foundation

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
    /// Whether `pattern` is a path glob (`paths(matching:)`): a part of it holds `*` or `?`.
    public static func isPathPattern(_ pattern: String) -> Bool {
        pattern.split(separator: "/").contains { !Glob(String($0)).isLiteral }
    }

    /// The paths that exist and that `pattern` matches, in path order: `*` and `?` match within
    /// one part of the path (`runs/*.jsonl.gz`, `runs/*/run.jsonl.gz`), and a part that is `**`
    /// matches any number of folders, none included (`runs/**/*.jsonl.gz`; `runs/**` is every
    /// entry below `runs`). A glob matches no name that begins with `.`, and `**` does not go
    /// through a symbolic link to a folder (as a shell's globstar does not: a link back up would
    /// never end); a part without a glob is taken as it is. Files and folders alike: the caller
    /// says what it takes.
    public static func paths(matching pattern: String) -> [String] {
        var parts = pattern.split(separator: "/").map(String.init)
        if parts.last == "**" { parts.append("*") }
        var found = Set<String>()
        walk(parts[...], under: pattern.hasPrefix("/") ? "/" : "", into: &found)
        return found.sorted()
    }

    /// Adds to `found` the paths under `base` ("" for the working folder) that `parts` match.
    private static func walk(_ parts: ArraySlice<String>, under base: String, into found: inout Set<String>) {
        func joined(_ name: String) -> String { base.isEmpty ? name : base.hasSuffix("/") ? base + name : base + "/" + name }
        func entries() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: base.isEmpty ? "." : base)) ?? []).filter { !$0.hasPrefix(".") }
        }
        guard let part = parts.first else {
            if !base.isEmpty, FileManager.default.fileExists(atPath: base) { found.insert(base) }
            return
        }
        let rest = parts.dropFirst()
        if part == "**" {
            // None: the rest here. Then each folder below, one level at a time (not through links).
            walk(rest, under: base, into: &found)
            for name in entries() {
                let path = joined(name)
                let kind = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType
                if kind == .typeDirectory { walk(parts, under: path, into: &found) }
            }
            return
        }
        let glob = Glob(part)
        if glob.isLiteral {
            walk(rest, under: joined(part), into: &found)
            return
        }
        for name in entries() where glob.matches(name) { walk(rest, under: joined(name), into: &found) }
    }
}
