public import AgentRuntime
public import ConfigFile
import Foundation
public import TraceCore

/// A conversation case's `user:` (docs/conversations.md): who the simulated user is, what it
/// opens with, the lines it says when their condition holds, and the model that speaks
/// otherwise.
public struct CaseUserSpec: Sendable {
    public var persona: UserPersona?
    public var opening: String?
    public var lines: [CaseUser.Line]
    /// The user's model: anything an agent file's `model:` may be.
    public var model: ModelSource?
    public var maxTurns: Int
    /// `review:`: a judge reads the user's own turns after each conversation and flags one that
    /// invents facts, says an `unknown`, stops before it should or leaves its part; a flagged
    /// attempt could not run (a simulator fault). Nil: no review.
    public var review: Rubric?
    /// Where the case gives `user:`.
    public var location: SourceLocation

    public init(
        persona: UserPersona? = nil, opening: String? = nil, lines: [CaseUser.Line] = [], model: ModelSource? = nil,
        maxTurns: Int = Conversation.defaultMaxTurns, location: SourceLocation
    ) {
        self.persona = persona
        self.opening = opening
        self.lines = lines
        self.model = model
        self.maxTurns = maxTurns
        self.location = location
    }

    /// The keys `user:` takes, in the order the docs list them.
    static let keys = ["persona", "scenario", "opening", "script", "model", "maxTurns", "review"]

    /// Reads `user:`; errors name the key path and its line.
    static func read(_ node: ConfigNode, directory: String) throws(ConfigError) -> CaseUserSpec {
        var fields = try node.mapping("user")
        let personaText = try fields.optional("persona")?.nonEmptyString("user.persona")
        var persona: UserPersona?
        if let scenarioNode = fields.optional("scenario") {
            var scenario = try scenarioNode.mapping("user.scenario")
            let reason = try scenario.optional("reason")?.nonEmptyString("user.scenario.reason")
            let known = try scenario.optional("known")?.strings("user.scenario.known") ?? []
            let unknown = try scenario.optional("unknown")?.strings("user.scenario.unknown") ?? []
            let task = try scenario.optional("task")?.nonEmptyString("user.scenario.task")
            try scenario.finish()
            guard let personaText else {
                throw ConfigError(
                    .missingKey, "user.scenario needs user.persona beside it: who the user is", at: scenarioNode.location,
                    hint: "for example persona: A busy customer who answers only what is asked.")
            }
            persona = UserPersona(persona: personaText, reason: reason, known: known, unknown: unknown, task: task)
        } else if let personaText {
            persona = UserPersona(persona: personaText)
        }
        let openingNode = fields.optional("opening")
        let opening = try openingNode?.nonEmptyString("user.opening")
        // A conversation the user ends before the agent said anything has nothing to check, and
        // is a fault of the simulator every time it runs: refused here, at its line.
        if let opening, let openingNode, let stop = UserTurn.Ending.tokens.first(where: { opening.contains($0.token) }) {
            throw ConfigError(
                .invalidValue,
                "user.opening holds the stop token \(stop.token): the user would end the conversation before the agent says anything",
                at: openingNode.location, hint: "take the token out of the opening; a later turn (a script line, the model) ends it")
        }
        var lines: [CaseUser.Line] = []
        var lineNodes: [ConfigNode] = []
        for (index, item) in (try fields.optional("script")?.list("user.script") ?? []).enumerated() {
            lines.append(try readLine(item, what: "user.script[\(index)]"))
            lineNodes.append(item)
        }
        // Without an opening, turn 1 is the first line whose condition holds at once (lines are
        // tried in order, before the model): one that ends the conversation ends it there.
        if opening == nil,
            let first = lines.firstIndex(where: { $0.turn == 1 || ($0.turn == nil && $0.toolCalled == nil && $0.agentSaid == nil) }),
            lines[first].end != nil || UserTurn.Ending.tokens.contains(where: { lines[first].say.contains($0.token) })
        {
            throw ConfigError(
                .invalidValue,
                "user.script[\(first)] is said at turn 1 (its condition holds at once, and there is no opening) and ends the conversation "
                    + "before the agent says anything",
                at: lineNodes[first].location,
                hint:
                    "give user.opening (the first turn), or the line an `after` on what the agent said or called, which cannot hold at turn 1"
            )
        }
        let modelNode = fields.optional("model")
        let model = try modelNode.map { node throws(ConfigError) in try ModelSource.read(node, what: "user.model", directory: directory) }
        let maxTurns = try fields.optional("maxTurns")?.int("user.maxTurns", in: 1...1000) ?? Conversation.defaultMaxTurns
        // A line for a turn the conversation never gives it is never said: `check` said nothing,
        // and a case counting on it checked a conversation without it.
        for (index, line) in lines.enumerated() {
            guard let turn = line.turn else { continue }
            if turn == 1, opening != nil {
                throw ConfigError(
                    .invalidValue, "user.script[\(index)] is for turn 1, which is the user's opening: it can never be said",
                    at: lineNodes[index].location,
                    hint: "give it a later turn (2: the user's answer to the agent's first reply), or drop after.turn")
            }
            if turn > maxTurns {
                throw ConfigError(
                    .invalidValue,
                    "user.script[\(index)] is for turn \(turn), and the conversation has at most \(maxTurns) user turns (user.maxTurns): "
                        + "it can never be said", at: lineNodes[index].location,
                    hint: "raise user.maxTurns, or give the line an earlier turn")
            }
        }
        var review: Rubric?
        if let reviewNode = fields.optional("review") {
            var entry = try reviewNode.mapping("user.review")
            let judge = try entry.optional("model").map { node throws(ConfigError) in
                try ModelSource.read(node, what: "user.review.model", directory: directory)
            }
            let rules = try entry.optional("rules")?.strings("user.review.rules") ?? []
            try entry.finish()
            review = Rubric(text: Self.reviewRules(adding: rules), model: judge, location: reviewNode.location)
        }
        try fields.finish()
        if model != nil, persona == nil {
            throw ConfigError(
                .missingKey, "user.model needs user.persona: who the model plays", at: modelNode?.location ?? node.location,
                hint: "give persona (and scenario: reason, known, unknown, task)")
        }
        if opening == nil, model == nil,
            !lines.contains(where: { $0.turn == 1 || ($0.turn == nil && $0.toolCalled == nil && $0.agentSaid == nil) })
        {
            throw ConfigError(
                .missingKey, "user has no first turn: give user.opening, a user.model, or a script line for turn 1", at: node.location,
                hint: "for example opening: hi, my order arrived broken")
        }
        var spec = CaseUserSpec(persona: persona, opening: opening, lines: lines, model: model, maxTurns: maxTurns, location: node.location)
        spec.review = review
        return spec
    }

