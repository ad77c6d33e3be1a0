/// Reads JSON straight into typed values, member by member, without building a `JSONValue`
/// tree: how event payloads are decoded on the reader's hot path.
///
/// Each `read…` call consumes exactly one value and checks its type; a value of the wrong type
/// throws a field error, and `readObject` and `readArray` add the member name or index to the
/// error's path on its way out. Syntax is checked as strictly as `JSONParser` does.
///
/// ```swift
/// var name: String?
/// try JSONScanner.scan(bytes) { scanner in
///     try scanner.readObject { scanner, key in
///         switch key {
///         case "name": name = try scanner.readString()
///         default: try scanner.skipValue()
///         }
///     }
/// }
/// ```
public struct JSONScanner {
    var cursor: JSONParser.Cursor
    private var depth = 0
    /// Set, `String` values (`readText`) are checked as fully as when they are read but come
    /// back empty, without being made: for a decoder whose caller needs a value's structure and
    /// numbers, not its text (a fold over context packets). Member names, enums and
    /// `readString` are read as always.
    public var discardsText = false

    init(cursor: JSONParser.Cursor) {
        self.cursor = cursor
    }

    /// Runs `body` over one JSON text; what follows the value (other than white space) is an
    /// error.
    public static func scan<T>(_ buffer: UnsafeRawBufferPointer, _ body: (inout JSONScanner) throws -> T) throws -> T {
        let bytes = buffer.bindMemory(to: UInt8.self)
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            throw TraceCoreError(.invalidJSON, "invalid JSON at byte 0: the text is empty", byteOffset: 0)
        }
        var scanner = JSONScanner(cursor: JSONParser.Cursor(base: base, end: bytes.count))
        scanner.cursor.skipSpace()
        let result = try body(&scanner)
        scanner.cursor.skipSpace()
        if scanner.cursor.index < scanner.cursor.end {
            throw scanner.cursor.failure("unexpected \(scanner.cursor.describeByte()) after the JSON value")
        }
        return result
    }

    /// What the next value is, for type errors.
    private func nextValueDescription() -> String {
        guard cursor.index < cursor.end else { return "the end of the text" }
        switch cursor.base[cursor.index] {
        case UInt8(ascii: "{"): return "an object"
        case UInt8(ascii: "["): return "an array"
        case UInt8(ascii: "\""): return "a string"
        case UInt8(ascii: "t") where startsWithLiteral("true"), UInt8(ascii: "f") where startsWithLiteral("false"): return "a boolean"
        case UInt8(ascii: "n") where startsWithLiteral("null"): return "null"
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return "a number"
        default: return cursor.describeByte()
        }
    }

    /// Whether the text at the cursor is `literal` and ends there (text that only begins like
    /// one, such as a line of prose, is not named a boolean).
    private func startsWithLiteral(_ literal: StaticString) -> Bool {
        literal.withUTF8Buffer { expected in
            guard cursor.end - cursor.index >= expected.count else { return false }
            for offset in 0..<expected.count where cursor.base[cursor.index + offset] != expected[offset] { return false }
            let after = cursor.index + expected.count
            guard after < cursor.end else { return true }
            switch cursor.base[after] {
            case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0A, 0x0D, 0x09: return true
            default: return false
            }
        }
    }

    private func typeError(_ expected: String) -> TraceCoreError {
        TraceCoreError(.invalidField, "must be \(expected), found \(nextValueDescription())", fieldPath: "")
    }

    private func peek(_ byte: UInt8) -> Bool {
        cursor.index < cursor.end && cursor.base[cursor.index] == byte
    }

    /// Reads an object, calling `body` once per member with its name; `body` must read or skip
    /// the member's value. Members are seen in document order.
    public mutating func readObject(_ body: (inout JSONScanner, JSONKey) throws -> Void) throws {
        try readObject(known: nil, body)
    }

    /// `readObject`, for an object whose members are named among `known`: the same calls of
    /// `body`, the same checks and errors, in less work for an object in the writer's form. While
    /// each member's name is one of `known` after the one before it, with nothing between the
    /// tokens, the name is matched by its bytes, and no set of the names is kept (names in that
    /// order cannot repeat). From the first member that is not so — another name, one out of
    /// order, white space, an escape — the object is read on the general way, with the names
    /// matched so far among those it has seen.
    public mutating func readObject(known: MemberNames?, _ body: (inout JSONScanner, JSONKey) throws -> Void) throws {
        guard peek(UInt8(ascii: "{")) else { throw typeError("an object") }
        depth += 1
        defer { depth -= 1 }
        guard depth <= JSONParser.maximumDepth else {
            throw cursor.failure("nesting deeper than \(JSONParser.maximumDepth)")
        }
        let start = cursor.index
        cursor.index += 1
        cursor.skipSpace()
        if peek(UInt8(ascii: "}")) {
            cursor.index += 1
            return
        }
        var seen = SeenKeys()
        var isAfterValue = false
        if let known {
            var next = 0
            var matched: UInt64 = 0
            inOrder: while let (position, name) = known.match(at: cursor, from: next) {
                let keyStart = cursor.index
                cursor.index += name.count + 3
                // A value after white space is read the general way, from its name.
                guard cursor.index < cursor.end, cursor.base[cursor.index] > 0x20 else {
                    cursor.index = keyStart
                    break inOrder
                }
                let key = JSONKey(storage: .raw(UnsafeBufferPointer(start: cursor.base + keyStart + 1, count: name.count)))
                do {
                    try body(&self, key)
                } catch let error as TraceCoreError {
                    throw error.inside(key.string)
                }
                matched |= 1 << UInt64(position)
                next = position + 1
                if peek(UInt8(ascii: ",")) {
                    cursor.index += 1
                    continue inOrder
                }
                if peek(UInt8(ascii: "}")) {
                    cursor.index += 1
                    return
                }
                isAfterValue = true
                break inOrder
            }
            for position in 0..<known.names.count where matched & (1 << UInt64(position)) != 0 {
                _ = seen.insert(JSONKey(storage: .raw(known.names[position])))
            }
        }
        try readMembers(ofObjectAt: start, seen: &seen, isAfterValue: isAfterValue, body)
    }

    /// The general member loop of `readObject`, from a member's name (or, `isAfterValue`, from
    /// what follows a member's value), with the names `seen` before.
    private mutating func readMembers(
        ofObjectAt start: Int, seen: inout SeenKeys, isAfterValue: Bool, _ body: (inout JSONScanner, JSONKey) throws -> Void
    ) throws {
        var isAfterValue = isAfterValue
        while true {
            if !isAfterValue {
                cursor.skipSpace()
                guard peek(UInt8(ascii: "\"")) else {
                    throw cursor.failure("expected a member name in double quotes, found \(cursor.describeByte())")
                }
                let keyStart = cursor.index
                let key = try readKey()
                if seen.insert(key) == false {
                    throw cursor.failure("duplicate member name \"\(key.string)\" in object", at: keyStart)
                }
                cursor.skipSpace()
                guard peek(UInt8(ascii: ":")) else {
                    throw cursor.failure("expected ':' after member name \"\(key.string)\", found \(cursor.describeByte())")
                }
                cursor.index += 1
                cursor.skipSpace()
                do {
                    try body(&self, key)
                } catch let error as TraceCoreError {
                    throw error.inside(key.string)
                }
            }
            isAfterValue = false
            cursor.skipSpace()
            guard cursor.index < cursor.end else { throw cursor.failure("object opened at byte \(start) is not closed") }
            if peek(UInt8(ascii: ",")) {
                cursor.index += 1
                continue
            }
            if peek(UInt8(ascii: "}")) {
                cursor.index += 1
                return
            }
            throw cursor.failure("expected ',' or '}' in object, found \(cursor.describeByte())")
        }
    }

    private mutating func readKey() throws -> JSONKey {
        let open = cursor.index
        var index = open + 1
        while index < cursor.end {
            let byte = cursor.base[index]
            if byte == UInt8(ascii: "\"") {
                cursor.index = index + 1
                return JSONKey(storage: .raw(UnsafeBufferPointer(start: cursor.base + open + 1, count: index - open - 1)))
            }
            // Plain printable ASCII only, in one pass (names are short: eight bytes at a time,
            // as a string's are found, took more); anything else takes the full reader.
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
            index += 1
        }
        // Escapes, non-ASCII, a control character or an unterminated name: the full string
        // reader checks and decodes.
        return JSONKey(storage: .decoded(try cursor.string()))
    }

    /// Whether the next value is an array (for members whose elements take more than one form).
    public var nextIsArray: Bool { peek(UInt8(ascii: "[")) }

    /// Reads an array, calling `element` once per element.
    public mutating func readArray<T>(_ element: (inout JSONScanner) throws -> T) throws -> [T] {
        var elements: [T] = []
        try forEachElement { scanner, _ in elements.append(try element(&scanner)) }
        return elements
    }

    /// Reads an array, calling `body` once per element with its index; `body` must read or
    /// skip the element. Returns the number of elements.
    @discardableResult
    public mutating func forEachElement(_ body: (inout JSONScanner, Int) throws -> Void) throws -> Int {
        guard peek(UInt8(ascii: "[")) else { throw typeError("an array") }
        depth += 1
        defer { depth -= 1 }
        guard depth <= JSONParser.maximumDepth else {
            throw cursor.failure("nesting deeper than \(JSONParser.maximumDepth)")
        }
        let start = cursor.index
        cursor.index += 1
        var count = 0
        cursor.skipSpace()
        if peek(UInt8(ascii: "]")) {
            cursor.index += 1
            return count
        }
        while true {
            cursor.skipSpace()
            do {
                try body(&self, count)
            } catch let error as TraceCoreError {
                throw error.inside("[\(count)]")
            }
            count += 1
            cursor.skipSpace()
            guard cursor.index < cursor.end else { throw cursor.failure("array opened at byte \(start) is not closed") }
            if peek(UInt8(ascii: ",")) {
                cursor.index += 1
                continue
            }
            if peek(UInt8(ascii: "]")) {
                cursor.index += 1
                return count
            }
            throw cursor.failure("expected ',' or ']' in array, found \(cursor.describeByte())")
        }
    }

    /// Reads any value as a tree (for free-form fields: arguments, outputs, schemas).
    public mutating func readValue() throws -> JSONValue {
        try cursor.value(depth: depth)
    }

    /// Reads and discards one value, checking it as reading it would — syntax, valid UTF-8,
    /// escapes, no duplicate member names, nesting — without making it.
    public mutating func skipValue() throws {
        // The one walk over a value, with nothing to note: starting false, the canonical checks
        // are never made.
        var isCanonical = false
        try skipNotingCanonical(&isCanonical)
    }

    /// Reads an object written exactly as `names` say — those members, in that order, with no
    /// white space between tokens (`names[i]` is `"name":`, the separator before it left out) —
    /// calling `body` with each member's index on its value. Returns false as soon as the text
    /// is not that shape, the cursor then somewhere inside it: the caller reads the object
    /// again the general way, which also gives the errors. A fast path for an object whose
    /// canonical form is fixed (an event's envelope), without member-name matching or the
    /// duplicate-name search: the names are those, once each.
    mutating func readObject(exactly names: [StaticString], optional: Int? = nil, _ body: (inout JSONScanner, Int) throws -> Void)
        throws -> Bool
    {
        guard peek(UInt8(ascii: "{")), depth < JSONParser.maximumDepth else { return false }
        depth += 1
        defer { depth -= 1 }
        for (index, name) in names.enumerated() {
            // `{` before the first name, `,` before the others.
            guard cursor.index < cursor.end, cursor.base[cursor.index] == (index == 0 ? UInt8(ascii: "{") : UInt8(ascii: ","))
            else { return false }
            let matches = name.withUTF8Buffer { expected in
                guard let start = expected.baseAddress, cursor.end - cursor.index - 1 >= expected.count else { return false }
                return ShortBytes.equal(cursor.base + cursor.index + 1, start, count: expected.count)
            }
            // The member `optional` may be missing: then the next name is here instead.
            if !matches && index == optional && index > 0 { continue }
            cursor.index += 1
            guard matches else { return false }
            cursor.index += name.utf8CodeUnitCount
            try body(&self, index)
        }
        guard peek(UInt8(ascii: "}")) else { return false }
        cursor.index += 1
        return true
    }

    /// `skipValue`, which also notes whether the value's text is in the canonical form
    /// (`JSONText.isCanonical`): no white space, members in strictly ascending key order, no
    /// escape but those the form writes, numbers as written back. One pass for what a checked
    /// copy of a value (`JSONText`) needs: a string without escapes, the common case, is
    /// canonical as it stands. The same checks and errors as `skipValue`.
    mutating func skipValue(isCanonical: inout Bool) throws {
        let spaceBefore = cursor.sawSpace
        cursor.sawSpace = false
        defer { cursor.sawSpace = cursor.sawSpace || spaceBefore }
        try skipNotingCanonical(&isCanonical)
        if cursor.sawSpace { isCanonical = false }
    }

    /// Steps over one value when its text is valid and in the canonical form (`JSONText`), the
    /// form `JSONWriter` writes and so the form a log's values come in: true, the cursor past
    /// it. In one pass, with none of the general reader's per-member work: no set of names, since
    /// names in strictly ascending byte order cannot repeat. Anything else gives false, the
    /// cursor where it was, for the general reader (`skipValue(isCanonical:)`) to read and, for
    /// an error, to name: white space, names out of order, with escapes or beyond ASCII, an
    /// escape the form does not write, a number other than an integer of at most 15 digits,
    /// nesting deeper than 32 levels (or than the reader allows), and any error.
    mutating func skipCanonical() -> Bool {
        let start = cursor.index
        let (base, end) = (cursor.base, cursor.end)
        /// An open container: an object's previous name (`nameEnd` 0 until it has one), or an array.
        struct Level {
            var isObject: Bool
            var nameStart = 0
            var nameEnd = 0
        }
        let levels = 32
        return withUnsafeTemporaryAllocation(of: Level.self, capacity: levels) { open -> Bool in
            var depthNow = 0
            /// Reads a name and its colon, the cursor on the `"`; false when it does not follow
            /// the object's previous name or is not plain printable ASCII. (A name beyond ASCII is
            /// left to the general reader, which compares such names as strings, where two
            /// spellings of one name are one name, not as bytes.)
            func name(_ object: inout Level) -> Bool {
                guard cursor.index < end, base[cursor.index] == UInt8(ascii: "\"") else { return false }
                let nameStart = cursor.index + 1
                var index = nameStart
                while index < end, base[index] != UInt8(ascii: "\"") {
                    guard base[index] &- 0x20 < 0x60, base[index] != UInt8(ascii: "\\") else { return false }
                    index += 1
                }
                guard index + 1 < end, base[index + 1] == UInt8(ascii: ":") else { return false }
                if object.nameEnd > 0 {
                    // Strictly after the previous name in byte order.
                    let (previous, count) = (object.nameStart, object.nameEnd - object.nameStart)
                    var offset = 0
                    while offset < count, nameStart + offset < index, base[previous + offset] == base[nameStart + offset] { offset += 1 }
                    let follows =
                        offset == count
                        ? nameStart + offset < index : nameStart + offset < index && base[previous + offset] < base[nameStart + offset]
                    guard follows else { return false }
                }
                (object.nameStart, object.nameEnd) = (nameStart, index)
                cursor.index = index + 2
                return true
            }
            func literal(_ text: StaticString) -> Bool {
                let count = text.utf8CodeUnitCount
                guard end - cursor.index >= count, ShortBytes.equal(base + cursor.index, text.utf8Start, count: count) else { return false }
                cursor.index += count
                return true
            }
            func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }
            scanning: while true {
                // A value.
                guard cursor.index < end else { break scanning }
                switch base[cursor.index] {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    let isObject = base[cursor.index] == UInt8(ascii: "{")
                    cursor.index += 1
                    guard cursor.index < end else { break scanning }
                    // The general reader counts an empty container's level too.
                    guard depth + depthNow + 1 <= JSONParser.maximumDepth else { break scanning }
                    if base[cursor.index] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        cursor.index += 1
                    } else {
                        guard depthNow < levels else { break scanning }
                        open[depthNow] = Level(isObject: isObject)
                        depthNow += 1
                        if isObject && !name(&open[depthNow - 1]) { break scanning }
                        continue scanning
                    }
                case UInt8(ascii: "\""):
                    let quote = cursor.index
                    guard let isPlain = try? cursor.skipString() else { break scanning }
                    if !isPlain {
                        let text = UnsafeBufferPointer(start: base + quote, count: cursor.index - quote)
                        guard JSONText.canonicalStringEnd(text, from: 1, allowsEscapes: true) == text.count - 1 else { break scanning }
                    }
                case UInt8(ascii: "t"): guard literal("true") else { break scanning }
                case UInt8(ascii: "f"): guard literal("false") else { break scanning }
                case UInt8(ascii: "n"): guard literal("null") else { break scanning }
                default:
                    // An integer of 1 to 15 digits, no leading zero, not "-0": written back as it is.
                    var index = cursor.index
                    let isNegative = base[index] == UInt8(ascii: "-")
                    if isNegative { index += 1 }
                    let first = index
                    while index < end, isDigit(base[index]) { index += 1 }
                    let digits = index - first
                    guard digits >= 1, digits <= 15, base[first] != UInt8(ascii: "0") || (digits == 1 && !isNegative) else {
                        break scanning
                    }
                    if index < end, base[index] == UInt8(ascii: ".") || base[index] | 0x20 == UInt8(ascii: "e") { break scanning }
                    cursor.index = index
                }
                // After a value: the next one in its container, or the container's end.
                while depthNow > 0 {
                    guard cursor.index < end else { break scanning }
                    let byte = base[cursor.index]
                    cursor.index += 1
                    if byte == UInt8(ascii: ",") {
                        if open[depthNow - 1].isObject && !name(&open[depthNow - 1]) { break scanning }
                        continue scanning
                    }
                    guard byte == (open[depthNow - 1].isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { break scanning }
                    depthNow -= 1
                }
                return true
            }
            cursor.index = start
            return false
        }
    }

    private mutating func skipNotingCanonical(_ isCanonical: inout Bool) throws {
        guard cursor.index < cursor.end else { throw cursor.failure("expected a value, found the end of the text") }
        let start = cursor.index
        switch cursor.base[start] {
        case UInt8(ascii: "{"):
            var previous: UnsafeBufferPointer<UInt8>?
            try readObject { scanner, key in
                if case .raw(let name) = key.storage, isCanonical {
                    if let previous, JSONObject.compareBytes(previous, name) >= 0 { isCanonical = false }
                    previous = name
                } else {
                    isCanonical = false  // a name with an escape or beyond ASCII: written again to be sure
                }
                try scanner.skipNotingCanonical(&isCanonical)
            }
        case UInt8(ascii: "["):
            try forEachElement { scanner, _ in try scanner.skipNotingCanonical(&isCanonical) }
        case UInt8(ascii: "\""):
            if try !cursor.skipString() && isCanonical {
                isCanonical = JSONText.isCanonical(UnsafeBufferPointer(start: cursor.base + start, count: cursor.index - start))
            }
        default:
            _ = try cursor.value(depth: depth)  // a literal or a number: nothing to make but a rare double
            if isCanonical && cursor.base[start] != UInt8(ascii: "t") && cursor.base[start] != UInt8(ascii: "f")
                && cursor.base[start] != UInt8(ascii: "n")
            {
                isCanonical = JSONText.isCanonical(UnsafeBufferPointer(start: cursor.base + start, count: cursor.index - start))
            }
        }
    }

    public mutating func readString() throws -> String {
        guard peek(UInt8(ascii: "\"")) else { throw typeError("a string") }
        return try cursor.string()
    }

    /// A `String` value: `readString`, or an empty string once the text is checked when
    /// `discardsText` is set.
    public mutating func readText() throws -> String {
        guard discardsText else { return try readString() }
        guard peek(UInt8(ascii: "\"")) else { throw typeError("a string") }
        try cursor.skipString()
        return ""
    }

    /// `readString`, giving back one of `known`'s strings itself, and its place among them,
    /// when the string is that one: for a value from a fixed set (an event's `kind`), read
    /// without making a string or comparing it with each of the set again.
    public mutating func readString(among known: KnownStrings) throws -> (String, index: Int?) {
        guard peek(UInt8(ascii: "\"")) else { throw typeError("a string") }
        return try cursor.string(among: known)
    }

    /// `readString`, giving back `candidate` itself when the string is the same: for values a
    /// caller expects to repeat, so that they share one storage instead of each getting its own.
    public mutating func readString(reusing candidate: String?) throws -> String {
        guard peek(UInt8(ascii: "\"")) else { throw typeError("a string") }
        return try cursor.string(reusing: candidate)
    }

    /// The largest measure a log may hold — a time in µs since the epoch, a duration, a token
    /// count: 2^53 − 1, the largest integer every JSON reader keeps exactly (RFC 8259 §6). Sums
    /// and differences of so many measures cannot overflow, so no fold or report of a log traps
    /// on what the log says (a hostile log's `Int.max` would).
    public static let maximumMeasure = 9_007_199_254_740_991

    /// An integer that measures something (`maximumMeasure`): from 0 to 2^53 − 1.
    public mutating func readMeasure() throws -> Int {
        let value = try readInt()
        try Self.checkMeasure(value)
        return value
    }

    /// `readMeasure`, or nil for `null`.
    public mutating func readOptionalMeasure() throws -> Int? {
        if try readNull() { return nil }
        return try readMeasure()
    }

    /// Whether `value` is a measure: from 0 to `maximumMeasure`.
    public static func isMeasure(_ value: Int) -> Bool { value >= 0 && value <= maximumMeasure }

    /// Throws, for the member being read, when `value` is no measure (`maximumMeasure`).
    public static func checkMeasure(_ value: Int) throws {
        guard !isMeasure(value) else { return }
        throw TraceCoreError(.invalidField, "must be a whole number from 0 to \(maximumMeasure) (2^53 − 1), found \(value)", fieldPath: "")
    }

    public mutating func readInt() throws -> Int {
        if let value = readPlainInt() { return value }
        guard cursor.index < cursor.end,
            cursor.base[cursor.index] == UInt8(ascii: "-")
                || (cursor.base[cursor.index] >= UInt8(ascii: "0") && cursor.base[cursor.index] <= UInt8(ascii: "9"))
        else { throw typeError("an integer") }
        let start = cursor.index
        let number = try cursor.number()
        guard let value = number.intValue else {
            cursor.index = start
            throw TraceCoreError(.invalidField, "must be an integer, found \(JSONWriter.encodeString(number))", fieldPath: "")
        }
        return value
    }

    /// The integer at the cursor when it is written plainly — `0`, or up to 18 digits without
    /// a leading zero (below 2^63, so no overflow to check) — and the number ends there, the
    /// cursor then past it; else nil, the cursor unmoved, for the full reader (signs, fractions,
    /// exponents, long or malformed numbers). Every envelope has four, and a step's events more.
    @inline(__always)
    private mutating func readPlainInt() -> Int? {
        let base = cursor.base
        let end = cursor.end
        var index = cursor.index
        guard index < end else { return nil }
        var value = 0
        if base[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            let limit = min(end, index + 18)
            while index < limit {
                let digit = base[index] &- UInt8(ascii: "0")
                guard digit < 10 else { break }
                value = value &* 10 &+ Int(digit)
                index += 1
            }
            guard index > cursor.index else { return nil }
        }
        if index < end {
            let next = base[index]
            if next &- UInt8(ascii: "0") < 10 || next == UInt8(ascii: ".") || next | 0x20 == UInt8(ascii: "e") { return nil }
        }
        cursor.index = index
        return value
    }

    public mutating func readDouble() throws -> Double {
        guard cursor.index < cursor.end,
            cursor.base[cursor.index] == UInt8(ascii: "-")
                || (cursor.base[cursor.index] >= UInt8(ascii: "0") && cursor.base[cursor.index] <= UInt8(ascii: "9"))
        else { throw typeError("a number") }
        return try cursor.number().doubleValue ?? 0
    }

    public mutating func readBool() throws -> Bool {
        if peek(UInt8(ascii: "t")) {
            try cursor.literal("true")
            return true
        }
        if peek(UInt8(ascii: "f")) {
            try cursor.literal("false")
            return false
        }
        throw typeError("true or false")
    }

    /// Consumes a `null` if one is next.
    public mutating func readNull() throws -> Bool {
        guard peek(UInt8(ascii: "n")) else { return false }
        try cursor.literal("null")
        return true
    }

    /// Reads a member typed `hash` (docs/log-format.md §4): a string, `sha256:` and 64
    /// lowercase hex digits; anything else is an invalid field. Under `discardsText` it is
    /// checked all the same and comes back empty.
    public mutating func readHash() throws -> String {
        guard peek(UInt8(ascii: "\"")) else { throw typeError("a hash string (\"sha256:\" and 64 lowercase hex digits)") }
        let start = cursor.index
        // The usual form, no escapes: 71 bytes between the quotes, checked where they lie.
        if start + 72 < cursor.end, cursor.base[start + 72] == UInt8(ascii: "\""),
            ContentHash.isSHA256(UnsafeRawBufferPointer(start: cursor.base + start + 1, count: 71))
        {
            cursor.index = start + 73
            return discardsText ? "" : String(decoding: UnsafeBufferPointer(start: cursor.base + start + 1, count: 71), as: UTF8.self)
        }
        let text = try cursor.string()
        guard ContentHash.isSHA256(text) else {
            let shown = text.unicodeScalars.count > 80 ? String(text.unicodeScalars.prefix(80)) + "…" : text
            throw TraceCoreError(
                .invalidField, "must be a hash, \"sha256:\" and 64 lowercase hex digits, found \(JSONWriter.encodeString(.string(shown)))",
                fieldPath: "")
        }
        return discardsText ? "" : text
    }

    /// `readHash`, or nil for `null`.
    public mutating func readOptionalHash() throws -> String? {
        if try readNull() { return nil }
        return try readHash()
    }

    /// Reads a value of a representable type.
    public mutating func read<T: JSONRepresentable>(_ type: T.Type = T.self) throws -> T {
        try T(from: &self)
    }

    /// Reads a value of a representable type; `null` gives nil.
    public mutating func readOptional<T: JSONRepresentable>(_ type: T.Type = T.self) throws -> T? {
        if try readNull() { return nil }
        return try T(from: &self)
    }

    /// Reads an array of a representable type; `null` gives an empty array.
    public mutating func readList<T: JSONRepresentable>(_ type: T.Type = T.self) throws -> [T] {
        if try readNull() { return [] }
        return try readArray { try T(from: &$0) }
    }
}

