public import TraceCore

extension ConfigNode {
    /// The error for a value of the wrong kind: `<what> must be <expected>, found a list`.
    public func typeError(_ what: String, expected: String) -> ConfigError {
        ConfigError(.invalidValue, "\(what) must be \(expected), found a \(kindName)", at: location)
    }

    /// A string, from any scalar (a plain `42` reads as "42", so names and ids can be numbers).
    public func string(_ what: String) throws(ConfigError) -> String {
        guard case .scalar(let text, _) = content else { throw typeError(what, expected: "a string") }
        return text
    }

    /// A non-empty string.
    public func nonEmptyString(_ what: String) throws(ConfigError) -> String {
        let text = try string(what)
        guard !text.isEmpty else { throw ConfigError(.invalidValue, "\(what) must not be empty", at: location) }
        return text
    }

    /// A regular expression that `LinearRegex` runs, as its source text.
    public func regex(_ what: String) throws(ConfigError) -> String {
        let text = try string(what)
        do {
            _ = try LinearRegex(text)
        } catch {
            throw ConfigError(.invalidValue, "\(what) is not a regular expression this tool runs: \(error)", at: location)
        }
        return text
    }

    /// An integer within `range`.
    public func int(_ what: String, in range: ClosedRange<Int> = Int.min...Int.max) throws(ConfigError) -> Int {
        guard case .int(let value) = json else { throw typeError(what, expected: "a whole number") }
        guard range.contains(value) else {
            let bound =
                range.upperBound == Int.max ? "at least \(range.lowerBound)" : "between \(range.lowerBound) and \(range.upperBound)"
            throw ConfigError(.invalidValue, "\(what) must be \(bound), found \(value)", at: location)
        }
        return value
    }

    /// A number (integer or decimal).
    public func double(_ what: String) throws(ConfigError) -> Double {
        guard let value = json.doubleValue, case .scalar = content else { throw typeError(what, expected: "a number") }
        return value
    }

    /// `true` or `false`.
    public func bool(_ what: String) throws(ConfigError) -> Bool {
        guard case .bool(let value) = json, case .scalar = content else { throw typeError(what, expected: "true or false") }
        return value
    }

    /// One of `choices` (the raw values of `T`).
    public func choice<T: RawRepresentable & CaseIterable>(_ what: String, as type: T.Type = T.self) throws(ConfigError) -> T
    where T.RawValue == String {
        let text = try string(what)
        if let value = T(rawValue: text) { return value }
        let names = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        throw ConfigError(
            .invalidValue, "\(what) must be one of \(names), found \"\(text)\"", at: location,
            hint: Self.suggestion(for: text, among: T.allCases.map(\.rawValue)).map { "did you mean \"\($0)\"?" })
    }

    /// The items of a list.
    public func list(_ what: String) throws(ConfigError) -> [ConfigNode] {
        guard case .sequence(let items) = content else { throw typeError(what, expected: "a list") }
        return items
    }

    /// A name (of a tool, a tag): a string. Unlike `string(_:)`, a plain number, boolean or null
    /// is a type error, so `toolsCalled: 5` is not a tool named "5".
    public func name(_ what: String) throws(ConfigError) -> String {
        guard case .scalar(let text, _) = content, kindName == "string" else { throw typeError(what, expected: "a name (a string)") }
        guard !text.isEmpty else { throw ConfigError(.invalidValue, "\(what) must not be empty", at: location) }
        return text
    }

    /// A list of names, or a single name taken as a list of one.
    public func names(_ what: String) throws(ConfigError) -> [String] {
        if case .scalar = content { return [try name(what)] }
        var result: [String] = []
        for item in try list(what) { result.append(try item.name("each item of \(what)")) }
        return result
    }

    /// A list of strings, or a single string taken as a list of one.
    public func strings(_ what: String) throws(ConfigError) -> [String] {
        if case .scalar = content { return [try string(what)] }
        var result: [String] = []
        for item in try list(what) { result.append(try item.string("each item of \(what)")) }
        return result
    }

    /// A reader over the keys of a mapping.
    public func mapping(_ what: String) throws(ConfigError) -> MappingReader {
        guard case .mapping(let pairs) = content else { throw typeError(what, expected: "a mapping") }
        return MappingReader(pairs: pairs, location: location, what: what)
    }

