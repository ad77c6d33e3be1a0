import ConfigFile
public import TraceCore

/// What the arguments of a call must be. Modes name the relation of the *actual* arguments
/// (from the run) to the *expected* ones (from the case), as LangChain agentevals'
/// `tool_args_match_mode` does: `superset` means the call's arguments hold at least the
/// expected keys.
public struct ArgumentMatcher: Sendable, CustomStringConvertible {
    public enum Mode: String, Sendable, CaseIterable {
        /// Equal, once ignored keys are removed from both.
        case exact
        /// The call's arguments are a superset of the expected: every expected key is present
        /// with a matching value; the call may have more. The default.
        case superset
        /// The call's arguments are a subset of the expected: every key of the call is expected
        /// with a matching value; expected keys may be missing.
        case subset
        /// Arguments are not compared (only `paths` are checked).
        case ignore

        /// Other names case files may use: the relation spelled out.
        public static let synonyms: [String: Mode] = ["includes_expected": .superset, "within_expected": .subset]
    }

    /// A check on the value at one key path.
    public enum ValueTest: Sendable, CustomStringConvertible {
        case equals(JSONValue)
        case regex(String)
        case range(min: Double?, max: Double?)
        case exists(Bool)
        case oneOf([JSONValue])

        func mismatch(_ value: JSONValue?) -> String? {
            switch self {
            case .exists(let expected):
                return (value != nil) == expected ? nil : (expected ? "is missing" : "is present (\(Self.show(value)))")
            case .equals(let expected):
                guard let value else { return "is missing" }
                return value.equals(byValue: expected)
                    ? nil : "is \(Self.show(value)), expected \(JSONWriter.encodeString(expected))"
            case .oneOf(let options):
                guard let value else { return "is missing" }
                return options.contains { value.equals(byValue: $0) }
                    ? nil : "is \(Self.show(value)), expected one of \(JSONWriter.encodeString(.array(options)))"
            case .regex(let pattern):
                guard let text = value?.stringValue else { return "is \(Self.show(value)), expected a string matching /\(pattern)/" }
                guard let regex = try? LinearRegex(pattern), regex.matches(text) else {
                    return "is \(Self.show(value)), which does not match /\(pattern)/"
                }
                return nil
            case .range(let low, let high):
                guard let number = value?.doubleValue else { return "is \(Self.show(value)), expected a number" }
                if let low, number < low { return "is \(Self.show(value)), below the minimum \(Self.format(low))" }
                if let high, number > high { return "is \(Self.show(value)), above the maximum \(Self.format(high))" }
                return nil
            }
        }

        static func show(_ value: JSONValue?) -> String {
            value.map { JSONWriter.encodeString($0) } ?? "missing"
        }

        static func format(_ number: Double) -> String {
            number.rounded() == number && abs(number) < 1e15 ? String(Int(number)) : String(number)
        }

        public var description: String {
            switch self {
            case .equals(let value): return "= \(JSONWriter.encodeString(value))"
            case .regex(let pattern): return "~ /\(pattern)/"
            case .range(let low?, let high?): return "between \(Self.format(low)) and \(Self.format(high))"
            case .range(let low?, nil): return "at least \(Self.format(low))"
            case .range(nil, let high?): return "at most \(Self.format(high))"
            case .range(nil, nil): return "any number"
            case .exists(let flag): return flag ? "present" : "absent"
            case .oneOf(let values): return "in \(JSONWriter.encodeString(.array(values)))"
            }
        }
    }

    public var mode: Mode
    /// The expected arguments (for exact, subset and superset).
    public var expected: JSONValue
    /// Checks by dotted key path (`address.country`, `items.0.sku`), on top of the mode.
    public var paths: [(path: String, test: ValueTest)]
    /// Keys left out of the comparison, as dotted paths with `*` globs per segment.
    public var ignoredKeys: [String]

    /// The argument names the matcher looks at: the first key of each path, and the expected
    /// object's keys (for exact, subset and superset), each once, in order.
    public var firstKeys: [String] {
        var keys = paths.compactMap { $0.path.split(separator: ".").first.map(String.init) }
        if mode != .ignore, let object = expected.objectValue { keys += object.keys }
        var seen = Set<String>()
        return keys.filter { seen.insert($0).inserted }
    }

    public init(mode: Mode, expected: JSONValue = .object(JSONObject()), paths: [(String, ValueTest)] = [], ignoredKeys: [String] = []) {
        self.mode = mode
        self.expected = expected
        self.paths = paths.map { (path: $0.0, test: $0.1) }
        self.ignoredKeys = ignoredKeys
    }

