public import TraceCore

/// An item the agent file gives the model besides observations: a memory or a piece of
/// evidence, by id.
public struct ContextItem: Sendable, Hashable {
    public var id: String
    public var text: String

    public init(id: String, text: String) {
        self.id = id
        self.text = text
    }
}

/// How the context packet is filled.
public struct ContextSettings: Sendable, Hashable {
    /// Tokens the packet may use, by the estimate below.
    public var tokenBudget: Int
    /// Tool outputs larger than this (encoded JSON bytes) are stored as content and referenced.
    public var inlineOutputBytes: Int
    /// Observations older than this many steps are left out as stale; nil keeps them all.
    public var maxObservationAgeSteps: Int?

    public init(tokenBudget: Int = 8_000, inlineOutputBytes: Int = 4_096, maxObservationAgeSteps: Int? = nil) {
        self.tokenBudget = tokenBudget
        self.inlineOutputBytes = inlineOutputBytes
        self.maxObservationAgeSteps = maxObservationAgeSteps
    }

    /// The documented estimate: a token per four UTF-8 bytes, rounded up.
    public static func estimateTokens(bytes: Int) -> Int { (bytes + 3) / 4 }
}

/// Builds the context packet for one decision: goal, state summary, tools disclosed after
/// policy filtering, and as many observations, evidence and memory items as the token budget
/// holds, newest observations first; everything left out is listed with the reason.
///
/// The packet depends only on the run state, the agent and stored contents, so a re-run of
/// the same log builds the same packets.
public struct ContextBuilder: Sendable {
    public var instructions: String
    public var tools: ToolRegistry
    public var policy: any Policy
    public var settings: ContextSettings
    public var memory: [ContextItem]
    public var evidence: [ContextItem]

    public init(
        instructions: String, tools: ToolRegistry, policy: any Policy, settings: ContextSettings, memory: [ContextItem] = [],
        evidence: [ContextItem] = []
    ) {
        self.instructions = instructions
        self.tools = tools
        self.policy = policy
        self.settings = settings
        self.memory = memory
        self.evidence = evidence
    }

    /// What one build produces: the packet to record and what goes to the model with it.
    public struct Built: Sendable {
        public var packet: ContextBuilt
        public var observations: [Observation]
        public var disclosedTools: [ToolSpec]
    }

    /// What earlier builds of the same run worked out, so that each build costs what changed:
    /// the observation of each finished call and its encoded size, and the tools' sizes.
    public struct Cache: Sendable {
        /// A class, so that a build hands entries around by reference: a long run's build
        /// looks at every earlier call, and copying each entry's fields was most of its cost.
        final class Entry: Sendable {
            let mark: Mark
            let observation: Observation
            let reference: ItemReference
            let size: Int
            /// Hash of the observation without its id and step, for finding duplicates.
            let resultHash: Int
            /// How the packet lists it when it does not fit the budget (the same every step).
            let budgetOmission: OmittedItem

            init(mark: Mark, observation: Observation, reference: ItemReference, size: Int, resultHash: Int, budget: Int) {
                self.mark = mark
                self.observation = observation
                self.reference = reference
                self.size = size
                self.resultHash = resultHash
                budgetOmission = ContextBuilder.budgetOmission(id: observation.callId, size: size, kind: "the observation", budget: budget)
            }
        }

        /// The call's revision when its observation was made: the fold bumps it at every change.
        typealias Mark = Int

        /// By position in the state's calls (ids may repeat in imported runs).
        var entries: [Entry?] = []
        var toolSizes: [String: Int] = [:]

        public init() {}
    }

