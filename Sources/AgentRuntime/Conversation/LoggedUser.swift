public import TraceCore

/// A user who says again, turn by turn, what a log's user said (`rerun` of a conversation): turn
/// N is the log's Nth `user_turn` as it was recorded, whatever the agent says now. Past the
/// log's last turn there is nothing to say: a simulator fault naming the turn, where a re-run
/// that asked for more than the recorded conversation had parts from it.
public struct LoggedUser: SimulatedUser {
    public var turns: [UserTurn]

    public init(turns: [UserTurn]) {
        self.turns = turns
    }

    public func reply(turn: Int, after state: RunState) async throws -> UserTurn {
        guard turn >= 1, turn <= turns.count else {
            throw SimulatorFault("the log's user said \(turns.count) turn\(turns.count == 1 ? "" : "s"); the re-run asked for turn \(turn)")
        }
        return turns[turn - 1]
    }
}
