public import TraceCore

/// A user who says again, turn by turn, what a log's user said (`rerun` of a conversation): turn
/// N is the log's Nth `user_turn` as it was recorded, whatever the agent says now. Past the
/// log's last turn there is nothing to say: a simulator fault naming the turn, where a re-run
/// that asked for more than the recorded conversation had parts from it — or, when the log's
/// user failed right there (`fault`), that same fault again, so the re-run ends as the log did.
public struct LoggedUser: SimulatedUser {
    public var turns: [UserTurn]
    /// What the log's user failed with after its last turn (its stop's words after
    /// `RunStopped.simulatorFaultPrefix`); nil when it did not fail.
    public var fault: String?

    public init(turns: [UserTurn], fault: String? = nil) {
        self.turns = turns
        self.fault = fault
    }

    public func reply(turn: Int, after state: RunState) async throws -> UserTurn {
        if turn == turns.count + 1, let fault { throw SimulatorFault(fault) }
        guard turn >= 1, turn <= turns.count else {
            throw SimulatorFault("the log's user said \(turns.count) turn\(turns.count == 1 ? "" : "s"); the re-run asked for turn \(turn)")
        }
        return turns[turn - 1]
    }
}
