/// `user_turn`: what the user of a conversation said (format version 4, docs/log-format.md §4).
///
/// A conversation's run records the user's first turn at step 0, right after `run_started`
/// (whose `goal` is the same text), and each later turn at the start of the step that answers
/// it. A turn that ends the conversation (`ends`) is followed by the run's stop. The user's
/// model calls are the user's: their usage and cost sit here, never in the agent's.
public struct UserTurn: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// How the turn was made.
    public enum Source: String, JSONEnum {
        /// The case's fixed first turn.
        case opening
        /// A line of the case's script, whose condition held.
        case script
        /// The user's model (a simulator).
        case model
        /// Given from outside (`fork --say`, an imported transcript).
        case given
    }

    /// How a user ends a conversation (the simulator's stop tokens).
    public enum Ending: String, JSONEnum {
        /// The user is done (`###STOP###`).
        case userStop = "user_stop"
        /// The user asked for a human (`###TRANSFER###`).
        case userTransfer = "user_transfer"
        /// The user's request is outside what the agent serves (`###OUT-OF-SCOPE###`).
        case userOutOfScope = "user_out_of_scope"

        /// The stop tokens a simulated user ends a conversation with (τ-bench's), in the order
        /// they are looked for.
        public static let tokens: [(token: String, ending: Ending)] = [
            ("###STOP###", .userStop), ("###TRANSFER###", .userTransfer), ("###OUT-OF-SCOPE###", .userOutOfScope),
        ]

        /// What a user's `text` says and how it ends: a stop token anywhere in it ends the
        /// conversation (the first found, in `tokens` order) and is taken out of what is said;
        /// the rest is trimmed of white space.
        public static func parse(_ text: String) -> (said: String, ending: Ending?) {
            var said = text
            var ending: Ending?
            for (token, kind) in tokens where said.contains(token) {
                ending = ending ?? kind
                said = said.replacing(token, with: "")
            }
            // Trimmed at both ends (TraceCore has no Foundation).
            let start = said.firstIndex { !$0.isWhitespace } ?? said.endIndex
            let end = said.lastIndex { !$0.isWhitespace }.map(said.index(after:)) ?? start
            return (String(said[start..<max(start, end)]), ending)
        }

        /// The run's stop reason for a conversation the user ended so.
        public var stopReason: StopReason {
            switch self {
            case .userStop: return .userStop
            case .userTransfer: return .userTransfer
            case .userOutOfScope: return .userOutOfScope
            }
        }
    }

    /// 1 for the first turn, then 2, 3, …
    public var turn: Int
    /// What the user said; empty when a turn only ends the conversation.
    public var text: String
    public var source: Source
    /// Set when this turn ends the conversation.
    public var ends: Ending?
    /// The case script's line that made it (0 for the first), for a `script` turn: each line
    /// is said once, which a replay reads from here.
    public var line: Int?
    /// The user's model, for a turn it made.
    public var model: ModelIdentity?
    /// What the user's model call cost, when it made the turn.
    public var usage: TokenUsage?
    public var costUSD: Double?
    public var latencyUs: Int?
    /// The sampling settings the user's model was sent, when it made the turn (its temperature,
    /// token limit and seed): what a replay of the user's call depends on besides the transcript.
    public var sampling: SamplingSettings?

    public init(
        turn: Int, text: String, source: Source, ends: Ending? = nil, line: Int? = nil, model: ModelIdentity? = nil,
        usage: TokenUsage? = nil, costUSD: Double? = nil, latencyUs: Int? = nil
    ) {
        self.turn = turn
        self.text = text
        self.source = source
        self.ends = ends
        self.line = line
        self.model = model
        self.usage = usage
        self.costUSD = costUSD
        self.latencyUs = latencyUs
    }

    /// Turn `turn` saying `text` as a user says it (`Ending.parse`): a stop token in it ends the
    /// conversation and is taken out of what is said.
    public init(turn: Int, parsing text: String, source: Source, line: Int? = nil) {
        let (said, ending) = Ending.parse(text)
        self.init(turn: turn, text: said, source: source, ends: ending, line: line)
    }

    /// The most a simulated user's turn may say, in UTF-8 bytes: a longer reply is a simulator fault.
    public static let maxTextBytes = 16_384

    public init(from scanner: inout JSONScanner) throws {
        var turn: Int?
        var text: String?
        var source: Source?
        var ends: Ending?
        var line: Int?
        var model: ModelIdentity?
        var usage: TokenUsage?
        var costUSD: Double?
        var latencyUs: Int?
        var sampling: SamplingSettings?
        try scanner.readObject { scanner, key in
            switch key {
            case "turn": turn = try scanner.read()
            case "text": text = try scanner.read()
            case "source": source = try scanner.read()
            case "ends": ends = try scanner.readOptional()
            case "line": line = try scanner.readOptional()
            case "model": model = try scanner.readOptional()
            case "usage": usage = try scanner.readOptional()
            case "cost_usd": costUSD = try scanner.readOptional()
            case "latency_us": latencyUs = try scanner.readOptionalMeasure()
            case "sampling": sampling = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.turn = try required(turn, "turn")
        guard self.turn >= 1 else { throw TraceCoreError(.invalidField, "must be 1 or more, found \(self.turn)", fieldPath: "turn") }
        self.text = try required(text, "text")
        self.source = try required(source, "source")
        self.ends = ends
        self.line = line
        self.model = model
        self.usage = usage
        self.costUSD = costUSD
        self.latencyUs = latencyUs
        self.sampling = sampling
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("cost_usd", costUSD)
        object.set("ends", ends)
        object.set("latency_us", latencyUs)
        object.set("line", line)
        object.set("model", model)
        object.set("sampling", sampling)
        object.set("source", source)
        object.set("text", text)
        object.set("turn", turn)
        object.set("usage", usage)
    }
}

/// One user turn as the run state keeps it: the event's data and where it was recorded.
public struct UserTurnRecord: Sendable, Hashable {
    public var step: Int
    public var sequence: Int
    public var turn: UserTurn

    public init(step: Int, sequence: Int, turn: UserTurn) {
        self.step = step
        self.sequence = sequence
        self.turn = turn
    }
}

extension UserTurnRecord: JSONRepresentable, JSONObjectEncodable {
    public init(from scanner: inout JSONScanner) throws {
        var step: Int?
        var sequence: Int?
        var turn: UserTurn?
        try scanner.readObject { scanner, key in
            switch key {
            case "step": step = try scanner.read()
            case "seq": sequence = try scanner.read()
            case "turn": turn = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.init(step: try required(step, "step"), sequence: try required(sequence, "seq"), turn: try required(turn, "turn"))
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("seq", sequence)
        object.set("step", step)
        object.set("turn", turn)
    }
}

/// The sampling settings a model call was sent: each only when the call set it.
public struct SamplingSettings: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var temperature: Double?
    public var maxTokens: Int?
    public var seed: Int?

    public init(temperature: Double? = nil, maxTokens: Int? = nil, seed: Int? = nil) {
        self.temperature = temperature
        self.maxTokens = maxTokens
        self.seed = seed
    }

    public init(from scanner: inout JSONScanner) throws {
        var temperature: Double?
        var maxTokens: Int?
        var seed: Int?
        try scanner.readObject { scanner, key in
            switch key {
            case "temperature": temperature = try scanner.readOptional()
            case "max_tokens": maxTokens = try scanner.readOptional()
            case "seed": seed = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.init(temperature: temperature, maxTokens: maxTokens, seed: seed)
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("max_tokens", maxTokens)
        object.set("seed", seed)
        object.set("temperature", temperature)
    }
}
