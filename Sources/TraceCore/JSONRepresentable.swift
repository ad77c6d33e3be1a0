/// A value with a fixed JSON form: how event payloads and run state become JSON and back.
///
/// `init(from:)` reads the value straight from JSON text (the reader's hot path) and rejects
/// what does not fit with a `TraceCoreError` whose `fieldPath` says where inside the value
/// (such as `calls[0].arguments`); enclosing decoders extend the path as the error passes
/// through them (`TraceCoreError.inside(_:)`).
public protocol JSONRepresentable: JSONEncodable {
    init(from scanner: inout JSONScanner) throws
}

/// A value with a fixed JSON form, written as a tree (`json`) or straight as canonical bytes.
public protocol JSONEncodable: Sendable {
    var json: JSONValue { get }
    /// Appends the canonical encoding of `json`, byte for byte, without building the tree
    /// where the type can (the writer's and the digester's hot path).
    func write(to writer: inout JSONWriter)
}

extension JSONEncodable {
    public func write(to writer: inout JSONWriter) { writer.write(json) }
}

/// A value whose JSON form is an object, given once as its members: `json` builds the tree,
/// `write(to:)` writes the canonical bytes straight from the members.
///
/// `members(into:)` may set its members in any order; giving them in key byte order (as the
/// canonical form writes them) lets `write(to:)` write them where they fall. Otherwise it
/// writes the object again from `json`, so the bytes are canonical either way.
public protocol JSONObjectEncodable: JSONEncodable {
    func members(into object: inout some JSONMemberSink)
}

extension JSONObjectEncodable {
    public var json: JSONValue {
        var object = ObjectBuilder()
        members(into: &object)
        return object.json
    }

    public func write(to writer: inout JSONWriter) {
        let start = writer.count
        let isInKeyOrder = JSONObjectWriter.write(into: &writer) { members(into: &$0) }
        if !isInKeyOrder {
            writer.truncate(to: start)
            writer.write(json)
        }
    }
}

extension JSONObjectEncodable {
    /// Whether `members(into:)` sets this value's members in key byte order, so that
    /// `write(to:)` takes the straight path (nested values answer for themselves).
    var setsMembersInKeyOrder: Bool {
        var writer = JSONWriter(capacity: 0)
        return JSONObjectWriter.write(into: &writer) { members(into: &$0) }
    }
}

extension JSONWriter {
    /// Writes an object whose members `body` sets in key byte order (the canonical order; a
    /// body that does not is a programming error, caught here).
    mutating func writeObject(_ body: (inout JSONObjectWriter) -> Void) {
        let isInKeyOrder = JSONObjectWriter.write(into: &self, body)
        precondition(isInKeyOrder, "writeObject: members set out of key order")
    }
}

/// Where an object's members go: a tree (`ObjectBuilder`) or canonical bytes
/// (`JSONObjectWriter`). A nil value leaves the member out.
public protocol JSONMemberSink {
    mutating func set(_ key: StaticString, _ value: (some JSONEncodable)?)
}

/// Writes an object's members straight to bytes, in the order they are set, and notes whether
/// that order was the canonical one (strictly increasing key bytes).
public struct JSONObjectWriter: JSONMemberSink {
    private var writer = JSONWriter(capacity: 0)
    private var previousKey: StaticString?
    public private(set) var isInKeyOrder = true

    private init() {}

    /// Appends the object `body` sets to `writer`; returns whether its members came in key
    /// order. The bytes move into the object writer and back (no copy of what is written).
    static func write(into writer: inout JSONWriter, _ body: (inout JSONObjectWriter) -> Void) -> Bool {
        var object = JSONObjectWriter()
        swap(&object.writer, &writer)
        object.writer.append(UInt8(ascii: "{"))
        body(&object)
        object.writer.append(UInt8(ascii: "}"))
        swap(&object.writer, &writer)
        return object.isInKeyOrder
    }

