/// A state saved and loaded again: what caches of folded logs (the catalog's fact cache, an
/// interrupted index) store instead of reading the log a second time.
///
/// The snapshot is `json` with the start in full (`RunStarted.json`, tool servers included,
/// where `json` keeps the state form). Loading it gives a state equal to the one saved (`==`),
/// with the counters rebuilt from its lists.
extension RunState {
    /// The snapshot: every member, the start in full.
    public var snapshotJSON: JSONValue {
        var lists = PlainLists(startInFull: true)
        return canonicalJSON(&lists)
    }

    /// The snapshot's canonical bytes, written straight from the state: what
    /// `JSONWriter.encode(snapshotJSON)` gives, without building the tree (a cache stores one
    /// per log it reads).
    public func writeSnapshot(to writer: inout JSONWriter) {
        var lists = SnapshotLists()
        writer.writeObject { canonicalMembers(into: &$0, &lists) }
    }

    /// Loads a snapshot from JSON text.
    public init(snapshotText bytes: UnsafeRawBufferPointer) throws {
        self = try JSONScanner.scan(bytes) { try RunState(snapshot: &$0) }
    }

    /// Loads a snapshot.
    public init(snapshot scanner: inout JSONScanner) throws {
        self.init()
        var state = self
        try scanner.readObject { scanner, key in
            switch key {
            case "run_id": state.runId = try scanner.readOptional()
            case "start": state.start = try scanner.readOptional()
            case "started_at_us": state.startedAtUs = try scanner.readOptional()
            case "last_event_at_us": state.lastEventAtUs = try scanner.readOptional()
            case "event_count": state.eventCount = try scanner.read()
            case "step": state.step = try scanner.read()
            case "steps_completed": state.stepsCompleted = try scanner.read()
            case "context_packet_count": state.contextPacketCount = try scanner.read()
            case "last_token_estimate": state.lastTokenEstimate = try scanner.readOptional()
            case "decisions": state.decisions = try scanner.readList()
            case "calls": state.calls = try scanner.readList()
            case "usage": state.usage = try scanner.read()
            case "contents": state.contents = try scanner.readList()
            case "last_state_digest": state.lastStateDigest = try scanner.readOptional()
            case "stop": state.stop = try scanner.readOptional()
            case "resume_count": state.resumeCount = try scanner.read()
            case "forked": state.forked = try scanner.readOptional()
            case "unknown_event_count": state.unknownEventCount = try scanner.read()
            case "anomalies": state.anomalies = try scanner.readList()
            case "user_turns": state.userTurns = try scanner.readList()
            default: try scanner.skipValue()
            }
        }
        state.counters.invalidDecisions = state.decisions.count { if case .invalid = $0.outcome { true } else { false } }
        for call in state.calls { state.counters.update(from: .nothing, to: .init(call)) }
        self = state
    }
}

extension RunCounters.CallShare {
    /// What a call that is not there contributes.
    static let nothing = RunCounters.CallShare(executed: 0, denied: 0, awaiting: 0, failed: 0, failedCall: 0)

    init(executed: Int, denied: Int, awaiting: Int, failed: Int, failedCall: Int) {
        (self.executed, self.denied, self.awaiting, self.failed, self.failedCall) = (executed, denied, awaiting, failed, failedCall)
    }
}

extension DecisionRecord: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        var step: Int?
        var sequence: Int?
        var outcome: DecisionMade.Outcome?
        var usage: TokenUsage?
        var isAside: Bool?
        try scanner.readObject { scanner, key in
            switch key {
            case "aside": isAside = try scanner.readOptional()
            case "step": step = try scanner.read()
            case "seq": sequence = try scanner.read()
            case "decision": outcome = .valid(try scanner.read())
            case "invalid": outcome = .invalid(try scanner.read())
            case "usage": usage = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.init(
            step: try required(step, "step"), sequence: try required(sequence, "seq"), outcome: try required(outcome, "decision"),
            usage: usage, isAside: isAside ?? false)
    }
}

extension ToolCallRecord: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        var id: String?
        var tool: String?
        var step: Int?
        var arguments: JSONText?
        var verdict: VerdictGiven?
        var approval: ApprovalRecorded?
        var attempts = 0
        var results: [ToolCompleted] = []
        try scanner.readObject { scanner, key in
            switch key {
            case "id": id = try scanner.read()
            case "tool": tool = try scanner.read()
            case "step": step = try scanner.read()
            case "arguments": arguments = try scanner.read()
            case "verdict": verdict = try scanner.readOptional()
            case "approval": approval = try scanner.readOptional()
            case "attempts": attempts = try scanner.read()
            case "results": results = try scanner.readList()
            default: try scanner.skipValue()
            }
        }
        self.init(
            id: try required(id, "id"), tool: try required(tool, "tool"), step: try required(step, "step"),
            argumentsText: try required(arguments, "arguments"))
        self.verdict = verdict
        self.approval = approval
        self.attempts = attempts
        self.results = results
    }
}

extension ResourceUsage: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        self.init()
        var usage = self
        try scanner.readObject { scanner, key in
            switch key {
            case "input_tokens": usage.inputTokens = try scanner.read()
            case "output_tokens": usage.outputTokens = try scanner.read()
            case "cost_usd": usage.costUSD = try scanner.read()
            case "model_calls": usage.modelCalls = try scanner.read()
            case "model_latency_us": usage.modelLatencyUs = try scanner.read()
            case "tool_attempts": usage.toolAttempts = try scanner.read()
            case "tool_time_us": usage.toolTimeUs = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self = usage
    }
}

extension ContentReference: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        var hash: String?
        var mediaType: String?
        var byteCount: Int?
        try scanner.readObject { scanner, key in
            switch key {
            case "hash": hash = try scanner.read()
            case "media_type": mediaType = try scanner.read()
            case "byte_count": byteCount = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.init(
            hash: try required(hash, "hash"), mediaType: try required(mediaType, "media_type"),
            byteCount: try required(byteCount, "byte_count"))
    }
}

extension Anomaly: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        var sequence: Int?
        var message: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "seq": sequence = try scanner.read()
            case "message": message = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.init(sequence: try required(sequence, "seq"), message: try required(message, "message"))
    }
}

/// The snapshot's members as bytes: the start in full, each list encoded as it stands.
private struct SnapshotLists: StateListEncoder {
    func start(_ start: RunStarted) -> RunStarted { start }
    func decisions(_ decisions: [DecisionRecord]) -> EncodedList { EncodedList(decisions) }
    func calls(_ calls: [ToolCallRecord]) -> EncodedList { EncodedList(calls) }
    func contents(_ contents: [ContentReference]) -> EncodedList { EncodedList(contents) }
    func anomalies(_ anomalies: [Anomaly]) -> EncodedList { EncodedList(anomalies) }
    func userTurns(_ turns: [UserTurnRecord]) -> EncodedList { EncodedList(turns) }
}

/// A list already written as canonical JSON.
private struct EncodedList: JSONEncodable {
    let bytes: [UInt8]

    init(_ elements: [some JSONEncodable]) {
        var writer = JSONWriter(capacity: 1024)
        elements.write(to: &writer)
        bytes = writer.bytes
    }

    var json: JSONValue { (try? JSONParser.parse(bytes)) ?? .array([]) }

    func write(to writer: inout JSONWriter) { writer.append(contentsOf: bytes) }
}
