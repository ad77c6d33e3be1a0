public import ConfigFile
import Foundation
public import TraceCore

/// A policy of ordered rules, as written in an agent file: the first rule whose conditions
/// all hold gives the verdict; when none does, `defaultDecision` does.
public struct RulePolicy: Policy {
    public var name: String
    public var rules: [PolicyRule]
    public var defaultDecision: PolicyDecision

    public init(name: String, rules: [PolicyRule], defaultDecision: PolicyDecision = PolicyDecision(.deny, reason: "no rule allows it")) {
        self.name = name
        self.rules = rules
        self.defaultDecision = defaultDecision
    }

    public var identity: PolicyIdentity {
        PolicyIdentity(name: name, digest: ContentHash.sha256(JSONWriter.encode(json)))
    }

    public func decide(_ query: PolicyQuery) -> PolicyDecision {
        // The call's arguments, parsed by the first rule that looks at them, for every rule.
        var parsedArguments: JSONValue?
        for rule in rules {
            switch rule.match(query, parsedArguments: &parsedArguments) {
            case .no: continue
            case .yes: return PolicyDecision(rule.verdict, reason: rule.reason, rule: rule.id)
            case .undecidable(let why):
                // A restrictive rule whose condition cannot be judged on the value given applies
                // (fail closed); the reason says why. An allowing one does not.
                let reason = (rule.reason.map { $0 + "; " } ?? "") + "applied because \(why)"
                return PolicyDecision(rule.verdict, reason: reason, rule: rule.id)
            }
        }
        return defaultDecision
    }

    public func discloses(_ tool: ToolSpec, actor: String?, route: String?) -> (isDisclosed: Bool, reason: String?) {
        for rule in rules where rule.matchesStatically(tool: tool, actor: actor, route: route) {
            // A rule that looks at arguments, approvals or budget may or may not fire: show the tool.
            guard rule.isStatic else { return (true, nil) }
            return rule.verdict == .deny ? (false, "rule \(rule.id): \(rule.reason ?? "denied")") : (true, nil)
        }
        if defaultDecision.verdict == .deny { return (false, "no rule allows it") }
        return (true, nil)
    }

    /// The rules as JSON, for the policy digest.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("name", name)
        object.set("rules", JSONValue.array(rules.map(\.json)))
        object.set("default", defaultDecision.verdict)
        object.set("default_reason", defaultDecision.reason)
        return object.json
    }
}

/// One policy rule: conditions, all of which must hold, and the verdict they give.
public struct PolicyRule: Sendable {
    public var id: String
    public var verdict: Verdict
    public var reason: String?
    /// Tool name patterns; empty means any tool.
    public var tools: [Glob] = []
    public var sideEffects: [SideEffect] = []
    /// MCP server name patterns (an agent file's `mcp_servers` keys); empty means any tool,
    /// served or not. A tool of the agent's own matches no pattern.
    public var servers: [Glob] = []
    public var actors: [Glob] = []
    public var routes: [Glob] = []
    /// Conditions on argument values, by key path.
    public var arguments: [ArgumentCondition] = []
    /// Whether a call of this tool was already approved in this run.
    public var isApproved: Bool?
    /// Fires when fewer tool calls than this are left.
    public var toolCallsLeftBelow: Int?
    /// Fires when fewer tokens than this are left.
    public var tokensLeftBelow: Int?

    public init(id: String, verdict: Verdict, reason: String? = nil) {
        self.id = id
        self.verdict = verdict
        self.reason = reason
    }

    /// Whether the rule needs only the tool, actor and route (known before any call).
    var isStatic: Bool {
        arguments.isEmpty && isApproved == nil && toolCallsLeftBelow == nil && tokensLeftBelow == nil
    }

