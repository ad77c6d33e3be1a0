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
/// input_requests:              # what the server may ask the client (`InputRequestPolicy`)
///   sampling: deny
/// ```
///
/// A tool that no `side_effects` pattern names takes what its server's annotations say
/// (`ServedTool.sideEffect(mcpAnnotations:)`), and `write` when they say nothing: a tool of
/// unknown effect is treated as the most dangerous kind.
///
/// The file cannot know the tools, so the names it gives are kept (`toolReferences`) and every
/// user that learns the tools checks them (`unknownTools(among:)`): `mcp-proxy` once its server
/// has listed them, `audit` against the logs' tools, a case's `policy:` against its runs' tools.
/// A misspelt name would otherwise be a rule that never fires, and a call it was to stop allowed.
public struct PolicyFile: Sendable {
    public var policy: RulePolicy
    /// Tool name patterns and the side effect they give, in the file's order.
    public var sideEffects: [(pattern: Glob, effect: SideEffect)]
    /// Every literal tool name a rule's `when: {tool: …}` gives, at its place in the file.
    public var toolReferences: [ToolReference] = []
    /// Where each `side_effects` entry is, in the file's order (parallel to `sideEffects`).
    public var sideEffectLocations: [SourceLocation] = []
    /// What the server may ask the client (`input_requests:`): everything, unless the file says.
    public var inputRequests = InputRequestPolicy()

    public init(policy: RulePolicy, sideEffects: [(pattern: Glob, effect: SideEffect)] = []) {
        self.policy = policy
        self.sideEffects = sideEffects
    }

    /// The names in the file that none of `tools` has: a rule naming a tool literally, or a
    /// `side_effects` entry (a name, or a glob) that matches no tool — each an error at its line,
    /// with the closest name as a hint.
    public func unknownTools(among tools: [String]) -> [ConfigError] {
        let known = Set(tools)
        let sorted = Array(known).sorted()
        var errors: [ConfigError] = []
        for reference in toolReferences where !reference.isServer && !known.contains(reference.name) {
            errors.append(
                ConfigError(
                    .invalidValue,
                    "\(reference.what) names the tool \"\(reference.name)\", which none of the tools here has "
                        + "(\(Self.listed(sorted))): the rule would never apply", at: reference.location,
                    hint: ConfigNode.suggestion(for: reference.name, among: sorted).map { "did you mean \"\($0)\"?" }))
        }
        for (index, entry) in sideEffects.enumerated() where !sorted.contains(where: entry.pattern.matches) {
            errors.append(
                ConfigError(
                    .invalidValue, "side_effects \"\(entry.pattern.pattern)\" matches none of the tools here (\(Self.listed(sorted)))",
                    at: index < sideEffectLocations.count ? sideEffectLocations[index] : SourceLocation(path: ""),
                    hint: ConfigNode.suggestion(for: entry.pattern.pattern, among: sorted).map { "did you mean \"\($0)\"?" }))
        }
        return errors
    }

