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
