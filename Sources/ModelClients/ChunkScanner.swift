import Foundation
import TraceCore

/// Reads the few members of a streamed Chat Completions chunk that a reply needs straight from
/// its bytes, checking the rest only for well-formedness, instead of building a JSON tree of
/// every chunk (a long reply is thousands of them).
///
/// It is a fast path, not a second parser: it accepts only what `JSONParser` accepts and gives
/// up (nil) on anything it does not check itself as strictly — a skipped string with an escape
/// or a non-ASCII byte, a duplicate member, a number outside the plain forms, deep nesting — and
/// the caller then parses the chunk whole. The strings it returns go through `JSONParser`
/// whenever they hold an escape or a non-ASCII byte, so they are exactly what a full parse
/// gives.
///
/// Why not TraceCore's `JSONScanner`, the log reader's: it was measured (issue 46). The same
/// reads written over `JSONScanner` (every valid chunk read, the test below passing) made
/// `model-benchmark`'s stream part slower, alternating old and new binaries three times on one
/// machine: OpenAI-style medians 84.9/92.6/93.6 MB/s against 108.2/132.4/134.1, Anthropic-style
/// 84.4/91.2/95.2 against 99.0/104.7/160.7. `JSONScanner` is called across a module boundary
/// through closures and generic entry points the optimizer cannot specialize, and checks what
/// a log needs (duplicate names by set, error paths per member); this scanner is inlined into
/// the assemblers and gives up instead of explaining. Two scanners, then, on purpose: this one
/// gives what `JSONParser` gives or nothing, which `ChunkScannerTests` checks on generated streams.
struct ChunkScanner {
    /// What a chunk says, by member; nil where the chunk does not have it.
    struct Chunk {
        struct CallDelta {
            var index: Int?
            var id: String?
            var name: String?
            var arguments: String?
        }

        /// `error`, when present (any value), and `usage`, when present and not null, as parsed values.
        var error: JSONValue?
        var usage: JSONValue?
        var hasChoice = false
        var content: String?
        var refusal: String?
        var toolCalls: [CallDelta] = []
        var finishReason: String?
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    /// The keys of the objects being read, innermost last, in stack memory the scan provides
    /// (a chunk with more than `keyCapacity` open keys is left to the parser).
    private let keys: UnsafeMutableBufferPointer<Range<Int>>
    private var keyCount = 0
    static let keyCapacity = 64

    /// A member's key, as the bytes between its quotes.
    struct Key {
        let bytes: UnsafeBufferPointer<UInt8>

        static func == (key: Key, name: StaticString) -> Bool {
            guard key.bytes.count == name.utf8CodeUnitCount, let base = key.bytes.baseAddress else { return false }
            return memcmp(base, name.utf8Start, key.bytes.count) == 0
        }
    }

    private init(_ bytes: UnsafeBufferPointer<UInt8>, keys: UnsafeMutableBufferPointer<Range<Int>>) {
        self.bytes = bytes
        self.keys = keys
    }

    /// Runs `body` with a scanner over `bytes` whose key memory is on the stack.
    private static func with<T>(_ bytes: UnsafeBufferPointer<UInt8>, _ body: (inout ChunkScanner) -> T) -> T {
        withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: keyCapacity) { keys in
            var scanner = ChunkScanner(bytes, keys: keys)
            return body(&scanner)
        }
    }

    /// Runs `body` over a string's UTF-8, in place when the string is contiguous (a copy
    /// otherwise), with a scanner whose key memory is on the stack.
    private static func with<T>(_ text: String, _ body: (inout ChunkScanner) -> T?) -> T? {
        if let result = text.utf8.withContiguousStorageIfAvailable({ with($0, body) }) { return result }
        return Array(text.utf8).withUnsafeBufferPointer { with($0, body) }
    }

    /// Whether the scan consumed the whole text (white space aside).
    private mutating func isAtEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    /// The chunk in `text` (an event's data), or nil when the fast path cannot vouch for it.
    static func scan(_ text: String) -> Chunk? {
        with(text) { scanner in
            var chunk = Chunk()
            return scanner.chunk(into: &chunk) && scanner.isAtEnd() ? chunk : nil
        }
    }

    /// A Messages stream's `content_block_delta`, the event a long reply is made of.
    struct BlockDelta {
        var index: Int?
        var deltaType: String?
        var text: String?
        var partialJSON: String?
    }

    /// The `content_block_delta` event in `text`, or nil when it is another event or the fast
    /// path cannot vouch for it.
    static func scanBlockDelta(_ text: String) -> BlockDelta? {
        with(text) { scanner in
            var delta = BlockDelta()
            var type: String?
            let isRead = scanner.object { scanner, key in
                if key == "type" { return scanner.optionalString(into: &type) }
                if key == "index" { return scanner.optionalInt(into: &delta.index) }
                guard key == "delta" else { return scanner.skipValue(depth: 1) }
                return scanner.memberObject(depth: 1) { scanner, key in
                    if key == "type" { return scanner.optionalString(into: &delta.deltaType) }
                    if key == "text" { return scanner.optionalString(into: &delta.text) }
                    if key == "partial_json" { return scanner.optionalString(into: &delta.partialJSON) }
                    return scanner.skipValue(depth: 2)
                }
            }
            return isRead && scanner.isAtEnd() && type == "content_block_delta" ? delta : nil
        }
    }

