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
        try scanner.readObject(known: itemNames) { scanner, key in
            switch key {
            case "id": id = try scanner.read()
            case "summary": summary = try scanner.readOptional()
            case "content_hash": contentHash = try scanner.readOptionalHash()
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
        try scanner.readObject(known: omittedNames) { scanner, key in
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
    /// Set for a packet read from a delta line (format version 2): its lists are in the delta,
    /// as changes to the previous packet's, and the five list members above are empty until a
    /// `ContextPacketResolver` makes the packet whole. Set by `LogWriter` on the lines it writes.
    public var delta: ContextDelta?

    public init(
        goal: String, stateSummary: String, observations: [ItemReference] = [], toolsDisclosed: [String] = [],
        evidence: [ItemReference] = [], memory: [ItemReference] = [], omitted: [OmittedItem] = [],
        tokenEstimate: Int, promptHash: String? = nil, delta: ContextDelta? = nil
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
        self.delta = delta
    }

    public init(from scanner: inout JSONScanner) throws {
        try self.init(from: &scanner, version: 1)
    }

    /// Reads a packet written under envelope `version`: from version 2 on, a packet with
    /// `base_seq` is a delta, and its lists are edits of the previous packet's.
    public init(from scanner: inout JSONScanner, version: Int) throws {
        // Version 1 lists go straight into the packet's lists (the reader's hot path); version
        // 2 lists are read as edits and become items or a delta below.
        let readsEdits = version >= 2
        var goal: String?
        var stateSummary: String?
        var observations: [ItemReference] = []
        var toolsDisclosed: [String] = []
        var evidence: [ItemReference] = []
        var memory: [ItemReference] = []
        var omitted: [OmittedItem] = []
        var tokenEstimate: Int?
        var promptHash: String?
        var baseSequence: Int?
        // Version 2 lists: items while every element is one, edits from the first copy on.
        var observationEdits = EditedList<ItemReference>()
        var toolEdits = EditedList<String>()
        var evidenceEdits = EditedList<ItemReference>()
        var memoryEdits = EditedList<ItemReference>()
        var omittedEdits = EditedList<OmittedItem>()
        try scanner.readObject(known: packetNames) { scanner, key in
            switch key {
            case "goal": goal = try scanner.read()
            case "state_summary": stateSummary = try scanner.read()
            case "observations":
                if readsEdits { observationEdits = try EditedList(from: &scanner) } else { observations = try scanner.readList() }
            case "tools_disclosed":
                if readsEdits { toolEdits = try EditedList(from: &scanner) } else { toolsDisclosed = try scanner.readList() }
            case "evidence": if readsEdits { evidenceEdits = try EditedList(from: &scanner) } else { evidence = try scanner.readList() }
            case "memory": if readsEdits { memoryEdits = try EditedList(from: &scanner) } else { memory = try scanner.readList() }
            case "omitted": if readsEdits { omittedEdits = try EditedList(from: &scanner) } else { omitted = try scanner.readList() }
            case "token_estimate": tokenEstimate = try scanner.read()
            case "prompt_hash": promptHash = try scanner.readOptionalHash()
            case "base_seq" where readsEdits: baseSequence = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        var delta: ContextDelta?
        if let baseSequence {
            guard baseSequence >= 0 else {
                throw TraceCoreError(
                    .invalidField, "must be the seq of an earlier context_built, found \(baseSequence)", fieldPath: "base_seq")
            }
            delta = ContextDelta(
                baseSequence: baseSequence, observations: observationEdits.edits, toolsDisclosed: toolEdits.edits,
                evidence: evidenceEdits.edits, memory: memoryEdits.edits, omitted: omittedEdits.edits)
        } else if readsEdits {
            // A whole packet under version 2: its lists hold items alone.
            observations = try observationEdits.itemsAlone("observations")
            toolsDisclosed = try toolEdits.itemsAlone("tools_disclosed")
            evidence = try evidenceEdits.itemsAlone("evidence")
            memory = try memoryEdits.itemsAlone("memory")
            omitted = try omittedEdits.itemsAlone("omitted")
        }
        self.init(
            goal: try required(goal, "goal"), stateSummary: try required(stateSummary, "state_summary"), observations: observations,
            toolsDisclosed: toolsDisclosed, evidence: evidence, memory: memory, omitted: omitted,
            tokenEstimate: try required(tokenEstimate, "token_estimate"), promptHash: promptHash, delta: delta)
    }

    public func members(into object: inout some JSONMemberSink) {
        if let delta {
            object.set("base_seq", delta.baseSequence)
            object.set("evidence", delta.evidence)
            object.set("goal", goal)
            object.set("memory", delta.memory)
            object.set("observations", delta.observations)
            object.set("omitted", delta.omitted)
        } else {
            object.set("evidence", evidence)
            object.set("goal", goal)
            object.set("memory", memory)
            object.set("observations", observations)
            object.set("omitted", omitted)
        }
        object.set("prompt_hash", promptHash)
        object.set("state_summary", stateSummary)
        object.set("token_estimate", tokenEstimate)
        if let delta { object.set("tools_disclosed", delta.toolsDisclosed) } else { object.set("tools_disclosed", toolsDisclosed) }
    }
}

/// One list of a packet written under version 2 as it is read: its items alone while every
/// element is an item (every list of a whole packet, and the new part of a delta's), its edits
/// from the first copy on. A whole packet's lists are then read straight into items, without
/// an edit made for each item and a second list of the items made from them.
private struct EditedList<Item: JSONRepresentable & Hashable> {
    private var items: [Item] = []
    private var copies: [ListEdit<Item>]?
    /// The place of the first copy, if any.
    private var firstCopy: Int?

    init() {}

    /// Reads the list (`null`: empty), each element an item or a copy `[start, count]`
    /// (`ListEdit`), with the same checks and errors.
    init(from scanner: inout JSONScanner) throws {
        if try scanner.readNull() { return }
        var items: [Item] = []
        var copies: [ListEdit<Item>]?
        var firstCopy: Int?
        try scanner.forEachElement { scanner, position in
            if scanner.nextIsArray {
                let copy = try ListEdit<Item>(from: &scanner)
                if copies == nil {
                    copies = items.map { .item($0) }
                    items = []
                    firstCopy = position
                }
                copies?.append(copy)
            } else if copies != nil {
                copies?.append(.item(try Item(from: &scanner)))
            } else {
                items.append(try Item(from: &scanner))
            }
        }
        (self.items, self.copies, self.firstCopy) = (items, copies, firstCopy)
    }

    /// The list as edits: what a delta holds.
    var edits: [ListEdit<Item>] { copies ?? items.map { .item($0) } }

    /// The list's items; throws for a list that copies (the packet, `name`'s owner, has no base).
    func itemsAlone(_ name: String) throws -> [Item] {
        if let firstCopy {
            throw TraceCoreError(
                .invalidField, "copies from a base packet, but the packet has no base_seq", fieldPath: "\(name)[\(firstCopy)]")
        }
        return items
    }
}

/// The member names `ItemReference`'s reader knows, in the order the writer writes them.
private let itemNames = MemberNames(["content_hash", "id", "summary"])

/// The member names `OmittedItem`'s reader knows, in the order the writer writes them.
private let omittedNames = MemberNames(["detail", "id", "reason"])

/// The member names `ContextBuilt`'s reader knows, in the order the writer writes them.
private let packetNames = MemberNames([
    "base_seq", "evidence", "goal", "memory", "observations", "omitted", "prompt_hash", "state_summary", "token_estimate",
    "tools_disclosed",
])
