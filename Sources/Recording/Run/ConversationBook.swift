import TraceCore

/// The conversations of a recorded run and the rule that tells which one a request continues —
/// the bookkeeping of `ExchangeRecorder`, as a value of its own. A request continues the
/// conversation that proposed a call whose result it carries (the newest result first: a request
/// carries every earlier one again, and an id several conversations reuse, such as `call_1`,
/// belongs to the one whose call is open, newest first), or whose call it writes back as text;
/// else one with the same opening (system prompt and first user message) that had fewer
/// messages; else it begins a new one. At most `maxKept` conversations are kept: past that,
/// the one answered longest ago with no call open is forgotten.
struct ConversationBook {
    struct Conversation {
        var number: Int
        var opening: String
        var goal: String
        var lastMessageCount: Int
        var requests = 0
        /// Calls proposed and not yet answered: source id → (log id, tool, when proposed).
        var openCalls: [String: (logId: String, tool: String, atUs: Int)] = [:]
        var lastOutcome: DecisionMade.Outcome?
        /// The number of the run's answered request that this conversation's last one was.
        var lastAnswered = 0
        /// In a conversation with a simulated user, whether this is the agent's talk with the user,
        /// decided at its first request (`ExchangeRecorder.isUserTalk`); nil until then.
        var isUserTalk: Bool?
    }

    /// The conversations kept, by number: at most `maxKept` (those with calls still open, and
    /// the ones answered last).
    var conversations: [Int: Conversation] = [:]
    /// Conversations begun, kept or not.
    var count = 0
    /// The conversation each open call belongs to: source id → number.
    /// (Several, oldest first, when providers reuse ids such as `call_1`.)
    var openCallOwner: [String: [Int]] = [:]
    /// The conversations kept with each opening, by number, oldest first.
    var byOpening: [String: [Int]] = [:]
    /// The conversation answered last: its outcome is the run's.
    var lastAnswered: Int?

    /// The number of the conversation `view` continues, or of the one it begins: the first
    /// conversation's goal is `runGoal` when given, every other's its first user message.
    mutating func assign(_ view: ModelRequestView, runGoal: String?, maxKept: Int) -> Int {
        for result in view.results.reversed() {
            if let number = openCallOwner[result.callId]?.last { return number }
        }
        if !view.echoes.isEmpty {
            for id in openCallOwner.keys.sorted()
            where view.echoes.contains(where: { ExchangeRecorder.place(of: id, in: $0.callText) != nil }) {
                if let number = openCallOwner[id]?.last { return number }
            }
        }
        let opening = view.system + "\u{0}" + (view.firstUserText ?? "")
        if let number = byOpening[opening]?.last(where: { (conversations[$0]?.lastMessageCount ?? .max) < view.messageCount }) {
            return number
        }
        count += 1
        let number = count
        conversations[number] = Conversation(
            number: number, opening: opening, goal: number == 1 ? (runGoal ?? view.firstUserText ?? "") : (view.firstUserText ?? ""),
            lastMessageCount: 0)
        byOpening[opening, default: []].append(number)
        if conversations.count > maxKept {
            var oldest: Conversation?
            for kept in conversations.values
            where kept.openCalls.isEmpty && kept.number != number && kept.number != lastAnswered
                && kept.lastAnswered < (oldest?.lastAnswered ?? .max)
            {
                oldest = kept
            }
            if let oldest {
                conversations[oldest.number] = nil
                byOpening[oldest.opening]?.removeAll { $0 == oldest.number }
                if byOpening[oldest.opening]?.isEmpty == true { byOpening[oldest.opening] = nil }
            }
        }
        return number
    }
}

/// Where a fork of a recorded run stands on its way to its fork point (`ExchangeRecorder+Fork`).
struct ForkProgress {
    /// The fork's requests before its fork point that a request of the program claimed (by
    /// position in `RecordedFork.requests`), and how many of them were answered.
    var prefixClaimed = Set<Int>()
    var prefixAnswered = 0
    /// The call ids whose edited result a request past the fork point carried to the model.
    var editsShown = Set<String>()
    /// Whether the fork's log was made: until then, the run is recorded apart (`forkPrefixPath`).
    var isForkMade = false
}