    /// What in the file's rules reaches none of `tools` though it is no error: a tool glob that
    /// matches none of them (a misspelling, or a rule for another server's tools), and an
    /// argument path whose first key no tool the rule names declares (`change.role` where the
    /// tool takes `changes`) — each a sentence, for a note: such a rule never applies here.
    public func unreachableConditions(among tools: [ServedTool]) -> [String] {
        let names = tools.map(\.name).sorted()
        var notes: [String] = []
        for rule in policy.rules {
            for glob in rule.tools where !glob.isLiteral && !names.contains(where: glob.matches) {
                notes.append(
                    "rule \"\(rule.id)\": the tool pattern \"\(glob.pattern)\" matches none of the tools here (\(Self.listed(names))): "
                        + "it never applies to this server")
            }
            let named = tools.filter { tool in rule.tools.contains { $0.isLiteral && $0.matches(tool.name) } }
            guard !named.isEmpty else { continue }
            for condition in rule.arguments {
                guard let first = condition.path.first else { continue }
                let declaring = named.filter { tool in
                    guard let properties = tool.inputSchema["properties"]?.objectValue else { return true }
                    return properties[first] != nil || tool.inputSchema["additionalProperties"] != .bool(false) && properties.isEmpty
                }
                if declaring.isEmpty {
                    let known = named.flatMap { $0.inputSchema["properties"]?.objectValue.map { Array($0.keys) } ?? [] }
                    notes.append(
                        "rule \"\(rule.id)\": argument \(condition.path.joined(separator: ".")) is not one \(named.map(\.name).joined(separator: ", ")) "
                            + "declares (its arguments: \(known.isEmpty ? "none" : known.sorted().joined(separator: ", "))): the condition "
                            + "never sees a value"
                            + (ConfigNode.suggestion(for: first, among: known).map { "; did you mean \"\($0)\"?" } ?? ""))
                }
            }
        }
        return notes
    }

    /// The MCP servers the file's rules name (`server:`, literally) that are not `server`, the
    /// one it judges calls to (`mcp-proxy --name`): each an error at its line — the rule would
    /// never apply.
    public func unknownServers(besides server: String) -> [ConfigError] {
        toolReferences.filter { $0.isServer && $0.name != server }.map { reference in
            ConfigError(
                .invalidValue,
                "\(reference.what) names the MCP server \"\(reference.name)\", and the calls judged here are the server \"\(server)\"'s: "
                    + "the rule would never apply", at: reference.location,
                hint: ConfigNode.suggestion(for: reference.name, among: [server]).map { "did you mean \"\($0)\"?" }
                    ?? "name the server with mcp-proxy --name, or drop server: from the rule")
        }
    }

    /// `unknownTools(among:)` where `tools` may be only some of the tools the file is written
    /// for — a run's, which lists those its requests declared or its calls used, not every tool of
    /// the server the file also serves: a name close to one of them is a misspelling (an error,
    /// with the name it meant); a name far from all of them may be a tool these runs never met
    /// (a note).
    public func misspeltTools(among tools: [String]) -> (errors: [ConfigError], notes: [ConfigError]) {
        let problems = unknownTools(among: tools)
        return (problems.filter { $0.hint != nil }, problems.filter { $0.hint == nil })
    }

    /// The MCP servers the file's rules name literally (`server: NAME`) that none of the runs'
    /// tools came from, as `misspeltTools` says it of tools: a name close to one of `servers` is
    /// a misspelling (an error, with the name it meant); another, a note — the rule may be for a
    /// server these runs never used, and never applied to them.
    public func misspeltServers(among servers: [String]) -> (errors: [ConfigError], notes: [ConfigError]) {
        let known = Set(servers)
        let sorted = Array(known).sorted()
        var errors: [ConfigError] = []
        var notes: [ConfigError] = []
        for reference in toolReferences where reference.isServer && !known.contains(reference.name) {
            let meant = ConfigNode.suggestion(for: reference.name, among: sorted)
            let problem = ConfigError(
                .invalidValue,
                "\(reference.what) names the MCP server \"\(reference.name)\", which no tool here came from "
                    + "(\(sorted.isEmpty ? "no tool came from a server" : "servers: " + Self.listed(sorted))): the rule would never apply",
                at: reference.location, hint: meant.map { "did you mean \"\($0)\"?" })
            if meant != nil { errors.append(problem) } else { notes.append(problem) }
        }
        return (errors, notes)
    }

    static func listed(_ tools: [String]) -> String {
        tools.isEmpty ? "no tool" : tools.prefix(12).joined(separator: ", ") + (tools.count > 12 ? ", …" : "")
    }

    /// The policy when no file is given: every call allowed (rule `default`), recorded all the same.
    public static let allowAll = PolicyFile(
        policy: RulePolicy(name: "allow-all (no --policy)", rules: [], defaultDecision: PolicyDecision(.allow, rule: "default")))

