/// One message of a conversation: what the user said, or what the agent said to the user.
public struct DialogueLine: Sendable, Hashable {
    public enum Speaker: String, Sendable, Hashable {
        case user
        case agent
    }

    public var speaker: Speaker
    public var text: String
    /// The step that recorded it: a user turn's, or the step of the agent's decision.
    public var step: Int
    /// The user turn it belongs to (1 for the first): a user's own, or the one an agent's line answers.
    public var turn: Int

    public init(speaker: Speaker, text: String, step: Int, turn: Int) {
        self.speaker = speaker
        self.text = text
        self.step = step
        self.turn = turn
    }
}

extension RunState {
    /// The conversation as its two sides saw it, in order: each user turn (for a run that is no
    /// conversation, its goal as the one user line) and each answer or question the agent
    /// gave the user (`answer` and `ask_human` decisions, but those aside: `isAside`). Tool calls are not lines: they belong
    /// to the turn whose step range holds them (`turn(ofStep:)`).
    public var dialogue: [DialogueLine] {
        var lines: [DialogueLine] = []
        if userTurns.isEmpty {
            if let goal = start?.goal { lines.append(DialogueLine(speaker: .user, text: goal, step: 0, turn: 1)) }
        }
        var turns = userTurns.makeIterator()
        var nextTurn = turns.next()
        var turn = userTurns.isEmpty ? 1 : 0
        for decision in decisions {
            // A user turn comes before every decision of its step.
            while let pending = nextTurn, pending.step <= decision.step {
                if !pending.turn.text.isEmpty || pending.turn.ends == nil {
                    lines.append(DialogueLine(speaker: .user, text: pending.turn.text, step: pending.step, turn: pending.turn.turn))
                }
                turn = pending.turn.turn
                nextTurn = turns.next()
            }
            switch decision.outcome {
            case .valid(.answer(let text)) where !decision.isAside, .valid(.askHuman(let text)) where !decision.isAside:
                lines.append(DialogueLine(speaker: .agent, text: text, step: decision.step, turn: turn))
            default:
                break
            }
        }
        while let pending = nextTurn {
            if !pending.turn.text.isEmpty || pending.turn.ends == nil {
                lines.append(DialogueLine(speaker: .user, text: pending.turn.text, step: pending.step, turn: pending.turn.turn))
            }
            nextTurn = turns.next()
        }
        return lines
    }

    /// The user turn (1 for the first) a step belongs to: the last turn recorded at or before
    /// it. 1 for a run that is no conversation.
    public func turn(ofStep step: Int) -> Int {
        var found = 1
        for record in userTurns {
            guard record.step <= step else { break }
            found = record.turn.turn
        }
        return found
    }

    /// What the agent said to the user, in order: every line of `dialogue` the agent spoke.
    public var agentMessages: [String] { dialogue.filter { $0.speaker == .agent }.map(\.text) }
}

extension RunState {
    /// The steps user turn `number` covers: from the step that recorded it up to (not
    /// including) the next turn's; nil when the run has no such turn.
    public func steps(ofTurn number: Int) -> Range<Int>? {
        guard let index = userTurns.firstIndex(where: { $0.turn.turn == number }) else { return nil }
        let from = index == 0 ? 0 : userTurns[index].step
        let to = index + 1 < userTurns.count ? userTurns[index + 1].step : Int.max
        return from..<to
    }

    /// The run as one user turn of a conversation saw it: that turn, and the decisions and calls
    /// of its steps (their counters made again); nil when the run has no such turn. For checking
    /// what the agent did in that turn (`expected.turns`), never digested or written.
    public func slice(turn number: Int) -> RunState? {
        guard let steps = steps(ofTurn: number) else { return nil }
        var slice = self
        slice.userTurns = userTurns.filter { $0.turn.turn == number }
        slice.decisions = decisions.filter { steps.contains($0.step) }
        slice.calls = calls.filter { steps.contains($0.step) }
        slice.counters = RunCounters()
        slice.counters.invalidDecisions = slice.decisions.count { if case .invalid = $0.outcome { true } else { false } }
        for call in slice.calls { slice.counters.update(from: .nothing, to: .init(call)) }
        return slice
    }
}
