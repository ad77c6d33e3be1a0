import Foundation
public import TraceCore

/// The user an eval case declares (`user:`): a fixed opening, script lines said when their
/// condition holds, and a model for everything else (docs/conversations.md).
///
/// Each turn is decided from the run's fold alone — which lines were said is read from the
/// recorded turns — so a replayed conversation asks the user the same questions and, with the
/// model's replies replayed from a cassette, gets the same answers.
public struct CaseUser: SimulatedUser {
    /// One scripted line: said once, at the first turn its condition holds.
    public struct Line: Sendable, Hashable {
        /// The agent called this tool (in any turn so far).
        public var toolCalled: String?
        /// A regular expression the agent's newest message matches.
        public var agentSaid: String?
        /// The user turn (1 for the opening) it is said at.
        public var turn: Int?
        /// What the user says; a stop token in it ends the conversation.
        public var say: String
        /// Ends the conversation after `say`.
        public var end: UserTurn.Ending?

        public init(toolCalled: String? = nil, agentSaid: String? = nil, turn: Int? = nil, say: String, end: UserTurn.Ending? = nil) {
            self.toolCalled = toolCalled
            self.agentSaid = agentSaid
            self.turn = turn
            self.say = say
            self.end = end
        }

        func holds(turn number: Int, state: RunState, agentSaidLast: String?) -> Bool {
            if let turn, turn != number { return false }
            if let toolCalled, !state.calls.contains(where: { $0.tool == toolCalled }) { return false }
            if let agentSaid {
                guard let text = agentSaidLast, (try? LinearRegex(agentSaid))?.matches(text) == true else { return false }
            }
            return true
        }
    }

    /// The first turn, when the case fixes it.
    public var opening: String?
    public var lines: [Line]
    /// Who speaks when neither the opening nor a line does (a `ModelUser`, or under `--user
    /// frozen` a `FrozenUser`); nil: nobody, a simulator fault.
    public var model: (any SimulatedUser)?

    public init(opening: String? = nil, lines: [Line] = [], model: (any SimulatedUser)? = nil) {
        self.opening = opening
        self.lines = lines
        self.model = model
    }

    public func reply(turn: Int, after state: RunState) async throws -> UserTurn {
        if turn == 1, let opening {
            return UserTurn(turn: turn, parsing: opening, source: .opening)
        }
        let said = Set(state.userTurns.compactMap(\.turn.line))
        let agentSaidLast = state.agentMessages.last
        for (index, line) in lines.enumerated() where !said.contains(index) {
            guard line.holds(turn: turn, state: state, agentSaidLast: agentSaidLast) else { continue }
            var said = UserTurn(turn: turn, parsing: line.say, source: .script, line: index)
            said.ends = said.ends ?? line.end
            return said
        }
        guard let model else {
            throw SimulatorFault(
                "the user has nothing to say at turn \(turn): no script line's condition holds"
                    + (agentSaidLast.map { " after the agent said \"\($0.count > 120 ? String($0.prefix(120)) + "…" : $0)\"" } ?? "")
                    + ", and the case gives the user no model",
                hint: "add a script line for it (end the conversation with end: user_stop), or give user.model")
        }
        return try await model.reply(turn: turn, after: state)
    }
}

/// A user played by a model: its instructions are the persona and the scenario, and it sees
/// the conversation with the roles flipped (the agent's messages are what it is told, its own
/// turns what it said). Its requests depend on the log alone, so a cassette replays them.
public struct ModelUser: SimulatedUser {
    public var client: any ModelClient
    public var persona: UserPersona

    public init(client: any ModelClient, persona: UserPersona) {
        self.client = client
        self.persona = persona
    }

    /// What the user's model is shown at a turn after `state`: a first message that starts the
    /// conversation, then the conversation with the roles flipped (the agent's lines are what the
    /// user is told, its own turns what it said).
    public static func transcript(after state: RunState) -> [DialogueLine] {
        var lines = [DialogueLine(speaker: .user, text: UserPersona.kickoff, step: 0, turn: 0)]
        for (index, line) in state.dialogue.enumerated() {
            // Steps in order of the lines: a user turn and the answer to it may share a step.
            lines.append(DialogueLine(speaker: line.speaker == .user ? .agent : .user, text: line.text, step: index + 1, turn: line.turn))
        }
        return lines
    }

    /// The request for turn `turn` after `state`: what a cassette keys the user's calls by.
    public func request(turn: Int, after state: RunState) -> ModelRequest {
        let lines = Self.transcript(after: state)
        let transcriptBytes = lines.reduce(persona.instructions.utf8.count) { $0 + $1.text.utf8.count }
        var request = ModelRequest(
            instructions: persona.instructions,
            packet: ContextBuilt(goal: "", stateSummary: "", tokenEstimate: ContextSettings.estimateTokens(bytes: transcriptBytes)),
            // The user's model is asked for the turns the opening and the script do not give: its
            // n-th answer (a scripted model's n-th decision) is the n-th it gives, whatever turn.
            tools: [], observations: [], feedback: nil, decisionIndex: state.userTurns.count { $0.turn.source == .model },
            step: state.step)
        request.runId = state.runId ?? ""
        request.dialogue = lines
        return request
    }

