/// A value with a fixed JSON form: how event payloads and run state become JSON and back.
///
/// `init(json:path:)` rejects what does not fit with a `TraceCoreError` naming `path`, the
/// location of the value inside the event (such as `data.calls[0].arguments`).
public protocol JSONRepresentable: Sendable {
    init(json: JSONValue, path: String) throws
    var json: JSONValue { get }
}

extension JSONRepresentable {
    /// Decodes from JSON at the top of a document.
    public init(json: JSONValue) throws {
        try self.init(json: json, path: "$")
    }
}

func fieldError(_ path: String, expected: String, found value: JSONValue) -> TraceCoreError {
    TraceCoreError(.invalidField, "\(path) must be \(expected), found \(value.typeDescription)", fieldPath: path)
}

extension String: JSONRepresentable {
    public init(json: JSONValue, path: String) throws {
        guard case .string(let text) = json else { throw fieldError(path, expected: "a string", found: json) }
        self = text
    }
    public var json: JSONValue { .string(self) }
}

extension Int: JSONRepresentable {
    public init(json: JSONValue, path: String) throws {
        guard let number = json.intValue else { throw fieldError(path, expected: "an integer", found: json) }
        self = number
    }
    public var json: JSONValue { .int(self) }
}

extension Double: JSONRepresentable {
    public init(json: JSONValue, path: String) throws {
        guard let number = json.doubleValue else { throw fieldError(path, expected: "a number", found: json) }
        self = number
    }
    public var json: JSONValue { .double(self) }
}

extension Bool: JSONRepresentable {
    public init(json: JSONValue, path: String) throws {
        guard case .bool(let flag) = json else { throw fieldError(path, expected: "true or false", found: json) }
        self = flag
    }
    public var json: JSONValue { .bool(self) }
}

extension JSONValue: JSONRepresentable {
    public init(json: JSONValue, path: String) throws { self = json }
    public var json: JSONValue { self }
}

extension Array: JSONRepresentable where Element: JSONRepresentable {
    public init(json: JSONValue, path: String) throws {
        guard case .array(let elements) = json else { throw fieldError(path, expected: "an array", found: json) }
        self = []
        reserveCapacity(elements.count)
        for (position, element) in elements.enumerated() {
            append(try Element(json: element, path: "\(path)[\(position)]"))
        }
    }
    public var json: JSONValue { .array(map(\.json)) }
}

/// String enums encode as their raw value; an unknown value is an error naming the choices.
public protocol JSONEnum: JSONRepresentable, RawRepresentable, CaseIterable where RawValue == String {}

extension JSONEnum {
    public init(json: JSONValue, path: String) throws {
        guard case .string(let text) = json else {
            throw fieldError(path, expected: "a string", found: json)
        }
        guard let value = Self(rawValue: text) else {
            let choices = Self.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw TraceCoreError(.invalidField, "\(path) is \"\(text)\", which is not one of \(choices)", fieldPath: path)
        }
        self = value
    }
    public var json: JSONValue { .string(rawValue) }
}

/// Reads typed members of one JSON object, naming each member's path in errors.
public struct FieldReader {
    public let object: JSONObject
    public let path: String

    public init(_ value: JSONValue, path: String) throws {
        guard case .object(let object) = value else { throw fieldError(path, expected: "an object", found: value) }
        self.object = object
        self.path = path
    }

    /// The member named `key`. Payload field names are ASCII, and an ASCII string is equal
    /// (under Swift's canonical equivalence) only to the same bytes, so `==` is exact here, and
    /// a scan of these small objects beats a binary search.
    private func value(_ key: String) -> JSONValue? {
        for member in object.members where member.key == key { return member.value }
        return nil
    }

    /// A required member.
    public func callAsFunction<T: JSONRepresentable>(_ key: String) throws -> T {
        guard let value = value(key) else {
            throw TraceCoreError(.invalidField, "\(path).\(key) is missing", fieldPath: "\(path).\(key)")
        }
        return try T(json: value, path: "\(path).\(key)")
    }

    /// An optional member; `null` counts as absent.
    public func optional<T: JSONRepresentable>(_ key: String) throws -> T? {
        guard let value = value(key), value != .null else { return nil }
        return try T(json: value, path: "\(path).\(key)")
    }

    /// An optional array member; absent means empty.
    public func list<T: JSONRepresentable>(_ key: String) throws -> [T] {
        try optional(key) ?? []
    }
}

/// Builds an object member by member; nil values and empty lists are left out.
public struct ObjectBuilder {
    public private(set) var object = JSONObject()

    public init() {}

    public mutating func set(_ key: String, _ value: (some JSONRepresentable)?) {
        if let value { object[key] = value.json }
    }

    public mutating func set<T: JSONRepresentable>(_ key: String, omitEmpty list: [T]) {
        if !list.isEmpty { object[key] = list.json }
    }

    public var json: JSONValue { .object(object) }
}
