/// How much a tool changes the world: the policy gate's main input.
public enum SideEffect: String, JSONEnum {
    /// Only reads; safe to retry and to run in parallel.
    case read
    /// Prepares something a human or a later call commits (a draft email, a staged change).
    case draft
    /// Changes the world (sends, pays, deletes).
    case write
}

/// A tool as offered to the model.
public struct ToolSpec: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var name: String
    public var description: String
    /// A JSON Schema for the arguments object.
    public var inputSchema: JSONValue
    public var sideEffect: SideEffect
    /// The tool server (an agent file's `mcp_servers` key) that serves the tool; nil for the
    /// agent's own tools.
    public var server: String?

    public init(name: String, description: String, inputSchema: JSONValue, sideEffect: SideEffect, server: String? = nil) {
        self.name = name
        self.description = description
        self.inputSchema = inputSchema
        self.sideEffect = sideEffect
        self.server = server
    }

    public init(from scanner: inout JSONScanner) throws {
        var name: String?
        var description: String?
        var inputSchema: JSONValue?
        var sideEffect: SideEffect?
        var server: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "name": name = try scanner.read()
            case "description": description = try scanner.read()
            case "input_schema": inputSchema = try scanner.read()
            case "side_effect": sideEffect = try scanner.read()
            case "server": server = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.name = try required(name, "name")
        self.description = try required(description, "description")
        self.inputSchema = try required(inputSchema, "input_schema")
        self.sideEffect = try required(sideEffect, "side_effect")
        self.server = server
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("description", description)
        object.set("input_schema", inputSchema)
        object.set("name", name)
        object.set("server", server)
        object.set("side_effect", sideEffect)
    }
}

/// A tool server a run used (an MCP server): the agent file's name for it and what the
/// server said it is when the run connected.
public struct ToolServerIdentity: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// The agent file's key for the server (`mcp_servers: {time: ...}` gives "time").
    public var name: String
    /// The protocol: "mcp".
    public var kind: String
    /// The server's own name and version, from its answer to `initialize`.
    public var serverName: String
    public var serverVersion: String
    /// The protocol version both sides agreed on.
    public var protocolVersion: String?

    public init(name: String, kind: String = "mcp", serverName: String, serverVersion: String, protocolVersion: String? = nil) {
        self.name = name
        self.kind = kind
        self.serverName = serverName
        self.serverVersion = serverVersion
        self.protocolVersion = protocolVersion
    }

    public init(from scanner: inout JSONScanner) throws {
        var name: String?
        var kind: String?
        var serverName: String?
        var serverVersion: String?
        var protocolVersion: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "name": name = try scanner.read()
            case "kind": kind = try scanner.read()
            case "server_name": serverName = try scanner.read()
            case "server_version": serverVersion = try scanner.read()
            case "protocol_version": protocolVersion = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.name = try required(name, "name")
        self.kind = try required(kind, "kind")
        self.serverName = try required(serverName, "server_name")
        self.serverVersion = try required(serverVersion, "server_version")
        self.protocolVersion = protocolVersion
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("kind", kind)
        object.set("name", name)
        object.set("protocol_version", protocolVersion)
        object.set("server_name", serverName)
        object.set("server_version", serverVersion)
    }
}

/// Which agent ran: its name, version, and a digest of its whole configuration.
public struct AgentIdentity: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var name: String
    public var version: String?
    /// `sha256:<hex>` of the agent's configuration, so two runs can be told apart by config.
    public var configDigest: String

    public init(name: String, version: String? = nil, configDigest: String) {
        self.name = name
        self.version = version
        self.configDigest = configDigest
    }

    public init(from scanner: inout JSONScanner) throws {
        var name: String?
        var version: String?
        var configDigest: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "name": name = try scanner.read()
            case "version": version = try scanner.readOptional()
            case "config_digest": configDigest = try scanner.readHash()
            default: try scanner.skipValue()
            }
        }
        self.name = try required(name, "name")
        self.version = version
        self.configDigest = try required(configDigest, "config_digest")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("config_digest", configDigest)
        object.set("name", name)
        object.set("version", version)
    }
}

