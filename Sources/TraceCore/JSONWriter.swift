/// Writes JSON in the canonical form of the log format: no white space, object members in
/// key byte order (as `JSONObject` keeps them), strings as raw UTF-8 with only `"`, `\` and
/// control characters escaped, integers in decimal, doubles in their shortest round-trip form.
///
/// The same value always gives the same bytes; hashes and digests depend on that.
public struct JSONWriter: Sendable {
    /// The bytes written so far.
    public var bytes: [UInt8]

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// The canonical encoding of one value.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        writer.write(value)
        return writer.bytes
    }

    /// The canonical encoding of a value with a JSON form, written straight from it.
    public static func encode(_ value: some JSONEncodable) -> [UInt8] {
        var writer = JSONWriter()
        value.write(to: &writer)
        return writer.bytes
    }

    /// The canonical encoding of one value as a string.
    public static func encodeString(_ value: JSONValue) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }

    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: writeRaw("null")
        case .bool(let flag): writeRaw(flag ? "true" : "false")
        case .int(let number): write(number)
        case .double(let number): write(number)
        case .string(let text): write(text)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            for (position, member) in object.members.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                write(member.key)
                bytes.append(UInt8(ascii: ":"))
                write(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// An indented rendering for people (golden files, `--pretty` output): same key order, two
    /// spaces per level, a newline at the end. Not the canonical form.
    public static func encodePretty(_ value: JSONValue) -> String {
        var writer = JSONWriter()
        writer.writePretty(value, indent: 0)
        writer.bytes.append(0x0A)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// A line of spaces that pretty-printing copies its indentation from.
    private static let spaces = [UInt8](repeating: UInt8(ascii: " "), count: 64)

    private mutating func writePretty(_ value: JSONValue, indent: Int) {
        func newline(_ level: Int) {
            bytes.append(0x0A)
            // Copied from a line of spaces, a few bytes at a time: appending a repeated element
            // went byte by byte (in a debug build, most of writing a 50,000-case report).
            var left = level * 2
            while left > 0 {
                let count = min(left, Self.spaces.count)
                bytes.append(contentsOf: Self.spaces[..<count])
                left -= count
            }
        }
        switch value {
        case .array(let elements) where !elements.isEmpty:
            bytes.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                writePretty(element, indent: indent + 1)
            }
            newline(indent)
            bytes.append(UInt8(ascii: "]"))
        case .object(let object) where !object.isEmpty:
            bytes.append(UInt8(ascii: "{"))
            for (position, member) in object.members.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                write(member.key)
                writeRaw(": ")
                writePretty(member.value, indent: indent + 1)
            }
            newline(indent)
            bytes.append(UInt8(ascii: "}"))
        default:
            write(value)
        }
    }

    /// The nesting depth of encoded JSON `bytes` when it is more than `limit`, else nil: one
    /// pass over the bytes, skipping strings, so a writer can refuse what a reader would.
    public static func nestingDepth(of bytes: [UInt8], exceeding limit: Int) -> Int? {
        // Each level opens with `{` or `[`: fewer of them than the limit cannot exceed it, and
        // counting them is a fraction of the exact scan (most lines end here).
        if bytes.count <= limit || openingBracketCount(bytes) <= limit { return nil }
        let scan = nesting(of: bytes, stoppingAbove: limit)
        return scan.deepest > limit ? scan.deepest : nil
    }

    /// One pass over JSON text, skipping strings: the deepest nesting reached (the pass stops
    /// once it is over `limit`), the levels still open at the end, and whether the text ends
    /// inside a string. Text cut short ends with levels open or inside a string.
    public static func nesting(of bytes: some Sequence<UInt8>, stoppingAbove limit: Int = .max) -> (
        deepest: Int, open: Int, endsInString: Bool
    ) {
        var depth = 0
        var deepest = 0
        var isInString = false
        var isEscaped = false
        for byte in bytes {
            if isInString {
                if isEscaped {
                    isEscaped = false
                } else if byte == UInt8(ascii: "\\") {
                    isEscaped = true
                } else if byte == UInt8(ascii: "\"") {
                    isInString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): isInString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                deepest = max(deepest, depth)
                if depth > limit { return (deepest, depth, false) }
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default: break
            }
        }
        return (deepest, depth, isInString)
    }

    /// How many `{` and `[` bytes `bytes` holds, strings included; eight bytes at a time.
    static func openingBracketCount(_ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBytes { buffer in
            // `{` is 0x7B and `[` is 0x5B: with bit 0x20 set, both are 0x7B.
            let ones: UInt64 = 0x0101_0101_0101_0101
            let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
            var count = 0
            var index = 0
            while index + 8 <= buffer.count {
                let word = buffer.loadUnaligned(fromByteOffset: index, as: UInt64.self) | (ones &* 0x20)
                let difference = word ^ (ones &* 0x7B)
                // A byte's high bit is set here exactly when the byte of `difference` is zero.
                let zeros = ~(((difference & low7) &+ low7) | difference | low7)
                count += zeros.nonzeroBitCount
                index += 8
            }
            while index < buffer.count {
                if buffer[index] | 0x20 == 0x7B { count += 1 }
                index += 1
            }
            return count
        }
    }

    /// Appends `,"key":` (`"key":` for an object's first member) in one copy: a member name
    /// is written once per member, and byte-by-byte appends cost a uniqueness and capacity
    /// check each. `key` is ASCII without characters that need escaping.
    @inline(__always)
    mutating func writeMemberName(_ key: StaticString, isFirst: Bool) {
        key.withUTF8Buffer { name in
            let count = name.count + (isFirst ? 3 : 4)
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
                var position = 0
                if !isFirst {
                    buffer[0] = UInt8(ascii: ",")
                    position = 1
                }
                buffer[position] = UInt8(ascii: "\"")
                for byte in name {
                    position += 1
                    buffer[position] = byte
                }
                buffer[position + 1] = UInt8(ascii: "\"")
                buffer[position + 2] = UInt8(ascii: ":")
                bytes.append(contentsOf: UnsafeBufferPointer(buffer))
            }
        }
    }

    /// Appends ASCII text as it is (punctuation, literals, pre-encoded keys).
    public mutating func writeRaw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    public mutating func write(_ number: Int) {
        if number >= 0 && number < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(number))
            return
        }
        var magnitude = number.magnitude
        if number < 0 { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, enough for 20 digits
        withUnsafeMutableBytes(of: &digits) { raw in
            let scratch = raw.bindMemory(to: UInt8.self)
            var position = scratch.count
            repeat {
                position -= 1
                scratch[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[position...]))
        }
    }

    public mutating func write(_ number: Double) {
        guard number.isFinite else {
            writeRaw("null")
            return
        }
        bytes.append(contentsOf: number.description.utf8)
    }

    /// Writes a string literal with the escapes JSON requires and no others.
    public mutating func write(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            var index = 0
            while index < utf8.count {
                // Eight bytes at a time while none of them needs an escape (the common case).
                if index + 8 <= utf8.count, let base = utf8.baseAddress {
                    let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                    if !JSONWriter.needsEscape(word) {
                        index += 8
                        continue
                    }
                }
                let byte = utf8[index]
                index += 1
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                let at = index - 1
                if runStart < at { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<at])) }
                runStart = index
                switch byte {
                case UInt8(ascii: "\""): writeRaw("\\\"")
                case UInt8(ascii: "\\"): writeRaw("\\\\")
                case 0x0A: writeRaw("\\n")
                case 0x0D: writeRaw("\\r")
                case 0x09: writeRaw("\\t")
                case 0x08: writeRaw("\\b")
                case 0x0C: writeRaw("\\f")
                default:
                    writeRaw("\\u00")
                    bytes.append(JSONWriter.hexDigits[Int(byte >> 4)])
                    bytes.append(JSONWriter.hexDigits[Int(byte & 0x0F)])
                }
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Whether any of the eight bytes of `word` is a control character, `"` or `\\` (the
    /// classic SWAR tests for a zero byte and a byte below a bound; bytes of 0x80 and above
    /// never match).
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below20 = (word &- ones &* 0x20) & ~word & highs
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote & highs
        let hasBackslash = (backslash &- ones) & ~backslash & highs
        return (below20 | hasQuote | hasBackslash) != 0
    }
}
