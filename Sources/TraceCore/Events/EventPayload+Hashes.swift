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
