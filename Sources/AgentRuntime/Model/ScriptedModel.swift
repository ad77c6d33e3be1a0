public import ConfigFile
public import TraceCore

/// A model that follows a script, for offline runs and tests: an ordered list of replies (the
/// n-th decision of the run gets the n-th), then rules ("when the last observation matches X,
/// reply Y"), first match wins.
///
/// Script file (YAML):
/// ```yaml
/// name: support-script
/// decisions:
///   - tool_calls: [{name: lookup_order, arguments: {order_id: A-1042}}]
///     usage: {input: 412, output: 31}
///   - raw: "Sure, one moment!"          # a reply that is not a decision, on purpose
/// rules:
///   - when: {last_tool: search, last_status: error}
///     reply: {tool_calls: [{name: search, arguments: {query: retry}}]}
///   - when: {goal_matches: "refund"}      # the goal (for a judge: the text it grades)
///     reply: {answer: "Refunded."}
///   - when: {user_said: "yes"}           # what the user said last (a conversation's newest turn)
///     reply: {tool_calls: [{name: refund_order, arguments: {order_id: A-1042}}]}
///   - when: {chance: 0.3}                 # matches 3 times in 10, drawn per run and decision
///     reply: {answer: "I could not find it."}
///   - reply: {answer: "Done."}           # no `when`: always matches
/// ```
/// `chance` draws from the run id, the decision's index and the rule's place: a run draws the
/// same every time it asks (and its log records what it got, so a replay is exact), and each new
/// run draws anew — a scripted model with a known pass probability, for testing gates.
/// Replies are serialised to the JSON the runtime's `DecisionParser` reads, so a scripted run
/// exercises the same parsing as a live one. Without `usage`, input tokens are the packet's
/// estimate and output tokens a quarter of the reply's bytes, rounded up.
public struct ScriptedModel: ModelClient {
    /// One scripted reply: the raw text the model "returns", and what it reports it cost.
    public typealias Reply = ModelReply

    /// A reply given when its condition holds.
    public struct Rule: Sendable, Hashable {
        /// The newest observation's tool must match this pattern.
        public var lastTool: Glob?
        /// The newest observation's status (`ok`, `error`, `refused`, `denied`).
        public var lastStatus: String?
        /// A regular expression matched against the newest observation's JSON.
        public var lastObservationMatches: String?
        /// Whether the previous reply was rejected.
        public var afterRejection: Bool?
        /// A regular expression matched against the request's goal (the run's input; for a
        /// judge, the text it is asked to grade).
        public var goalMatches: String?
        /// A regular expression matched against what the user said last (in a conversation, the
        /// newest user turn; otherwise the goal).
        public var userSaid: String?
        /// The rule matches (when its other conditions hold) with this probability, drawn per
        /// run and decision (0 < chance < 1).
        public var chance: Double?
        /// The rule's place in the script, which salts its draw.
        var index = 0
        public var reply: Reply

        public init(
            lastTool: Glob? = nil, lastStatus: String? = nil, lastObservationMatches: String? = nil, afterRejection: Bool? = nil,
            goalMatches: String? = nil, reply: Reply
        ) {
            self.lastTool = lastTool
            self.lastStatus = lastStatus
            self.lastObservationMatches = lastObservationMatches
            self.afterRejection = afterRejection
            self.goalMatches = goalMatches
            self.reply = reply
        }

        func matches(_ request: ModelRequest) -> Bool {
            if let chance, Self.draw(runId: request.runId, decision: request.decisionIndex, rule: index) >= chance { return false }
            if let afterRejection, (request.feedback != nil) != afterRejection { return false }
            if let goalMatches, (try? LinearRegex(goalMatches))?.matches(request.packet.goal) != true { return false }
            if let userSaid, (try? LinearRegex(userSaid))?.matches(request.lastUserText) != true { return false }
            if lastTool == nil && lastStatus == nil && lastObservationMatches == nil { return true }
            guard let last = request.lastObservation else { return false }
            if let lastTool, !lastTool.matches(last.tool) { return false }
            if let lastStatus, last.status != lastStatus { return false }
            if let pattern = lastObservationMatches {
                guard let regex = try? LinearRegex(pattern), regex.matches(JSONWriter.encodeString(last.json)) else {
                    return false
                }
            }
            return true
        }

        /// A number in [0, 1) from the run id, decision index and rule index: FNV-1a, then the
        /// SplitMix64 finaliser, so nearby ids draw unrelated numbers.
        static func draw(runId: String, decision: Int, rule: Int) -> Double {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in "\(runId)/\(decision)/\(rule)".utf8 {
                hash ^= UInt64(byte)
                hash &*= 0x100_0000_01b3
            }
            hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
            hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
            hash ^= hash >> 31
            return Double(hash >> 11) / Double(UInt64(1) << 53)
        }
    }

