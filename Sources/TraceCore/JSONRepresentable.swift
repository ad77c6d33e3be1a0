/// A value with a fixed JSON form: how event payloads and run state become JSON and back.
///
/// `init(json:)` rejects what does not fit with a `TraceCoreError` whose `fieldPath` says
/// where inside the value (such as `calls[0].arguments`); enclosing decoders extend the path
/// as the error passes through them (`TraceCoreError.inside(_:)`).
public protocol JSONRepresentable: Sendable {
    init(json: JSONValue) throws
    var json: JSONValue { get }
}

func fieldError(expected: String, found value: JSONValue) -> TraceCoreError {
    TraceCoreError(.invalidField, "must be \(expected), found \(value.typeDescription)", fieldPath: "")
}

extension String: JSONRepresentable {
    public init(json: JSONValue) throws {
        guard case .string(let text) = json else { throw fieldError(expected: "a string", found: json) }
        self = text
    }
    public var json: JSONValue { .string(self) }
}

extension Int: JSONRepresentable {
    public init(json: JSONValue) throws {
        guard let number = json.intValue else { throw fieldError(expected: "an integer", found: json) }
        self = number
    }
    public var json: JSONValue { .int(self) }
}

extension Double: JSONRepresentable {
    public init(json: JSONValue) throws {
        guard let number = json.doubleValue else { throw fieldError(expected: "a number", found: json) }
        self = number
    }
    public var json: JSONValue { .double(self) }
}

extension Bool: JSONRepresentable {
    public init(json: JSONValue) throws {
        guard case .bool(let flag) = json else { throw fieldError(expected: "true or false", found: json) }
        self = flag
    }
    public var json: JSONValue { .bool(self) }
}

extension JSONValue: JSONRepresentable {
    public init(json: JSONValue) throws { self = json }
    public var json: JSONValue { self }
}

extension Array: JSONRepresentable where Element: JSONRepresentable {
    public init(json: JSONValue) throws {
        guard case .array(let elements) = json else { throw fieldError(expected: "an array", found: json) }
        self = []
        reserveCapacity(elements.count)
        for (position, element) in elements.enumerated() {
            do {
                append(try Element(json: element))
            } catch let error as TraceCoreError {
                throw error.inside("[\(position)]")
            }
        }
    }
    public var json: JSONValue { .array(map(\.json)) }
}

/// String enums encode as their raw value; an unknown value is an error naming the choices.
public protocol JSONEnum: JSONRepresentable, RawRepresentable, CaseIterable where RawValue == String {}

extension JSONEnum {
    public init(json: JSONValue) throws {
        guard case .string(let text) = json else {
            throw fieldError(expected: "a string", found: json)
        }
        guard let value = Self(rawValue: text) else {
            let choices = Self.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw TraceCoreError(.invalidField, "is \"\(text)\", which is not one of \(choices)", fieldPath: "")
        }
        self = value
    }
    public var json: JSONValue { .string(rawValue) }
}

/// Reads typed members of one JSON object, naming each member's path in errors.
public struct FieldReader {
    public let object: JSONObject

    public init(_ value: JSONValue) throws {
        guard case .object(let object) = value else { throw fieldError(expected: "an object", found: value) }
        self.object = object
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
            throw TraceCoreError(.invalidField, "is missing", fieldPath: key)
        }
        return try decode(value, key)
    }

    /// An optional member; `null` counts as absent.
    public func optional<T: JSONRepresentable>(_ key: String) throws -> T? {
        guard let value = value(key), value != .null else { return nil }
        return try decode(value, key) as T
    }

    private func decode<T: JSONRepresentable>(_ value: JSONValue, _ key: String) throws -> T {
        do {
            return try T(json: value)
        } catch let error as TraceCoreError {
            throw error.inside(key)
        }
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