    /// What a review of the user's turns checks (`user.review`), then the case's own `rules`.
    /// Part of every review request, so of its cassette key.
    static func reviewRules(adding rules: [String]) -> String {
        var text = """
            The user (a simulated customer, played by a model) must keep to its part. It fails when any of its turns:
            - states a fact it was not given (in its scenario or by the agent): an invented order number, date, name or amount;
            - states a value for something its scenario lists as unknown, instead of saying it does not know;
            - ends the conversation (the end marker) while the agent was still working on the task and had not failed it;
            - speaks as the agent, or stops being the user described.
            """
        for rule in rules { text += "\n- \(rule)" }
        text += "\nName the first turn that fails, by its number, in the reason."
        return text
    }

    static func readLine(_ node: ConfigNode, what: String) throws(ConfigError) -> CaseUser.Line {
        var entry = try node.mapping(what)
        let say = try entry.required("say", hint: "what the user says at this line").string("\(what).say")
        var line = CaseUser.Line(say: say)
        if let end = entry.optional("end") { line.end = try end.choice("\(what).end") }
        if let after = entry.optional("after") {
            var condition = try after.mapping("\(what).after")
            line.toolCalled = try condition.optional("toolCalled")?.name("\(what).after.toolCalled")
            line.agentSaid = try condition.optional("agentSaid")?.regex("\(what).after.agentSaid")
            let turnNode = condition.optional("turn")
            line.turn = try turnNode?.int("\(what).after.turn", in: 1...1000)
            try condition.finish()
            // Turn 1 is the user's opening: the agent has said and called nothing yet, so a
            // condition on what it did can never hold there.
            if line.turn == 1, line.agentSaid != nil || line.toolCalled != nil {
                throw ConfigError(
                    .invalidValue,
                    "\(what).after asks for turn 1 and for what the agent \(line.agentSaid != nil ? "said" : "called"): at turn 1, the "
                        + "user's opening, the agent has done nothing yet, so this line can never be said",
                    at: turnNode?.location ?? after.location, hint: "drop turn: 1 (the line then fits any turn after it), or the condition")
            }
        }
        try entry.finish()
        // A stop token in what is said ends the conversation its own way: beside an `end:` that
        // says another, the token won without a word.
        if let end = line.end, let token = UserTurn.Ending.tokens.first(where: { line.say.contains($0.token) }), token.ending != end {
            throw ConfigError(
                .invalidValue,
                "\(what).say holds the stop token \(token.token), which ends the conversation as \(token.ending.rawValue), and its end: "
                    + "is \(end.rawValue)", at: node.location, hint: "keep one of the two: take the token out of say, or drop end:")
        }
        if line.say.trimmingCharacters(in: .whitespaces).isEmpty, line.end == nil,
            !UserTurn.Ending.tokens.contains(where: { line.say.contains($0.token) })
        {
            throw ConfigError(.invalidValue, "\(what).say is empty and ends nothing", at: node.location)
        }
        return line
    }

    /// The simulated user, its model's client made by `factory` (the case's cassette's). With
    /// `frozen` (`--user frozen`), a model served over HTTP is not asked: its turns recorded in the
    /// cassette are said again (`FrozenUser`); a scripted model is asked as ever.
    public func user(factory: (any ModelClientFactory)?, frozen: FrozenUserLedger? = nil) throws(ConfigError) -> CaseUser {
        var modelUser: (any SimulatedUser)?
        if let model, let persona {
            if let frozen, case .http(let settings) = model.kind {
                let recorded: (any RecordedUserTurns)?
                do {
                    recorded = try factory?.recordedUserTurns()
                } catch {
                    throw ConfigError(
                        .unreadable, "--user frozen cannot read the case's cassette: \((error as? any Diagnostic)?.message ?? "\(error)")",
                        at: location)
                }
                guard let recorded else {
                    throw ConfigError(
                        .invalidValue, "--user frozen replays the user's recorded turns from the case's cassette, and this case names none",
                        at: location, hint: "give the case a cassette: and record it once (--record new); or run it without --user frozen")
                }
                modelUser = FrozenUser(settings: settings, persona: persona, recorded: recorded, ledger: frozen)
            } else {
                modelUser = ModelUser(client: try model.client(factory: factory), persona: persona)
            }
        }
        return CaseUser(opening: opening, lines: lines, model: modelUser)
    }
}
