/// `run_forked`: this run is a fork of another (`agent-eval fork`, docs/replay.md "What if").
///
/// The log holds the parent's events up to the fork point — the same payloads, steps and times,
/// rewritten under this run's id and hash chain — then this event, then what the fork did live.
/// `parentHead` is the hash of the parent's last copied event line, so anyone holding the parent
/// can check the copy: the parent's events up to the one with that hash carry the same payloads.
/// The fold applies the edits that change the state (a tool result replaced, the goal restated);
/// the others (a model reply given, a human's approval, a tool answering from a fixture) act on
/// the live continuation and show in the events after this one.
public struct RunForked: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var parentRunId: String
    /// SHA-256 (hex) of the parent's last event line that was copied.
    public var parentHead: String
    /// The parent's step the fork continues from: the copy holds the parent's steps up to it.
    public var step: Int
    /// The parent's log as it was named when forking (information only: a log can move).
    public var parentLog: String?
    public var edits: [ForkEdit]
    /// The agent and model the fork goes on with (the copied `run_started` names the parent's).
    public var agent: AgentIdentity?
    public var model: ModelIdentity?

    public init(
        parentRunId: String, parentHead: String, step: Int, parentLog: String? = nil, edits: [ForkEdit] = [],
        agent: AgentIdentity? = nil, model: ModelIdentity? = nil
    ) {
        self.parentRunId = parentRunId
        self.parentHead = parentHead
        self.step = step
        self.parentLog = parentLog
        self.edits = edits
        self.agent = agent
        self.model = model
    }

    public init(from scanner: inout JSONScanner) throws {
        try self.init(from: &scanner, version: Event.conversationVersion)
    }

    /// Reads a fork of an event of envelope `version`: a `say` edit needs version 4.
    public init(from scanner: inout JSONScanner, version: Int) throws {
        var parentRunId: String?
        var parentHead: String?
        var step: Int?
        var parentLog: String?
        var edits: [ForkEdit] = []
        var agent: AgentIdentity?
        var model: ModelIdentity?
        try scanner.readObject { scanner, key in
            switch key {
            case "parent_run_id": parentRunId = try scanner.read()
            case "parent_head": parentHead = try scanner.read()
            case "step": step = try scanner.read()
            case "parent_log": parentLog = try scanner.readOptional()
            case "edits": edits = try scanner.readArray { try ForkEdit(from: &$0) }
            case "agent": agent = try scanner.readOptional()
            case "model": model = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        if version < Event.conversationVersion, let index = edits.firstIndex(where: { $0.kind == .say }) {
            throw TraceCoreError(
                .invalidField, "is \"say\", a conversation's edit, which only a version 4 line may record",
                fieldPath: "edits[\(index)].kind")
        }
        self.parentRunId = try required(parentRunId, "parent_run_id")
        self.parentHead = try required(parentHead, "parent_head")
        self.step = try required(step, "step")
        self.parentLog = parentLog
        self.edits = edits
        self.agent = agent
        self.model = model
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("agent", agent)
        object.set("edits", edits)
        object.set("model", model)
        object.set("parent_head", parentHead)
        object.set("parent_log", parentLog)
        object.set("parent_run_id", parentRunId)
        object.set("step", step)
    }
}

/// One change a fork makes to its parent's run.
public struct ForkEdit: JSONRepresentable, JSONObjectEncodable, Hashable {
    public enum Kind: String, JSONEnum {
        /// A tool result replaced (`value` the output): the call's last result becomes
        /// `{call_id, tool, attempt, status: ok, output, duration_us: 0}`.
        case result
        /// A tool result replaced by a failure (`text` the error): `status: error`, `error`.
        case error
        /// The model's reply at `step` given (`text`, parsed like any reply) instead of asked for.
        case decision
        /// A call waiting for approval granted or refused by a human (`approval_recorded` follows).
        case approve, deny
        /// The goal restated (`text`).
        case input
        /// `tool` answers from a fixture from the fork on (`value` its responses).
        case toolFixture = "tool_fixture"
        /// A conversation's user says `text` at `step` instead of the parent's turn there
        /// (format version 4: a `run_forked` holding it is a version 4 line; `user_turn` follows).
        case say
    }

    public var kind: Kind
    public var callId: String?
    public var step: Int?
    public var tool: String?
    public var text: String?
    public var value: JSONValue?

    public init(
        kind: Kind, callId: String? = nil, step: Int? = nil, tool: String? = nil, text: String? = nil, value: JSONValue? = nil
    ) {
        self.kind = kind
        self.callId = callId
        self.step = step
        self.tool = tool
        self.text = text
        self.value = value
    }

    public init(from scanner: inout JSONScanner) throws {
        var kind: Kind?
        var edit = ForkEdit(kind: .input)
        try scanner.readObject { scanner, key in
            switch key {
            case "kind": kind = try scanner.read()
            case "call_id": edit.callId = try scanner.readOptional()
            case "step": edit.step = try scanner.readOptional()
            case "tool": edit.tool = try scanner.readOptional()
            case "text": edit.text = try scanner.readOptional()
            case "value": edit.value = try scanner.readValue()
            default: try scanner.skipValue()
            }
        }
        edit.kind = try required(kind, "kind")
        self = edit
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("call_id", callId)
        object.set("kind", kind)
        object.set("step", step)
        object.set("text", text)
        object.set("tool", tool)
        object.set("value", value)
    }

    /// The edit on one line, as `fork` and `replay` show it.
    public var summary: String {
        switch kind {
        case .result: return "result of \(callId ?? "?") replaced by \(JSONWriter.encodeString(value ?? .null))"
        case .error: return "result of \(callId ?? "?") replaced by the error \"\(text ?? "")\""
        case .decision: return "model reply at step \(step ?? 0) given: \(text ?? "")"
        case .approve: return "\(callId ?? "?") approved"
        case .deny: return "\(callId ?? "?") refused"
        case .input: return "goal restated: \(text ?? "")"
        case .toolFixture: return "\(tool ?? "?") answers from a fixture"
        case .say: return "the user says at step \(step ?? 0): \(text ?? "")"
        }
    }
}
