/// Parses JSON text into `JSONValue`, straight from UTF-8 bytes.
///
/// Strict RFC 8259: one value, optional surrounding white space, no trailing commas, no
/// comments, no duplicate keys, no lone surrogate escapes, valid UTF-8. This is the reader's
/// hot path, so it walks raw bytes and never goes through `Character`.
public struct JSONParser {
    /// Nesting deeper than this is rejected rather than risking the stack.
    public static let maximumDepth = 512

    /// Parses a whole text.
    public static func parse(_ bytes: some Collection<UInt8>) throws -> JSONValue {
        if let result = try bytes.withContiguousStorageIfAvailable({ try parse(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return try Array(bytes).withUnsafeBytes { try parse($0) }
    }

    /// Parses a whole text held in raw memory.
    public static func parse(_ buffer: UnsafeRawBufferPointer) throws -> JSONValue {
        let bytes = buffer.bindMemory(to: UInt8.self)
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            throw TraceCoreError(.invalidJSON, "invalid JSON at byte 0: the text is empty", byteOffset: 0)
        }
        var parser = Cursor(base: base, end: bytes.count)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        if parser.index < parser.end {
            throw parser.failure("unexpected \(parser.describeByte()) after the JSON value")
        }
        return value
    }

    /// `bytes` with each lone UTF-16 surrogate escape (`\\ud83d` not followed by its low half,
    /// or a low half alone) written as `\\ufffd`; nil when there is none. The strict parser
    /// refuses such text (it is no Unicode), but a program that cuts a string inside an emoji
    /// (JavaScript's `slice`) writes it: a reader of another program's lines repairs it rather
    /// than lose the line.
    public static func replacingLoneSurrogates(in bytes: [UInt8]) -> [UInt8]? {
        /// The code unit of the `\\uXXXX` escape at `index`, read as the parser reads one.
        func hex(at index: Int) -> UInt32? {
            guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
            return bytes.withUnsafeBufferPointer { buffer in
                guard let base = buffer.baseAddress else { return nil }
                var cursor = Cursor(base: base, end: index + 6, index: index + 2)
                return try? cursor.hex4()
            }
        }
        var result: [UInt8] = []
        var copied = 0
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            guard let unit = hex(at: index) else {
                index += 2  // another escape (`\\\\`, `\\n`): its second byte is not a new one
                continue
            }
            if (0xD800...0xDBFF).contains(unit), let low = hex(at: index + 6), (0xDC00...0xDFFF).contains(low) {
                index += 12
            } else if (0xD800...0xDFFF).contains(unit) {
                result += bytes[copied..<index]
                result += Array("\\ufffd".utf8)
                index += 6
                copied = index
            } else {
                index += 6
            }
        }
        guard copied > 0 else { return nil }
        return result + bytes[copied...]
    }

    /// Whether `bytes` are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates,
    /// nothing above U+10FFFF): exactly the texts `String(validating:)` accepts.
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        func isContinuation(_ offset: Int) -> Bool { bytes[index + offset] & 0xC0 == 0x80 }
        while index < count {
            let lead = bytes[index]
            switch lead {
            case 0..<0x80:
                index += 1
            case 0xC2..<0xE0:
                guard index + 1 < count, isContinuation(1) else { return false }
                index += 2
            case 0xE0..<0xF0:
                guard index + 2 < count, isContinuation(1), isContinuation(2) else { return false }
                let second = bytes[index + 1]
                // E0 needs A0 and up (else overlong); ED stops below A0 (else a surrogate).
                if (lead == 0xE0 && second < 0xA0) || (lead == 0xED && second >= 0xA0) { return false }
                index += 3
            case 0xF0..<0xF5:
                guard index + 3 < count, isContinuation(1), isContinuation(2), isContinuation(3) else { return false }
                let second = bytes[index + 1]
                // F0 needs 90 and up (else overlong); F4 stops below 90 (else above U+10FFFF).
                if (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second >= 0x90) { return false }
                index += 4
            default:
                return false
            }
        }
        return true
    }