/// A member name seen by `JSONScanner.readObject`, compared without making a `String` in the
/// common case (plain ASCII): `switch key { case "name": … }`.
public struct JSONKey {
    enum Storage {
        case raw(UnsafeBufferPointer<UInt8>)
        case decoded(String)
    }

    let storage: Storage

    /// The name as a string (made on demand).
    public var string: String {
        switch storage {
        case .raw(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .decoded(let text): return text
        }
    }

    /// Inlined into each reader's `switch` (out of line, every name matched was a call).
    @inline(__always)
    public static func ~= (pattern: StaticString, key: JSONKey) -> Bool {
        pattern.withUTF8Buffer { expected in
            switch key.storage {
            case .raw(let bytes):
                guard bytes.count == expected.count else { return false }
                for index in 0..<bytes.count where bytes[index] != expected[index] { return false }
                return true
            case .decoded(let text):
                return text.utf8.elementsEqual(expected)
            }
        }
    }
}

/// A fixed set of strings that a reader finds by their bytes (`JSONScanner.readString(among:)`):
/// a handful, so a look along them, by length first, is quickest.
public struct KnownStrings: Sendable {
    public let strings: [String]
    private let bytes: [[UInt8]]

    public init(_ strings: [String]) {
        self.strings = strings
        bytes = strings.map { Array($0.utf8) }
    }

