public import TraceCore

/// The other side of a conversation: given the run so far, what the user says next.
///
/// The runtime asks for the first turn before the run starts (the run's goal is what the user
/// opened with) and for each later turn after the agent answered, and records each as a
/// `user_turn` event. A user that cannot give a turn throws `SimulatorFault`: the attempt then
/// shows what the simulator could not do, not what the agent does, and a case over it could not
/// run (docs/conversations.md).
public protocol SimulatedUser: Sendable {
    /// The user's turn `turn` (1 for the opening) after `state`, the run's fold so far: the
    /// `user_turn` event the runtime records.
    func reply(turn: Int, after state: RunState) async throws -> UserTurn
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
