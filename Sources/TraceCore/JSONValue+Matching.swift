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

    /// How deep a value the runtime records may nest: the reader's limit
    /// (`JSONParser.maximumDepth`) less room for the event envelope around it.
    public static let recordableDepth = JSONParser.maximumDepth - 32

    /// Whether the value nests more than `limit` arrays and objects deep. Stops as soon as it
    /// knows, so a hostile value costs no more than `limit` levels.
    public func nests(deeperThan limit: Int) -> Bool {
        guard limit >= 0 else { return true }
        switch self {
        case .array(let items): return items.contains { $0.nests(deeperThan: limit - 1) }
        case .object(let object): return object.contains { $0.value.nests(deeperThan: limit - 1) }
        default: return false
        }
    }

    /// The first place where this value and `other` differ, depth first: its key path (from
    /// `path`: `a.b[2].c`) and the two values there (nil where one side lacks the member or
    /// element). Object members are visited in `keyPriority` order first, then by name;
    /// arrays by index. Nil when the values are equal.
    public func firstDifference(from other: JSONValue, at path: String = "", keyPriority: [String] = []) -> JSONDifference? {
        switch (self, other) {
        case (.object(let x), .object(let y)):
            // The union of both sides' keys by their bytes (a Swift Set would merge two keys that
            // differ only in Unicode normalisation, which JSON keeps apart).
            var keys: [String] = []
            var seen: Set<[UInt8]> = []
            for key in x.keys + y.keys where seen.insert(Array(key.utf8)).inserted { keys.append(key) }
            keys.sort { a, b in
                let (first, second) = (
                    keyPriority.firstIndex(of: a) ?? keyPriority.count, keyPriority.firstIndex(of: b) ?? keyPriority.count
                )
                return first != second ? first < second : a.utf8.lexicographicallyPrecedes(b.utf8)
            }
            for key in keys {
                let child = path.isEmpty ? key : "\(path).\(key)"
                switch (x[key], y[key]) {
                case (let left?, let right?):
                    if left != right {
                        return left.firstDifference(from: right, at: child, keyPriority: keyPriority)
                            ?? JSONDifference(path: child, left: left, right: right)
                    }
                case (let left, let right) where left != nil || right != nil:
                    return JSONDifference(path: child, left: left, right: right)
                default:
                    continue
                }
            }
            return nil
        case (.array(let x), .array(let y)):
            for index in 0..<max(x.count, y.count) {
                let child = "\(path)[\(index)]"
                // `.none`, not `nil`: JSONValue is nil-literal expressible, and a missing element is not `null`.
                let left: JSONValue? = index < x.count ? .some(x[index]) : .none
                let right: JSONValue? = index < y.count ? .some(y[index]) : .none
                guard let left, let right else { return JSONDifference(path: child, left: left, right: right) }
                if left != right {
                    return left.firstDifference(from: right, at: child, keyPriority: keyPriority)
                        ?? JSONDifference(path: child, left: left, right: right)
                }
            }
            return nil
        default:
            return self == other ? nil : JSONDifference(path: path, left: self, right: other)
        }
    }
}

/// Where two JSON values first differ (see `JSONValue.firstDifference(from:at:keyPriority:)`).
public struct JSONDifference: Sendable, Hashable {
    /// The key path: `arguments.items[2].sku`; empty for the values themselves.
    public var path: String
    /// The left value there; nil when the left side has no such member or element.
    public var left: JSONValue?
    public var right: JSONValue?

    public init(path: String, left: JSONValue?, right: JSONValue?) {
        self.path = path
        self.left = left
        self.right = right
    }

    /// The left value, or `"(absent)"` for display.
    public var leftOrAbsent: JSONValue { left ?? "(absent)" }
    public var rightOrAbsent: JSONValue { right ?? "(absent)" }
}
