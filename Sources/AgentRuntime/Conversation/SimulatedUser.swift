import Foundation
public import TraceCore

/// The other side of a conversation: given the run so far, what the user says next.
///
/// The runtime asks for the first turn before the run starts (the run's goal is what the user
/// opened with) and for each later turn after the agent answered, and records each as a
/// `user_turn` event. A user that cannot give a turn throws `SimulatorFault`: the attempt then
/// shows what the simulator could not do, not what the agent does, and a case over it could not
/// run (docs/conversations.md).
public protocol SimulatedUser: Sendable {
    /// The user's turn `turn` (1 for the opening) after `state`: the run's fold so far.
    func reply(turn: Int, after state: RunState) async throws -> UserReply
}

/// What a simulated user said.
public struct UserReply: Sendable, Hashable {
    public var text: String
    public var source: UserTurn.Source
    /// Set when the user ended the conversation with this turn (`text` is said first).
    public var ending: UserTurn.Ending?
    /// The script line that made it, for a `script` turn.
    public var line: Int?
    /// The user's model and what its call cost, for a turn it made.
    public var model: ModelIdentity?
    public var usage: TokenUsage?
    public var costUSD: Double?
    public var latencyUs: Int?

    public init(
        text: String, source: UserTurn.Source, ending: UserTurn.Ending? = nil, line: Int? = nil, model: ModelIdentity? = nil,
        usage: TokenUsage? = nil, costUSD: Double? = nil, latencyUs: Int? = nil
    ) {
        self.text = text
        self.source = source
        self.ending = ending
        self.line = line
        self.model = model
        self.usage = usage
        self.costUSD = costUSD
        self.latencyUs = latencyUs
    }

    /// The stop tokens a simulated user ends a conversation with (`UserTurn.Ending.tokens`).
    public static var stopTokens: [(token: String, ending: UserTurn.Ending)] { UserTurn.Ending.tokens }

    /// The most a user turn may say, in UTF-8 bytes: a longer reply is a simulator fault.
    public static let maxTextBytes = 16_384

    /// `text` as a user says it (`UserTurn.Ending.parse`): a stop token in it ends the conversation.
    public init(parsing text: String, source: UserTurn.Source, line: Int? = nil) {
        let (said, ending) = UserTurn.Ending.parse(text)
        self.init(text: said, source: source, ending: ending, line: line)
    }

    /// The `user_turn` event of this reply as turn `turn`.
    public func event(turn: Int) -> UserTurn {
        UserTurn(
            turn: turn, text: text, source: source, ends: ending, line: line, model: model, usage: usage, costUSD: costUSD,
            latencyUs: latencyUs)
    }
}

/// The simulated user could not give a turn: an empty, malformed, refused or oversized reply, a
/// model that failed, a stop before the agent answered anything, a script with nothing to say.
/// Never the agent's failure: the run records it as a stop with `RunStopped.simulatorFaultPrefix`.
public struct SimulatorFault: Error, Diagnostic, Hashable {
    public var message: String
    public var hint: String?

    public init(_ message: String, hint: String? = nil) {
        self.message = message
        self.hint = hint
    }

    public var diagnosticCode: String { "conversation.simulator_fault" }
    public var place: SourceLocation? { nil }
}

/// How a conversation is run: its user and how long it may go.
public struct Conversation: Sendable {
    public var user: any SimulatedUser
    /// The user turns the conversation may have: after the agent answers the last of them, the
    /// run stops with `max_turns`.
    public var maxTurns: Int

    /// The turns a conversation may have unless its case says otherwise.
    public static let defaultMaxTurns = 12

    public init(user: any SimulatedUser, maxTurns: Int = Self.defaultMaxTurns) {
        self.user = user
        self.maxTurns = max(1, maxTurns)
    }
}