    // MARK: The members read

    private mutating func chunk(into chunk: inout Chunk) -> Bool {
        object { scanner, key in
            if key == "choices" { return scanner.choices(into: &chunk) }
            if key == "error" {
                guard let value = scanner.parsedValue() else { return false }
                // `"error": null` is no error: the SDKs read the member for truth.
                if value != .null { chunk.error = value }
                return true
            }
            if key == "usage" {
                guard let value = scanner.parsedValue() else { return false }
                // Not a ternary: JSONValue takes `nil` as its null, which would keep it.
                if value != .null { chunk.usage = value }
                return true
            }
            return scanner.skipValue(depth: 1)
        }
    }

    /// `choices`: the choice whose `index` is 0 is read (one without `index`: the one at the
    /// array's place 0), the others checked and skipped. A request with `n` above 1 gets its
    /// choices' pieces in any order, a chunk each: the reply is choice 0's alone.
    private mutating func choices(into chunk: inout Chunk) -> Bool {
        var position = 0
        return memberArray(depth: 1) { scanner in
            defer { position += 1 }
            scanner.skipWhitespace()
            guard scanner.peek == UInt8(ascii: "{") else { return scanner.skipValue(depth: 2) }
            var choice = Chunk()
            var number: Int?
            let isRead = scanner.object { scanner, key in
                if key == "index" { return scanner.optionalInt(into: &number) }
                if key == "delta" { return scanner.memberObject(depth: 3) { scanner, key in scanner.delta(key, into: &choice) } }
                if key == "finish_reason" { return scanner.optionalString(into: &choice.finishReason) }
                return scanner.skipValue(depth: 3)
            }
            guard isRead else { return false }
            if (number ?? position) == 0, !chunk.hasChoice {
                chunk.hasChoice = true
                chunk.content = choice.content
                chunk.refusal = choice.refusal
                chunk.toolCalls = choice.toolCalls
                chunk.finishReason = choice.finishReason
            }
            return true
        }
    }

    /// One member of `choices[0].delta`.
    private mutating func delta(_ key: Key, into chunk: inout Chunk) -> Bool {
        if key == "content" { return optionalString(into: &chunk.content) }
        if key == "refusal" { return optionalString(into: &chunk.refusal) }
        guard key == "tool_calls" else { return skipValue(depth: 4) }
        return memberArray(depth: 4) { scanner in
            scanner.skipWhitespace()
            var call = Chunk.CallDelta()
            // Not an object: a call with nothing in it, as the tree gives.
            let isRead = scanner.memberObject(depth: 5) { scanner, key in
                if key == "index" { return scanner.optionalInt(into: &call.index) }
                if key == "id" { return scanner.optionalString(into: &call.id) }
                guard key == "function" else { return scanner.skipValue(depth: 6) }
                return scanner.memberObject(depth: 6) { scanner, key in
                    if key == "name" { return scanner.optionalString(into: &call.name) }
                    if key == "arguments" { return scanner.optionalString(into: &call.arguments) }
                    return scanner.skipValue(depth: 7)
                }
            }
            guard isRead else { return false }
            chunk.toolCalls.append(call)
            return true
        }
    }

    // MARK: Values

    /// A string member's value (`into` keeps nil for any other type, as `stringValue` would).
    private mutating func optionalString(into target: inout String?) -> Bool {
        skipWhitespace()
        guard peek == UInt8(ascii: "\"") else {
            target = nil
            return skipValue(depth: 8)
        }
        guard let text = string() else { return false }
        target = text
        return true
    }

    /// A member read with `intValue`: plain integers here, anything else through the parser.
    private mutating func optionalInt(into target: inout Int?) -> Bool {
        skipWhitespace()
        let start = index
        guard skipValue(depth: 8) else { return false }
        if let number = Self.plainInt(UnsafeBufferPointer(rebasing: bytes[start..<index])) {
            target = number
        } else {
            guard let value = parsed(from: start) else { return false }
            target = value.intValue
        }
        return true
    }

    private static func plainInt(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return bytes.count > 1 && bytes[0] == UInt8(ascii: "0") ? nil : value
    }

    /// The next value parsed whole (for the rare members kept as values).
    private mutating func parsedValue() -> JSONValue? {
        skipWhitespace()
        let start = index
        guard skipValue(depth: 1) else { return nil }
        return parsed(from: start)
    }

