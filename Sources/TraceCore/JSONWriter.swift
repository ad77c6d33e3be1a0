/// Writes JSON in the canonical form of the log format: no white space, object members in
/// key byte order (as `JSONObject` keeps them), strings as raw UTF-8 with only `"`, `\` and
/// control characters escaped, integers in decimal, doubles in their shortest round-trip form.
///
/// The same value always gives the same bytes; hashes and digests depend on that.
///
/// The bytes are kept in memory of the writer's own (`Storage`), written through a pointer: an
/// encoding is thousands of appends of a few bytes each (a member's name, an integer, a short
/// string), and appending to an array checks its uniqueness and capacity and goes through a
/// generic copy for each (issue 76: a quarter of the state digests' time). `bytes` gives them
/// as an array; the hot paths use `count`, `append`, `removeAll()` and `withUnsafeBytes`.
public struct JSONWriter: Sendable {
    /// The memory the bytes are in: owned by one writer, copied before a write when a copy of
    /// the writer shares it (a writer is a value, as an array is).
    final class Storage: @unchecked Sendable {
        let base: UnsafeMutablePointer<UInt8>
        let capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            base = .allocate(capacity: capacity)
        }

        deinit { base.deallocate() }
    }

    /// None until the first write when made with no capacity (a writer that only stands in for
    /// another, as in a swap, allocates nothing).
    private var storage: Storage?
    /// How many bytes of `storage` are written.
    public private(set) var count = 0

    public init(capacity: Int = 256) {
        storage = capacity > 0 ? Storage(capacity: capacity) : nil
    }

    /// The bytes written so far. Setting them replaces what was written.
    public var bytes: [UInt8] {
        get { withUnsafeBytes { Array($0) } }
        set {
            removeAll()
            newValue.withUnsafeBytes { append(contentsOf: $0) }
        }
    }

    /// Room for `extra` more bytes, in memory of this writer's alone: where they go.
    @inline(__always)
    mutating func reserve(_ extra: Int) -> UnsafeMutablePointer<UInt8> {
        if _slowPath(!isKnownUniquelyReferenced(&storage) || storage.unsafelyUnwrapped.capacity - count < extra) { grow(extra) }
        return storage.unsafelyUnwrapped.base + count
    }

    /// A new storage of this writer's own with room for `extra` more bytes (at least twice the
    /// old capacity when it grows, so that appends take amortized constant time).
    @inline(never)
    private mutating func grow(_ extra: Int) {
        let needed = count + extra
        let old = storage?.capacity ?? 0
        let new = Storage(capacity: old >= needed ? old : max(needed, old * 2, 64))
        if let storage { new.base.update(from: storage.base, count: count) }
        storage = new
    }

    /// Appends one byte.
    @inline(__always)
    public mutating func append(_ byte: UInt8) {
        reserve(1).initialize(to: byte)
        count += 1
    }

    /// Appends raw bytes.
    @inline(__always)
    public mutating func append(contentsOf source: UnsafeRawBufferPointer) {
        guard let from = source.baseAddress, source.count > 0 else { return }
        let count = source.count
        UnsafeMutableRawPointer(reserve(count)).copyMemory(from: from, byteCount: count)
        self.count += count
    }

    /// Appends the bytes of an array.
    public mutating func append(contentsOf source: [UInt8]) {
        source.withUnsafeBytes { append(contentsOf: $0) }
    }

    /// Appends a string's UTF-8 as it is (no quotes, no escapes).
    public mutating func append(utf8 text: String) {
        var text = text
        text.withUTF8 { append(contentsOf: UnsafeRawBufferPointer($0)) }
    }

    /// Forgets what was written, keeping the memory for what comes next (a copy that shares it
    /// keeps its bytes: the next write here takes memory of its own).
    public mutating func removeAll() {
        count = 0
    }

    /// Forgets what was written after the first `length` bytes.
    public mutating func truncate(to length: Int) {
        precondition(length >= 0 && length <= count, "JSONWriter.truncate: \(length) is outside 0...\(count)")
        count = length
    }

    /// Calls `body` with the bytes written so far.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: storage?.base, count: count))
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
            append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { append(UInt8(ascii: ",")) }
                write(element)
            }
            append(UInt8(ascii: "]"))
        case .object(let object):
            append(UInt8(ascii: "{"))
            for (position, member) in object.members.enumerated() {
                if position > 0 { append(UInt8(ascii: ",")) }
                write(member.key)
                append(UInt8(ascii: ":"))
                write(member.value)
            }
            append(UInt8(ascii: "}"))
        }
    }

    /// An indented rendering for people (golden files, `--pretty` output): same key order, two
    /// spaces per level, a newline at the end. Not the canonical form.
    public static func encodePretty(_ value: JSONValue) -> String {
        var writer = JSONWriter()
        writer.writePretty(value, indent: 0)
        writer.append(0x0A)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// A line of spaces that pretty-printing copies its indentation from.
    private static let spaces = [UInt8](repeating: UInt8(ascii: " "), count: 64)

    private mutating func writePretty(_ value: JSONValue, indent: Int) {
        func newline(_ level: Int) {
            append(0x0A)
            // Copied from a line of spaces, a few bytes at a time: appending a repeated element
            // went byte by byte (in a debug build, most of writing a 50,000-case report).
            var left = level * 2
            while left > 0 {
                let count = min(left, Self.spaces.count)
                Self.spaces.withUnsafeBytes { append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                left -= count
            }
        }
        switch value {
        case .array(let elements) where !elements.isEmpty:
            append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { append(UInt8(ascii: ",")) }
                newline(indent + 1)
                writePretty(element, indent: indent + 1)
            }
            newline(indent)
            append(UInt8(ascii: "]"))
        case .object(let object) where !object.isEmpty:
            append(UInt8(ascii: "{"))
            for (position, member) in object.members.enumerated() {
                if position > 0 { append(UInt8(ascii: ",")) }
                newline(indent + 1)
                write(member.key)
                writeRaw(": ")
                writePretty(member.value, indent: indent + 1)
            }
            newline(indent)
            append(UInt8(ascii: "}"))
        default:
            write(value)
        }
    }

    /// The nesting depth of encoded JSON `bytes` when it is more than `limit`, else nil: one
    /// pass over the bytes, skipping strings, so a writer can refuse what a reader would.
    public static func nestingDepth(of bytes: [UInt8], exceeding limit: Int) -> Int? {
        bytes.withUnsafeBytes { nestingDepth(of: $0, exceeding: limit) }
    }

    /// The nesting depth of the encoded JSON in `bytes` when it is more than `limit`, else nil.
    public static func nestingDepth(of bytes: UnsafeRawBufferPointer, exceeding limit: Int) -> Int? {
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

    /// How many `{` and `[` bytes `buffer` holds, strings included; eight bytes at a time.
    static func openingBracketCount(_ buffer: UnsafeRawBufferPointer) -> Int {
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

    /// Appends `,"key":` (`"key":` for an object's first member) in one copy: a member name
    /// is written once per member. `key` is ASCII without characters that need escaping.
    @inline(__always)
    mutating func writeMemberName(_ key: StaticString, isFirst: Bool) {
        key.withUTF8Buffer { name in
            let length = name.count
            let count = length + (isFirst ? 3 : 4)
            var to = reserve(count)
            if !isFirst {
                to.initialize(to: UInt8(ascii: ","))
                to += 1
            }
            to.initialize(to: UInt8(ascii: "\""))
            if let from = name.baseAddress { (to + 1).initialize(from: from, count: length) }
            (to + 1 + length).initialize(to: UInt8(ascii: "\""))
            (to + 2 + length).initialize(to: UInt8(ascii: ":"))
            self.count += count
        }
    }

    /// Appends ASCII text as it is (punctuation, literals, pre-encoded keys).
    public mutating func writeRaw(_ text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: UnsafeRawBufferPointer($0)) }
    }

    public mutating func write(_ number: Int) {
        if number >= 0 && number < 10 {
            append(UInt8(ascii: "0") + UInt8(number))
            return
        }
        var magnitude = number.magnitude
        // The digits are counted first, then written from the last one back, straight where
        // they go.
        var digits = 1
        var bound: UInt = 10
        while magnitude >= bound {
            digits += 1
            // Past the largest power of ten a `UInt` holds, every magnitude is below the next.
            let (next, overflow) = bound.multipliedReportingOverflow(by: 10)
            if overflow { break }
            bound = next
        }
        let sign = number < 0 ? 1 : 0
        let to = reserve(sign + digits)
        if sign == 1 { to.initialize(to: UInt8(ascii: "-")) }
        var position = to + sign + digits
        repeat {
            position -= 1
            position.initialize(to: UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        count += sign + digits
    }

    public mutating func write(_ number: Double) {
        guard number.isFinite else {
            writeRaw("null")
            return
        }
        append(utf8: number.description)
    }

    /// Writes a string literal with the escapes JSON requires and no others.
    public mutating func write(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            // Most strings need no escape: they are copied whole, quotes and all, in one piece.
            if !JSONWriter.needsEscape(utf8) {
                let count = utf8.count
                let to = reserve(count + 2)
                to.initialize(to: UInt8(ascii: "\""))
                if let from = utf8.baseAddress { (to + 1).initialize(from: from, count: count) }
                (to + 1 + count).initialize(to: UInt8(ascii: "\""))
                self.count += count + 2
                return
            }
            append(UInt8(ascii: "\""))
            var runStart = 0
            var index = 0
            while index < utf8.count {
                // Eight bytes at a time while none of them needs an escape (the common case); in
                // eight that hold one, straight to the first that does (the lowest bit of the
                // mask is always a byte that matches), not byte by byte.
                if index + 8 <= utf8.count, let base = utf8.baseAddress {
                    // In memory order: byte 0 of the eight is the lowest.
                    let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                    let mask = JSONWriter.escapeMask(word)
                    if mask == 0 {
                        index += 8
                        continue
                    }
                    index += mask.trailingZeroBitCount >> 3
                }
                let byte = utf8[index]
                index += 1
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                let at = index - 1
                if runStart < at { append(contentsOf: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[runStart..<at]))) }
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
                    append(JSONWriter.hexDigits[Int(byte >> 4)])
                    append(JSONWriter.hexDigits[Int(byte & 0x0F)])
                }
            }
            if runStart < utf8.count { append(contentsOf: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[runStart...]))) }
            append(UInt8(ascii: "\""))
        }
    }

    /// Whether any byte of `utf8` is a control character, `"` or `\\`: eight bytes at a time,
    /// the last eight overlapping the words before them, and a run of four to seven as its first
    /// four and last four in one word; only a run of fewer than four byte by byte.
    @inline(__always)
    static func needsEscape(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = utf8.baseAddress else { return false }
        let raw = UnsafeRawPointer(base)
        let count = utf8.count
        if count >= 8 {
            var index = 0
            while index + 8 <= count {
                if needsEscape(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { return true }
                index += 8
            }
            return index < count && needsEscape(raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
        }
        if count >= 4 {
            let first = UInt64(raw.loadUnaligned(as: UInt32.self))
            let last = UInt64(raw.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self))
            return needsEscape(first | last << 32)
        }
        var index = 0
        while index < count {
            let byte = base[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return true }
            index += 1
        }
        return false
    }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Whether any of the eight bytes of `word` is a control character, `"` or `\\`.
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool { escapeMask(word) != 0 }

    /// The high bit of each of the eight bytes of `word` that may be a control character, `"`
    /// or `\\` (the classic SWAR tests for a zero byte and a byte below a bound; bytes of 0x80
    /// and above never match). A borrow only raises a false alarm in a byte above one that
    /// matches, so the lowest bit set is always a byte that does: with `word` loaded in memory
    /// order (little-endian), its trailing zero bits / 8 is that byte's offset.
    @inline(__always)
    static func escapeMask(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below20 = (word &- ones &* 0x20) & ~word
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        return (below20 | (quote &- ones) & ~quote | (backslash &- ones) & ~backslash) & highs
    }
}
