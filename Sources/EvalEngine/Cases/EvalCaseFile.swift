public import ConfigFile
import Foundation
import TraceCore

/// Reads eval case files (YAML or JSON): one case as a mapping, or several as a list. The
/// format is documented in docs/eval-cases.md, with a JSON Schema in
/// docs/eval-case.schema.json. Every error names file:line:column.
public enum EvalCaseFile {
    public static func load(path: String) throws(ConfigError) -> [EvalCase] {
        let root = try ConfigNode.load(path: path)
        let directory = (path as NSString).deletingLastPathComponent
        switch root.content {
        case .sequence(let items):
            var cases: [EvalCase] = []
            for (index, item) in items.enumerated() { cases.append(try readCase(item, what: "case \(index + 1)", directory: directory)) }
            return cases
        default:
            return [try readCase(root, what: "the case", directory: directory)]
        }
    }

    /// `path` relative to the case file's directory, with `.` and `..` folded away so reports
    /// and replay commands show a clean path.
    static func resolve(_ path: String, from directory: String) -> String {
        let joined = path.hasPrefix("/") || directory.isEmpty ? path : directory + "/" + path
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." {
                parts.removeLast()
            } else {
                parts.append(part)
            }
        }
        return (joined.hasPrefix("/") ? "/" : "") + parts.joined(separator: "/")
    }

    static func readCase(_ node: ConfigNode, what: String, directory: String) throws(ConfigError) -> EvalCase {
        var fields = try node.mapping(what)
        let idNode = try fields.required("caseId", hint: "every case needs a unique caseId")
        let id = try idNode.nonEmptyString("caseId")
        guard id.allSatisfy({ $0.isLetter || $0.isNumber || "-_.:".contains($0) }) else {
            throw ConfigError(
                .invalidValue, "caseId \"\(id)\" may only hold letters, digits, \"-\", \"_\", \".\" and \":\"", at: idNode.location)
        }
        let name = "case \"\(id)\""
        let description = try fields.optional("description")?.string("description")
        let tags = try fields.optional("tags")?.strings("tags") ?? []
        let input = try fields.optional("input")?.string("input")
        let agent = try fields.optional("agent")?.nonEmptyString("agent")
        let logsNode = fields.optional("logs")
        let logs = try logsNode?.strings("logs")
        let approve = try fields.optional("approve")?.strings("approve") ?? []
        let deny = try fields.optional("deny")?.strings("deny") ?? []
        let expected = try readExpectations(fields.required("expected"))
        try fields.finish()

        let source: EvalCase.Source
        switch (agent, logs) {
        case (let agent?, nil):
            source = .live(agent: resolve(agent, from: directory), approve: approve, deny: deny)
        case (nil, let logs?):
            guard !logs.isEmpty else { throw ConfigError(.invalidValue, "\(name) logs is empty", at: logsNode?.location ?? node.location) }
            if !approve.isEmpty || !deny.isEmpty {
                throw ConfigError(.invalidValue, "\(name) approve and deny only apply to live runs (with agent)", at: node.location)
            }
            source = .recorded(patterns: logs.map { resolve($0, from: directory) })
        case (nil, nil):
            source = .defaultAgent(approve: approve, deny: deny)
        default:
            throw ConfigError(.invalidValue, "\(name) has both agent and logs; a case checks live runs or recorded ones", at: node.location)
        }
        if case .recorded = source {
        } else if input == nil {
            throw ConfigError(.missingKey, "\(name) runs live and needs an input", at: node.location)
        }
        return EvalCase(
            id: id, description: description, tags: tags, input: input, source: source, expected: expected, location: node.location)
    }

    static func readExpectations(_ node: ConfigNode) throws(ConfigError) -> Expectations {
        var fields = try node.mapping("expected")
        var expected = Expectations()
        expected.toolsCalled = try fields.optional("toolsCalled")?.strings("toolsCalled") ?? []
        expected.toolsNotCalled = try fields.optional("toolsNotCalled")?.strings("toolsNotCalled") ?? []
        expected.stopReason = try fields.optional("stopReason").map { node throws(ConfigError) in try node.choice("stopReason") }
        expected.limit = try fields.optional("limit").map { node throws(ConfigError) in try node.choice("limit") }
        if let node = fields.optional("sequence") { expected.sequence = try readSequence(node) }
        if let node = fields.optional("arguments") {
            let tools = try node.mapping("arguments")
            for pair in tools.pairs { expected.arguments.append((pair.key, try readMatcher(pair.value, what: "arguments of \(pair.key)"))) }
        }
        if let node = fields.optional("callCounts") {
            let tools = try node.mapping("callCounts")
            for pair in tools.pairs { expected.callCounts.append((pair.key, try readRange(pair.value, what: "callCounts.\(pair.key)"))) }
        }
        expected.maxSteps = try fields.optional("maxSteps")?.int("maxSteps", in: 0...Int.max)
        expected.maxToolCalls = try fields.optional("maxToolCalls")?.int("maxToolCalls", in: 0...Int.max)
        expected.maxTokens = try fields.optional("maxTokens")?.int("maxTokens", in: 0...Int.max)
        expected.maxDurationMs = try fields.optional("maxDurationMs")?.int("maxDurationMs", in: 0...Int.max)
        if let node = fields.optional("verdicts") {
            var verdicts = try node.mapping("verdicts")
            expected.denied = try verdicts.optional("denied")?.strings("verdicts.denied") ?? []
            expected.approvalRequired = try verdicts.optional("approvalRequired")?.strings("verdicts.approvalRequired") ?? []
            expected.requiresApprovalBeforeExecution =
                try verdicts.optional("noUnapprovedExecution")?.bool("verdicts.noUnapprovedExecution") ?? false
            try verdicts.finish()
        }
        if let node = fields.optional("answer") {
            if case .scalar = node.content {
                expected.answerContains = [try node.string("answer")]
            } else {
                var answer = try node.mapping("answer")
                expected.answerContains = try answer.optional("contains")?.strings("answer.contains") ?? []
                if let pattern = answer.optional("matches") {
                    expected.answerMatches = try regex(pattern, what: "answer.matches")
                }
                try answer.finish()
            }
        }
        expected.countsDeniedAttempts = try fields.optional("countDeniedAttempts")?.bool("countDeniedAttempts") ?? false
        try fields.finish()
        return expected
    }

    static func regex(_ node: ConfigNode, what: String) throws(ConfigError) -> String {
        let text = try node.string(what)
        guard (try? Regex(text)) != nil else {
            throw ConfigError(.invalidValue, "\(what) is not a valid regular expression: \(text)", at: node.location)
        }
        return text
    }

    static func readSequence(_ node: ConfigNode) throws(ConfigError) -> SequenceExpectation {
        // A plain list is an in-order subsequence: the common case.
        if case .sequence = node.content { return SequenceExpectation(mode: .inOrder, calls: try readCalls(node)) }
        var fields = try node.mapping("sequence")
        let mode: SequenceExpectation.Mode = try fields.required("mode", hint: "strict, unordered, subset, superset or in_order").choice(
            "sequence.mode")
        let calls = try readCalls(fields.required("calls"))
        try fields.finish()
        return SequenceExpectation(mode: mode, calls: calls)
    }

    static func readCalls(_ node: ConfigNode) throws(ConfigError) -> [CallPattern] {
        var calls: [CallPattern] = []
        for (index, item) in try node.list("sequence.calls").enumerated() {
            if case .scalar = item.content {
                calls.append(CallPattern(tool: try item.nonEmptyString("sequence.calls[\(index)]"), location: item.location))
                continue
            }
            var fields = try item.mapping("sequence.calls[\(index)]")
            let tool = try fields.required("tool").nonEmptyString("sequence.calls[\(index)].tool")
            let arguments = try fields.optional("arguments").map { node throws(ConfigError) in
                try readMatcher(node, what: "sequence.calls[\(index)].arguments")
            }
            try fields.finish()
            calls.append(CallPattern(tool: tool, arguments: arguments, location: item.location))
        }
        return calls
    }

    static let matcherKeys = ["mode", "match", "paths", "ignoreKeys"]

    /// A matcher: `{mode, match, paths, ignoreKeys}`, or a plain mapping of expected
    /// arguments (a subset match).
    static func readMatcher(_ node: ConfigNode, what: String) throws(ConfigError) -> ArgumentMatcher {
        var fields = try node.mapping(what)
        guard fields.pairs.contains(where: { matcherKeys.contains($0.key) }) else {
            return ArgumentMatcher(mode: .subset, expected: node.json)
        }
        let mode: ArgumentMatcher.Mode =
            try fields.optional("mode").map { node throws(ConfigError) in try node.choice("\(what) mode") } ?? .subset
        let match = fields.optional("match")
        if let match, case .mapping = match.content {
        } else if let match {
            throw match.typeError("\(what) match", expected: "a mapping of arguments")
        }
        var paths: [(String, ArgumentMatcher.ValueTest)] = []
        if let node = fields.optional("paths") {
            for pair in try node.mapping("\(what) paths").pairs {
                paths.append((pair.key, try readTest(pair.value, what: "\(what) paths.\(pair.key)")))
            }
        }
        let ignored = try fields.optional("ignoreKeys")?.strings("\(what) ignoreKeys") ?? []
        try fields.finish()
        if mode == .exact || mode == .superset, match == nil {
            throw ConfigError(.missingKey, "\(what) mode \(mode.rawValue) needs match (the expected arguments)", at: node.location)
        }
        return ArgumentMatcher(mode: mode, expected: match?.json ?? .object(JSONObject()), paths: paths, ignoredKeys: ignored)
    }

    static func readTest(_ node: ConfigNode, what: String) throws(ConfigError) -> ArgumentMatcher.ValueTest {
        guard case .mapping(let pairs) = node.content else { return .equals(node.json) }
        var fields = try node.mapping(what)
        if let value = fields.optional("equals") {
            try fields.finish()
            return .equals(value.json)
        }
        if let value = fields.optional("regex") {
            let pattern = try regex(value, what: "\(what) regex")
            try fields.finish()
            return .regex(pattern)
        }
        if let value = fields.optional("exists") {
            let flag = try value.bool("\(what) exists")
            try fields.finish()
            return .exists(flag)
        }
        if let value = fields.optional("in") {
            let options = try value.list("\(what) in").map(\.json)
            try fields.finish()
            return .oneOf(options)
        }
        let low = try fields.optional("min")?.double("\(what) min")
        let high = try fields.optional("max")?.double("\(what) max")
        try fields.finish()
        guard low != nil || high != nil else {
            throw ConfigError(
                .invalidValue,
                "\(what) needs one of equals, regex, in, exists, or min/max (it has \(pairs.map(\.key).joined(separator: ", ")))",
                at: node.location)
        }
        return .range(min: low, max: high)
    }

    static func readRange(_ node: ConfigNode, what: String) throws(ConfigError) -> CountRange {
        if case .scalar = node.content {
            let count = try node.int(what, in: 0...Int.max)
            return CountRange(min: count, max: count)
        }
        var fields = try node.mapping(what)
        let range = CountRange(
            min: try fields.optional("min")?.int("\(what).min", in: 0...Int.max) ?? 0,
            max: try fields.optional("max")?.int("\(what).max", in: 0...Int.max))
        try fields.finish()
        if let max = range.max, max < range.min {
            throw ConfigError(.invalidValue, "\(what) max (\(max)) is below min (\(range.min))", at: node.location)
        }
        return range
    }
}
