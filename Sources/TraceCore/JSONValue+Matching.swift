/// Looking values up by key path and comparing them the way people mean JSON: the shared
/// vocabulary of policy rules, fixture tools and eval matchers.
extension JSONValue {
    /// The value at a key path: object members by name, array elements by index
    /// (`["items", "0", "sku"]`); nil when any step is missing.
    public func value(atPath path: some Sequence<some StringProtocol>) -> JSONValue? {
        var current = self
        for key in path {
            switch current {
            case .object(let object):
                guard let next = object[String(key)] else { return nil }
                current = next
            case .array(let items):
                guard let index = Int(key), items.indices.contains(index) else { return nil }
                current = items[index]
            default:
                return nil
            }
        }
        return current
    }

    /// The value at a dotted key path (`address.country`, `items.0.sku`).
    public func value(atDottedPath path: String) -> JSONValue? {
        value(atPath: path.split(separator: "."))
    }

    /// Equality as JSON means it: numbers by value (`1` equals `1.0`), arrays element by
    /// element, objects member by member.
    public func equals(byValue other: JSONValue) -> Bool {
        switch (self, other) {
        case (.int, .double), (.double, .int), (.double, .double): return doubleValue == other.doubleValue
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { $0.equals(byValue: $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.allSatisfy { member in y[member.key].map { member.value.equals(byValue: $0) } ?? false }
        default: return self == other
        }
    }

    /// Whether this value holds everything in `pattern`: for objects, every member of the
    /// pattern is present and holds the pattern's value (more members are fine, at any depth);
    /// anything else must be equal by value.
    public func contains(_ pattern: JSONValue) -> Bool {
        guard case .object(let object) = self, case .object(let wanted) = pattern else { return equals(byValue: pattern) }
        return wanted.allSatisfy { member in object[member.key].map { $0.contains(member.value) } ?? false }
    }
}
