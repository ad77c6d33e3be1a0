/// A value with a fixed JSON form: how event payloads and run state become JSON and back.
///
/// `init(from:)` reads the value straight from JSON text (the reader's hot path) and rejects
/// what does not fit with a `TraceCoreError` whose `fieldPath` says where inside the value
/// (such as `calls[0].arguments`); enclosing decoders extend the path as the error passes
/// through them (`TraceCoreError.inside(_:)`).
public protocol JSONRepresentable: Sendable {
    init(from scanner: inout JSONScanner) throws
    var json: JSONValue { get }
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
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readString() }
    public var json: JSONValue { .string(self) }
}

extension Int: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readInt() }
    public var json: JSONValue { .int(self) }
}

extension Double: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readDouble() }
    public var json: JSONValue { .double(self) }
}

extension Bool: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readBool() }
    public var json: JSONValue { .bool(self) }
}

extension JSONValue: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws { self = try scanner.readValue() }
    public var json: JSONValue { self }
}

extension Array: JSONRepresentable where Element: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        self = try scanner.readArray { try Element(from: &$0) }
    }
    public var json: JSONValue { .array(map(\.json)) }
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
}

/// Builds an object member by member; nil values are left out.
public struct ObjectBuilder {
    public private(set) var object = JSONObject()

    public init() {}

    public mutating func set(_ key: String, _ value: (some JSONRepresentable)?) {
        if let value { object[key] = value.json }
    }

    public var json: JSONValue { .object(object) }
}