    /// Whether every byte is below 0x80, eight bytes at a time.
    static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var index = 0
        let raw = UnsafeRawPointer(base)
        while index + 8 <= bytes.count {
            if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            index += 8
        }
        while index < bytes.count {
            if base[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    struct Cursor {
        let base: UnsafePointer<UInt8>
        let end: Int
        var index = 0
        /// Set once `skipSpace` steps over any white space (the canonical form has none).
        var sawSpace = false

        func failure(_ message: String, at offset: Int? = nil) -> TraceCoreError {
            let where_ = offset ?? index
            return TraceCoreError(.invalidJSON, "invalid JSON at byte \(where_): \(message)", byteOffset: where_)
        }

        /// The printable ASCII word at the cursor (up to 24 bytes), quoted, for an error about
        /// text that is not a JSON literal (a line of prose: `'this'`); else `describeByte()`.
        func describeWord() -> String {
            var stop = index
            while stop < end && stop - index < 24, base[stop] > 0x20 && base[stop] < 0x7F,
                !"{}[],:\"".utf8.contains(base[stop])
            {
                stop += 1
            }
            guard stop > index else { return describeByte() }
            return "'" + String(decoding: UnsafeBufferPointer(start: base + index, count: stop - index), as: UTF8.self) + "'"
        }

        func describeByte() -> String {
            guard index < end else { return "end of text" }
            let byte = base[index]
            if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
            return "byte 0x\(String(byte, radix: 16))"
        }

        /// Steps over white space. Canonical text has none, so the first byte usually settles
        /// it, inline (it is called around every member name and value).
        @inline(__always)
        mutating func skipSpace() {
            if index < end && base[index] > 0x20 { return }
            while index < end {
                switch base[index] {
                case 0x20, 0x0A, 0x0D, 0x09:
                    index += 1
                    sawSpace = true
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws -> JSONValue {
            guard index < end else { throw failure("expected a value, found the end of the text") }
            switch base[index] {
            case UInt8(ascii: "{"): return .object(try object(depth: depth + 1))
            case UInt8(ascii: "["): return .array(try array(depth: depth + 1))
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw failure("expected a value, found \(describeByte())")
            }
        }

        mutating func literal(_ word: StaticString) throws {
            let count = word.utf8CodeUnitCount
            guard end - index >= count, ShortBytes.equal(base + index, word.utf8Start, count: count) else {
                throw failure("expected '\(word)', found \(describeWord())")
            }
            index += count
        }

        mutating func object(depth: Int) throws -> JSONObject {
            let start = index
            var members = try self.members(depth: depth)
            var sorted = true
            for position in members.indices.dropFirst()
            where JSONObject.compare(members[position - 1].key, members[position].key) >= 0 {
                sorted = false
                break
            }
            if !sorted {
                members.sort { JSONObject.compare($0.key, $1.key) < 0 }
                for position in members.indices.dropFirst()
                where JSONObject.compare(members[position - 1].key, members[position].key) == 0 {
                    throw failure("duplicate member name \"\(members[position].key)\" in object", at: start)
                }
            }
            return JSONObject(sortedUniqueMembers: members.trimmedToCount())
        }

        /// The members of the object at the cursor, in document order.
        mutating func members(depth: Int) throws -> [JSONObject.Member] {
            guard depth <= JSONParser.maximumDepth else { throw failure("nesting deeper than \(JSONParser.maximumDepth)") }
            let start = index
            index += 1
            var members: [JSONObject.Member] = []
            skipSpace()
            if index < end && base[index] == UInt8(ascii: "}") {
                index += 1
                return members
            }
            members.reserveCapacity(8)
            while true {
                skipSpace()
                guard index < end, base[index] == UInt8(ascii: "\"") else {
                    throw failure("expected a member name in double quotes, found \(describeByte())")
                }
                let key = try string()
                skipSpace()
                guard index < end, base[index] == UInt8(ascii: ":") else {
                    throw failure("expected ':' after member name \"\(key)\", found \(describeByte())")
                }
                index += 1
                skipSpace()
                let value = try value(depth: depth)
                members.append(JSONObject.Member(key: key, value: value))
                skipSpace()
                guard index < end else { throw failure("object opened at byte \(start) is not closed") }
                if base[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if base[index] == UInt8(ascii: "}") {
                    index += 1
                    break
                }
                throw failure("expected ',' or '}' in object, found \(describeByte())")
            }
            return members
        }

        mutating func array(depth: Int) throws -> [JSONValue] {
            guard depth <= JSONParser.maximumDepth else { throw failure("nesting deeper than \(JSONParser.maximumDepth)") }
            let start = index
            index += 1
            var elements: [JSONValue] = []
            skipSpace()
            if index < end && base[index] == UInt8(ascii: "]") {
                index += 1
                return elements
            }
            while true {
                skipSpace()
                elements.append(try value(depth: depth))
                skipSpace()
                guard index < end else { throw failure("array opened at byte \(start) is not closed") }
                if base[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if base[index] == UInt8(ascii: "]") {
                    index += 1
                    return elements.trimmedToCount()
                }
                throw failure("expected ',' or ']' in array, found \(describeByte())")
            }
        }

        /// The string at the cursor and, when it is one of `known`, its place there. Without
        /// escapes it is then found by its bytes and given back as `known`'s own string (no
        /// new storage, nothing to decode).
        mutating func string(among known: KnownStrings) throws -> (String, index: Int?) {
            let open = index
            if let (run, isASCII) = try plainString() {
                if let found = known.index(of: run) { return (known.strings[found], found) }
                return (try makeString(run, at: open + 1, isASCII: isASCII), nil)
            }
            // Written with escapes (no writer of ours does), it may still be one of them.
            index = open
            let text = try string()
            return (text, known.strings.firstIndex(of: text))
        }

        /// The string at the cursor. When it has no escapes and its bytes are `candidate`'s,
        /// `candidate` itself is returned: no new storage (a log repeats its run id and each
        /// line's hash on the next line).
        mutating func string(reusing candidate: String? = nil) throws -> String {
            let open = index
            let runStart = index + 1
            // Fast path: no escapes.
            if let (run, isASCII) = try plainString() {
                if let candidate, Self.bytesEqual(candidate, run) { return candidate }
                return try makeString(run, at: runStart, isASCII: isASCII)
            }
            // Slow path: unescape in one pass, each run between escapes copied whole (a model's
            // raw reply, itself JSON, escapes every quote). First where the string ends: its
            // closing quote, stepping over the byte after each backslash.
            // Unescaped, a string is never longer than that (`\uXXXX` is 6 bytes for at most 3,
            // a surrogate pair 12 for 4, every other escape 2 for 1).
            var close = index
            let raw = UnsafeRawPointer(base)
            findingTheEnd: while close < end {
                // Eight bytes at a time while none is a quote or a backslash (nor a control
                // character, which the reading below then names).
                while close + 8 <= end && !JSONWriter.needsEscape(raw.loadUnaligned(fromByteOffset: close, as: UInt64.self)) {
                    close += 8
                }
                guard close < end else { break }
                let byte = base[close]
                if byte == UInt8(ascii: "\"") { break findingTheEnd }
                close += byte == UInt8(ascii: "\\") ? 2 : 1
            }
            // (A string left open is read on as before, so that what is wrong with it is said.)
            // The unescaped bytes go to scratch memory, then into a string of their exact size:
            // a string sized to the escaped text would keep the difference for as long as it
            // lives (a decision's `raw` reply stays in the run's state).
            var highBits: UInt64 = 0
            var isClosed = false
            let text = try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(min(close, end) - runStart, 1)) { out in
                guard let to = out.baseAddress else { return "" }
                var written = index - runStart
                to.initialize(from: base + runStart, count: written)
                highBits |= JSONParser.isASCII(UnsafeBufferPointer(start: base + runStart, count: written)) ? 0 : 0x80
                while index < end {
                    // On a backslash: the escape, then the plain run after it.
                    index += 1
                    guard index < end else { break }
                    let escape = base[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): to[written] = 0x22
                    case UInt8(ascii: "\\"): to[written] = 0x5C
                    case UInt8(ascii: "/"): to[written] = 0x2F
                    case UInt8(ascii: "b"): to[written] = 0x08
                    case UInt8(ascii: "f"): to[written] = 0x0C
                    case UInt8(ascii: "n"): to[written] = 0x0A
                    case UInt8(ascii: "r"): to[written] = 0x0D
                    case UInt8(ascii: "t"): to[written] = 0x09
                    case UInt8(ascii: "u"):
                        let scalar = try unicodeEscape()
                        written -= 1  // the code units below take the place
                        UTF8.encode(scalar) { unit in
                            written += 1
                            to[written] = unit
                        }
                    default:
                        throw failure("invalid escape '\\\(Character(Unicode.Scalar(escape)))' in string", at: index - 2)
                    }
                    written += 1
                    let plain = index
                    isClosed = try skipPlainRun(highBits: &highBits)
                    if index > plain {
                        (to + written).initialize(from: base + plain, count: index - plain)
                        written += index - plain
                    }
                    if isClosed {
                        index += 1
                        // Escapes give whole UTF-8; the bytes copied as they were must be too
                        // (a sequence split by an escape is not).
                        let bytes = UnsafeBufferPointer(start: to, count: written)
                        if highBits & 0x8080_8080_8080_8080 != 0 && !JSONParser.isValidUTF8(bytes) {
                            throw TraceCoreError(
                                .invalidUTF8, "invalid UTF-8 in a string starting at byte \(runStart)", byteOffset: runStart)
                        }
                        return String(decoding: bytes, as: UTF8.self)
                    }
                }
                return ""
            }
            if isClosed { return text }
            throw failure("string opened at byte \(open) is not closed", at: open)
        }

        /// Steps over the string at the cursor, checking it as `string()` does, without making
        /// it: a string with escapes is checked by `string()` itself (they are rare). Returns
        /// whether it had no escape.
        @discardableResult
        mutating func skipString() throws -> Bool {
            let open = index
            if let (run, isASCII) = try plainString() {
                if !isASCII && !JSONParser.isValidUTF8(run) {
                    throw TraceCoreError(.invalidUTF8, "invalid UTF-8 in a string starting at byte \(open + 1)", byteOffset: open + 1)
                }
                return true
            }
            index = open
            _ = try string()
            return false
        }

        /// The bytes of the string at the cursor when it has no escapes, and whether they are
        /// all ASCII, the cursor then past its closing quote; nil (the cursor on the first
        /// escape) when it has one. A string left open is an error.
        @inline(__always)
        private mutating func plainString() throws -> (UnsafeBufferPointer<UInt8>, isASCII: Bool)? {
            let open = index
            index += 1
            let runStart = index
            var highBits: UInt64 = 0
            guard try skipPlainRun(highBits: &highBits) else {
                guard index < end else { throw failure("string opened at byte \(open) is not closed", at: open) }
                return nil
            }
            let run = UnsafeBufferPointer(start: base + runStart, count: index - runStart)
            index += 1
            return (run, highBits & 0x8080_8080_8080_8080 == 0)
        }

        /// Steps over a string's bytes up to its closing quote (true, the cursor on the quote)
        /// or its first escape or the end of the text (false): eight bytes at a time while none
        /// of them is a quote, a backslash or a control character (`JSONWriter.escapeMask`,
        /// whose first byte flagged is one that matches: the cursor goes straight to it). A
        /// control character is an error. Every byte stepped over is or-ed into `highBits`, so
        /// that its 0x80 bits say whether the run is ASCII without another pass.
        @inline(__always)
        private mutating func skipPlainRun(highBits: inout UInt64) throws -> Bool {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= end {
                // In memory order: byte 0 of the eight is the lowest.
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let special = JSONWriter.escapeMask(word)
                if special != 0 {
                    // The bytes before the first one flagged are plain: stepped over here, the
                    // loop below starts on the one flagged.
                    let plain = special.trailingZeroBitCount >> 3
                    highBits |= word & ((1 &<< UInt64(plain &* 8)) &- 1)
                    index += plain
                    break
                }
                highBits |= word
                index += 8
            }
            while index < end {
                let byte = base[index]
                if byte == UInt8(ascii: "\"") { return true }
                if byte == UInt8(ascii: "\\") { return false }
                if byte < 0x20 { throw failure("control character 0x\(String(byte, radix: 16)) inside a string") }
                highBits |= UInt64(byte)
                index += 1
            }
            return false
        }

        mutating func hex4() throws -> UInt32 {
            guard end - index >= 4 else { throw failure("incomplete \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = base[index]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw failure("invalid hex digit in \\u escape")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        mutating func unicodeEscape() throws -> Unicode.Scalar {
            let start = index - 2
            let first = try hex4()
            if first >= 0xD800 && first < 0xDC00 {
                guard end - index >= 2, base[index] == UInt8(ascii: "\\"), base[index + 1] == UInt8(ascii: "u") else {
                    throw failure("lone high surrogate \\u\(String(first, radix: 16)) in string", at: start)
                }
                index += 2
                let second = try hex4()
                guard second >= 0xDC00 && second < 0xE000 else {
                    throw failure("high surrogate not followed by a low surrogate in string", at: start)
                }
                let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                guard let scalar = Unicode.Scalar(combined) else { throw failure("invalid \\u escape", at: start) }
                return scalar
            }
            guard let scalar = Unicode.Scalar(first) else {
                throw failure("lone low surrogate \\u\(String(first, radix: 16)) in string", at: start)
            }
            return scalar
        }

        /// Whether `text`'s UTF-8 is exactly `bytes`.
        static func bytesEqual(_ text: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard text.utf8.count == bytes.count else { return false }
            return text.utf8.withContiguousStorageIfAvailable { utf8 in
                guard let left = utf8.baseAddress, let right = bytes.baseAddress else { return true }
                return ShortBytes.equal(left, right, count: bytes.count)
            } ?? text.utf8.elementsEqual(bytes)
        }

        func makeString(_ run: UnsafeBufferPointer<UInt8>, at offset: Int, isASCII: Bool? = nil) throws -> String {
            // `String(validating:)` is generic and slow per call; decode (which repairs) and
            // accept only when nothing was repaired, i.e. the bytes came through unchanged.
            let text = String(decoding: run, as: UTF8.self)
            if !(isASCII ?? JSONParser.isASCII(run)) && !text.utf8.elementsEqual(run) {
                throw TraceCoreError(.invalidUTF8, "invalid UTF-8 in a string starting at byte \(offset)", byteOffset: offset)
            }
            return text
        }

        mutating func number() throws -> JSONValue {
            let start = index
            var negative = false
            if base[index] == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            guard index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") else {
                throw failure("expected a digit in number")
            }
            var magnitude: UInt64 = 0
            var overflow = false
            if base[index] == UInt8(ascii: "0") {
                index += 1
                if index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") {
                    throw failure("leading zero in number", at: start)
                }
            } else {
                while index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") {
                    let (times, o1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times.addingReportingOverflow(UInt64(base[index] - UInt8(ascii: "0")))
                    overflow = overflow || o1 || o2
                    magnitude = sum
                    index += 1
                }
            }
            var isInteger = true
            if index < end, base[index] == UInt8(ascii: ".") {
                isInteger = false
                index += 1
                guard index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") else {
                    throw failure("expected a digit after the decimal point")
                }
                while index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") { index += 1 }
            }
            if index < end, base[index] == UInt8(ascii: "e") || base[index] == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if index < end, base[index] == UInt8(ascii: "+") || base[index] == UInt8(ascii: "-") { index += 1 }
                guard index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") else {
                    throw failure("expected a digit in the exponent")
                }
                while index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") { index += 1 }
            }
            if isInteger && !overflow {
                if negative {
                    if magnitude <= UInt64(Int.max) { return .int(-Int(magnitude)) }
                    if magnitude == UInt64(Int.max) + 1 { return .int(Int.min) }
                } else if magnitude <= UInt64(Int.max) {
                    return .int(Int(magnitude))
                }
            }
            let text = String(decoding: UnsafeBufferPointer(start: base + start, count: index - start), as: UTF8.self)
            guard let value = Double(text), value.isFinite else {
                throw failure("number \(text) is out of range", at: start)
            }
            return .double(value)
        }
    }
}

extension Array {
    /// The same elements in storage of exactly their count. A parsed tree can live as long as
    /// the run's state (every call's arguments): the capacity a parse reserved or grew into
    /// beyond the count (up to twice it) would stay allocated as long.
    func trimmedToCount() -> [Element] {
        guard capacity > count else { return self }
        return [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = buffer.initialize(fromContentsOf: self)
        }
    }
}
