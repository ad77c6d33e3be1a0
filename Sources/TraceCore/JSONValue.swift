/// A JSON value, the free-form data of events: tool arguments, tool outputs, input schemas.
///
/// Objects keep their members sorted by the UTF-8 bytes of their keys, so equal values are
/// equal members in equal order and encode to the same bytes. Numbers without a fraction or
/// exponent that fit in `Int` are `.int`; every other number is `.double`.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The string, when this value is one.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The object, when this value is one.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The array, when this value is one.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The integer, when this value is one (a double with an integral value counts too).
    public var intValue: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e15: return Int(value)
        default: return nil
        }
    }

    /// The number as a double, when this value is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The boolean, when this value is one.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The member `key` of an object, or nil for a missing key or a value that is no object.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// A short name of the value's type, for error messages ("a string", "an object").
    public var typeDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int: return "an integer"
        case .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// Equality is JSON's: strings are equal when their code points are (compared as UTF-8
/// bytes), not when Swift deems them canonically equivalent. "José" written with a combining
/// accent is another string than "José" with a precomposed one: another argument to a tool,
/// another answer.
extension JSONValue {
    public static func == (left: JSONValue, right: JSONValue) -> Bool {
        switch (left, right) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.string(let x), .string(let y)): return JSONObject.sameBytes(x, y)
        case (.array(let x), .array(let y)): return x == y
        case (.object(let x), .object(let y)): return x == y
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .int(let value): hasher.combine(value)
        case .double(let value): hasher.combine(value)
        case .string(let value): JSONObject.hashBytes(value, into: &hasher)
        case .array(let value): hasher.combine(value)
        case .object(let value): hasher.combine(value)
        }
    }
}

/// A JSON object: members in ascending order of their keys' UTF-8 bytes, keys unique.
///
/// Key comparison is by bytes, not by Swift's canonical string equivalence, so two keys
/// that differ only in Unicode normalisation stay two keys, as JSON says they are.
public struct JSONObject: Sendable, Hashable, RandomAccessCollection {
    /// One member of an object.
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue

        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }

        /// Keys compare by their bytes, as `JSONValue`'s strings do.
        public static func == (left: Member, right: Member) -> Bool {
            JSONObject.sameBytes(left.key, right.key) && left.value == right.value
        }

        public func hash(into hasher: inout Hasher) {
            JSONObject.hashBytes(key, into: &hasher)
            hasher.combine(value)
        }
    }

    /// Whether two strings are the same code points (their UTF-8 bytes), not merely
    /// canonically equivalent as Swift's `==` has it.
    static func sameBytes(_ left: String, _ right: String) -> Bool {
        left.utf8.count == right.utf8.count && left.utf8.elementsEqual(right.utf8)
    }

    /// Hashes a string's UTF-8 bytes (Swift's own hash follows canonical equivalence).
    static func hashBytes(_ text: String, into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        hasher.combine(text.utf8.count)
    }

    public private(set) var members: [Member]

    /// An empty object.
    public init() {
        members = []
    }

    /// An object from members in any order; a later duplicate key replaces an earlier one.
    public init(_ pairs: [(String, JSONValue)]) {
        members = []
        members.reserveCapacity(pairs.count)
        for (key, value) in pairs { self[key] = value }
    }

    /// Members that the caller guarantees are sorted by key bytes and unique.
    init(sortedUniqueMembers: [Member]) {
        members = sortedUniqueMembers
    }

    public var startIndex: Int { members.startIndex }
    public var endIndex: Int { members.endIndex }
    public subscript(position: Int) -> Member { members[position] }

    /// The keys in order.
    public var keys: [String] { members.map(\.key) }

    /// The value for `key`; assigning nil removes the member.
    public subscript(key: String) -> JSONValue? {
        get {
            switch search(key) {
            case .found(let index): return members[index].value
            case .insertAt: return nil
            }
        }
        set {
            switch (search(key), newValue) {
            case (.found(let index), .some(let value)): members[index].value = value
            case (.found(let index), .none): members.remove(at: index)
            case (.insertAt(let index), .some(let value)): members.insert(Member(key: key, value: value), at: index)
            case (.insertAt, .none): break
            }
        }
    }

    private enum SearchResult {
        case found(Int)
        case insertAt(Int)
    }

    private func search(_ key: String) -> SearchResult {
        // Appending in order is the common case when building; check the end first.
        if let last = members.last {
            let order = JSONObject.compare(last.key, key)
            if order < 0 { return .insertAt(members.count) }
            if order == 0 { return .found(members.count - 1) }
        } else {
            return .insertAt(0)
        }
        var low = 0
        var high = members.count
        while low < high {
            let mid = (low + high) / 2
            let order = JSONObject.compare(members[mid].key, key)
            if order == 0 { return .found(mid) }
            if order < 0 { low = mid + 1 } else { high = mid }
        }
        return .insertAt(low)
    }

    /// Three-way comparison of two keys by their UTF-8 bytes.
    static func compare(_ lhs: String, _ rhs: String) -> Int {
        var left = lhs
        var right = rhs
        return left.withUTF8 { a in right.withUTF8 { b in compareBytes(a, b) } }
    }

    /// Three-way comparison of two byte strings: memcmp order, a prefix first.
    static func compareBytes(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let common = Swift.min(a.count, b.count)
        if common > 0, let pa = a.baseAddress, let pb = b.baseAddress {
            let order = ShortBytes.compare(pa, pb, count: common)
            if order != 0 { return order }
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
    public init(nilLiteral: ()) { self = .null }
}