    func matchesStatically(tool: ToolSpec, actor: String?, route: String?) -> Bool {
        (tools.isEmpty || tools.contains { $0.matches(tool.name) })
            && (sideEffects.isEmpty || sideEffects.contains(tool.sideEffect))
            && (servers.isEmpty || tool.server.map { server in servers.contains { $0.matches(server) } } ?? false)
            && (actors.isEmpty || actors.contains { $0.matches(actor ?? "") })
            && (routes.isEmpty || routes.contains { $0.matches(route ?? "") })
    }

    /// Whether the rule applies to a call: `undecidable` when every other condition holds and
    /// an argument condition cannot be judged on the value the call gives (see
    /// `ArgumentCondition.judge(_:)`).
    public enum Match: Sendable, Equatable {
        case yes, no
        case undecidable(String)
    }

    public func matches(_ query: PolicyQuery) -> Bool { match(query) == .yes }

    /// Whether the rule applies to a call; an argument condition that cannot be judged makes a
    /// restrictive rule (deny, approval_required) `undecidable` — it applies, failing closed —
    /// and an allowing rule `no`: a value a condition cannot read never opens a way around it.
    public func match(_ query: PolicyQuery) -> Match {
        var parsedArguments: JSONValue?
        return match(query, parsedArguments: &parsedArguments)
    }

    /// `match(_:)`, with the call's arguments parsed once for all the rules of a policy: the
    /// first rule that looks at them parses them into `parsedArguments` (the call holds them as
    /// text; parsing them for each of 200 rules was a tenth of what judging a call cost).
    func match(_ query: PolicyQuery, parsedArguments: inout JSONValue?) -> Match {
        guard matchesStatically(tool: query.tool, actor: query.actor, route: query.route) else { return .no }
        if let isApproved, query.isToolApproved != isApproved { return .no }
        if let toolCallsLeftBelow, let left = query.toolCallsLeft, left >= toolCallsLeftBelow { return .no }
        if let toolCallsLeftBelow, query.toolCallsLeft == nil, toolCallsLeftBelow >= 0 { return .no }
        if let tokensLeftBelow, let left = query.tokensLeft, left >= tokensLeftBelow { return .no }
        if tokensLeftBelow != nil, query.tokensLeft == nil { return .no }
        var undecided: String?
        let callArguments: JSONValue
        if arguments.isEmpty {
            callArguments = [:]
        } else if let parsedArguments {
            callArguments = parsedArguments
        } else {
            callArguments = query.call.arguments
            parsedArguments = callArguments
        }
        for condition in arguments {
            switch condition.judge(callArguments) {
            case .holds: continue
            case .fails: return .no
            case .undecidable(let why): undecided = undecided ?? why
            }
        }
        guard let undecided else { return .yes }
        return verdict == .allow ? .no : .undecidable(undecided)
    }

    var json: JSONValue {
        var object = ObjectBuilder()
        object.set("id", id)
        object.set("verdict", verdict)
        object.set("reason", reason)
        if !tools.isEmpty { object.set("tool", JSONValue.array(tools.map { .string($0.pattern) })) }
        if !sideEffects.isEmpty { object.set("side_effect", JSONValue.array(sideEffects.map { .string($0.rawValue) })) }
        if !servers.isEmpty { object.set("server", JSONValue.array(servers.map { .string($0.pattern) })) }
        if !actors.isEmpty { object.set("actor", JSONValue.array(actors.map { .string($0.pattern) })) }
        if !routes.isEmpty { object.set("route", JSONValue.array(routes.map { .string($0.pattern) })) }
        if !arguments.isEmpty { object.set("arguments", JSONValue.array(arguments.map(\.json))) }
        object.set("approved", isApproved)
        object.set("tool_calls_left_below", toolCallsLeftBelow)
        object.set("tokens_left_below", tokensLeftBelow)
        return object.json
    }
}

