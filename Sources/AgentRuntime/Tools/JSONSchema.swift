public import TraceCore

/// A JSON Schema, of the subset tools use to describe their input: `type`, `properties`,
/// `required`, `additionalProperties`, `items`, `enum`, `const`, `anyOf`, numeric bounds,
/// string lengths and `pattern`, array lengths. Annotations (`title`, `description`,
/// `default`, `examples`, `format`, `$schema`, `$id`) are accepted and not checked.
///
/// Anything else is rejected when the schema is read, so a misspelt keyword cannot silently
/// turn a check off.
public final class JSONSchema: Sendable {
    /// The schema's JSON, as written.
    public let json: JSONValue
    let types: [String]?
    let properties: [(name: String, schema: JSONSchema)]
    let required: [String]
    let additionalProperties: Additional
    let items: JSONSchema?
    let allowed: [JSONValue]?
    let constant: JSONValue?
    let anyOf: [JSONSchema]
    let minimum: Double?
    let maximum: Double?
    let exclusiveMinimum: Double?
    let exclusiveMaximum: Double?
    let minLength: Int?
    let maxLength: Int?
    let pattern: LinearRegex?
    let minItems: Int?
    let maxItems: Int?
    let minProperties: Int?
    let maxProperties: Int?

    enum Additional: Sendable {
        case allowed
        case forbidden
        case schema(JSONSchema)
    }

    static let typeNames = ["string", "integer", "number", "boolean", "object", "array", "null"]
    /// Keywords past the subset that may allow an object members `properties` does not name.
    static let keywordsAllowingMoreMembers: Set<String> = [
        "patternProperties", "$ref", "allOf", "oneOf", "if", "then", "else", "dependentSchemas", "unevaluatedProperties", "$dynamicRef",
    ]
    static let annotations: Set<String> = ["title", "description", "default", "examples", "format", "$schema", "$id", "$comment"]

    /// What a schema keyword outside the subset does.
    public enum UnknownKeywords: Sendable {
        /// It is an error: a schema the user writes (an agent file) must mean what it says.
        case reject
        /// It is accepted and not checked, nor is a `pattern` this tool cannot run: for schemas
        /// a tool server publishes (`$ref`, `oneOf`…), which the server checks itself.
        case ignore
    }

