/// One JSON value held as its canonical encoding (docs/log-format.md §2): the bytes the value
/// is written as, in a log line, in the state's canonical JSON and in its digest.
///
/// A free-form value the fold keeps but never looks into (a tool's output) costs a few times
/// its JSON size as a `JSONValue` tree; held as its text it costs its size, and writing it again
/// (the next event, the state digest, a snapshot) is a copy. Read from a line already in the
/// canonical form — every line this project writes — it is copied as it is, after the scan that
/// checks it, without making the tree; any other form is parsed and written canonically.
///
/// Two texts are equal when their bytes are, which is when their values' canonical JSON is:
/// the equality the state and its digest define.
///
/// A text may also be held elsewhere (`init(storedIn:key:check:count:)`): the fold of a long log
/// lets its results' outputs go back to the log they were read from (`StoredOutputs`), and each
/// use of `bytes` reads the text back. The value is the same; only where it is kept differs.
public struct JSONText: Sendable, Hashable {
    /// Where the bytes are. Each case is one reference, so a text is one word in every result
    /// a long run's state keeps.
    private enum Storage: Sendable {
        case canonical([UInt8])
        /// The value nests deeper than the parser reads (no log line holds one: the writer
        /// refuses it): kept with its bytes, so that `value` gives it back all the same.
        case deep(DeepValue)
        case stored(StoredText)
    }

    private final class DeepValue: Sendable {
        let bytes: [UInt8]
        let value: JSONValue

        init(_ bytes: [UInt8], _ value: JSONValue) {
            self.bytes = bytes
            self.value = value
        }
    }

    private final class StoredText: Sendable {
        let store: any JSONTextStore
        let key: Int
        let check: UInt64
        let count: Int

        init(store: any JSONTextStore, key: Int, check: UInt64, count: Int) {
            self.store = store
            self.key = key
            self.check = check
            self.count = count
        }

        /// The bytes read back, or, when they cannot be, the canonical JSON of a string that
        /// says so (the store keeps the error for its reader to report).
        var bytes: [UInt8] {
            if let bytes = store.text(at: key, check: check), bytes.count == count { return bytes }
            return JSONWriter.encode(.string(store.unavailableText(at: key)))
        }
    }

    private let storage: Storage

    /// The canonical encoding.
    public var bytes: [UInt8] {
        switch storage {
        case .canonical(let bytes): return bytes
        case .deep(let deep): return deep.bytes
        case .stored(let stored): return stored.bytes
        }
    }

    /// The canonical encoding of `value`.
    public init(_ value: JSONValue) {
        let bytes = JSONWriter.encode(value)
        storage = value.nests(deeperThan: JSONParser.maximumDepth - 1) ? .deep(DeepValue(bytes, value)) : .canonical(bytes)
    }

    private init(canonical bytes: [UInt8]) {
        storage = .canonical(bytes)
    }

    /// A text of `count` bytes that `store` keeps under `key`, read back on each use of
    /// `bytes`; `check` is what the store checks the bytes it reads back against.
    public init(storedIn store: any JSONTextStore, key: Int, check: UInt64, count: Int) {
        storage = .stored(StoredText(store: store, key: key, check: check, count: count))
    }

    /// The size of the canonical encoding, without reading a stored text back.
    public var count: Int {
        switch storage {
        case .canonical(let bytes): return bytes.count
        case .deep(let deep): return deep.bytes.count
        case .stored(let stored): return stored.count
        }
    }

    /// Whether the text is held elsewhere and read back on each use.
    public var isStored: Bool {
        if case .stored = storage { return true }
        return false
    }

    public static func == (a: JSONText, b: JSONText) -> Bool {
        if case .stored(let x) = a.storage, case .stored(let y) = b.storage, x.store === y.store, x.key == y.key { return true }
        return a.count == b.count && a.bytes == b.bytes
    }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    /// The canonical encoding as a string (what `JSONWriter.encodeString(value)` gives).
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// The value, parsed from the bytes (which cannot fail: they are the encoding of a value
    /// read or made within the parser's limits, or the deep value is kept).
    public var value: JSONValue {
        if case .deep(let deep) = storage { return deep.value }
        do {
            return try bytes.withUnsafeBytes { try JSONParser.parse($0) }
        } catch {
            preconditionFailure("JSONText holds bytes that do not parse: \(error)")
        }
    }