    /// Who reads a policy file, for what it must hold.
    public enum Reader: Sendable {
        /// `mcp-proxy --policy`, a project check: a file with only `input_requests:` is whole
        /// (every call allowed, as with no file; the server's questions judged).
        case proxy
        /// What checks recorded calls against the file's rules — `audit`, a case's `policy:`,
        /// `serve`'s audit view, named by `what`: it needs a `policy:` block, since a file
        /// without one would pass every call it was given to judge.
        case callChecker(what: String)
    }

    /// Reads the file at `path` for `reader`; throws every error in it, each at its line and
    /// column.
    public static func load(path: String, for reader: Reader = .proxy) throws(ConfigErrors) -> PolicyFile {
        let root = try ConfigNode.loadReportingAll(path: path)
        var errors = ConfigErrors([])
        guard var fields = errors.collect({ () throws(ConfigError) in try root.mapping("the policy file") }) else { throw errors }
        var references: [ToolReference] = []
        // The tools are the server's, not known here: every name a rule gives is accepted
        // (`servers` non-empty turns "unknown tool" into a reference nobody checks).
        // A file that says what the server may ask (`input_requests:`) and has no `policy:` block
        // leaves every call allowed for mcp-proxy, as no --policy does; what judges recorded calls
        // by the rules refuses it, and any other file must say what is allowed.
        let policy: RulePolicy?
        if fields.optional("policy") == nil, fields.contains("input_requests"), case .callChecker(let what) = reader {
            policy = nil
            errors.errors.append(
                ConfigError(
                    .missingKey,
                    "the policy file has no policy: block, only input_requests:; \(what) checks calls against its rules, "
                        + "and without them would pass every call",
                    at: root.location,
                    hint: "add a policy: block as in an agent file (docs/agent-files.md); "
                        + "a file with input_requests: alone is for mcp-proxy --policy"))
        } else if fields.optional("policy") == nil, fields.contains("input_requests") {
            policy = RulePolicy(
                name: "allow-all (the policy file has no policy: block)", rules: [],
                defaultDecision: PolicyFile.allowAll.policy.defaultDecision)
        } else {
            policy = errors.collect { () throws(ConfigError) in
                try fields.required("policy", hint: "the file holds a policy: block as in an agent file (docs/agent-files.md)")
            }.flatMap { node in
                AgentFile.readPolicy(node, toolNames: [], known: [], servers: ["*"], references: &references, errors: &errors)
            }
        }
        var sideEffects: [(pattern: Glob, effect: SideEffect)] = []
        var locations: [SourceLocation] = []
        if let node = fields.optional("side_effects"),
            let pairs = errors.collect({ () throws(ConfigError) in try node.mapping("side_effects").pairs })
        {
            for pair in pairs {
                errors.collect { () throws(ConfigError) in
                    sideEffects.append((Glob(pair.key), try pair.value.choice("side_effects \"\(pair.key)\"")))
                    locations.append(pair.keyLocation)
                }
            }
        }
        let inputRequests = fields.optional("input_requests").map { InputRequestPolicy.read($0, errors: &errors) }
        errors.errors.append(contentsOf: fields.unknownKeys(in: "the policy file"))
        guard errors.errors.isEmpty, let policy else { throw errors }
        var file = PolicyFile(policy: policy, sideEffects: sideEffects)
        if let inputRequests { file.inputRequests = inputRequests }
        file.toolReferences = references
        file.sideEffectLocations = locations
        return file
    }

    /// The side effect of `tool`: the first `side_effects` pattern that names it, else what its
    /// server's annotations say, else `write`.
    public func sideEffect(of tool: String, annotated: SideEffect?) -> SideEffect {
        sideEffects.first { $0.pattern.matches(tool) }?.effect ?? annotated ?? .write
    }
}
