extension EventPayload {
    /// The first member typed `hash` (docs/log-format.md §4) whose value is not `sha256:` and 64
    /// lowercase hex digits, as a field path and the value; nil when every one is. Readers reject
    /// such an event, so the writer asks this before it writes one.
    public var malformedHash: (fieldPath: String, value: String)? {
        func check(_ value: String?, _ path: String) -> (fieldPath: String, value: String)? {
            guard let value, !ContentHash.isSHA256(value) else { return nil }
            return (path, value)
        }
        func check(_ items: [ItemReference], _ list: String) -> (fieldPath: String, value: String)? {
            for (index, item) in items.enumerated() {
                if let found = check(item.contentHash, "data.\(list)[\(index)].content_hash") { return found }
            }
            return nil
        }
        switch self {
        case .runStarted(let started):
            return check(started.agent.configDigest, "data.agent.config_digest") ?? check(started.policy.digest, "data.policy.digest")
        case .contextBuilt(let packet):
            return check(packet.observations, "observations") ?? check(packet.evidence, "evidence") ?? check(packet.memory, "memory")
                ?? check(packet.promptHash, "data.prompt_hash")
        case .toolCompleted(let completed):
            return check(completed.contentHash, "data.content_hash")
        case .stepEnded(let ended):
            return check(ended.stateDigest, "data.state_digest")
        case .contentStored(let content):
            return check(content.hash, "data.hash")
        case .runForked(let forked):
            return check(forked.agent?.configDigest, "data.agent.config_digest")
        case .decisionMade, .verdictGiven, .toolIntended, .approvalRecorded, .runStopped, .userTurn, .pipeline, .unknown:
            return nil
        }
    }
}

extension EventPayload {
    /// The payload with every member that names a stored content by its hash — a packet's items
    /// and prompt, a result's `content_hash`, an attempt's `partial_reply` — renamed where
    /// `renamed` gives another hash; nil when none is. Nothing else is touched: no text, no body.
    public func renamingContentHashes(_ renamed: (String) -> String?) -> EventPayload? {
        var isChanged = false
        func rename(_ hash: inout String?) {
            guard let old = hash, let new = renamed(old), new != old else { return }
            hash = new
            isChanged = true
        }
        func rename(_ items: inout [ItemReference]) {
            for index in items.indices { rename(&items[index].contentHash) }
        }
        var payload = self
        switch payload {
        case .contextBuilt(var packet):
            rename(&packet.observations)
            rename(&packet.evidence)
            rename(&packet.memory)
            rename(&packet.promptHash)
            payload = .contextBuilt(packet)
        case .toolCompleted(var completed):
            rename(&completed.contentHash)
            payload = .toolCompleted(completed)
        case .decisionMade(var made):
            for index in made.attempts.indices { rename(&made.attempts[index].partialReply) }
            payload = .decisionMade(made)
        default:
            return nil
        }
        return isChanged ? payload : nil
    }
}