    /// Reads one value: its bytes as they are when they are canonical, else the canonical
    /// encoding of the value they hold. Checks the value as `readValue` does.
    public init(from scanner: inout JSONScanner) throws {
        let start = scanner.cursor.index
        // The form a log's values come in, stepped over in one pass (`skipCanonical`); any
        // other text, and any error, is read the general way below.
        if scanner.skipCanonical() {
            self.init(canonical: Array(UnsafeBufferPointer(start: scanner.cursor.base + start, count: scanner.cursor.index - start)))
            return
        }
        var isCanonical = true
        try scanner.skipValue(isCanonical: &isCanonical)
        let raw = UnsafeBufferPointer(start: scanner.cursor.base + start, count: scanner.cursor.index - start)
        if isCanonical {
            self.init(canonical: Array(raw))
            return
        }
        // Not canonical (white space, member order, escapes, number forms): read it again as a
        // tree, which the scan above has shown to be valid, and write that.
        var cursor = scanner.cursor
        cursor.index = start
        self.init(try cursor.value(depth: 0))
    }

    /// Whether `raw`, one valid JSON value (checked by the caller), is already in the canonical
    /// form `JSONWriter` writes: no white space, members in key byte order, only the escapes
    /// the form requires, numbers as written back. A key with an escape in it is reported as not
    /// canonical (the caller then writes the value again, which gives the same bytes when it was
    /// canonical after all).
    static func isCanonical(_ raw: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = raw.count
        // Each open container: whether it is an object, and its previous key (nil: none yet).
        var open: [(isObject: Bool, previousKey: Range<Int>?)] = []
        // After `{` or `,` in an object, the next string is a key.
        var expectsKey = false
        while index < count {
            let byte = raw[index]
            switch byte {
            case UInt8(ascii: "{"):
                open.append((true, nil))
                expectsKey = true
                index += 1
            case UInt8(ascii: "["):
                open.append((false, nil))
                expectsKey = false
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                open.removeLast()
                expectsKey = false
                index += 1
            case UInt8(ascii: ","):
                expectsKey = open.last?.isObject == true
                index += 1
            case UInt8(ascii: ":"):
                expectsKey = false
                index += 1
            case UInt8(ascii: "\""):
                let start = index + 1
                guard let end = canonicalStringEnd(raw, from: start, allowsEscapes: !expectsKey) else { return false }
                if expectsKey {
                    let key = start..<end
                    if let previous = open[open.count - 1].previousKey, !precedes(raw, previous, key) { return false }
                    open[open.count - 1].previousKey = key
                    expectsKey = false
                }
                index = end + 1
            case UInt8(ascii: "t"): index += 4
            case UInt8(ascii: "f"): index += 5
            case UInt8(ascii: "n"): index += 4
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                var end = index
                while end < count, isNumberByte(raw[end]) { end += 1 }
                guard isCanonicalNumber(UnsafeBufferPointer(rebasing: raw[index..<end])) else { return false }
                index = end
            default:
                // White space between tokens.
                return false
            }
        }
        return true
    }