/// A condition on one argument, found by a dotted key path (`address.country`, `items.0.sku`).
public struct ArgumentCondition: Sendable {
    public enum Test: Sendable {
        case equals(JSONValue)
        case oneOf([JSONValue])
        /// A regular expression that must match somewhere in the string value.
        case matches(String)
        case atLeast(Double)
        case atMost(Double)
        case exists(Bool)
    }

    public var path: [String]
    public var test: Test {
        didSet { regex = Self.compile(test) }
    }
    /// The `matches` pattern, compiled once: a policy judges every call against every rule,
    /// and compiling on each judgement cost about 2.5 µs a rule (mcp-proxy-benchmark).
    private var regex: LinearRegex?

    public init(path: [String], test: Test) {
        self.path = path
        self.test = test
        regex = Self.compile(test)
    }

    private static func compile(_ test: Test) -> LinearRegex? {
        guard case .matches(let pattern) = test else { return nil }
        return try? LinearRegex(pattern)
    }

    public func holds(in arguments: JSONValue) -> Bool { judge(arguments) == .holds }

    /// What a condition says of a call's arguments.
    public enum Judgement: Sendable, Equatable {
        case holds, fails
        /// The value given cannot be judged by this condition: why, in a sentence.
        case undecidable(String)
    }

    /// Judges the value at `path` as the server that gets it would read it, since servers coerce
    /// (pydantic turns `"50000"` into 50000): a number written as a string is compared as that
    /// number, by `min`, `max`, `equals` and `in`; a number or a boolean is matched by `matches` as
    /// its JSON text. What cannot be read so — no value for `min`/`max`, a string that is no
    /// number for them, an object or a list for `matches` — is `undecidable`: never a plain
    /// "fails", which would let the call around the rule (docs/agent-files.md, "Argument
    /// conditions").
    /// The value at `path` as the server reads the arguments: a string met on the way or at the
    /// end that is the JSON text of an object or a list is read as that object or list, since
    /// servers parse it so (the official Python SDK does, for a field that is no string) — a rule
    /// on `changes.role` is not walked around by giving `changes` as `"{\"role\": \"admin\"}"`.
    static func value(atPath path: [String], in arguments: JSONValue) -> JSONValue? {
        switch walk(path, in: arguments) {
        case .found(let value): value
        case .missing, .unreadable: nil
        }
    }

    /// Where the walk along a path ends: at a value, at nothing, or at a string met on the way
    /// that looks like JSON text (`{…`, `[…`) and is none the gate can read — duplicate keys,
    /// `NaN`, a lone surrogate, nesting past the parser's limit — which a server's more lenient
    /// parser may read as an object holding the path after all.
    enum Walk: Equatable {
        case found(JSONValue)
        case missing
        case unreadable(String)
    }

    static func walk(_ path: [String], in arguments: JSONValue) -> Walk {
        var current = asServerReads(arguments)
        for (depth, key) in path.enumerated() {
            switch current {
            case .object(let object):
                guard let next = object[key] else { return .missing }
                current = asServerReads(next)
            case .array(let items):
                guard let index = Int(key), items.indices.contains(index) else { return .missing }
                current = asServerReads(items[index])
            case .string(let text) where looksLikeJSONText(text):
                return .unreadable(path[..<depth].joined(separator: "."))
            default:
                return .missing
            }
        }
        return .found(current)
    }