    /// Reads a schema; throws `SchemaError` naming the keyword path that is wrong.
    public init(json: JSONValue, unknownKeywords: UnknownKeywords = .reject) throws(SchemaError) {
        self.json = json
        if case .bool(true) = json {
            types = nil
            properties = []
            required = []
            additionalProperties = .allowed
            items = nil
            allowed = nil
            constant = nil
            anyOf = []
            (minimum, maximum, exclusiveMinimum, exclusiveMaximum) = (nil, nil, nil, nil)
            (minLength, maxLength, pattern, minItems, maxItems) = (nil, nil, nil, nil, nil)
            (minProperties, maxProperties) = (nil, nil)
            return
        }
        guard let object = json.objectValue else {
            throw SchemaError(path: [], message: "a schema must be an object, found \(json.typeDescription)")
        }
        var types: [String]?
        var properties: [(String, JSONSchema)] = []
        var required: [String] = []
        var additional = Additional.allowed
        var items: JSONSchema?
        var allowed: [JSONValue]?
        var constant: JSONValue?
        var anyOf: [JSONSchema] = []
        var numbers: [String: Double] = [:]
        var counts: [String: Int] = [:]
        var pattern: LinearRegex?
        for member in object {
            let key = member.key
            let value = member.value
            switch key {
            case "type":
                let names: [String]
                if let name = value.stringValue {
                    names = [name]
                } else if let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }), !list.isEmpty {
                    names = list.compactMap(\.stringValue)
                } else {
                    throw SchemaError(path: [key], message: "must be a type name or a list of them, found \(value.typeDescription)")
                }
                for name in names where !Self.typeNames.contains(name) {
                    throw SchemaError(
                        path: [key], message: "names an unknown type \"\(name)\" (known: \(Self.typeNames.joined(separator: ", ")))")
                }
                types = names
            case "properties":
                guard let members = value.objectValue else {
                    throw SchemaError(path: [key], message: "must be an object of schemas, found \(value.typeDescription)")
                }
                for property in members {
                    do {
                        properties.append((property.key, try JSONSchema(json: property.value, unknownKeywords: unknownKeywords)))
                    } catch {
                        throw error.inside([key, property.key])
                    }
                }
            case "required":
                guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                    throw SchemaError(path: [key], message: "must be a list of field names")
                }
                required = list.compactMap(\.stringValue)
            case "additionalProperties":
                switch value {
                case .bool(let isAllowed): additional = isAllowed ? .allowed : .forbidden
                default:
                    do { additional = .schema(try JSONSchema(json: value, unknownKeywords: unknownKeywords)) } catch {
                        throw error.inside([key])
                    }
                }
            case "items":
                do { items = try JSONSchema(json: value, unknownKeywords: unknownKeywords) } catch { throw error.inside([key]) }
            case "enum":
                guard let list = value.arrayValue, !list.isEmpty else {
                    throw SchemaError(path: [key], message: "must be a non-empty list of values")
                }
                allowed = list
            case "const":
                constant = value
            case "anyOf":
                guard let list = value.arrayValue, !list.isEmpty else {
                    throw SchemaError(path: [key], message: "must be a non-empty list of schemas")
                }
                for (index, item) in list.enumerated() {
                    do { anyOf.append(try JSONSchema(json: item, unknownKeywords: unknownKeywords)) } catch {
                        throw error.inside([key, "\(index)"])
                    }
                }
            case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
                guard let number = value.doubleValue else {
                    throw SchemaError(path: [key], message: "must be a number, found \(value.typeDescription)")
                }
                numbers[key] = number
            case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
                guard let count = value.intValue, count >= 0 else {
                    throw SchemaError(path: [key], message: "must be a whole number of at least 0")
                }
                counts[key] = count
            case "pattern":
                guard let text = value.stringValue else { throw SchemaError(path: [key], message: "must be a string") }
                do {
                    pattern = try LinearRegex(text)
                } catch  where unknownKeywords == .ignore {
                    pattern = nil
                } catch {
                    throw SchemaError(path: [key], message: "is not a regular expression this tool runs: \(error)")
                }
            default:
                guard Self.annotations.contains(key) || unknownKeywords == .ignore else {
                    throw SchemaError(
                        path: [key],
                        message: "is not a supported schema keyword (supported: type, properties, required, "
                            + "additionalProperties, items, enum, const, anyOf, minimum, maximum, exclusiveMinimum, "
                            + "exclusiveMaximum, minLength, maxLength, pattern, minItems, maxItems, minProperties, maxProperties)")
                }
            }
        }
        // Keywords that let an object have members `properties` does not name: left unchecked, they
        // must not leave `additionalProperties` (false, or a schema) judging the members they allow.
        if unknownKeywords == .ignore, object.contains(where: { Self.keywordsAllowingMoreMembers.contains($0.key) }) {
            additional = .allowed
        }
        for name in required where unknownKeywords == .reject && !properties.isEmpty && !properties.contains(where: { $0.0 == name }) {
            throw SchemaError(path: ["required"], message: "names \"\(name)\", which is not among the properties")
        }
        self.types = types
        self.properties = properties
        self.required = required
        self.additionalProperties = additional
        self.items = items
        self.allowed = allowed
        self.constant = constant
        self.anyOf = anyOf
        minimum = numbers["minimum"]
        maximum = numbers["maximum"]
        exclusiveMinimum = numbers["exclusiveMinimum"]
        exclusiveMaximum = numbers["exclusiveMaximum"]
        minLength = counts["minLength"]
        maxLength = counts["maxLength"]
        minItems = counts["minItems"]
        maxItems = counts["maxItems"]
        minProperties = counts["minProperties"]
        maxProperties = counts["maxProperties"]
        self.pattern = pattern
    }

    /// The first way `value` breaks the schema, as a sentence about `root` (such as
    /// `arguments.items[1].sku must be a string, found an integer`), or nil when it conforms.
    public func violation(of value: JSONValue, root: String = "arguments") -> String? {
        check(value, path: root)
    }

    private func check(_ value: JSONValue, path: String) -> String? {
        if let types, !types.contains(where: { Self.value(value, hasType: $0) }) {
            let expected = types.map(Self.article).joined(separator: " or ")
            return "\(path) must be \(expected), found \(Self.describe(value))"
        }
        if let constant, constant != value {
            return "\(path) must be \(JSONWriter.encodeString(constant)), found \(Self.describe(value))"
        }
        if let allowed, !allowed.contains(value) {
            let names = allowed.map { JSONWriter.encodeString($0) }.joined(separator: ", ")
            return "\(path) must be one of \(names), found \(Self.describe(value))"
        }
        if !anyOf.isEmpty {
            // Each form is checked once: the first form's problem is kept from that check, not
            // asked again (nested `anyOf` asked twice per level took 2^depth checks).
            var first: String?
            for (position, form) in anyOf.enumerated() {
                guard let problem = form.check(value, path: path) else {
                    first = nil
                    break
                }
                if position == 0 { first = problem }
            }
            // Said once, however deep the forms nest.
            let none = " (and no other allowed form matches)"
            if let first { return first.hasSuffix(none) ? first : first + none }
        }
        switch value {
        case .object(let object):
            for name in required where object[name] == nil {
                return "\(path) is missing the required field \"\(name)\""
            }
            if let minProperties, object.count < minProperties {
                return "\(path) must have at least \(minProperties) field\(minProperties == 1 ? "" : "s"), found \(object.count)"
            }
            if let maxProperties, object.count > maxProperties {
                return "\(path) must have at most \(maxProperties) field\(maxProperties == 1 ? "" : "s"), found \(object.count)"
            }
            for member in object {
                if let schema = properties.first(where: { $0.name == member.key })?.schema {
                    if let problem = schema.check(member.value, path: path + "." + member.key) { return problem }
                    continue
                }
                switch additionalProperties {
                case .allowed: break
                case .forbidden:
                    let known = properties.map { "\"\($0.name)\"" }.joined(separator: ", ")
                    return "\(path) has an unexpected field \"\(member.key)\" (allowed: \(known))"
                case .schema(let schema):
                    if let problem = schema.check(member.value, path: path + "." + member.key) { return problem }
                }
            }
        case .array(let elements):
            if let minItems, elements.count < minItems { return "\(path) must have at least \(minItems) items, found \(elements.count)" }
            if let maxItems, elements.count > maxItems { return "\(path) must have at most \(maxItems) items, found \(elements.count)" }
            if let items {
                for (index, element) in elements.enumerated() {
                    if let problem = items.check(element, path: "\(path)[\(index)]") { return problem }
                }
            }
        case .string(let text):
            let length = text.count
            if let minLength, length < minLength { return "\(path) must be at least \(minLength) characters long, found \(length)" }
            if let maxLength, length > maxLength { return "\(path) must be at most \(maxLength) characters long, found \(length)" }
            if let pattern, !pattern.matches(text) {
                return "\(path) must match the pattern \(pattern), found \(Self.describe(value))"
            }
        case .int, .double:
            guard let number = value.doubleValue else { break }
            let shown = Self.describe(value)
            if let minimum, number < minimum { return "\(path) must be at least \(Self.format(minimum)), found \(shown)" }
            if let maximum, number > maximum { return "\(path) must be at most \(Self.format(maximum)), found \(shown)" }
            if let exclusiveMinimum, number <= exclusiveMinimum {
                return "\(path) must be greater than \(Self.format(exclusiveMinimum)), found \(shown)"
            }
            if let exclusiveMaximum, number >= exclusiveMaximum {
                return "\(path) must be less than \(Self.format(exclusiveMaximum)), found \(shown)"
            }
        default: break
        }
        return nil
    }

    static func value(_ value: JSONValue, hasType name: String) -> Bool {
        switch (name, value) {
        case ("string", .string), ("boolean", .bool), ("object", .object), ("array", .array), ("null", .null): return true
        case ("integer", .int): return true
        case ("integer", .double(let number)): return number.rounded() == number
        case ("number", .int), ("number", .double): return true
        default: return false
        }
    }

    private static func article(_ type: String) -> String {
        switch type {
        case "integer", "object", "array": return "an \(type)"
        case "null": return "null"
        default: return "a \(type)"
        }
    }

    /// A value for messages: its type and, when short, the value itself.
    static func describe(_ value: JSONValue) -> String {
        let text = JSONWriter.encodeString(value)
        switch value {
        case .null: return "null"
        case .object, .array: return text.utf8.count <= 40 ? "\(value.typeDescription) \(text)" : value.typeDescription
        default: return text.utf8.count <= 60 ? "\(value.typeDescription) (\(text))" : value.typeDescription
        }
    }

    private static func format(_ number: Double) -> String {
        number.rounded() == number && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }
}

/// A schema that cannot be read: the keyword path (`properties.amount.type`) and what is wrong.
public struct SchemaError: Diagnostic, Hashable {
    public var path: [String]
    public var message: String

    public init(path: [String], message: String) {
        self.path = path
        self.message = message
    }

    func inside(_ keys: [String]) -> SchemaError {
        SchemaError(path: keys + path, message: message)
    }

    /// `properties.amount.type names an unknown type "int"`.
    public var sentence: String {
        path.isEmpty ? message : "\(path.joined(separator: ".")) \(message)"
    }

    public var diagnosticCode: String { "schema.invalid" }
    /// A schema sits in an agent file; the loader that read it says where.
    public var place: SourceLocation? { nil }
}