    /// Why `actual` does not match, or nil when it does.
    public func mismatch(_ actual: JSONValue) -> String? {
        let expectedValue = Self.removing(ignoredKeys, from: expected, at: [])
        let actualValue = Self.removing(ignoredKeys, from: actual, at: [])
        switch mode {
        case .ignore: break
        case .exact:
            if let problem = Self.difference(
                expected: expectedValue, actual: actualValue, at: "", allowExtraActual: false, allowMissingActual: false)
            {
                return problem
            }
        case .superset:
            if let problem = Self.difference(
                expected: expectedValue, actual: actualValue, at: "", allowExtraActual: true, allowMissingActual: false)
            {
                return problem
            }
        case .subset:
            if let problem = Self.difference(
                expected: expectedValue, actual: actualValue, at: "", allowExtraActual: false, allowMissingActual: true)
            {
                return problem
            }
        }
        for (path, test) in paths {
            if let problem = test.mismatch(actual.value(atDottedPath: path)) { return "\(path) \(problem)" }
        }
        return nil
    }

    /// The first difference between objects compared key by key; extra or missing keys are
    /// allowed at every level as the mode says. Numbers compare by value (1 equals 1.0).
    static func difference(expected: JSONValue, actual: JSONValue, at path: String, allowExtraActual: Bool, allowMissingActual: Bool)
        -> String?
    {
        let place = path.isEmpty ? "arguments" : path
        switch (expected, actual) {
        case (.object(let wanted), .object(let got)):
            for member in wanted {
                let key = path.isEmpty ? member.key : "\(path).\(member.key)"
                guard let value = got[member.key] else {
                    if allowMissingActual { continue }
                    return "\(key) is missing, expected \(JSONWriter.encodeString(member.value))" + checkHint(member.value, at: key)
                }
                if let problem = difference(
                    expected: member.value, actual: value, at: key, allowExtraActual: allowExtraActual,
                    allowMissingActual: allowMissingActual)
                {
                    return problem
                }
            }
            if !allowExtraActual, let extra = got.first(where: { wanted[$0.key] == nil }) {
                let key = path.isEmpty ? extra.key : "\(path).\(extra.key)"
                return "\(key) is \(JSONWriter.encodeString(extra.value)), which was not expected"
            }
            return nil
        default:
            return expected.equals(byValue: actual)
                ? nil
                : "\(place) is \(JSONWriter.encodeString(actual)), expected \(JSONWriter.encodeString(expected))"
                    + checkHint(expected, at: place)
        }
    }

    /// The keys of a check under `paths:` (`{regex: …}`, `{min: …}`, …), as
    /// `EvalCaseFile.readTest` reads them.
    static let checkKeys: Set<String> = ["equals", "regex", "min", "max", "in", "exists"]

    /// For an expected value that reads like a check but is compared as a literal (it was
    /// written among the expected arguments, not under `paths:`), a note saying where it goes.
    static func checkHint(_ expected: JSONValue, at path: String) -> String {
        guard case .object(let object) = expected, !object.isEmpty, object.allSatisfy({ checkKeys.contains($0.key) }) else { return "" }
        return " — a literal value here; a check like this goes under paths: (paths: {\(path): \(JSONWriter.encodeString(expected))})"
    }

    /// `value` without the keys whose dotted path matches one of `patterns`.
    static func removing(_ patterns: [String], from value: JSONValue, at path: [String]) -> JSONValue {
        guard !patterns.isEmpty, case .object(let object) = value else { return value }
        var result = JSONObject()
        for member in object {
            let memberPath = path + [member.key]
            if patterns.contains(where: { Self.path(memberPath, matches: $0) }) { continue }
            result[member.key] = removing(patterns, from: member.value, at: memberPath)
        }
        return .object(result)
    }

    static func path(_ path: [String], matches pattern: String) -> Bool {
        let segments = pattern.split(separator: ".").map(String.init)
        // A pattern without dots ignores that key at any depth.
        if segments.count == 1 { return Glob(segments[0]).matches(path.last ?? "") }
        guard segments.count == path.count else { return false }
        return zip(segments, path).allSatisfy { Glob($0).matches($1) }
    }

    public var description: String {
        var parts: [String] = []
        let isEmpty = expected.objectValue?.isEmpty ?? false
        if mode != .ignore && !(mode == .superset && isEmpty) { parts.append("\(mode.rawValue) \(JSONWriter.encodeString(expected))") }
        for (path, test) in paths { parts.append("\(path) \(test)") }
        if !ignoredKeys.isEmpty { parts.append("ignoring \(ignoredKeys.joined(separator: ", "))") }
        return parts.isEmpty ? "any arguments" : parts.joined(separator: "; ")
    }
}
