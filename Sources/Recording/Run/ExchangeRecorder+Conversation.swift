import AgentRuntime
import TraceCore
import TraceLog

/// A recorded command's conversation with a simulated user (`CommandRecording.conversation`), as
/// the recorder keeps it: what the user said, how often the agent answered, and how it ended.
/// The driver (`CommandConversation`) waits on it: each answer wakes it to ask the user for the
/// next turn.
struct UserTalk {
    var isConversation = false
    /// The first turn, recorded beside `run_started` when the log is made.
    var opening: UserTurn?
    /// The user turns said (the one pending included).
    var turnsSaid = 0
    /// The turn the program was given and has not acted on: recorded when its next model request
    /// begins, in the step that answers it (as the runtime records a turn), or at the end of a
    /// run it did not end by itself. A program that exits at once after its answer,
    /// never reading the turn, leaves no trace of it: the log is the same however fast the user was.
    var pending: (turn: UserTurn, atUs: Int)?
    /// Model requests the program made since it was given `pending` that do not hold its text:
    /// a program that ends with the turn still pending after some (one that rewrites what the
    /// user says) leaves its answers to the turn unplaced (`unseenTurnStop`).
    var requestsPastPending = 0
    /// What the user said in them: a model conversation that opens with one of them is the
    /// agent's talk with the user (a program that starts a new chat per turn), not a sub-agent's.
    var saidTexts: Set<String> = []
    /// Replies without tool calls in the agent's talk with the user: turn k is answered once
    /// `answers >= k`.
    var answers = 0
    /// The answers the driver has taken (asked the user after): the run's end waits until every
    /// answer is taken, so the user's reply to the last one counts however fast the program exited.
    var handled = 0
    /// How the conversation ended, when the user ended it (or its turns ran out, or the
    /// simulator failed): the run's stop, whatever the program did after.
    var ending: RunStopped?
    /// The program ended (exited, was killed): no answer will come.
    var isProgramEnded = false
    /// The user turn the user is being asked for (its model may be slow): a run that runs out of
    /// time meanwhile stopped on the simulator, not on the agent. Nil while nobody asks.
    var userAnswering: Int?
    /// `userAnswering` when the program ended.
    var userAnsweringAtEnd: Int?
    /// The turn the user was still being asked for when the wait for it after the program's own
    /// end ran out (`waitForUser`): the simulator's slowness, never the agent's stop.
    var userOutwaited: Int?
    /// The recording was interrupted from outside (Ctrl-C): its stop says so, whatever the user said.
    var isInterrupted = false
}

extension ExchangeRecorder {
    /// Makes this recording a conversation whose first turn is `opening` (nil: the user could
    /// not open).
    func beginConversation(opening: UserTurn?) {
        state.withLock { state in
            state.talk.isConversation = true
            guard let opening else { return }
            state.talk.opening = opening
            state.talk.turnsSaid = 1
            state.talk.saidTexts.insert(opening.text)
        }
    }

    /// Takes the agent's answers so far: how many, how many turns the user said, whether the
    /// conversation ended, and the run's fold (what the user is shown).
    func takeAnswers() -> (answers: Int, turnsSaid: Int, isEnded: Bool, fold: RunState) {
        state.withLock { state in
            var fold = state.recorder?.state ?? RunState()
            fold.runId = fold.runId ?? runId
            state.talk.handled = state.talk.answers
            return (state.talk.answers, state.talk.turnsSaid, state.talk.ending != nil || state.talk.isInterrupted, fold)
        }
    }

    /// Waits until the agent has answered more than `answers` times, or the program ended, at
    /// most `timeoutMs`.
    func waitForAnswer(after answers: Int, timeoutMs: Int) async {
        await state.wait(within: .milliseconds(timeoutMs), on: clock) { $0.talk.answers > answers || $0.talk.isProgramEnded }
    }