    /// The place of the string whose UTF-8 is `run`, if it is one of these.
    func index(of run: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let start = run.baseAddress, !run.isEmpty else { return bytes.firstIndex { $0.isEmpty } }
        for position in bytes.indices where bytes[position].count == run.count {
            let matches = bytes[position].withUnsafeBufferPointer { known in
                known.baseAddress.map { ShortBytes.equal($0, start, count: run.count) } ?? false
            }
            if matches { return position }
        }
        return nil
    }
}

/// The member names an object's reader knows, in byte order, the order the writer writes them
/// in (`JSONScanner.readObject(known:_:)`); at most 64. A name left out, or a list out of
/// order, costs only speed: such a member is read the general way.
public struct MemberNames: @unchecked Sendable {  // pointers to the names' static bytes, never written
    let names: [UnsafeBufferPointer<UInt8>]

    public init(_ names: [StaticString]) {
        precondition(names.count <= 64, "MemberNames: at most 64 names")
        precondition(names.allSatisfy(\.hasPointerRepresentation), "MemberNames: names are literals")
        self.names = names.map { UnsafeBufferPointer(start: $0.utf8Start, count: $0.utf8CodeUnitCount) }
        // A name is matched by its bytes as the line has them, so it must be written plain; and
        // two places must not hold one name, which would let a repeated member through.
        precondition(
            self.names.allSatisfy { $0.allSatisfy { $0 &- 0x20 < 0x60 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") } },
            "MemberNames: names are printable ASCII without quotes or backslashes")
        precondition(Set(names.map(\.description)).count == names.count, "MemberNames: a name is listed twice")
    }

    /// The first name from place `first` on that is at the cursor, written plain and followed
    /// by its colon (`"name":`), and its place.
    @inline(__always)
    func match(at cursor: JSONParser.Cursor, from first: Int) -> (Int, UnsafeBufferPointer<UInt8>)? {
        guard cursor.index < cursor.end, cursor.base[cursor.index] == UInt8(ascii: "\"") else { return nil }
        let room = cursor.end - cursor.index - 3
        var position = first
        while position < names.count {
            let name = names[position]
            if name.count <= room, cursor.base[cursor.index + 1 + name.count] == UInt8(ascii: "\""),
                cursor.base[cursor.index + 2 + name.count] == UInt8(ascii: ":")
            {
                if let known = name.baseAddress, ShortBytes.equal(cursor.base + cursor.index + 1, known, count: name.count) {
                    return (position, name)
                }
            }
            position += 1
        }
        return nil
    }
}

/// The member names of one object seen so far, to reject duplicates. The first 15 plain names
/// live in inline storage (no allocation); more, or names with escapes, go to arrays.
struct SeenKeys {
    private var inline:
        (
            UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
            UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
            UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
            UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?
        ) = (nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil)
    private var inlineCount = 0
    /// The slots a bound view of `inline` holds: its last element is not padded to a full
    /// stride, so one fewer than the tuple has (an object's 16th name once trapped here).
    private static let inlineCapacity =
        MemoryLayout<
            (
                UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?,
                UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?
            )
        >.size / MemoryLayout<UnsafeBufferPointer<UInt8>?>.stride
    /// Names past the inline slots, and names with escapes: made only for such an object, so
    /// that the common one has nothing to release at its end (two empty arrays were two releases
    /// for every object read).
    private final class Spill {
        var raw: [UnsafeBufferPointer<UInt8>] = []
        var decoded: [String] = []
    }
    private var spill: Spill?

    private mutating func spilled() -> Spill {
        if let spill { return spill }
        let made = Spill()
        spill = made
        return made
    }

    /// Adds `key`; false when it was there already.
    mutating func insert(_ key: JSONKey) -> Bool {
        switch key.storage {
        case .raw(let bytes):
            let count = inlineCount
            let isNew = withUnsafeBytes(of: &inline) { storage -> Bool in
                let names = storage.bindMemory(to: UnsafeBufferPointer<UInt8>?.self)
                for index in 0..<count {
                    if let other = names[index], other.count == bytes.count, SeenKeys.equal(other, bytes) { return false }
                }
                return true
            }
            guard isNew else { return false }
            if let spill {
                for other in spill.raw where other.count == bytes.count && SeenKeys.equal(other, bytes) { return false }
                if spill.decoded.contains(where: { $0.utf8.elementsEqual(bytes) }) { return false }
            }
            if inlineCount < SeenKeys.inlineCapacity {
                let slot = inlineCount
                withUnsafeMutableBytes(of: &inline) { storage in
                    storage.bindMemory(to: UnsafeBufferPointer<UInt8>?.self)[slot] = bytes
                }
                inlineCount += 1
            } else {
                spilled().raw.append(bytes)
            }
        case .decoded(let text):
            if let spill, spill.decoded.contains(where: { $0.utf8.elementsEqual(text.utf8) }) { return false }
            let count = inlineCount
            let isNew = withUnsafeBytes(of: &inline) { storage -> Bool in
                let names = storage.bindMemory(to: UnsafeBufferPointer<UInt8>?.self)
                for index in 0..<count {
                    if let other = names[index], other.elementsEqual(text.utf8) { return false }
                }
                return true
            }
            guard isNew, spill?.raw.contains(where: { $0.elementsEqual(text.utf8) }) != true else { return false }
            spilled().decoded.append(text)
        }
        return true
    }

    private static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let left = a.baseAddress, let right = b.baseAddress else { return a.count == b.count }
        return ShortBytes.equal(left, right, count: a.count)
    }
}

/// The error for a required member that was not there.
public func missingField(_ name: String) -> TraceCoreError {
    TraceCoreError(.invalidField, "is missing", fieldPath: name)
}

/// Unwraps a required member read by a scanner.
public func required<T>(_ value: T?, _ name: String) throws -> T {
    guard let value else { throw missingField(name) }
    return value
}