    /// Builds the packet for the decision of step `currentStep` of `state`, reusing (and
    /// updating) what earlier builds of this run found in `cache`. `content` looks up stored
    /// content by hash (for outputs too large to sit in the log's events).
    public func build(state: RunState, step currentStep: Int, promptHash: String?, cache: inout Cache, content: (String) -> JSONValue?)
        -> Built
    {
        let goal = state.start?.goal ?? ""
        let actor = state.start?.actor
        let route = state.start?.route
        var omitted: [OmittedItem] = []
        var disclosed: [ToolSpec] = []
        for tool in tools.tools {
            let (isDisclosed, reason) = policy.discloses(tool.spec, actor: actor, route: route)
            if isDisclosed {
                disclosed.append(tool.spec)
            } else {
                omitted.append(OmittedItem(id: "tool:\(tool.name)", reason: .policy, detail: reason))
            }
        }
        let summary = Self.summary(of: state, step: currentStep)
        // A conversation's chat goes to the model with every decision (its first line is the goal).
        let chat = state.isConversation ? state.dialogue.dropFirst().reduce(0) { $0 + $1.text.utf8.count } : 0
        var used =
            instructions.utf8.count + goal.utf8.count + summary.utf8.count + chat
            + disclosed.reduce(0) { total, spec in
                if let size = cache.toolSizes[spec.name] { return total + size }
                let size = JSONWriter.encode(spec).count
                cache.toolSizes[spec.name] = size
                return total + size
            }
        // Saturating: an agent file may give any budget up to Int.max ("no limit" in effect).
        let budgetBytes = settings.tokenBudget.multipliedSaturating(by: 4)

        // Counts an item in if it fits the budget; lists it as omitted if not.
        func fits(size: Int, omission: @autoclosure () -> OmittedItem) -> Bool {
            guard used + size <= budgetBytes else {
                omitted.append(omission())
                return false
            }
            used += size
            return true
        }

        // Observations, newest first, so the most recent survive a tight budget.
        var candidates = Self.observations(of: state, cache: &cache, content: content, budget: settings.tokenBudget)
        var included: [Cache.Entry] = []
        // The newest call of each result seen so far, by the result's hash; results whose
        // hashes collide with another's wait in `collided`.
        var seen: [Int: Cache.Entry] = [:]
        seen.reserveCapacity(candidates.count)
        var collided: [Int: [Cache.Entry]] = [:]
        for candidate in candidates.reversed() {
            let step = candidate.observation.step
            if let maxAge = settings.maxObservationAgeSteps, currentStep - step > maxAge {
                omitted.append(
                    OmittedItem(
                        id: candidate.observation.callId, reason: .staleness, detail: "from step \(step), older than \(maxAge) steps"))
                continue
            }
            if let newer = Self.newerDuplicate(of: candidate, seen: &seen, collided: &collided) {
                omitted.append(Self.duplicate(candidate, of: newer))
                continue
            }
            if fits(size: candidate.size, omission: candidate.budgetOmission) { included.append(candidate) }
        }
        included.reverse()
        candidates.removeAll()

        func fit(_ items: [ContextItem], kind: String) -> [ItemReference] {
            items.filter { item in
                let size = item.id.utf8.count + item.text.utf8.count
                return fits(size: size, omission: Self.budgetOmission(id: item.id, size: size, kind: kind, budget: settings.tokenBudget))
            }
            .map { ItemReference(id: $0.id, summary: Self.shortened($0.text)) }
        }
        let evidenceReferences = fit(evidence, kind: "evidence")
        let memoryReferences = fit(memory, kind: "memory")

        let packet = ContextBuilt(
            goal: goal, stateSummary: summary, observations: included.map(\.reference), toolsDisclosed: disclosed.map(\.name),
            evidence: evidenceReferences, memory: memoryReferences, omitted: omitted,
            tokenEstimate: ContextSettings.estimateTokens(bytes: used), promptHash: promptHash)
        return Built(packet: packet, observations: included.map(\.observation), disclosedTools: disclosed)
    }

    /// The next newer call with the same call and result as `entry`, if one was seen; `entry`
    /// becomes the one the next older duplicate names.
    static func newerDuplicate(of entry: Cache.Entry, seen: inout [Int: Cache.Entry], collided: inout [Int: [Cache.Entry]]) -> Cache.Entry?
    {
        guard let first = seen[entry.resultHash] else {
            seen[entry.resultHash] = entry
            return nil
        }
        if sameResult(first.observation, entry.observation) {
            seen[entry.resultHash] = entry
            return first
        }
        var others = collided[entry.resultHash, default: []]
        defer { collided[entry.resultHash] = others }
        if let index = others.firstIndex(where: { sameResult($0.observation, entry.observation) }) {
            let newer = others[index]
            others[index] = entry
            return newer
        }
        others.append(entry)
        return nil
    }