    /// The bytes from `start` to the cursor, parsed by `JSONParser`.
    private func parsed(from start: Int) -> JSONValue? {
        try? JSONParser.parse(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[start..<index])))
    }

    /// A string at the cursor: plain ASCII directly, anything else through the parser.
    private mutating func string() -> String? {
        let start = index
        guard let isPlain = skipString() else { return nil }
        if isPlain { return String(decoding: UnsafeBufferPointer(rebasing: bytes[(start + 1)..<(index - 1)]), as: UTF8.self) }
        return parsed(from: start)?.stringValue
    }

    // MARK: Structure

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
            index += 1
        }
    }

    /// An object's members: `body` reads or skips each value; a key seen twice gives up (the
    /// parser refuses duplicates).
    private mutating func object(_ body: (inout ChunkScanner, Key) -> Bool) -> Bool {
        skipWhitespace()
        guard peek == UInt8(ascii: "{") else { return false }
        index += 1
        skipWhitespace()
        if peek == UInt8(ascii: "}") {
            index += 1
            return true
        }
        let base = keyCount
        defer { keyCount = base }
        while true {
            skipWhitespace()
            let start = index
            // Keys are read only when plain: anything else is left to the parser.
            guard skipString() == true else { return false }
            let range = (start + 1)..<(index - 1)
            let key = Key(bytes: UnsafeBufferPointer(rebasing: bytes[range]))
            if let origin = bytes.baseAddress {
                for seen in keys[base..<keyCount] where seen.count == range.count {
                    if memcmp(origin + seen.lowerBound, origin + range.lowerBound, range.count) == 0 { return false }
                }
            }
            guard keyCount < keys.count else { return false }
            keys[keyCount] = range
            keyCount += 1
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { return false }
            index += 1
            guard body(&self, key) else { return false }
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return true
            default: return false
            }
        }
    }

    /// A member that the reply reads when it is an object: read by `body`; any other value is
    /// checked and skipped (the tree's lookups find nothing in it either).
    private mutating func memberObject(depth: Int, _ body: (inout ChunkScanner, Key) -> Bool) -> Bool {
        skipWhitespace()
        return peek == UInt8(ascii: "{") ? object(body) : skipValue(depth: depth)
    }

    /// The same for a member read when it is a list.
    private mutating func memberArray(depth: Int, _ element: (inout ChunkScanner) -> Bool) -> Bool {
        skipWhitespace()
        return peek == UInt8(ascii: "[") ? array(element) : skipValue(depth: depth)
    }

    private mutating func array(_ element: (inout ChunkScanner) -> Bool) -> Bool {
        skipWhitespace()
        guard peek == UInt8(ascii: "[") else { return false }
        index += 1
        skipWhitespace()
        if peek == UInt8(ascii: "]") {
            index += 1
            return true
        }
        while true {
            guard element(&self) else { return false }
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return true
            default: return false
            }
        }
    }

    /// Checks and skips one value.
    private mutating func skipValue(depth: Int) -> Bool {
        guard depth < 64 else { return false }
        skipWhitespace()
        switch peek {
        case UInt8(ascii: "{"): return object { scanner, _ in scanner.skipValue(depth: depth + 1) }
        case UInt8(ascii: "["): return array { scanner in scanner.skipValue(depth: depth + 1) }
        case UInt8(ascii: "\""):
            let start = index
            switch skipString() {
            case true?: return true
            // An escape or a non-ASCII byte: valid only if the parser says so.
            case false?: return parsed(from: start) != nil
            case nil: return false
            }
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        default: return skipNumber()
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    /// A JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    private mutating func skipNumber() -> Bool {
        func digits() -> Int {
            let start = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            return index - start
        }
        if peek == UInt8(ascii: "-") { index += 1 }
        if peek == UInt8(ascii: "0") {
            index += 1
        } else if digits() == 0 {
            return false
        }
        if peek == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return false }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return false }
        }
        return true
    }

    /// Skips a string; true when it is plain (printable ASCII, no escape), false when it has an
    /// escape or a non-ASCII byte (its text then comes from the parser), nil when it is not a
    /// string this scanner can vouch for (a control character, no closing quote).
    private mutating func skipString() -> Bool? {
        guard peek == UInt8(ascii: "\"") else { return nil }
        index += 1
        var isPlain = true
        // Eight bytes at a time while none is a quote, a backslash, a control character or
        // non-ASCII (as the parser does; a false alarm only hands over to the byte loop).
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            let ones: UInt64 = 0x0101_0101_0101_0101
            while index + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                let special = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word) | word
                if special & (ones &* 0x80) != 0 { break }
                index += 8
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return isPlain
            case UInt8(ascii: "\\"):
                isPlain = false
                guard index + 1 < bytes.count else { return nil }
                index += 2
            case ..<0x20:
                return nil
            case 0x80...:
                isPlain = false
                index += 1
            default:
                index += 1
            }
        }
        return nil
    }
}