    /// The index of the quote closing a string whose content starts at `start`, or nil when
    /// the string has an escape the canonical form would not write (or, with `allowsEscapes`
    /// off, any escape at all).
    static func canonicalStringEnd(_ raw: UnsafeBufferPointer<UInt8>, from start: Int, allowsEscapes: Bool) -> Int? {
        var index = start
        while index < raw.count {
            // Eight bytes at a time while none is a quote or a backslash (nor a control
            // character, which a checked value has none of inside a string).
            if index + 8 <= raw.count, let base = raw.baseAddress,
                !JSONWriter.needsEscape(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
            {
                index += 8
                continue
            }
            switch raw[index] {
            case UInt8(ascii: "\""):
                return index
            case UInt8(ascii: "\\"):
                guard allowsEscapes, index + 1 < raw.count else { return nil }
                switch raw[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"):
                    index += 2
                case UInt8(ascii: "u"):
                    // Only a control character without a short escape, as \u00xx in lowercase.
                    guard index + 5 < raw.count, raw[index + 2] == UInt8(ascii: "0"), raw[index + 3] == UInt8(ascii: "0"),
                        raw[index + 4] == UInt8(ascii: "0") || raw[index + 4] == UInt8(ascii: "1"),
                        let low = lowercaseHexValue(raw[index + 5])
                    else { return nil }
                    let scalar = (raw[index + 4] == UInt8(ascii: "1") ? 16 : 0) + low
                    switch scalar {
                    case 0x08, 0x09, 0x0A, 0x0C, 0x0D: return nil  // written \b \t \n \f \r
                    default: break
                    }
                    index += 6
                default:
                    return nil
                }
            default:
                index += 1
            }
        }
        return nil
    }

    private static func lowercaseHexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - UInt8(ascii: "a")) + 10
        default: return nil
        }
    }

    /// Whether key `a` sorts strictly before key `b` by their bytes (neither has an escape).
    private static func precedes(_ raw: UnsafeBufferPointer<UInt8>, _ a: Range<Int>, _ b: Range<Int>) -> Bool {
        let shared = min(a.count, b.count)
        for offset in 0..<shared where raw[a.lowerBound + offset] != raw[b.lowerBound + offset] {
            return raw[a.lowerBound + offset] < raw[b.lowerBound + offset]
        }
        return a.count < b.count
    }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."), UInt8(ascii: "e"),
            UInt8(ascii: "E"):
            return true
        default:
            return false
        }
    }

    /// Whether a valid number token is written as `JSONWriter` writes the value the parser
    /// reads from it: an integer in the 64-bit range other than `-0` as it is; any other number
    /// exactly as its double's description.
    private static func isCanonicalNumber(_ token: UnsafeBufferPointer<UInt8>) -> Bool {
        let isNegative = token.first == UInt8(ascii: "-")
        let digits = UnsafeBufferPointer(rebasing: token[(isNegative ? 1 : 0)...])
        if !token.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            // Valid JSON has no leading zeros; "-0" reads as the integer 0, written "0". Beyond
            // the 64-bit range the parser reads a double.
            if isNegative && digits.count == 1 && digits[0] == UInt8(ascii: "0") { return false }
            guard digits.count >= 19 else { return true }
            guard digits.count == 19 else { return false }
            // Nineteen digits: in range when not above the limit's (same length, so byte order).
            return !(isNegative ? Self.negativeLimit : Self.positiveLimit).lexicographicallyPrecedes(digits)
        }
        let text = String(decoding: token, as: UTF8.self)
        guard let value = Double(text), value.isFinite else { return false }
        return value.description == text
    }
}

extension JSONText {
    /// The digits of `Int.max` and of `Int.min`'s magnitude.
    fileprivate static let positiveLimit = Array("9223372036854775807".utf8)
    fileprivate static let negativeLimit = Array("9223372036854775808".utf8)
}

extension JSONText: JSONRepresentable {
    public var json: JSONValue { value }

    public func write(to writer: inout JSONWriter) {
        writer.append(contentsOf: bytes)
    }
}

/// Where texts that a state no longer holds in memory are kept, to be read back on use (the
/// log a fold read them from: `StoredOutputs`).
public protocol JSONTextStore: AnyObject, Sendable {
    /// The canonical bytes kept under `key`, when they read back and pass `check`; nil when
    /// they cannot be (the store keeps why).
    func text(at key: Int, check: UInt64) -> [UInt8]?
    /// What a text that could not be read back reads as instead: a sentence naming the store,
    /// the key and why.
    func unavailableText(at key: Int) -> String
}