    /// An item left out as a duplicate: it names the next newer identical call (which names the
    /// next, up to the one included), which stays the same when a later identical call arrives.
    static func duplicate(_ entry: Cache.Entry, of newer: Cache.Entry) -> OmittedItem {
        OmittedItem(id: entry.observation.callId, reason: .duplicate, detail: "same call and result as \(newer.observation.callId)")
    }

    /// An item left out for the budget. The detail says only what stays true from step to
    /// step (not the tokens left, which change as the run goes on), so that a packet differs
    /// from the one before it only where the run changed (the log writes packets as deltas).
    static func budgetOmission(id: String, size: Int, kind: String, budget: Int) -> OmittedItem {
        OmittedItem(
            id: id, reason: .budget,
            detail: "\(kind) needs \(ContextSettings.estimateTokens(bytes: size)) tokens, more than the budget of \(budget) had left")
    }

    static func sameResult(_ a: Observation, _ b: Observation) -> Bool {
        a.tool == b.tool && a.status == b.status && a.arguments == b.arguments && a.outputText == b.outputText && a.error == b.error
    }

    /// Every finished call as an observation, in proposal order; calls unchanged since the
    /// last build come from the cache.
    static func observations(of state: RunState, cache: inout Cache, content: (String) -> JSONValue?, budget: Int) -> [Cache.Entry] {
        var result: [Cache.Entry] = []
        result.reserveCapacity(state.calls.count)
        if cache.entries.count < state.calls.count {
            cache.entries += Array(repeating: nil, count: state.calls.count - cache.entries.count)
        }
        for (index, call) in state.calls.enumerated() {
            let mark = call.revision
            if let entry = cache.entries[index], entry.mark == mark {
                result.append(entry)
                continue
            }
            let status: String
            var output: JSONText?
            var error: String?
            var contentHash: String?
            if let approval = call.approval, !approval.isGranted {
                status = "denied"
                error = "a human refused this call" + (approval.reason.map { ": \($0)" } ?? "")
            } else if call.verdict?.verdict == .deny {
                status = "denied"
                error = "policy denied this call" + (call.verdict?.reason.map { ": \($0)" } ?? "")
            } else if let last = call.lastResult {
                status = last.status.rawValue
                error = last.error
                contentHash = last.contentHash
                output = last.outputText ?? last.contentHash.flatMap(content).map(JSONText.init)
            } else {
                continue
            }
            let observation = Observation(
                callId: call.id, tool: call.tool, step: call.step, arguments: call.arguments, status: status, outputText: output,
                error: error)
            var brief = "\(call.tool) \(status)"
            if let error { brief += ": \(error)" } else if let output { brief += ": " + output.string }
            var hasher = Hasher()
            hasher.combine(observation.tool)
            hasher.combine(observation.status)
            hasher.combine(observation.arguments)
            hasher.combine(observation.outputText)
            hasher.combine(observation.error)
            let entry = Cache.Entry(
                mark: mark, observation: observation,
                reference: ItemReference(id: call.id, summary: shortened(brief), contentHash: contentHash),
                size: JSONWriter.encode(observation).count, resultHash: hasher.finalize(), budget: budget)
            cache.entries[index] = entry
            result.append(entry)
        }
        return result
    }

    /// A one-paragraph summary of where the run stands.
    static func summary(of state: RunState, step: Int) -> String {
        let failed = state.counters.failedCalls
        let denied = state.counters.deniedCalls
        var text = "Step \(step). \(state.decisions.count) decisions so far. "
        text += "\(state.counters.executedCalls) tool calls executed"
        if failed > 0 { text += ", \(failed) failed" }
        if denied > 0 { text += ", \(denied) denied" }
        text += ". Tokens used: \(state.usage.totalTokens)"
        if let budget = state.start?.limits.tokenBudget { text += " of \(budget)" }
        text += "."
        return text
    }

    static func shortened(_ text: String, limit: Int = 120) -> String {
        guard text.count > limit else { return text }
        return String(text.prefix(limit - 1)) + "…"
    }
}