    /// Whether `text` begins (after white space) as the JSON text of an object or a list does.
    static func looksLikeJSONText(_ text: String) -> Bool {
        guard let first = text.utf8.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) else { return false }
        return first == UInt8(ascii: "{") || first == UInt8(ascii: "[")
    }

    /// `value`, or the object or list its string is the JSON text of.
    static func asServerReads(_ value: JSONValue) -> JSONValue {
        guard case .string(let text) = value, looksLikeJSONText(text), let parsed = try? JSONParser.parse(Array(text.utf8)),
            parsed.objectValue != nil || parsed.arrayValue != nil
        else { return value }
        return parsed
    }

    /// The number a server's lax reading makes of `text` (pydantic, Python's `int` and `float`):
    /// white space around it, a `+`, leading zeros and `_` between digits (`" +050_000 "` is
    /// 50000), an exponent; nil for anything else — hexadecimal, and `inf` and `nan`, which no
    /// bound can judge (undecidable, so a rule that denies applies).
    ///
    /// Read scalar by scalar, white space being Foundation's `whitespacesAndNewlines` as before
    /// (on Linux that is Unicode's `White_Space` and U+200B ZERO WIDTH SPACE): through
    /// Foundation's trimming and replacing, this was most of what judging a call cost
    /// `mcp-proxy` under a policy of 200 rules.
    static func laxNumber(_ text: String) -> Double? {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !whitespace.contains($0) }),
            let last = scalars.lastIndex(where: { !whitespace.contains($0) })
        else { return nil }
        let trimmed = scalars[first...last]
        guard trimmed.first != "_", trimmed.last != "_" else { return nil }
        var digits = String.UnicodeScalarView()
        var previous: Unicode.Scalar?
        for scalar in trimmed {
            switch scalar {
            case "x", "X", "p", "P": return nil
            case "_" where previous == "_": return nil
            case "_": break
            default: digits.append(scalar)
            }
            previous = scalar
        }
        guard let number = Double(String(digits)), number.isFinite else { return nil }
        return number
    }

    /// Whether `text` can be a number as JSON or a server's lax reading writes one (`laxNumber`):
    /// not empty, and nothing but digits, `+ - . e E _` and white space. Any other character
    /// makes both readings fail, so most text is ruled out here without either being tried.
    static func mayBeNumber(_ text: String) -> Bool {
        !text.isEmpty
            && text.unicodeScalars.allSatisfy { scalar in
                switch scalar {
                case "0"..."9", "+", "-", ".", "e", "E", "_": return true
                default: return whitespace.contains(scalar)
                }
            }
    }

    /// What `laxNumber` trims, as the reading it stands for trimmed it.
    static let whitespace = CharacterSet.whitespacesAndNewlines

    public func judge(_ arguments: JSONValue) -> Judgement {
        let where_ = "argument \(path.joined(separator: "."))"
        let value: JSONValue?
        switch Self.walk(path, in: arguments) {
        case .found(let found): value = found
        case .missing: value = nil
        case .unreadable(let at):
            // Not a plain "fails": a server may read the text, and the path in it, after all.
            return .undecidable(
                "argument \(at) is text that looks like JSON and cannot be read strictly (duplicate keys, NaN, a lone surrogate, "
                    + "too deep), so \(where_) in it cannot be judged")
        }
        func number(_ value: JSONValue) -> Double? {
            if let number = value.doubleValue { return number }
            // A string is the number a server's lax reading makes of it (`"050000"`, `"+5e4"`,
            // `"50_000"`); one that is none is no number: undecidable for `min`/`max`, judged closed.
            guard let text = value.stringValue, Self.mayBeNumber(text) else { return nil }
            if let parsed = try? JSONParser.parse(Array(text.utf8)), let number = parsed.doubleValue { return number }
            return Self.laxNumber(text)
        }
        func same(_ value: JSONValue, _ expected: JSONValue) -> Bool {
            if value.equals(byValue: expected) { return true }
            // A boolean given as a word or a 0/1 (or the other way round) is the boolean a server reads.
            if case .bool(let flag) = expected { return Self.boolean(value) == flag }
            // A number given as a string (or the other way round) is the number a server reads.
            if expected.doubleValue != nil || value.doubleValue != nil, let left = number(value), let right = number(expected) {
                return left == right
            }
            return false
        }
        func bound(_ compare: (Double) -> Bool, _ name: String, _ limit: Double) -> Judgement {
            guard let value else { return .undecidable("\(where_) is missing, so \(name) \(limit) cannot be judged") }
            guard let number = number(value) else {
                return .undecidable("\(where_) is \(JSONWriter.encodeString(value).prefix(80)), not a number \(name) \(limit) can judge")
            }
            return compare(number) ? .holds : .fails
        }
        // A value compared with a boolean that no server would read as one (`"maybe"`, `2`, a
        // list): undecidable, so that a rule on `false` is not walked around with `"nope"`.
        func unreadableAsBoolean(_ value: JSONValue, _ options: [JSONValue]) -> Judgement? {
            guard options.contains(where: { $0.boolValue != nil }), Self.boolean(value) == nil,
                !options.contains(where: { same(value, $0) })
            else { return nil }
            return .undecidable("\(where_) is \(JSONWriter.encodeString(value).prefix(80)), which no server reads as a boolean")
        }
        switch test {
        case .exists(let isExpected): return (value != nil) == isExpected ? .holds : .fails
        case .equals(let expected):
            if let value, let unreadable = unreadableAsBoolean(value, [expected]) { return unreadable }
            return value.map { same($0, expected) } == true ? .holds : .fails
        case .oneOf(let options):
            if let value, let unreadable = unreadableAsBoolean(value, options) { return unreadable }
            return value.map { value in options.contains { same(value, $0) } } == true ? .holds : .fails
        case .matches:
            guard let regex else { return .fails }
            guard let value else { return .fails }
            switch value {
            case .string(let text):
                if regex.matches(text) { return .holds }
                // A number written as a string (`"+50000"`) may reach the server as that number:
                // when the pattern holds of the number's JSON text, which one the server reads is
                // not known here, and neither is the verdict. (Only this way round: a string the
                // pattern matches as it is — a zip code `"02139"` — is judged as the text.)
                if let number = number(value), number.isFinite {
                    let numberText = JSONWriter.encodeString(
                        number.rounded() == number && abs(number) < 9e15 ? .int(Int(number)) : .double(number))
                    if regex.matches(numberText) {
                        return .undecidable(
                            "\(where_) is \(JSONWriter.encodeString(value).prefix(80)), which a server may read as the number \(numberText); "
                                + "the pattern holds of the number and not of the text")
                    }
                }
                return .fails
            case .int, .double, .bool: return regex.matches(JSONWriter.encodeString(value)) ? .holds : .fails
            case .null: return .fails
            case .array, .object:
                return .undecidable("\(where_) is \(value.arrayValue == nil ? "an object" : "a list"), which a pattern cannot match")
            }
        case .atLeast(let limit): return bound({ $0 >= limit }, "min", limit)
        case .atMost(let limit): return bound({ $0 <= limit }, "max", limit)
        }
    }

    /// The boolean a server reads from `value` (pydantic's lax mode: `true`/`false`, `1`/`0`,
    /// and the words `true`, `false`, `yes`, `no`, `on`, `off`, `t`, `f`, `y`, `n`, `1`, `0` in any
    /// case); nil when it reads none.
    static func boolean(_ value: JSONValue) -> Bool? {
        switch value {
        case .bool(let flag): return flag
        case .int(let number) where number == 0 || number == 1: return number == 1
        case .double(let number) where number == 0 || number == 1: return number == 1
        case .string(let text):
            switch text.lowercased() {
            case "true", "yes", "on", "t", "y", "1": return true
            case "false", "no", "off", "f", "n", "0": return false
            default: return nil
            }
        default: return nil
        }
    }

    var json: JSONValue {
        var object = ObjectBuilder()
        object.set("path", path.joined(separator: "."))
        switch test {
        case .equals(let value): object.set("equals", value)
        case .oneOf(let values): object.set("in", JSONValue.array(values))
        case .matches(let pattern): object.set("matches", pattern)
        case .atLeast(let bound): object.set("min", bound)
        case .atMost(let bound): object.set("max", bound)
        case .exists(let flag): object.set("exists", flag)
        }
        return object.json
    }
}
