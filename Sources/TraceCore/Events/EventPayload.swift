/// What happened, one case per event kind of format version 1.
///
/// `unknown` holds a kind this code does not know (written by a newer writer): it is kept
/// byte for byte through reading and rewriting, and the fold skips it.
public enum EventPayload: Sendable, Hashable {
    // The larger payloads are boxed: inline, the largest (a run's start, 337 bytes; a packet or
    // a decision, 144) set the size of every event, which a reader moves several times per
    // line, retaining each field of the payload at every move. Boxed, an event is 121 bytes (it
    // was 217) and a move retains one box: a job of `run` took about 3% less.
    indirect case runStarted(RunStarted)
    indirect case contextBuilt(ContextBuilt)
    indirect case decisionMade(DecisionMade)
    indirect case verdictGiven(VerdictGiven)
    indirect case toolIntended(ToolIntended)
    indirect case toolCompleted(ToolCompleted)
    case approvalRecorded(ApprovalRecorded)
    case stepEnded(StepEnded)
    case contentStored(ContentStored)
    case runStopped(RunStopped)
    /// This run is a fork of another from here on (`agent-eval fork`).
    indirect case runForked(RunForked)
    /// What the user of a conversation said (format version 4).
    indirect case userTurn(UserTurn)
    /// An event of a pipeline log (`PipelineEvent.kinds`).
    indirect case pipeline(PipelineEvent)
    case unknown(kind: String, data: JSONValue)

    /// Every kind of a run log this version knows, in the order the format document lists them
    /// (pipeline logs add `PipelineEvent.kinds`).
    public static let knownKinds = [
        "run_started", "context_built", "decision_made", "verdict_given", "tool_intended", "tool_completed",
        "approval_recorded", "step_ended", "content_stored", "run_stopped",
    ]

    /// Every kind a run log may hold: `knownKinds`, `run_forked`, which only a fork's log has
    /// (docs/replay.md), and `user_turn`, which only a conversation's has.
    public static let everyKind = knownKinds + ["run_forked", "user_turn"]

    /// The `kind` string of the envelope.
    public var kind: String {
        switch self {
        case .runStarted: return "run_started"
        case .contextBuilt: return "context_built"
        case .decisionMade: return "decision_made"
        case .verdictGiven: return "verdict_given"
        case .toolIntended: return "tool_intended"
        case .toolCompleted: return "tool_completed"
        case .approvalRecorded: return "approval_recorded"
        case .stepEnded: return "step_ended"
        case .contentStored: return "content_stored"
        case .runStopped: return "run_stopped"
        case .runForked: return "run_forked"
        case .userTurn: return "user_turn"
        case .pipeline(let event): return event.kind
        case .unknown(let kind, _): return kind
        }
    }

    /// The `data` object of the envelope.
    public var data: JSONValue { body.json }

    /// Appends the canonical encoding of `data`, straight from the payload.
    public func writeData(to writer: inout JSONWriter) { body.write(to: &writer) }

    /// The value `data` is the JSON form of.
    var body: any JSONEncodable {
        switch self {
        case .runStarted(let payload): return payload
        case .contextBuilt(let payload): return payload
        case .decisionMade(let payload): return payload
        case .verdictGiven(let payload): return payload
        case .toolIntended(let payload): return payload
        case .toolCompleted(let payload): return payload
        case .approvalRecorded(let payload): return payload
        case .stepEnded(let payload): return payload
        case .contentStored(let payload): return payload
        case .runStopped(let payload): return payload
        case .runForked(let payload): return payload
        case .userTurn(let payload): return payload
        case .pipeline(let event): return event.body
        case .unknown(_, let data): return data
        }
    }

    /// Decodes `data` for `kind` (of an event of envelope `version`); a kind this version does
    /// not know becomes `.unknown`.
    public init(kind: String, data: JSONValue, version: Int = Event.schemaVersion) throws {
        do {
            try self.init(decoding: kind, data, version: version)
        } catch let error as TraceCoreError {
            throw error.inside("data")
        }
    }