    /// Waits until the user was asked after every answer and nobody asks it anything, at most
    /// `timeoutMs`; a user still being asked then is noted (`userOutwaited`).
    func waitForUser(timeoutMs: Int) async {
        let done = await state.wait(within: .milliseconds(timeoutMs), on: clock) { state in
            state.talk.ending != nil || (state.talk.handled >= state.talk.answers && state.talk.userAnswering == nil)
        }
        if !done { state.withLock { $0.talk.userOutwaited = $0.talk.userAnswering } }
    }

    /// Waits until the program ended, at most `timeoutMs`; whether it did.
    func waitForProgramEnd(timeoutMs: Int) async -> Bool {
        await state.wait(within: .milliseconds(timeoutMs), on: clock) { $0.talk.isProgramEnded }
    }

    /// Takes the user's next turn (numbered after those said): one that ends the conversation
    /// is recorded now, any other when the program acts on it (`UserTalk.pending`). False when
    /// the conversation is over: it ended, or the program did — then only a turn that ends the
    /// conversation is taken (the user ended it after the agent's last answer, however fast the
    /// program exited), never one the program could not read.
    func say(_ turn: UserTurn) throws -> Bool {
        try state.withLock { state in
            guard state.talk.ending == nil, !state.talk.isInterrupted, !state.talk.isProgramEnded || turn.ends != nil else {
                return false
            }
            var said = turn
            said.turn = state.talk.turnsSaid + 1
            state.talk.turnsSaid = said.turn
            state.talk.saidTexts.insert(said.text)
            if said.ends == nil {
                state.talk.pending = (said, now())
                state.talk.requestsPastPending = 0
            } else {
                let recorder = try recorder(for: nil, state: &state, atUs: now())
                recorder.timeUs = now()
                try recorder.record(.userTurn(said))
            }
            return true
        }
    }

    /// Records the turn the program was given, at the start of the step that answers it (as its
    /// next model request begins).
    func recordPendingTurn(recorder: RunRecorder, state: inout State) throws {
        guard let pending = state.talk.pending else { return }
        state.talk.pending = nil
        state.talk.requestsPastPending = 0
        try recorder.record(.userTurn(pending.turn), at: pending.atUs)
    }

    /// The turn the program could not be given (its standard input is closed): taken back, never
    /// recorded.
    func unsay() {
        state.withLock { state in
            guard state.talk.pending != nil else { return }
            state.talk.pending = nil
            state.talk.requestsPastPending = 0
            state.talk.turnsSaid -= 1
        }
    }

    /// The user is being asked for turn `turn` (nil: no longer).
    func userAnswering(_ turn: Int?) {
        state.withLock { $0.talk.userAnswering = turn }
    }

    /// The log could not take a user turn: the run's end throws it, as for any write that failed.
    func failedToRecord(_ error: any Error) {
        state.withLock { state in
            if state.writeError == nil { state.writeError = "\(error)" }
        }
    }

    /// The recording is interrupted from outside: its stop says so.
    func interrupted() {
        state.withLock { $0.talk.isInterrupted = true }
    }

    /// Whether a model request `body` carries the turn the program was given: the request that
    /// answers it (any message, any API, a framework's wrapping of it) holds its text.
    static func carries(_ body: JSONValue, text: String) -> Bool {
        guard !text.isEmpty else { return true }
        switch body {
        case .string(let value): return value.contains(text)
        case .array(let items): return items.contains { carries($0, text: text) }
        case .object(let members): return members.contains { carries($0.value, text: text) }
        default: return false
        }
    }

    /// Ends the conversation with `stop` (the user's stop, `max_turns`, a simulator fault),
    /// unless it ended already; the agent's last message to the user is the stop's answer.
    func endConversation(_ reason: StopReason, error: String? = nil) {
        state.withLock { state in
            guard state.talk.ending == nil else { return }
            let answer = state.recorder?.state.agentMessages.last
            state.talk.ending = RunStopped(reason: reason, answer: answer, error: error)
        }
    }