/// Which model was asked.
public struct ModelIdentity: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// Who serves it: "openai", "anthropic", "scripted", "replay", ...
    public var provider: String
    public var name: String

    public init(provider: String, name: String) {
        self.provider = provider
        self.name = name
    }

    public init(from scanner: inout JSONScanner) throws {
        var provider: String?
        var name: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "provider": provider = try scanner.read()
            case "name": name = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.provider = try required(provider, "provider")
        self.name = try required(name, "name")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("name", name)
        object.set("provider", provider)
    }
}

/// Which policy judged the tool calls.
public struct PolicyIdentity: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var name: String
    /// `sha256:<hex>` of the rules, when they come from a file.
    public var digest: String?

    public init(name: String, digest: String? = nil) {
        self.name = name
        self.digest = digest
    }

    public init(from scanner: inout JSONScanner) throws {
        var name: String?
        var digest: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "name": name = try scanner.read()
            case "digest": digest = try scanner.readOptionalHash()
            default: try scanner.skipValue()
            }
        }
        self.name = try required(name, "name")
        self.digest = digest
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("digest", digest)
        object.set("name", name)
    }
}

/// The budgets a run may use; nil means no limit.
public struct RunLimits: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var maxSteps: Int?
    public var maxToolCalls: Int?
    public var timeoutMs: Int?
    /// Input plus output tokens, as reported by the model.
    public var tokenBudget: Int?

    public init(maxSteps: Int? = nil, maxToolCalls: Int? = nil, timeoutMs: Int? = nil, tokenBudget: Int? = nil) {
        self.maxSteps = maxSteps
        self.maxToolCalls = maxToolCalls
        self.timeoutMs = timeoutMs
        self.tokenBudget = tokenBudget
    }

    public init(from scanner: inout JSONScanner) throws {
        var maxSteps: Int?
        var maxToolCalls: Int?
        var timeoutMs: Int?
        var tokenBudget: Int?
        try scanner.readObject { scanner, key in
            switch key {
            case "max_steps": maxSteps = try scanner.readOptional()
            case "max_tool_calls": maxToolCalls = try scanner.readOptional()
            case "timeout_ms": timeoutMs = try scanner.readOptional()
            case "token_budget": tokenBudget = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.maxSteps = maxSteps
        self.maxToolCalls = maxToolCalls
        self.timeoutMs = timeoutMs
        self.tokenBudget = tokenBudget
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("max_steps", maxSteps)
        object.set("max_tool_calls", maxToolCalls)
        object.set("timeout_ms", timeoutMs)
        object.set("token_budget", tokenBudget)
    }
}

/// Where an imported run came from (`agent-eval import`): the source's format, file and
/// record id, and the importer that wrote the log. Runs the runtime recorded have none.
public struct RunSource: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// The source format: `otlp`, `jaeger`, `inspect`, `openai.messages`, `anthropic.messages`.
    public var format: String
    /// The input file, as given to the importer.
    public var file: String
    /// The run's id in the source (a trace id, `sample:epoch`, an episode id), when it has one.
    public var id: String?
    /// The importer and its version (`agent-eval-import/1`).
    public var importer: String
    /// The source's own word for how the run ended (a finish reason, an error), kept as it was.
    public var stop: String?
    /// What the source says of the run that has no place in a log (scores, rewards, trial
    /// numbers, metadata), as it was.
    public var metadata: JSONValue?

    public init(format: String, file: String, id: String? = nil, importer: String, stop: String? = nil, metadata: JSONValue? = nil) {
        self.format = format
        self.file = file
        self.id = id
        self.importer = importer
        self.stop = stop
        self.metadata = metadata
    }

    public init(from scanner: inout JSONScanner) throws {
        var format: String?
        var file: String?
        var id: String?
        var importer: String?
        var stop: String?
        var metadata: JSONValue?
        try scanner.readObject { scanner, key in
            switch key {
            case "format": format = try scanner.read()
            case "file": file = try scanner.read()
            case "id": id = try scanner.readOptional()
            case "importer": importer = try scanner.read()
            case "stop": stop = try scanner.readOptional()
            case "metadata": metadata = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.format = try required(format, "format")
        self.file = try required(file, "file")
        self.id = id
        self.importer = try required(importer, "importer")
        self.stop = stop
        self.metadata = metadata
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("file", file)
        object.set("format", format)
        object.set("id", id)
        object.set("importer", importer)
        object.set("metadata", metadata)
        object.set("stop", stop)
    }
}

/// `run_started`: the first event of every log. What was asked, of which agent, with what.
public struct RunStarted: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// The goal or input the run was given.
    public var goal: String
    public var agent: AgentIdentity
    public var model: ModelIdentity
    public var policy: PolicyIdentity
    /// Every tool offered, in the agent's order.
    public var tools: [ToolSpec]
    public var limits: RunLimits
    /// Who the run acts for, for policy decisions.
    public var actor: String?
    /// The entry point the run came through, for policy decisions.
    public var route: String?
    /// The tool servers the run connected to, in the agent file's order (absent when none).
    public var toolServers: [ToolServerIdentity]
    /// Where the run was imported from; nil for a run the runtime recorded. An imported run
    /// had no policy gate here: it carries no verdicts.
    public var source: RunSource?

    public init(
        goal: String, agent: AgentIdentity, model: ModelIdentity, policy: PolicyIdentity, tools: [ToolSpec],
        limits: RunLimits = RunLimits(), actor: String? = nil, route: String? = nil, toolServers: [ToolServerIdentity] = [],
        source: RunSource? = nil
    ) {
        self.goal = goal
        self.agent = agent
        self.model = model
        self.policy = policy
        self.tools = tools
        self.limits = limits
        self.actor = actor
        self.route = route
        self.toolServers = toolServers
        self.source = source
    }

    public init(from scanner: inout JSONScanner) throws {
        var goal: String?
        var agent: AgentIdentity?
        var model: ModelIdentity?
        var policy: PolicyIdentity?
        var tools: [ToolSpec] = []
        var limits: RunLimits?
        var actor: String?
        var route: String?
        var toolServers: [ToolServerIdentity] = []
        var source: RunSource?
        try scanner.readObject { scanner, key in
            switch key {
            case "goal": goal = try scanner.read()
            case "agent": agent = try scanner.read()
            case "model": model = try scanner.read()
            case "policy": policy = try scanner.read()
            case "tools": tools = try scanner.readList()
            case "limits": limits = try scanner.readOptional()
            case "actor": actor = try scanner.readOptional()
            case "route": route = try scanner.readOptional()
            case "tool_servers": toolServers = try scanner.readList()
            case "source": source = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.goal = try required(goal, "goal")
        self.agent = try required(agent, "agent")
        self.model = try required(model, "model")
        self.policy = try required(policy, "policy")
        self.tools = tools
        self.limits = limits ?? RunLimits()
        self.actor = actor
        self.route = route
        self.toolServers = toolServers
        self.source = source
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("actor", actor)
        object.set("agent", agent)
        object.set("goal", goal)
        object.set("limits", limits)
        object.set("model", model)
        object.set("policy", policy)
        object.set("route", route)
        object.set("source", source)
        if !toolServers.isEmpty { object.set("tool_servers", toolServers) }
        object.set("tools", tools)
    }

    /// The start as the state holds it (docs/log-format.md, A.3): the members version 1
    /// defines. `tool_servers`, the tools' `server` and `source` were added later, without a
    /// version change, so they are left out and a log's state digests stay what a version 1
    /// reader computes.
    public var stateForm: RunStarted {
        guard !toolServers.isEmpty || source != nil || tools.contains(where: { $0.server != nil }) else { return self }
        var form = self
        form.toolServers = []
        form.source = nil
        for index in form.tools.indices { form.tools[index].server = nil }
        return form
    }
}