    public var name: String
    public var decisions: [Reply]
    public var rules: [Rule]
    /// Where each decision and each rule's reply is in the script file (empty for a script
    /// made in code), for messages about them.
    var decisionLocations: [SourceLocation] = []
    var ruleLocations: [SourceLocation] = []

    public init(name: String, decisions: [Reply] = [], rules: [Rule] = []) {
        self.name = name
        self.decisions = decisions
        self.rules = rules
    }

    /// A scripted reply the runtime would reject: see `rejectedReplies(tools:toolsMayJoin:)`.
    public struct RejectedReply: Sendable {
        /// `decisions[0]`, `rules[2].reply`.
        public var place: String
        /// Where the reply is in the script file, when it came from one.
        public var location: SourceLocation?
        public var invalid: InvalidDecision
    }

    /// The replies an agent with `tools` would reject for calling a tool it does not have or
    /// for arguments the tool's schema refuses, parsed as a run parses them. A script that tests
    /// rejected replies does this on purpose; any other has a mistake that `check` can show
    /// before a run does. With `toolsMayJoin` (the agent's MCP servers add tools when they
    /// start), a name the agent does not have yet is not reported.
    public func rejectedReplies(tools: ToolRegistry, toolsMayJoin: Bool) -> [RejectedReply] {
        let parser = DecisionParser(tools: tools)
        let replies =
            decisions.enumerated().map {
                ("decisions[\($0.offset)]", $0.element, decisionLocations.indices.contains($0.offset) ? decisionLocations[$0.offset] : nil)
            }
            + rules.enumerated().map {
                ("rules[\($0.offset)].reply", $0.element.reply, ruleLocations.indices.contains($0.offset) ? ruleLocations[$0.offset] : nil)
            }
        return replies.compactMap { place, reply, location in
            guard case .invalid(let invalid) = parser.parse(reply.raw, format: reply.format, nextCallNumber: 1) else { return nil }
            switch invalid.kind {
            case .invalidArguments: break
            case .unknownTool where !toolsMayJoin: break
            default: return nil
            }
            return RejectedReply(place: place, location: location, invalid: invalid)
        }
    }

    public var identity: ModelIdentity { ModelIdentity(provider: "scripted", name: name) }

    public func reply(to request: ModelRequest) async throws -> ModelReply {
        let chosen: Reply
        if request.decisionIndex < decisions.count {
            chosen = decisions[request.decisionIndex]
        } else if let rule = rules.first(where: { $0.matches(request) }) {
            chosen = rule.reply
        } else {
            throw ModelError(
                "the script \"\(name)\" has no reply for decision \(request.decisionIndex + 1): its \(decisions.count) "
                    + "decisions are used up and no rule matches")
        }
        var reply = chosen
        reply.usage = chosen.usage ?? TokenUsage(input: request.packet.tokenEstimate, output: (chosen.raw.utf8.count + 3) / 4)
        return reply
    }
}

extension ScriptedModel {
    /// Reads a script file; errors name the file, line and column.
    public static func load(path: String) throws(ConfigError) -> ScriptedModel {
        do {
            return try loadReportingAll(path: path)
        } catch {
            throw error.errors[0]
        }
    }

    /// Reads a script file as `load` does, but throws every error in it, in file order (each
    /// decision and rule is read even after an earlier one failed).
    public static func loadReportingAll(path: String) throws(ConfigErrors) -> ScriptedModel {
        try read(ConfigNode.loadReportingAll(path: path), defaultName: Self.baseName(path))
    }

    static func baseName(_ path: String) -> String {
        var name = path.split(separator: "/").last.map(String.init) ?? path
        for suffix in [".yaml", ".yml", ".json", ".model"] where name.hasSuffix(suffix) { name.removeLast(suffix.count) }
        return name
    }