    public func reply(turn: Int, after state: RunState) async throws -> UserTurn {
        let answer: ModelReply
        do {
            answer = try await client.reply(to: request(turn: turn, after: state))
        } catch {
            // Cancelled from outside, however the client says it: an interruption, not a fault.
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            let message = (error as? any Diagnostic)?.message ?? "\(error)"
            throw SimulatorFault(
                "the user's model failed at turn \(turn): \(message)", hint: (error as? any Diagnostic)?.hint)
        }
        var said = try Self.turn(turn, from: answer, model: client.identity)
        said.sampling = client.sampling
        return said
    }

    /// The user's turn `turn` that the user's model's reply `answer` gives; a `SimulatorFault`
    /// for a reply that is no message (empty, malformed, refused, a tool call, too long, a stop
    /// at turn 1).
    public static func turn(_ turn: Int, from answer: ModelReply, model: ModelIdentity) throws -> UserTurn {
        let text: String
        switch DecisionParser(tools: ToolRegistry()).parse(answer.raw, format: answer.format, nextCallNumber: 1) {
        case .valid(.answer(let said)), .valid(.askHuman(let said)):
            text = said
        case .valid(.stop):
            text = UserTurn.Ending.tokens[0].token
        case .valid(.toolCalls(let calls)):
            throw SimulatorFault(
                "the user's model replied with tool calls (\(calls.map(\.name).joined(separator: ", "))) at turn \(turn), not a message")
        case .invalid(let invalid) where invalid.kind == .unknownTool:
            // A user has no tools: every call names one it was not given.
            throw SimulatorFault(
                "the user's model replied with a tool call at turn \(turn), not a message (a simulated user has no tools): \(invalid.message)"
            )
        case .invalid(let invalid):
            // Empty, malformed, refused.
            throw SimulatorFault("the user's model reply at turn \(turn) is no message: \(invalid.message)")
        }
        guard text.utf8.count <= UserTurn.maxTextBytes else {
            throw SimulatorFault(
                "the user's model said \(text.utf8.count) bytes at turn \(turn), more than the \(UserTurn.maxTextBytes) a user turn may hold"
            )
        }
        var reply = UserTurn(turn: turn, parsing: text, source: .model)
        reply.model = model
        reply.usage = answer.usage
        reply.costUSD = answer.costUSD
        reply.latencyUs = answer.latencyUs
        if reply.text.isEmpty && reply.ends == nil {
            throw SimulatorFault("the user's model gave an empty reply at turn \(turn)")
        }
        if turn == 1, let ending = reply.ends {
            throw SimulatorFault(
                "the user's model ended the conversation (\(ending.rawValue)) at turn 1, before the agent answered anything")
        }
        return reply
    }
}

/// Who the simulated user is: what its instructions tell its model.
public struct UserPersona: Sendable, Hashable {
    public var persona: String
    /// Why the user came.
    public var reason: String?
    /// What the user knows and may say when asked.
    public var known: [String]
    /// What the user does not know and must not invent.
    public var unknown: [String]
    /// What the user wants done.
    public var task: String?

    public init(persona: String, reason: String? = nil, known: [String] = [], unknown: [String] = [], task: String? = nil) {
        self.persona = persona
        self.reason = reason
        self.known = known
        self.unknown = unknown
        self.task = task
    }

    /// The first message the user's model is given: the conversation starts with its reply.
    public static let kickoff = "The conversation starts now. Write your first message to the agent."

    /// The user's model's instructions. Part of every request the user sends, so of its
    /// cassette key: record the cassettes again when it changes.
    public var instructions: String {
        var text = """
            You are a user talking to an AI agent that serves customers. Stay in character; you are the user, never the agent.

            Who you are: \(persona)
            """
        if let reason { text += "\nWhy you are here: \(reason)" }
        if let task { text += "\nWhat you want: \(task)" }
        if !known.isEmpty { text += "\nWhat you know (say it only when asked for it):" + known.map { "\n- \($0)" }.joined() }
        if !unknown.isEmpty {
            text += "\nWhat you do not know (never invent it; say you do not know):" + unknown.map { "\n- \($0)" }.joined()
        }
        text += """


            Rules:
            - Write only your next message to the agent, in plain text: one message, no labels, no quotes.
            - Give only the information the agent asks for.
            - When what you want is done, or cannot be done, end your message with ###STOP###.
            - When the agent hands you over to a human, write ###TRANSFER###.
            - When the agent says it cannot help with this at all, write ###OUT-OF-SCOPE###.
            """
        return text
    }
}
