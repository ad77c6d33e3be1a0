import TraceCore

/// The texts of a version 3 log's gzip members made from lines, chained as the writer chains
/// them (docs/log-format.md §3.1): each member's first line is given the SHA-256 of the member
/// before (`ContentHash.genesis` for the first) to carry as its `prev`. For tests that build a
/// log the writer would not write (a conformance case, a hostile log), edited as text.
public enum ChainedLog {
    /// Each member's text, its lines ending in a newline: `link(line, previous)` makes a
    /// member's first line carry `previous` (the other lines are kept as they are).
    public static func memberTexts(_ members: [[[UInt8]]], link: (_ line: [UInt8], _ previous: String) throws -> [UInt8]) rethrows
        -> [[UInt8]]
    {
        var texts: [[UInt8]] = []
        var previous = ContentHash.genesis
        for member in members {
            var text: [UInt8] = []
            for (index, line) in member.enumerated() { text += (index == 0 ? try link(line, previous) : line) + [0x0A] }
            previous = ContentHash.sha256Hex(text)
            texts.append(text)
        }
        return texts
    }
}
