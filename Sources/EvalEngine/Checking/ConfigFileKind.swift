public import ConfigFile

/// What an agent-eval file is, told from its top-level keys (docs/eval-cases.md, "Which files
/// are cases"): cases, agents, model scripts and pipelines can share a folder.
public enum ConfigFileKind: String, Sendable, Hashable, CaseIterable {
    /// A case (a mapping with `caseId` or `expected`) or a list of them.
    case cases
    /// An agent file: a mapping with `model`.
    case agent
    /// A scripted model: a mapping with `decisions` or `rules`, no `model`, and at most one key
    /// a script does not have.
    case modelScript = "model script"
    /// A pipeline file: a mapping with `pipeline` and `tasks`.
    case pipeline
    /// The project's quarantine file: a mapping whose only key is `quarantine`.
    case quarantine
    /// A policy file (`mcp-proxy --policy`, `audit --policy`, a case's `policy:`): a mapping with
    /// `policy` and no `model`, and nothing but `side_effects` beside it.
    case policy

    /// The kind of a parsed file, or nil when it is none of these (a cassette, a schema, a
    /// baseline, data a tool reads).
    public init?(of root: ConfigNode) {
        switch root.content {
        case .mapping:
            let keys = Set(root.keys)
            if Self.isCase(keys) {
                self = .cases
            } else if keys.contains("pipeline") && keys.contains("tasks") {
                self = .pipeline
            } else if keys == ["quarantine"] {
                self = .quarantine
            } else if keys.contains("policy"), keys.isSubset(of: ["policy", "side_effects"]) {
                self = .policy
            } else if keys.contains("model") {
                self = .agent
            } else if keys.contains("decisions") || keys.contains("rules"),
                keys.subtracting(["name", "decisions", "rules"]).count <= 1
            {
                // A misspelt key is reported, but a file of other data that happens to have
                // a `decisions` member (a saved state) is not a script.
                self = .modelScript
            } else {
                return nil
            }
        case .sequence(let items):
            // A list of cases; one item that looks like a case is enough for its errors to be
            // reported rather than the file skipped.
            guard items.contains(where: { Self.isCase(Set($0.keys)) }) else { return nil }
            self = .cases
        case .scalar:
            return nil
        }
    }

    private static func isCase(_ keys: Set<String>) -> Bool { keys.contains("caseId") || keys.contains("expected") }
}

extension ConfigNode {
    /// The keys of a mapping (none for a list or a scalar).
    var keys: [String] {
        guard case .mapping(let pairs) = content else { return [] }
        return pairs.map(\.key)
    }
}
