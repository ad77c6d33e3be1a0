/// A reference to an item of the working set: an observation, a piece of evidence, a memory.
public struct ItemReference: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var id: String
    /// What the model was shown in place of the whole item, if anything.
    public var summary: String?
    /// `sha256:<hex>` of a `content_stored` event holding the full item.
    public var contentHash: String?

    public init(id: String, summary: String? = nil, contentHash: String? = nil) {
        self.id = id
        self.summary = summary
        self.contentHash = contentHash
    }

    public init(from scanner: inout JSONScanner) throws {
        var id: String?
        var summary: String?
        var contentHash: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "id": id = try scanner.read()
            case "summary": summary = try scanner.readOptional()
            case "content_hash": contentHash = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.id = try required(id, "id")
        self.summary = summary
        self.contentHash = contentHash
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("content_hash", contentHash)
        object.set("id", id)
        object.set("summary", summary)
    }
}

/// Why an item was left out of a context packet.
public enum OmissionReason: String, JSONEnum {
    /// It did not fit in the token budget.
    case budget
    /// Policy withholds it (a tool not disclosed, a field redacted).
    case policy
    /// It is out of date.
    case staleness
    /// It repeats something already included.
    case duplicate
}

/// An item the context builder left out, and why.
public struct OmittedItem: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var id: String
    public var reason: OmissionReason
    public var detail: String?

    public init(id: String, reason: OmissionReason, detail: String? = nil) {
        self.id = id
        self.reason = reason
        self.detail = detail
    }

    public init(from scanner: inout JSONScanner) throws {
        var id: String?
        var reason: OmissionReason?
        var detail: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "id": id = try scanner.read()
            case "reason": reason = try scanner.read()
            case "detail": detail = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.id = try required(id, "id")
        self.reason = try required(reason, "reason")
        self.detail = detail
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("detail", detail)
        object.set("id", id)
        object.set("reason", reason)
    }
}

/// `context_built`: the working set for one decision, and what was left out of it.
public struct ContextBuilt: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var goal: String
    public var stateSummary: String
    public var observations: [ItemReference]
    /// Names of the tools shown to the model, after policy filtering.
    public var toolsDisclosed: [String]
    public var evidence: [ItemReference]
    public var memory: [ItemReference]
    public var omitted: [OmittedItem]
    /// The context builder's token estimate of the packet (see the log format for the rule).
    public var tokenEstimate: Int
    /// `sha256:<hex>` of a `content_stored` event holding the rendered prompt, if stored.
    public var promptHash: String?

    public init(
        goal: String, stateSummary: String, observations: [ItemReference] = [], toolsDisclosed: [String] = [],
        evidence: [ItemReference] = [], memory: [ItemReference] = [], omitted: [OmittedItem] = [],
        tokenEstimate: Int, promptHash: String? = nil
    ) {
        self.goal = goal
        self.stateSummary = stateSummary
        self.observations = observations
        self.toolsDisclosed = toolsDisclosed
        self.evidence = evidence
        self.memory = memory
        self.omitted = omitted
        self.tokenEstimate = tokenEstimate
        self.promptHash = promptHash
    }

    public init(from scanner: inout JSONScanner) throws {
        var goal: String?
        var stateSummary: String?
        var observations: [ItemReference] = []
        var toolsDisclosed: [String] = []
        var evidence: [ItemReference] = []
        var memory: [ItemReference] = []
        var omitted: [OmittedItem] = []
        var tokenEstimate: Int?
        var promptHash: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "goal": goal = try scanner.read()
            case "state_summary": stateSummary = try scanner.read()
            case "observations": observations = try scanner.readList()
            case "tools_disclosed": toolsDisclosed = try scanner.readList()
            case "evidence": evidence = try scanner.readList()
            case "memory": memory = try scanner.readList()
            case "omitted": omitted = try scanner.readList()
            case "token_estimate": tokenEstimate = try scanner.read()
            case "prompt_hash": promptHash = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.goal = try required(goal, "goal")
        self.stateSummary = try required(stateSummary, "state_summary")
        self.observations = observations
        self.toolsDisclosed = toolsDisclosed
        self.evidence = evidence
        self.memory = memory
        self.omitted = omitted
        self.tokenEstimate = try required(tokenEstimate, "token_estimate")
        self.promptHash = promptHash
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("evidence", evidence)
        object.set("goal", goal)
        object.set("memory", memory)
        object.set("observations", observations)
        object.set("omitted", omitted)
        object.set("prompt_hash", promptHash)
        object.set("state_summary", stateSummary)
        object.set("token_estimate", tokenEstimate)
        object.set("tools_disclosed", toolsDisclosed)
    }
}