    /// The program ended: the driver stops waiting for answers.
    func programEnded() {
        state.withLock { state in
            state.talk.isProgramEnded = true
            state.talk.userAnsweringAtEnd = state.talk.userAnswering
        }
    }

    /// A conversation's stop: how the user ended it; else, for a program that exited by itself
    /// (status 0, no failed model request), `agent_stop` — or `blocked` when it left the user's
    /// last turn unanswered. Nil when the run is no conversation or ended otherwise (a crash, a
    /// signal, a timeout): the run's usual stop.
    func conversationStop(_ ending: Ending, state: borrowing State) -> RunStopped? {
        guard state.talk.isConversation, !state.talk.isInterrupted else { return nil }
        if let stop = state.talk.ending { return stop }
        if case .timedOut(let ms) = ending, let turn = state.talk.userAnsweringAtEnd {
            // The program waited for the user, who was still answering: the simulator's time, not the agent's.
            return RunStopped(
                reason: .blocked, answer: state.recorder?.state.agentMessages.last,
                error: "\(RunStopped.simulatorFaultPrefix) the user was still answering turn \(turn) when the command's time ran out "
                    + "(\(ms / 1000) s, --timeout)")
        }
        if case .exited(0) = ending, let turn = state.talk.userOutwaited {
            // The program answered and exited; the user's reply, which could still have ended the
            // conversation, never came: how it ended is not known, and not the agent's doing.
            return RunStopped(
                reason: .blocked, answer: state.recorder?.state.agentMessages.last,
                error: "\(RunStopped.simulatorFaultPrefix) the user was still answering turn \(turn) "
                    + "\(CommandConversation.userAfterEndMs / 1000) s after the program exited")
        }
        guard isAgentEnd(ending, state: state) else { return nil }
        let answer = state.recorder?.state.agentMessages.last
        // A turn still pending never reached the agent's model: it is left out (`UserTalk.pending`).
        let recorded = state.talk.turnsSaid - (state.talk.pending == nil ? 0 : 1)
        if state.talk.answers < recorded {
            return RunStopped(
                reason: .blocked, answer: answer,
                error: "the program exited without answering user turn \(recorded) (it ended its conversation with the user "
                    + "before replying)")
        }
        return RunStopped(
            reason: .agentStop, answer: answer,
            error: "the agent ended the conversation: the program exited after answering user turn \(recorded)")
    }

    /// A conversation whose program was given a user turn and then asked its model, without the
    /// turn's text in any request, until it ended: which of its answers replies to the user
    /// cannot be told (they did not count, so the user was never asked again), and the run shows
    /// the recorder's blind spot, not the agent — a fault of the conversation (could not run),
    /// never the agent's stop. Nil otherwise.
    func unseenTurnStop(state: borrowing State) -> RunStopped? {
        guard state.talk.isConversation, !state.talk.isInterrupted, let pending = state.talk.pending,
            state.talk.requestsPastPending > 0
        else { return nil }
        let excerpt = pending.turn.text.count > 80 ? String(pending.turn.text.prefix(80)) + "…" : pending.turn.text
        return RunStopped(
            reason: .blocked, answer: state.recorder?.state.agentMessages.last,
            error: "\(RunStopped.simulatorFaultPrefix) the program was given user turn \(pending.turn.turn) (\"\(excerpt)\") and then made "
                + "\(counted(state.talk.requestsPastPending, "model request")) none of which holds its text, until it ended: its "
                + "answers to the user could not be told apart, so the user was not asked again (a program that rewrites what the "
                + "user says before its model sees it — translated, its case changed — cannot be recorded as a conversation)")
    }

    /// The program ended the conversation by itself: it exited with status 0, its model's last
    /// request answered, while the user had not ended it.
    func isAgentEnd(_ ending: Ending, state: borrowing State) -> Bool {
        guard state.talk.isConversation, state.talk.ending == nil, state.stopCause == nil, state.lastFailure == nil else { return false }
        if case .exited(0) = ending { return true }
        return false
    }
}