    static func read(_ root: ConfigNode, defaultName: String) throws(ConfigErrors) -> ScriptedModel {
        var errors = ConfigErrors([])
        guard var file = errors.collect({ () throws(ConfigError) in try root.mapping("the model script") }) else { throw errors }
        let name = errors.collect { () throws(ConfigError) in try file.optional("name")?.nonEmptyString("name") ?? defaultName }
        var decisions: [Reply] = []
        var decisionLocations: [SourceLocation] = []
        let decisionNodes = errors.collect { () throws(ConfigError) in try file.optional("decisions")?.list("decisions") ?? [] } ?? []
        for (index, item) in decisionNodes.enumerated() {
            if let reply = errors.collect({ () throws(ConfigError) in try readReply(item, what: "decisions[\(index)]") }) {
                decisions.append(reply)
                decisionLocations.append(item.location)
            }
        }
        var rules: [Rule] = []
        var ruleLocations: [SourceLocation] = []
        let ruleNodes = errors.collect { () throws(ConfigError) in try file.optional("rules")?.list("rules") ?? [] } ?? []
        for (index, item) in ruleNodes.enumerated() {
            if let rule = errors.collect({ () throws(ConfigError) in try readRule(item, index: index) }) {
                rules.append(rule)
                ruleLocations.append(item.location)
            }
        }
        errors.errors.append(contentsOf: file.unknownKeys())
        if decisionNodes.isEmpty && ruleNodes.isEmpty && errors.errors.isEmpty {
            errors.errors.append(ConfigError(.missingKey, "the model script has neither \"decisions\" nor \"rules\"", at: root.location))
        }
        guard errors.errors.isEmpty, let name else { throw errors.inFileOrder(of: root.location.path) }
        var script = ScriptedModel(name: name, decisions: decisions, rules: rules)
        script.decisionLocations = decisionLocations
        script.ruleLocations = ruleLocations
        return script
    }

    static func readRule(_ item: ConfigNode, index: Int) throws(ConfigError) -> Rule {
        var entry = try item.mapping("rules[\(index)]")
        var rule = Rule(reply: try readReply(entry.required("reply"), what: "rules[\(index)].reply"))
        rule.index = index
        if let when = entry.optional("when") {
            var condition = try when.mapping("rules[\(index)].when")
            rule.lastTool = try condition.optional("last_tool").map { node throws(ConfigError) in Glob(try node.string("last_tool")) }
            if let status = condition.optional("last_status") {
                let text = try status.string("last_status")
                guard ["ok", "error", "refused", "denied"].contains(text) else {
                    throw ConfigError(
                        .invalidValue, "last_status must be one of \"ok\", \"error\", \"refused\", \"denied\", found \"\(text)\"",
                        at: status.location)
                }
                rule.lastStatus = text
            }
            rule.lastObservationMatches = try condition.optional("last_observation_matches").map { node throws(ConfigError) in
                try node.regex("last_observation_matches")
            }
            rule.goalMatches = try condition.optional("goal_matches").map { node throws(ConfigError) in
                try node.regex("goal_matches")
            }
            rule.userSaid = try condition.optional("user_said").map { node throws(ConfigError) in try node.regex("user_said") }
            rule.afterRejection = try condition.optional("after_rejection")?.bool("after_rejection")
            if let chanceNode = condition.optional("chance") {
                let chance = try chanceNode.double("chance")
                guard chance > 0 && chance < 1 else {
                    throw ConfigError(
                        .invalidValue, "chance must be above 0 and below 1, found \(chance)", at: chanceNode.location,
                        hint: "the probability that the rule matches in a run, e.g. 0.3")
                }
                rule.chance = chance
            }
            try condition.finish()
        }
        try entry.finish()
        return rule
    }

    static func readReply(_ node: ConfigNode, what: String) throws(ConfigError) -> Reply {
        var entry = try node.mapping(what)
        let forms = ["answer", "tool_calls", "ask_human", "stop", "raw"].filter { entry.contains($0) }
        guard forms.count == 1, let form = forms.first else {
            throw ConfigError(
                .invalidValue,
                forms.isEmpty
                    ? "\(what) needs one of answer, tool_calls, ask_human, stop or raw"
                    : "\(what) has \(forms.joined(separator: " and ")); a reply is exactly one of them",
                at: node.location, hint: "to script a contradictory reply on purpose, write it out with raw: '…'")
        }
        var reply: Reply
        let body = try entry.required(form)
        if form == "raw" {
            reply = Reply(raw: try body.string("raw"))
        } else {
            var object = JSONObject()
            object[form] = body.json
            // `answer: 42` is the text "42", as YAML writes it: a model answers in text.
            if form == "answer" || form == "ask_human" {
                switch body.json {
                case .int, .double, .bool: object[form] = .string(try body.string(form))
                default: break
                }
            }
            reply = Reply(decision: .object(object))
        }
        if let usage = entry.optional("usage") {
            var fields = try usage.mapping("usage")
            reply.usage = TokenUsage(
                input: try fields.required("input").int("usage.input", in: 0...Int.max),
                output: try fields.required("output").int("usage.output", in: 0...Int.max))
            try fields.finish()
        }
        reply.latencyUs = try entry.optional("latency_ms").map { node throws(ConfigError) in
            // At most a day, as a tool's timeout: the microseconds a log records stay a measure.
            try node.int("latency_ms", in: 0...86_400_000) * 1000
        }
        reply.costUSD = try entry.optional("cost_usd")?.double("cost_usd")
        try entry.finish()
        return reply
    }
}