    public mutating func set(_ key: StaticString, _ value: (some JSONEncodable)?) {
        guard let value else { return }
        let isFirst = previousKey == nil
        if let previousKey, JSONObjectWriter.compare(previousKey, key) >= 0 { isInKeyOrder = false }
        previousKey = key
        // Keys are ASCII literals without characters that need escaping (checked in debug).
        assert(key.withUTF8Buffer { $0.allSatisfy { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") } })
        writer.writeMemberName(key, isFirst: isFirst)
        value.write(to: &writer)
    }

    @inline(__always)
    private static func compare(_ lhs: StaticString, _ rhs: StaticString) -> Int {
        // Member names are literals, held as pointers: keys of one object mostly differ in
        // their first byte, which settles the order without a call (every member checks it).
        if lhs.hasPointerRepresentation && rhs.hasPointerRepresentation && lhs.utf8CodeUnitCount > 0 && rhs.utf8CodeUnitCount > 0 {
            let (first, second) = (lhs.utf8Start.pointee, rhs.utf8Start.pointee)
            if first != second { return first < second ? -1 : 1 }
        }
        return lhs.withUTF8Buffer { a in rhs.withUTF8Buffer { b in JSONObject.compareBytes(a, b) } }
    }
}

extension JSONRepresentable {
    /// Decodes from an already parsed value (by way of its canonical text: not a hot path).
    public init(json: JSONValue) throws {
        let bytes = JSONWriter.encode(json)
        self = try bytes.withUnsafeBytes { buffer in try JSONScanner.scan(buffer) { try Self(from: &$0) } }
    }

    /// Decodes from JSON text.
    public init(jsonText bytes: UnsafeRawBufferPointer) throws {
        self = try JSONScanner.scan(bytes) { try Self(from: &$0) }
    }
}

extension String: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readText() }
    public var json: JSONValue { .string(self) }
    public func write(to writer: inout JSONWriter) { writer.write(self) }
}

extension Int: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readInt() }
    public var json: JSONValue { .int(self) }
    public func write(to writer: inout JSONWriter) { writer.write(self) }
}

extension Double: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readDouble() }
    public var json: JSONValue { .double(self) }
    public func write(to writer: inout JSONWriter) { writer.write(self) }
}

extension Bool: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readBool() }
    public var json: JSONValue { .bool(self) }
    public func write(to writer: inout JSONWriter) { writer.writeRaw(self ? "true" : "false") }
}

extension JSONValue: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readValue() }
    public var json: JSONValue { self }
    public func write(to writer: inout JSONWriter) { writer.write(self) }
}

extension Array: JSONEncodable where Element: JSONEncodable {
    public var json: JSONValue { .array(map(\.json)) }
    public func write(to writer: inout JSONWriter) {
        writer.append(UInt8(ascii: "["))
        // Each element written where it lies: iterating gave a copy of each (a retain of each of
        // its fields, and a release after), which a state's digest paid for every tool result.
        withUnsafeBufferPointer { elements in
            for position in elements.indices {
                if position > 0 { writer.append(UInt8(ascii: ",")) }
                elements[position].write(to: &writer)
            }
        }
        writer.append(UInt8(ascii: "]"))
    }
}

extension Array: JSONRepresentable where Element: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        self = try scanner.readArray { try Element(from: &$0) }
    }
}

/// String enums encode as their raw value; an unknown value is an error naming the choices.
public protocol JSONEnum: JSONRepresentable, RawRepresentable, CaseIterable where RawValue == String {}

extension JSONEnum {
    public init(from scanner: inout JSONScanner) throws {
        let text = try scanner.readString()
        guard let value = Self(rawValue: text) else {
            let choices = Self.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw TraceCoreError(.invalidField, "is \"\(text)\", which is not one of \(choices)", fieldPath: "")
        }
        self = value
    }
    public var json: JSONValue { .string(rawValue) }
    public func write(to writer: inout JSONWriter) { writer.write(rawValue) }
}

/// Builds an object member by member; nil values are left out.
public struct ObjectBuilder: JSONMemberSink {
    public private(set) var object = JSONObject()

    public init() {}

    public mutating func set(_ key: String, _ value: (some JSONEncodable)?) {
        if let value { object[key] = value.json }
    }

    public mutating func set(_ key: StaticString, _ value: (some JSONEncodable)?) {
        if let value { object[key.description] = value.json }
    }

    public var json: JSONValue { .object(object) }
}
