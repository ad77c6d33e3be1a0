/// Shell-style name patterns for config files: `*` matches any run of characters, `?` one
/// character; everything else matches itself. `delete_*` matches `delete_customer`.
public struct Glob: Sendable, Hashable, CustomStringConvertible {
    public let pattern: String
    private let characters: [Character]

    public init(_ pattern: String) {
        self.pattern = pattern
        self.characters = Array(pattern)
    }

    /// Whether the pattern has no wildcard (and so names one thing).
    public var isLiteral: Bool { !characters.contains("*") && !characters.contains("?") }

    public func matches(_ text: String) -> Bool {
        if isLiteral { return text == pattern }
        let input = Array(text)
        var p = 0
        var t = 0
        var star: Int?
        var resume = 0
        while t < input.count {
            if p < characters.count, characters[p] == "?" || characters[p] == input[t] {
                p += 1
                t += 1
            } else if p < characters.count, characters[p] == "*" {
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
        while p < characters.count, characters[p] == "*" { p += 1 }
        return p == characters.count
    }

    public var description: String { pattern }
}