    /// The closest of `names` to `text`, if close enough to be a likely typo.
    public static func suggestion(for text: String, among names: [String]) -> String? {
        var best: (name: String, distance: Int)?
        let lowered = Array(text.lowercased().utf8)
        for name in names {
            let other = Array(name.lowercased().utf8)
            let allowed = max(1, name.count / 3)
            // The distance is at least the difference in length: most names are ruled out
            // without computing it.
            guard abs(lowered.count - other.count) <= allowed else { continue }
            let distance = editDistance(lowered, other)
            if distance <= allowed, distance < (best?.distance ?? .max) { best = (name, distance) }
        }
        if let best { return best.name }
        // Another form of the same word (`denied` for `deny`, `approved` for `approval_required`):
        // a shared start of at least three letters and most of the shorter word, when only one
        // name has it.
        let stems = names.filter { name in
            let other = Array(name.lowercased().utf8)
            let shared = zip(lowered, other).prefix { $0 == $1 }.count
            return shared >= 3 && shared * 4 >= min(lowered.count, other.count) * 3
        }
        return stems.count == 1 ? stems[0] : nil
    }

    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

/// Reads the keys of one mapping, remembering which were read, so that `finish()` can reject
/// the keys nobody asked for (a typo such as `max_step` fails instead of being ignored).
public struct MappingReader {
    public let pairs: [ConfigNode.Pair]
    /// The mapping itself, for errors about a missing key.
    public let location: SourceLocation
    /// What the mapping is, for messages ("the agent", "tool \"search\"").
    public let what: String
    /// The keys asked for, in the order first asked (for the hint), and as a set (for the check).
    private var known: [String] = []
    private var knownSet: Set<String> = []

    init(pairs: [ConfigNode.Pair], location: SourceLocation, what: String) {
        self.pairs = pairs
        self.location = location
        self.what = what
    }

    /// The value under `key`, if present.
    public mutating func optional(_ key: String) -> ConfigNode? {
        if knownSet.insert(key).inserted { known.append(key) }
        return pairs.first { $0.key == key }?.value
    }

    /// The value under `key`; throws if it is missing.
    public mutating func required(_ key: String, hint: String? = nil) throws(ConfigError) -> ConfigNode {
        guard let node = optional(key) else {
            throw ConfigError(.missingKey, "\(what) has no \"\(key)\"", at: location, hint: hint)
        }
        return node
    }

    /// Whether `key` is present (without reading it).
    public func contains(_ key: String) -> Bool { pairs.contains { $0.key == key } }

    /// Throws on the first key that was never asked for, suggesting the closest known one.
    public func finish() throws(ConfigError) {
        if let first = unknownKeys().first { throw first }
    }

    /// An error for every key that was never asked for, each suggesting the closest known one;
    /// `name` replaces the mapping's description when more is known by now (`case "b"`).
    public func unknownKeys(in name: String? = nil) -> [ConfigError] {
        pairs.filter { !knownSet.contains($0.key) }.map { pair in
            let suggestion = ConfigNode.suggestion(for: pair.key, among: known)
            return ConfigError(
                .unknownKey, "\(name ?? what) has no setting \"\(pair.key)\"", at: pair.keyLocation,
                hint: suggestion.map { "did you mean \"\($0)\"?" } ?? "known keys: \(known.joined(separator: ", "))")
        }
    }
}

extension ConfigNode {
    /// Where the value of `key` is written, when this is a mapping that has it.
    public func location(ofKey key: String) -> SourceLocation? {
        guard case .mapping(let pairs) = content else { return nil }
        return pairs.first { $0.key == key }?.value.location
    }

    /// Where `text` is first written below this node, in file order: a scalar with that text
    /// or a mapping key (`arguments: {refund_order: …}`). For pointing a cross-file error (a
    /// tool the agent lacks) at the name itself.
    /// Use `firstLocations()` instead when looking up many texts: each call walks the tree.
    public func firstLocation(of text: String) -> SourceLocation? {
        switch content {
        case .scalar(let value, _):
            return value == text ? location : nil
        case .sequence(let items):
            for item in items {
                if let found = item.firstLocation(of: text) { return found }
            }
            return nil
        case .mapping(let pairs):
            for pair in pairs {
                if pair.key == text { return pair.keyLocation }
                if let found = pair.value.firstLocation(of: text) { return found }
            }
            return nil
        }
    }

    /// `firstLocation(of:)` for every text below this node, from one walk of the tree: for
    /// pointing many errors (a long list of misspelt tools) at their names in linear time.
    public func firstLocations() -> [String: SourceLocation] {
        var found: [String: SourceLocation] = [:]
        // An explicit stack, in the order `firstLocation(of:)` visits: nesting is bounded by
        // `maximumDepth`, but a walk with no recursion needs no such bound.
        var pending: [ConfigNode] = [self]
        while let node = pending.popLast() {
            switch node.content {
            case .scalar(let value, _):
                if found[value] == nil { found[value] = node.location }
            case .sequence(let items):
                pending.append(contentsOf: items.reversed())
            case .mapping(let pairs):
                for pair in pairs.reversed() {
                    pending.append(pair.value)
                    pending.append(ConfigNode(content: .scalar(pair.key, isPlain: false), location: pair.keyLocation))
                }
            }
        }
        return found
    }
}
