public import ConfigFile
public import TraceCore

/// A policy on its own, for tools the runtime does not define (`agent-eval mcp-proxy --policy
/// FILE`): the agent file's `policy:` block, read by the same code, and the side effect of each
/// tool, which an agent file gives per tool and a server may not say.
///
/// ```yaml
/// policy:                      # exactly an agent file's policy block (docs/agent-files.md)
///   default: allow
///   rules:
///     - id: no-deletes
///       when: {tool: "delete_*"}
///       verdict: deny
/// side_effects:                # tool name or glob → read, draft or write; the first match wins
///   get_*: read
///   refund_order: write
/// ```
///
/// A tool that no `side_effects` pattern names takes what its server's annotations say
/// (`ServedTool.sideEffect(mcpAnnotations:)`), and `write` when they say nothing: a tool of
/// unknown effect is treated as the most dangerous kind.
public struct PolicyFile: Sendable {
    public var policy: RulePolicy
    /// Tool name patterns and the side effect they give, in the file's order.
    public var sideEffects: [(pattern: Glob, effect: SideEffect)]

    public init(policy: RulePolicy, sideEffects: [(pattern: Glob, effect: SideEffect)] = []) {
        self.policy = policy
        self.sideEffects = sideEffects
    }

    /// The policy when no file is given: every call allowed (rule `default`), recorded all the same.
    public static let allowAll = PolicyFile(
        policy: RulePolicy(name: "allow-all (no --policy)", rules: [], defaultDecision: PolicyDecision(.allow, rule: "default")))

    /// Reads the file at `path`; throws every error in it, each at its line and column.
    public static func load(path: String) throws(ConfigErrors) -> PolicyFile {
        let root = try ConfigNode.loadReportingAll(path: path)
        var errors = ConfigErrors([])
        guard var fields = errors.collect({ () throws(ConfigError) in try root.mapping("the policy file") }) else { throw errors }
        var references: [ToolReference] = []
        // The tools are the server's, not known here: every name a rule gives is accepted
        // (`servers` non-empty turns "unknown tool" into a reference nobody checks).
        let policy = errors.collect { () throws(ConfigError) in
            try fields.required("policy", hint: "the file holds a policy: block as in an agent file (docs/agent-files.md)")
        }.flatMap { node in
            AgentFile.readPolicy(node, toolNames: [], known: [], servers: ["*"], references: &references, errors: &errors)
        }
        var sideEffects: [(pattern: Glob, effect: SideEffect)] = []
        if let node = fields.optional("side_effects"),
            let pairs = errors.collect({ () throws(ConfigError) in try node.mapping("side_effects").pairs })
        {
            for pair in pairs {
                errors.collect { () throws(ConfigError) in
                    sideEffects.append((Glob(pair.key), try pair.value.choice("side_effects \"\(pair.key)\"")))
                }
            }
        }
        errors.errors.append(contentsOf: fields.unknownKeys(in: "the policy file"))
        guard errors.errors.isEmpty, let policy else { throw errors }
        return PolicyFile(policy: policy, sideEffects: sideEffects)
    }

    /// The side effect of `tool`: the first `side_effects` pattern that names it, else what its
    /// server's annotations say, else `write`.
    public func sideEffect(of tool: String, annotated: SideEffect?) -> SideEffect {
        sideEffects.first { $0.pattern.matches(tool) }?.effect ?? annotated ?? .write
    }
}
