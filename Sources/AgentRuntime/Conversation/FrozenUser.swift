import Synchronization
public import TraceCore

/// One reply of a user's model recorded earlier (a cassette's): what the user was shown then and
/// what its model answered.
public struct RecordedUserReply: Sendable {
    /// The sampling settings the recorded request was sent.
    public var sampling: SamplingSettings?
    /// The user's transcript when it answered, as its model was shown it: a speaker and a text
    /// per message, the system instructions left out (`ModelUser.transcript(after:)`).
    public var transcript: [DialogueLine]
    /// The model's reply, as a model client gives it.
    public var reply: ModelReply
    /// Where it is recorded (a cassette's file), to name it.
    public var file: String

    public init(sampling: SamplingSettings? = nil, transcript: [DialogueLine], reply: ModelReply, file: String) {
        self.sampling = sampling
        self.transcript = transcript
        self.reply = reply
        self.file = file
    }
}

/// The replies a user's model gave before, by turn: what `--user frozen` replays.
public protocol RecordedUserTurns: Sendable {
    /// The recorded replies of the model `settings` names, told `instructions`, at user turn
    /// `turn` (a request holding `turn - 1` of the user's own turns), in a stable order.
    func replies(of settings: ModelSettings, instructions: String, turn: Int) throws -> [RecordedUserReply]
    /// `reply`, one of those `replies` gave, is the one replayed: the recordings never replayed
    /// are what a store can name as unused (a cassette's stale recordings).
    func replayed(_ reply: RecordedUserReply)
}

/// Where a frozen user's recorded turns stopped fitting the conversation: the first turn whose
/// recording was made when the agent had said something else.
public struct FrozenDivergence: Sendable, Hashable {
    /// The user turn whose recorded reply was given after another conversation.
    public var turn: Int
    /// The first line that differs: what was said then (nil: the recording had no such line),
    /// and now (nil: the conversation now has no such line).
    public var recorded: String?
    public var now: String?
    /// Whether that line is the agent's (else the user's own: its opening or a script line changed).
    public var isAgents: Bool
    /// The recording replayed.
    public var file: String
}

/// The first divergence of each frozen run, by run id: the runner reads it once the run ended.
public final class FrozenUserLedger: Sendable {
    // Guarded by the mutex: by run id.
    private let divergences = Mutex<[String: FrozenDivergence]>([:])

    public init() {}

    func note(_ divergence: FrozenDivergence, runId: String) {
        divergences.withLock { if $0[runId] == nil { $0[runId] = divergence } }
    }

    /// The first divergence of run `runId`, taken out; nil when its user's turns all fit.
    public func take(runId: String) -> FrozenDivergence? {
        divergences.withLock { $0.removeValue(forKey: runId) }
    }
}

/// `--user frozen`: the user's model is not asked; each turn it would give is the one it gave
/// when the case was recorded, whatever the agent says now. Of the recordings of turn N, the one
/// recorded after the conversation most like this one (the longest common start) is replayed; when
/// it was recorded after another conversation (the agent said something else), the first such
/// turn is noted in `ledger`: from there on the user answers a conversation that did not happen.
public struct FrozenUser: SimulatedUser {
    public var settings: ModelSettings
    public var persona: UserPersona
    public var recorded: any RecordedUserTurns
    public var ledger: FrozenUserLedger

    public init(settings: ModelSettings, persona: UserPersona, recorded: any RecordedUserTurns, ledger: FrozenUserLedger) {
        self.settings = settings
        self.persona = persona
        self.recorded = recorded
        self.ledger = ledger
    }

    public func reply(turn: Int, after state: RunState) async throws -> UserTurn {
        let now = ModelUser.transcript(after: state)
        let replies: [RecordedUserReply]
        do {
            replies = try recorded.replies(of: settings, instructions: persona.instructions, turn: turn)
        } catch {
            throw SimulatorFault(
                "--user frozen: the user's recorded turns cannot be read: \((error as? any Diagnostic)?.message ?? "\(error)")")
        }
        func shared(_ reply: RecordedUserReply) -> Int {
            zip(reply.transcript, now).prefix { $0.speaker == $1.speaker && $0.text == $1.text }.count
        }
        guard let best = replies.max(by: { shared($0) < shared($1) }) else {
            throw SimulatorFault(
                "--user frozen: the cassette holds no recorded turn \(turn) of this user (\(settings.provider.rawValue):\(settings.name), "
                    + "its persona and scenario)",
                hint: "record the conversation once with the models reachable (--record new), then replay it frozen")
        }
        recorded.replayed(best)
        let common = shared(best)
        if common < max(best.transcript.count, now.count) {
            let recordedLine = common < best.transcript.count ? best.transcript[common] : nil
            let nowLine = common < now.count ? now[common] : nil
            // In the user's transcript the agent's lines are what the user is told (`.user`).
            let isAgents = (nowLine ?? recordedLine)?.speaker == .user
            ledger.note(
                FrozenDivergence(turn: turn, recorded: recordedLine?.text, now: nowLine?.text, isAgents: isAgents, file: best.file),
                runId: state.runId ?? "")
        }
        var said = try ModelUser.turn(
            turn, from: best.reply, model: ModelIdentity(provider: settings.provider.rawValue, name: settings.name))
        // What the recorded call was sent: the frozen turn is that call's reply.
        said.sampling = best.sampling
        // Given from a recording, not said by the model in this run: the log says so (a replay,
        // `view` and the catalog showed it as the model's answer to what the agent says now), and
        // no call was made, so it has no usage, cost or latency of its own. `model` still names
        // the model that said it when it was recorded.
        said.source = .given
        said.usage = nil
        said.costUSD = nil
        said.latencyUs = nil
        return said
    }
}