    private init(decoding kind: String, _ data: JSONValue, version: Int) throws {
        let bytes = JSONWriter.encode(data)
        self = try bytes.withUnsafeBytes { buffer in
            try JSONScanner.scan(buffer) { try EventPayload(kind: kind, from: &$0, version: version) }
        }
    }

    /// Reads the `data` of `kind` (of an event of envelope `version`) straight from JSON
    /// text; a kind this version does not know is kept as `.unknown` with its data as it is.
    public init(kind: String, from scanner: inout JSONScanner, version: Int = Event.schemaVersion) throws {
        try self.init(kind: kind, at: EventPayload.runKinds.strings.firstIndex(of: kind), from: &scanner, version: version)
    }

    /// `everyKind`, which a reader finds an envelope's `kind` among by its bytes
    /// (`JSONScanner.readString(among:)`): its place there chooses the payload's type below
    /// without comparing the name with each kind in turn.
    public static let runKinds = KnownStrings(everyKind)
    /// `context_built`'s place in `runKinds`.
    static let contextBuiltKind = 1

    /// `init(kind:from:version:)` where `known` is `kind`'s place in `runKinds` (nil for any
    /// other kind).
    init(kind: String, at known: Int?, from scanner: inout JSONScanner, version: Int) throws {
        // The cases in `everyKind`'s order.
        switch known {
        case 0: self = .runStarted(try RunStarted(from: &scanner))
        case 1: self = .contextBuilt(try ContextBuilt(from: &scanner, version: version))
        case 2: self = .decisionMade(try DecisionMade(from: &scanner))
        case 3: self = .verdictGiven(try VerdictGiven(from: &scanner))
        case 4: self = .toolIntended(try ToolIntended(from: &scanner))
        case 5: self = .toolCompleted(try ToolCompleted(from: &scanner))
        case 6: self = .approvalRecorded(try ApprovalRecorded(from: &scanner))
        case 7: self = .stepEnded(try StepEnded(from: &scanner))
        case 8: self = .contentStored(try ContentStored(from: &scanner))
        case 9: self = .runStopped(try RunStopped(from: &scanner, version: version))
        case 10: self = .runForked(try RunForked(from: &scanner, version: version))
        // An older line naming the kind is a kind it did not know: kept and skipped as such.
        case 11 where version >= Event.conversationVersion: self = .userTurn(try UserTurn(from: &scanner))
        default:
            if let event = try PipelineEvent.decode(kind: kind, from: &scanner) {
                self = .pipeline(event)
            } else {
                self = .unknown(kind: kind, data: try scanner.readValue())
            }
        }
    }

    /// The least envelope version a line holding this payload says: 2 for a delta packet (in a
    /// log whose lines link), 4 for a conversation's user turn and ending, else 1.
    public var leastVersion: Int {
        switch self {
        case .contextBuilt(let packet) where packet.delta != nil: return Event.deltaVersion
        case .userTurn: return Event.conversationVersion
        case .runStopped(let stop) where stop.reason.isConversationEnding: return Event.conversationVersion
        case .runForked(let forked) where forked.edits.contains(where: { $0.kind == .say }): return Event.conversationVersion
        default: return Event.schemaVersion
        }
    }

    /// Whether this event begins a log: `run_started`, or `pipeline_started` for a pipeline log.
    public var isStart: Bool {
        switch self {
        case .runStarted, .pipeline(.started): return true
        default: return false
        }
    }

    /// Whether this event ends a run or a pipeline (the writer closes the member after it).
    public var isStop: Bool {
        switch self {
        case .runStopped, .pipeline(.stopped): return true
        default: return false
        }
    }

    /// Whether the writer must make the log durable right after this event: before a tool
    /// runs, when a human's approval is recorded, when a conversation's user speaks, at a step's
    /// end and at the run's end.
    public var isDurabilityPoint: Bool {
        switch self {
        // A user turn is what the agent acts on next: a kill after it must not lose it.
        case .toolIntended, .approvalRecorded, .stepEnded, .runStopped, .userTurn: return true
        case .pipeline(let event): return event.isDurabilityPoint
        default: return false
        }
    }
}
