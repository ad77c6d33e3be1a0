public import ConfigFile
import Foundation
public import TraceCore
import TraceLog

/// Reads agent files (YAML): the whole definition of an agent — instructions, model, tools
/// and their hosts, policy rules, limits, failure handling, context and durability — checked
/// up front, with errors that give file:line:column. The format is documented in
/// `docs/agent-files.md`.
public enum AgentFile {
    /// Loads the agent file at `path`. Relative paths inside it (model script, tool commands)
    /// are resolved from the file's directory. `models` makes clients for HTTP models and
    /// carries the command line's overrides; `servers` starts the MCP servers the file declares
    /// (each run starts its own: see `AgentRuntime.run`).
    public static func load(
        path: String, models: ModelOptions = ModelOptions(), servers: (any ToolServerConnector)? = nil
    ) throws(ConfigError) -> Agent {
        do {
            return try loadReportingAll(path: path, models: models, servers: servers)
        } catch {
            throw error.errors[0]
        }
    }

    /// Loads the agent file at `path` as `load` does, but throws every error found in it, in
    /// file order: each section, each tool and each rule is read even after an earlier one
    /// failed (`agent-eval check`).
    public static func loadReportingAll(
        path: String, models: ModelOptions = ModelOptions(), servers: (any ToolServerConnector)? = nil
    ) throws(ConfigErrors) -> Agent {
        let root = try ConfigNode.loadReportingAll(path: path)
        let directory = (path as NSString).deletingLastPathComponent
        return try read(root, directory: directory.isEmpty ? "." : directory, models: models, servers: servers)
    }

    static func read(
        _ root: ConfigNode, directory: String, models: ModelOptions = ModelOptions(), servers: (any ToolServerConnector)? = nil
    ) throws(ConfigErrors) -> Agent {
        var errors = ConfigErrors([])
        guard var file = errors.collect({ () throws(ConfigError) in try root.mapping("the agent file") }) else { throw errors }
        let name = errors.collect { () throws(ConfigError) in try file.required("name").nonEmptyString("name") }
        let version = errors.collect { () throws(ConfigError) in try file.optional("version")?.string("version") } ?? nil
        errors.collect { () throws(ConfigError) in _ = try file.optional("description")?.string("description") }
        let instructions = errors.collect { () throws(ConfigError) in try file.optional("instructions")?.string("instructions") ?? "" }

        let modelNode = errors.collect { () throws(ConfigError) in
            try file.required("model", hint: "for an offline run, give a script: model: {script: my.model.yaml}")
        }
        let model = modelNode.flatMap { node in
            errors.collect { () throws(ConfigError) in try readModel(node, directory: directory, options: models) }
        }
        var tools = ToolRegistry()
        let toolServers =
            errors.collect { () throws(ConfigError) in
                try file.optional("mcp_servers").map { node throws(ConfigError) in try readToolServers(node, directory: directory) } ?? []
            } ?? []
        let toolNodes =
            errors.collect { () throws(ConfigError) -> [ConfigNode] in
                if let node = file.optional("tools") { return try node.list("tools") }
                if toolServers.isEmpty && file.optional("mcp_servers") == nil { return try file.required("tools").list("tools") }
                return []
            } ?? []
        // Every tool is read, each with all its errors; the names of tools that have errors
        // still count, so a policy rule naming one is not reported unknown as well.
        // The list keeps the file's order for did-you-means; the set answers "seen?" in constant time.
        var toolNames: [String] = []
        var seenToolNames: Set<String> = []
        for (index, node) in toolNodes.enumerated() {
            let (name, tool) = readTool(node, index: index, directory: directory, errors: &errors)
            guard let name else { continue }
            if !seenToolNames.insert(name).inserted {
                errors.errors.append(
                    ConfigError(.invalidValue, "a second tool is named \"\(name)\"", at: node.location, hint: "tool names must be unique"))
                continue
            }
            toolNames.append(name)
            if let tool { tools.register(tool) }
        }
        var toolReferences: [ToolReference] = []
        let policyNode = file.optional("policy")
        let policy = policyNode.flatMap { node in
            readPolicy(
                node, toolNames: toolNames, known: seenToolNames, servers: toolServers.map(\.name), references: &toolReferences,
                errors: &errors, schemas: Dictionary(tools.specs.map { ($0.name, $0.inputSchema) }, uniquingKeysWith: { first, _ in first })
            )
        }
        let limits = errors.collect { () throws(ConfigError) in try file.optional("limits").map(readLimits) ?? RunLimits() }
        var handling = FailureHandling()
        errors.collect { () throws(ConfigError) in
            if let node = file.optional("on_invalid_decision") {
                var fields = try node.mapping("on_invalid_decision")
                handling.invalidDecisionRetries = try fields.required("retries").int("on_invalid_decision.retries", in: 0...100)
                try fields.finish()
            }
        }
        errors.collect { () throws(ConfigError) in
            if let node = file.optional("on_tool_failure") { handling.toolFailure = try node.choice("on_tool_failure") }
        }
        errors.collect { () throws(ConfigError) in
            if let node = file.optional("on_policy_denied") { handling.policyDenied = try node.choice("on_policy_denied") }
        }
        var context = ContextSettings()
        errors.collect { () throws(ConfigError) in
            if let node = file.optional("context") {
                var fields = try node.mapping("context")
                if let value = fields.optional("token_budget") {
                    context.tokenBudget = try value.int("context.token_budget", in: 1...Int.max)
                }
                if let value = fields.optional("inline_output_bytes") {
                    context.inlineOutputBytes = try value.int("context.inline_output_bytes", in: 0...Int.max)
                }
                if let value = fields.optional("max_observation_age_steps") {
                    context.maxObservationAgeSteps = try value.int("context.max_observation_age_steps", in: 0...Int.max)
                }
                try fields.finish()
            }
        }
        let memory =
            errors.collect { () throws(ConfigError) in
                try file.optional("memory").map { node throws(ConfigError) in try readItems(node, what: "memory") } ?? []
            } ?? []
        let evidence =
            errors.collect { () throws(ConfigError) in
                try file.optional("evidence").map { node throws(ConfigError) in try readItems(node, what: "evidence") } ?? []
            } ?? []
        let actor = errors.collect { () throws(ConfigError) in try file.optional("actor")?.string("actor") } ?? nil
        let route = errors.collect { () throws(ConfigError) in try file.optional("route")?.string("route") } ?? nil
        let durability = errors.collect { () throws(ConfigError) in try file.optional("durability").map(readDurability) ?? Durability() }
        let logVersion =
            errors.collect { () throws(ConfigError) in
                try file.optional("log_version")?.int("log_version", in: Event.writableVersions) ?? Event.writableVersions.upperBound
            } ?? Event.writableVersions.upperBound
        var redactEnvironment: [String] = []
        var redactMembers: [String] = []
        errors.collect { () throws(ConfigError) in
            if let node = file.optional("redact") {
                var fields = try node.mapping("redact")
                redactEnvironment = try fields.optional("env")?.names("redact.env") ?? []
                redactMembers = try fields.optional("members")?.names("redact.members") ?? []
                try fields.finish()
            }
        }
        errors.errors.append(contentsOf: file.unknownKeys())
        guard errors.errors.isEmpty, let name, let instructions, let (model, source) = model, let limits, let durability else {
            throw errors.inFileOrder(of: root.location.path)
        }

        var agent = Agent(
            name: name, version: version, instructions: instructions, model: model, tools: tools,
            policy: policy ?? RulePolicy(name: "\(name)-default", rules: [], defaultDecision: PolicyDecision(.allow, rule: "default")),
            limits: limits, handling: handling, context: context, memory: memory, evidence: evidence, actor: actor, route: route,
            durability: durability,
            configDigest: ContentHash.sha256(
                JSONWriter.encode(root.json)
                    + (models.overridesNothing ? [] : Array("\n\(models.model ?? "") \(models.baseURL ?? "")".utf8))))
        // The API key's value never reaches the log, whatever the file says about redaction.
        if let keyVariable = source.apiKeyVariable, !redactEnvironment.contains(keyVariable) { redactEnvironment.append(keyVariable) }
        agent.redactEnvironment = redactEnvironment
        if case .http(let settings) = source.kind, settings.apiKeyRequired {
            agent.apiKeyVariable = settings.apiKeyVariable
            agent.apiKeyLocation = source.location
        }
        agent.redactMembers = redactMembers
        agent.writesContextDeltas = logVersion >= Event.deltaVersion
        agent.logFormatVersion = logVersion >= Event.memberChainVersion ? Event.memberChainVersion : 1
        agent.toolServers = toolServers
        // What an HTTP server's headers took from the environment (a token) never reaches the log.
        for variable in toolServers.flatMap(\.headerVariables) where !agent.redactEnvironment.contains(variable) {
            agent.redactEnvironment.append(variable)
        }
        agent.toolServerConnector = servers
        agent.toolReferences = toolReferences
        return agent
    }

    /// The model, and where it comes from (its API key variable, where the file names it).
    static func readModel(
        _ node: ConfigNode, directory: String, options: ModelOptions
    ) throws(ConfigError) -> (any ModelClient, ModelSource) {
        let source = try ModelSource.read(node, directory: directory, overrides: options)
        return (try source.client(factory: options.factory), source)
    }

    /// One tool; nil when it has errors, which go to `errors`: every field is read, so a file
    /// with three mistakes in one tool shows all three. `name` is the tool's name when that much
    /// could be read (policy rules are checked against it).
    static func readTool(
        _ node: ConfigNode, index: Int, directory: String, errors: inout ConfigErrors
    ) -> (name: String?, tool: Tool?) {
        let before = errors.errors.count
        guard var fields = errors.collect({ () throws(ConfigError) in try node.mapping("tools[\(index)]") }) else { return (nil, nil) }
        let name = errors.collect { () throws(ConfigError) -> String in
            let nameNode = try fields.required("name")
            let name = try nameNode.nonEmptyString("the tool's name")
            guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == "." }) else {
                throw ConfigError(
                    .invalidValue, "the tool name \"\(name)\" may only hold letters, digits, \"_\", \"-\" and \".\"", at: nameNode.location)
            }
            return name
        }
        let what = name.map { "tool \"\($0)\"" } ?? "tools[\(index)]"
        let description = errors.collect { () throws(ConfigError) in try fields.required("description").string("\(what) description") }
        let sideEffect = errors.collect { () throws(ConfigError) -> SideEffect in
            try fields.required("side_effect", hint: "read, draft or write").choice("\(what) side_effect")
        }
        let schemaNode = fields.optional("input_schema")
        let schemaJSON = schemaNode?.json ?? ["type": "object"]
        let timeoutMs = errors.collect { () throws(ConfigError) in
            try fields.optional("timeout_ms")?.int("\(what) timeout_ms", in: 1...86_400_000) ?? 30_000
        }
        var retry = RetryPolicy()
        errors.collect { () throws(ConfigError) in
            guard let node = fields.optional("retry") else { return }
            var retryFields = try node.mapping("\(what) retry")
            retry.maxAttempts = try retryFields.required("max_attempts").int("retry.max_attempts", in: 1...100)
            if let value = retryFields.optional("backoff_ms") { retry.backoffMs = try value.int("retry.backoff_ms", in: 0...3_600_000) }
            if let value = retryFields.optional("multiplier") {
                retry.multiplier = try value.double("retry.multiplier")
                guard retry.multiplier >= 1 else {
                    throw ConfigError(.invalidValue, "retry.multiplier must be at least 1", at: value.location)
                }
            }
            try retryFields.finish()
        }
        let command = fields.optional("command")
        let fixture = fields.optional("fixture")
        let outputLimit =
            errors.collect { () throws(ConfigError) in
                try fields.optional("output_limit_bytes")?.int("\(what) output_limit_bytes", in: 1...Int.max)
            } ?? nil
        let cwdNode = fields.optional("cwd")
        let envNode = fields.optional("env")
        let inheritNode = fields.optional("inherit_env")
        errors.errors.append(contentsOf: fields.unknownKeys(in: what))

        let host = errors.collect { () throws(ConfigError) -> any ToolHost in
            switch (command, fixture) {
            case (let command?, nil):
                let process = try readProcess(
                    command: try command.strings("\(what) command"), at: command, cwd: cwdNode, env: envNode, inherit: inheritNode,
                    what: what, directory: directory)
                return SubprocessToolHost(
                    command: process.command, directory: process.directory, environment: process.environment,
                    outputLimit: outputLimit ?? 1 << 20, programName: process.programName)
            case (nil, let fixture?):
                if let extra = cwdNode ?? envNode ?? inheritNode {
                    throw ConfigError(.invalidValue, "\(what) cwd, env and inherit_env apply to command tools only", at: extra.location)
                }
                return FixtureToolHost(responses: try readFixture(fixture, what: what))
            case (nil, nil):
                throw ConfigError(
                    .missingKey, "\(what) has neither \"command\" nor \"fixture\"", at: node.location,
                    hint: "tools written in Swift are registered through the library API (ClosureToolHost)")
            default:
                throw ConfigError(.invalidValue, "\(what) has both \"command\" and \"fixture\"; give one", at: node.location)
            }
        }
        guard let name, let description else { return (name, nil) }
        let spec = ToolSpec(name: name, description: description, inputSchema: schemaJSON, sideEffect: sideEffect ?? .read)
        let tool = errors.collect { () throws(ConfigError) -> Tool in
            do throws(SchemaError) {
                return try Tool(spec: spec, host: host ?? FixtureToolHost(responses: []), timeoutMs: timeoutMs ?? 30_000, retry: retry)
            } catch {
                let location = schemaNode.flatMap { locate(error.path, in: $0) } ?? schemaNode?.location ?? node.location
                throw ConfigError(.invalidValue, "\(what) input_schema: \(error.sentence)", at: location)
            }
        }
        return (name, errors.errors.count == before ? tool : nil)
    }

    /// A command to start, checked: its program exists, its working directory is one.
    struct ProcessSetup {
        /// The command as it is started: a program given by path is absolute.
        var command: [String]
        /// The program as the agent file names it, for messages and results.
        var programName: String
        /// The working directory, absolute.
        var directory: String
        var environment: [String: String]
    }

    /// The command (its first word found on PATH, or a path relative to the agent file's
    /// folder), the working directory (the agent file's folder, or `cwd` relative to it) and
    /// the environment: only PATH, HOME, LANG, the `inherit` names and `env` — not the caller's
    /// secrets. Shared by command tools and MCP servers.
    ///
    /// Both paths are made absolute: the process starts in its own working directory, where a
    /// path relative to the caller's (`my-agent/tools/x.sh` from above `my-agent`) names
    /// another file or none.
    static func readProcess(
        command: [String], at commandNode: ConfigNode, cwd cwdNode: ConfigNode?, env envNode: ConfigNode?, inherit inheritNode: ConfigNode?,
        what: String, directory: String
    ) throws(ConfigError) -> ProcessSetup {
        var words = command
        guard let program = words.first, !program.isEmpty else {
            throw ConfigError(.invalidValue, "\(what) command is empty", at: commandNode.location)
        }
        // A program given as a relative path with a slash is a script beside the agent file.
        if program.contains("/") { words[0] = ConfigPath.absolute(program, from: directory) }
        guard findProgram(words[0]) != nil else {
            throw ConfigError(
                .invalidValue,
                program.contains("/")
                    ? "\(what) command: \(program) does not exist or is not executable"
                    : "\(what) command: \"\(program)\" is not a program on PATH",
                at: commandNode.location, hint: "install it, or give its path (relative paths start from the agent file's folder)")
        }
        let cwd = try cwdNode?.nonEmptyString("\(what) cwd") ?? "."
        let workingDirectory = ConfigPath.absolute(cwd, from: directory)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: workingDirectory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ConfigError(
                .invalidValue, "\(what) cwd: \(ConfigPath.resolve(cwd, from: directory)) is not a directory",
                at: cwdNode?.location ?? commandNode.location)
        }
        // The script an interpreter is given (`python3 tools/lookup.py`), where the command runs: a
        // tool whose script is not there fails at its first call, and the run stops or goes on
        // without it.
        if let script = Self.interpreterScript(of: command) {
            let path = ConfigPath.absolute(script, from: workingDirectory)
            guard FileManager.default.fileExists(atPath: path) else {
                throw ConfigError(
                    .invalidValue, "\(what) command: the script \(script) is not there (\(path))", at: commandNode.location,
                    hint: "paths in command: start from the tool's cwd (the agent file's folder unless cwd: says otherwise)")
            }
        }
        let caller = ProcessInfo.processInfo.environment
        var environment: [String: String] = [:]
        let inherited = try inheritNode?.names("\(what) inherit_env") ?? []
        for name in SubprocessToolHost.baseEnvironmentNames + inherited { environment[name] = caller[name] }
        if let envNode {
            for pair in try envNode.mapping("\(what) env").pairs {
                environment[pair.key] = try pair.value.string("\(what) env.\(pair.key)")
            }
        }
        return ProcessSetup(command: words, programName: program, directory: workingDirectory, environment: environment)
    }

    /// `mcp_servers:`, in the shape other MCP clients use (`command` and `args`, `env`, `cwd`; or
    /// `url` and `headers`, with `type: http`), plus what a run needs to know (`timeout_ms`,
    /// `startup_timeout_ms`, `prefix`, `tools`, `side_effect`).
    static func readToolServers(_ node: ConfigNode, directory: String) throws(ConfigError) -> [ToolServerSettings] {
        var servers: [ToolServerSettings] = []
        for pair in try node.mapping("mcp_servers").pairs {
            let name = pair.key
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
                throw ConfigError(
                    .invalidValue, "the MCP server name \"\(name)\" may only hold letters, digits, \"_\" and \"-\"", at: pair.keyLocation)
            }
            let what = "MCP server \"\(name)\""
            var fields = try pair.value.mapping(what)
            var kind = "stdio"
            if let type = fields.optional("type") {
                kind = try type.string("\(what) type")
                guard ["stdio", "http", "streamable-http"].contains(kind) else {
                    throw ConfigError(
                        .invalidValue, "\(what) type \"\(kind)\": the kinds are stdio (a command) and http (Streamable HTTP, a url)",
                        at: type.location,
                        hint: kind == "sse"
                            ? "the older HTTP+SSE transport is not supported; most servers that offer it offer Streamable HTTP too" : nil)
                }
            }
            var settings: ToolServerSettings
            if let urlNode = fields.optional("url") {
                guard kind != "stdio" || fields.optional("type") == nil else {
                    throw ConfigError(
                        .invalidValue, "\(what) has type stdio and a url: give a command, or type: http", at: urlNode.location)
                }
                for key in ["command", "args", "cwd", "env", "inherit_env"] {
                    if let extra = fields.optional(key) {
                        throw ConfigError(
                            .invalidValue, "\(what) has a url and \(key): \(key) belongs to a server started as a command",
                            at: extra.location)
                    }
                }
                let url = try urlNode.nonEmptyString("\(what) url")
                guard let parts = URLComponents(string: url), ["http", "https"].contains(parts.scheme?.lowercased() ?? ""),
                    !(parts.host ?? "").isEmpty
                else {
                    throw ConfigError(
                        .invalidValue, "\(what) url \"\(url)\" is not an http:// or https:// URL with a host", at: urlNode.location,
                        hint: "for example url: http://127.0.0.1:8000/mcp")
                }
                let (headers, variables) = try readHeaders(fields.optional("headers"), what: what)
                settings = ToolServerSettings(
                    name: name, command: [], directory: directory, location: pair.keyLocation, url: url, headers: headers,
                    headerVariables: variables)
            } else {
                guard kind == "stdio" else {
                    throw ConfigError(
                        .invalidValue, "\(what) has type \(kind) and no url", at: pair.value.location,
                        hint: "for example url: http://127.0.0.1:8000/mcp")
                }
                if let extra = fields.optional("headers") {
                    throw ConfigError(
                        .invalidValue, "\(what) has headers and no url: headers belong to a server over HTTP", at: extra.location)
                }
                let commandNode = try fields.required(
                    "command", hint: "for example command: [mcp-server-time, --local-timezone, UTC], or url: http://127.0.0.1:8000/mcp")
                var command: [String]
                if case .scalar = commandNode.content {
                    command = [try commandNode.nonEmptyString("\(what) command")]
                } else {
                    command = try commandNode.strings("\(what) command")
                }
                if let args = fields.optional("args") { command += try args.strings("\(what) args") }
                let process = try readProcess(
                    command: command, at: commandNode, cwd: fields.optional("cwd"), env: fields.optional("env"),
                    inherit: fields.optional("inherit_env"), what: what, directory: directory)
                settings = ToolServerSettings(
                    name: name, command: process.command, directory: process.directory, environment: process.environment,
                    location: pair.keyLocation)
            }
            if let value = fields.optional("timeout_ms") {
                settings.callTimeoutMs = try value.int("\(what) timeout_ms", in: 1...86_400_000)
            }
            if let value = fields.optional("startup_timeout_ms") {
                settings.startTimeoutMs = try value.int("\(what) startup_timeout_ms", in: 1...86_400_000)
            }
            if let value = fields.optional("prefix") {
                let prefix = try value.string("\(what) prefix")
                guard prefix.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == "." }) else {
                    throw ConfigError(
                        .invalidValue, "\(what) prefix may only hold letters, digits, \"_\", \"-\" and \".\"", at: value.location)
                }
                settings.prefix = prefix
            }
            if let value = fields.optional("tools") { settings.include = try value.strings("\(what) tools") }
            if let value = fields.optional("side_effect") { settings.sideEffect = try value.choice("\(what) side_effect") }
            try fields.finish()
            servers.append(settings)
        }
        return servers
    }

    /// An HTTP server's `headers:`: names and values, where `${NAME}` in a value stands for the
    /// environment variable (`ToolServerSettings.resolvedHeaders`, when the server is reached).
    /// Returns the headers and the variables named, whose values the log never shows.
    static func readHeaders(_ node: ConfigNode?, what: String) throws(ConfigError) -> ([String: String], [String]) {
        guard let node else { return ([:], []) }
        var headers: [String: String] = [:]
        var variables: [String] = []
        for pair in try node.mapping("\(what) headers").pairs {
            let isToken =
                !pair.key.isEmpty
                && pair.key.unicodeScalars.allSatisfy {
                    $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "!#$%&'*+-.^_`|~".unicodeScalars.contains($0))
                }
            guard isToken else {
                throw ConfigError(.invalidValue, "\(what) header name \"\(pair.key)\" is not an HTTP header name", at: pair.keyLocation)
            }
            guard headers.keys.allSatisfy({ $0.lowercased() != pair.key.lowercased() }) else {
                throw ConfigError(.invalidValue, "\(what) gives the header \"\(pair.key)\" twice", at: pair.keyLocation)
            }
            let reserved = [
                "content-type", "accept", "content-length", "host", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
            ]
            guard !reserved.contains(pair.key.lowercased()), !pair.key.lowercased().hasPrefix("mcp-param-") else {
                throw ConfigError(
                    .invalidValue, "\(what) header \"\(pair.key)\" is set by the MCP client itself", at: pair.keyLocation,
                    hint: "headers are for what the server asks of its callers, such as Authorization")
            }
            let text = try pair.value.string("\(what) headers.\(pair.key)")
            do {
                // Read for its form only: the values are read from the environment when the
                // server is reached (a re-run that reaches no server needs no token).
                for variable in try ToolServerSettings.substitute(text, { _ in "" }).variables where !variables.contains(variable) {
                    variables.append(variable)
                }
            } catch {
                throw ConfigError(.invalidValue, "\(what) headers.\(pair.key) \(error.message)", at: pair.value.location)
            }
            guard !text.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw ConfigError(.invalidValue, "\(what) headers.\(pair.key) holds a line break", at: pair.value.location)
            }
            headers[pair.key] = text
        }
        return (headers, variables)
    }

    /// The script a command's interpreter runs (`python3 agents/refund.py` → `agents/refund.py`),
    /// when it names one: the interpreters agents and tools are written for, a script file by its
    /// extension; nil for `python3 -m package`, `node -e code`, `sh -c "…"`.
    public static func interpreterScript(of arguments: [String]) -> String? {
        guard let first = arguments.first else { return nil }
        let interpreters: Set<String> = ["python", "python3", "node", "bun", "deno", "ruby", "bash", "sh"]
        let program = (first as NSString).lastPathComponent
        guard interpreters.contains(program) || program.hasPrefix("python3.") else { return nil }
        for word in arguments.dropFirst() {
            // `python3 -m package`, `node -e code`, `bash -lc "…"`: no script file.
            if word == "--eval" || word.hasPrefix("-") && !word.hasPrefix("--") && word.contains(where: { "mce".contains($0) }) {
                return nil
            }
            if word.hasPrefix("-") { continue }
            if word.contains(where: \.isWhitespace) { return nil }
            let known = ["py", "js", "mjs", "cjs", "ts", "rb", "sh"]
            return known.contains((word as NSString).pathExtension) && !word.contains("{input}") ? word : nil
        }
        return nil
    }

    /// Where `program` is: itself when it names a path (with a `/`) to an executable file, else
    /// the first executable of that name on this process's PATH; nil when there is none.
    public static func findProgram(_ program: String) -> String? {
        if program.contains("/") { return FileManager.default.isExecutableFile(atPath: program) ? program : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/\(program)") {
            return "\(folder)/\(program)"
        }
        return nil
    }

    /// The node at a key path inside `node`, for pointing at the exact part of a schema.
    static func locate(_ path: [String], in node: ConfigNode) -> SourceLocation? {
        var current = node
        for key in path {
            switch current.content {
            case .mapping(let pairs):
                guard let pair = pairs.first(where: { $0.key == key }) else { return current.location }
                current = key == path.last ? ConfigNode(content: pair.value.content, location: pair.keyLocation) : pair.value
            case .sequence(let items):
                guard let index = Int(key), items.indices.contains(index) else { return current.location }
                current = items[index]
            case .scalar:
                return current.location
            }
        }
        return current.location
    }

    /// The answers of `tool` from a file holding what an agent file's `fixture:` holds (a list
    /// of responses, YAML or JSON), and that list as JSON: `agent-eval fork --tool-fixture`.
    public static func loadFixture(path: String, tool: String) throws(ConfigError) -> (
        responses: [FixtureToolHost.Response], json: JSONValue
    ) {
        let node = try ConfigNode.load(path: path)
        return (try readFixture(node, what: "tool \"\(tool)\""), node.json)
    }

    /// The answers of `tool` from a fixture list given as JSON (a fork's `tool_fixture` edit).
    public static func fixtureResponses(_ value: JSONValue, tool: String) throws(ConfigError) -> [FixtureToolHost.Response] {
        try readFixture(try ConfigNode.parse(JSONWriter.encodeString(value), path: "tool_fixture \(tool)"), what: "tool \"\(tool)\"")
    }

    static func readFixture(_ node: ConfigNode, what: String) throws(ConfigError) -> [FixtureToolHost.Response] {
        var responses: [FixtureToolHost.Response] = []
        let items = try node.list("\(what) fixture")
        guard !items.isEmpty else { throw ConfigError(.invalidValue, "\(what) fixture needs at least one response", at: node.location) }
        for (index, item) in items.enumerated() {
            let place = "\(what) fixture[\(index)]"
            var fields = try item.mapping(place)
            var response = FixtureToolHost.Response()
            if let when = fields.optional("when") {
                guard case .mapping = when.content else { throw when.typeError("\(place) when", expected: "a mapping of arguments") }
                response.when = when.json
            }
            response.output = fields.optional("output")?.json
            response.error = try fields.optional("error")?.string("\(place) error")
            response.isRetryable = try fields.optional("retryable")?.bool("\(place) retryable") ?? false
            response.failAttempts = try fields.optional("fail_attempts")?.int("\(place) fail_attempts", in: 0...100) ?? 0
            response.delayMs = try fields.optional("delay_ms")?.int("\(place) delay_ms", in: 0...3_600_000) ?? 0
            try fields.finish()
            if response.output == nil && response.error == nil {
                throw ConfigError(.missingKey, "\(place) needs \"output\" or \"error\"", at: item.location)
            }
            responses.append(response)
        }
        return responses
    }

    /// The policy; nil when it has errors, which go to `errors` (every rule is read, and every
    /// part of each). A rule naming a tool the file does not have is an error, unless the agent
    /// has MCP servers: then the name goes to `references`, checked when the servers list their tools.
    /// `schemas` are the agent's own tools' input schemas, by name: a rule's argument none of its
    /// tools takes is an error (`undeclaredArgument`).
    static func readPolicy(
        _ node: ConfigNode, toolNames: [String], known: Set<String>, servers: [String], references: inout [ToolReference],
        errors: inout ConfigErrors, schemas: [String: JSONValue] = [:]
    ) -> RulePolicy? {
        let before = errors.errors.count
        guard var fields = errors.collect({ () throws(ConfigError) in try node.mapping("policy") }) else { return nil }
        let name = errors.collect { () throws(ConfigError) in try fields.optional("name")?.nonEmptyString("policy name") ?? "policy" }
        let defaultVerdict =
            errors.collect { () throws(ConfigError) -> Verdict in
                try fields.optional("default").map { node throws(ConfigError) in try node.choice("policy default") } ?? .deny
            } ?? .deny
        let defaultReason =
            errors.collect { () throws(ConfigError) in try fields.optional("default_reason")?.string("policy default_reason") } ?? nil
        var rules: [PolicyRule] = []
        var ruleIDs: Set<String> = []
        let ruleNodes = errors.collect { () throws(ConfigError) in try fields.optional("rules")?.list("policy rules") ?? [] } ?? []
        errors.errors.append(contentsOf: fields.unknownKeys(in: "policy"))
        for (index, ruleNode) in ruleNodes.enumerated() {
            guard
                let rule = readRule(
                    ruleNode, index: index, toolNames: toolNames, known: known, servers: servers, references: &references, errors: &errors,
                    schemas: schemas)
            else { continue }
            if !ruleIDs.insert(rule.id).inserted {
                errors.errors.append(ConfigError(.invalidValue, "a second rule has the id \"\(rule.id)\"", at: ruleNode.location))
                continue
            }
            rules.append(rule)
        }
        guard errors.errors.count == before, let name else { return nil }
        return RulePolicy(name: name, rules: rules, defaultDecision: PolicyDecision(defaultVerdict, reason: defaultReason, rule: "default"))
    }

    /// One policy rule; nil when it has errors, which go to `errors` (each part is read).
    static func readRule(
        _ ruleNode: ConfigNode, index: Int, toolNames: [String], known: Set<String>, servers: [String], references: inout [ToolReference],
        errors: inout ConfigErrors, schemas: [String: JSONValue] = [:]
    ) -> PolicyRule? {
        let before = errors.errors.count
        guard var ruleFields = errors.collect({ () throws(ConfigError) in try ruleNode.mapping("policy rules[\(index)]") }) else {
            return nil
        }
        let id = errors.collect { () throws(ConfigError) in try ruleFields.required("id").nonEmptyString("the rule's id") }
        let what = id.map { "rule \"\($0)\"" } ?? "policy rules[\(index)]"
        let verdict = errors.collect { () throws(ConfigError) -> Verdict in
            try ruleFields.required("verdict", hint: "allow, deny or approval_required").choice("\(what) verdict")
        }
        let reason = errors.collect { () throws(ConfigError) in try ruleFields.optional("reason")?.string("\(what) reason") } ?? nil
        var rule = PolicyRule(id: id ?? "", verdict: verdict ?? .deny, reason: reason)
        if let when = ruleFields.optional("when"),
            var condition = errors.collect({ () throws(ConfigError) in try when.mapping("\(what) when") })
        {
            // Names the agent lacks are found after the lists are read: each is its own error.
            var unknown: [ConfigError] = []
            errors.collect { () throws(ConfigError) in
                guard let toolNode = condition.optional("tool") else { return }
                rule.tools = try toolNode.strings("\(what) tool").map(Glob.init)
                for glob in rule.tools where glob.isLiteral && !known.contains(glob.pattern) {
                    // A server may offer it: checked when the servers have listed their tools.
                    guard servers.isEmpty else {
                        references.append(ToolReference(name: glob.pattern, location: toolNode.location, what: what))
                        continue
                    }
                    unknown.append(
                        ConfigError(
                            .invalidValue, "\(what) names the tool \"\(glob.pattern)\", which the agent does not have",
                            at: toolNode.location,
                            hint: ConfigNode.suggestion(for: glob.pattern, among: toolNames).map { "did you mean \"\($0)\"?" }))
                }
            }
            errors.collect { () throws(ConfigError) in
                guard let value = condition.optional("side_effect") else { return }
                var effects: [SideEffect] = []
                let nodes: [ConfigNode] = (try? value.list("side_effect")) ?? [value]
                for item in nodes { effects.append(try item.choice("\(what) side_effect")) }
                rule.sideEffects = effects
            }
            errors.collect { () throws(ConfigError) in
                guard let serverNode = condition.optional("server") else { return }
                rule.servers = try serverNode.strings("\(what) server").map(Glob.init)
                for glob in rule.servers where glob.isLiteral && !servers.contains(glob.pattern) {
                    // A policy file's server is the one it is given to: checked by its reader.
                    guard !servers.contains("*") else {
                        references.append(ToolReference(name: glob.pattern, location: serverNode.location, what: what, isServer: true))
                        continue
                    }
                    unknown.append(
                        ConfigError(
                            .invalidValue, "\(what) names the MCP server \"\(glob.pattern)\", which the agent does not have",
                            at: serverNode.location,
                            hint: ConfigNode.suggestion(for: glob.pattern, among: servers).map { "did you mean \"\($0)\"?" }))
                }
            }
            errors.errors.append(contentsOf: unknown)
            errors.collect { () throws(ConfigError) in
                rule.actors = try condition.optional("actor")?.strings("\(what) actor").map(Glob.init) ?? []
            }
            errors.collect { () throws(ConfigError) in
                rule.routes = try condition.optional("route")?.strings("\(what) route").map(Glob.init) ?? []
            }
            if let arguments = condition.optional("arguments"),
                let pairs = errors.collect({ () throws(ConfigError) in try arguments.mapping("\(what) arguments").pairs })
            {
                for pair in pairs {
                    errors.collect { () throws(ConfigError) in rule.arguments.append(try readCondition(pair, what: what)) }
                    if let problem = undeclaredArgument(pair, of: rule.tools, schemas: schemas, what: what) {
                        errors.errors.append(problem)
                    }
                }
            }
            errors.collect { () throws(ConfigError) in rule.isApproved = try condition.optional("approved")?.bool("\(what) approved") }
            errors.collect { () throws(ConfigError) in
                rule.toolCallsLeftBelow = try condition.optional("tool_calls_left_below")?.int(
                    "\(what) tool_calls_left_below", in: 0...Int.max)
            }
            errors.collect { () throws(ConfigError) in
                rule.tokensLeftBelow = try condition.optional("tokens_left_below")?.int("\(what) tokens_left_below", in: 0...Int.max)
            }
            errors.errors.append(contentsOf: condition.unknownKeys(in: "\(what) when"))
        }
        errors.errors.append(contentsOf: ruleFields.unknownKeys(in: what))
        return errors.errors.count == before ? rule : nil
    }

    /// The error for a rule's argument condition whose first key none of the rule's tools takes,
    /// by their input schemas: a misspelt key (`amount_cent` for `amount_cents`) made a deny rule
    /// that never fires. Only for rules naming the agent's own tools literally, whose schemas
    /// declare their properties; a key no schema declares is an error when every schema admits
    /// no other (`additionalProperties: false`) or it is close to one declared (a misspelling).
    static func undeclaredArgument(_ pair: ConfigNode.Pair, of tools: [Glob], schemas: [String: JSONValue], what: String) -> ConfigError? {
        guard let first = pair.key.split(separator: ".").first.map(String.init), !tools.isEmpty, tools.allSatisfy(\.isLiteral) else {
            return nil
        }
        var declared: [String] = []
        var admitsNoOther = true
        for tool in tools {
            // A server's tool: its schema is known when the server lists it.
            guard let schema = schemas[tool.pattern], let properties = schema["properties"]?.objectValue, !properties.isEmpty else {
                return nil
            }
            if properties[first] != nil { return nil }
            declared += properties.keys
            if schema["additionalProperties"] != .bool(false) { admitsNoOther = false }
        }
        let suggestion = ConfigNode.suggestion(for: first, among: declared)
        guard admitsNoOther || suggestion != nil else { return nil }
        return ConfigError(
            .invalidValue,
            "\(what) arguments: \(pair.key) is not an argument \(tools.map(\.pattern).joined(separator: ", ")) takes (its input_schema "
                + "declares \(Array(Set(declared)).sorted().joined(separator: ", "))): the condition would never see a value",
            at: pair.keyLocation, hint: suggestion.map { "did you mean \"\($0)\"?" } ?? "check the key against the tool's input_schema")
    }

    static func readCondition(_ pair: ConfigNode.Pair, what: String) throws(ConfigError) -> ArgumentCondition {
        let path = pair.key.split(separator: ".").map(String.init)
        let node = pair.value
        guard case .mapping(let tests) = node.content else {
            return ArgumentCondition(path: path, test: .equals(node.json))
        }
        guard tests.count == 1, let test = tests.first else {
            throw ConfigError(
                .invalidValue, "\(what) argument \"\(pair.key)\" needs exactly one test: equals, in, matches, min, max or exists",
                at: node.location)
        }
        let place = "\(what) argument \"\(pair.key)\" \(test.key)"
        switch test.key {
        case "equals": return ArgumentCondition(path: path, test: .equals(test.value.json))
        case "in":
            var values: [JSONValue] = []
            for item in try test.value.list(place) { values.append(item.json) }
            return ArgumentCondition(path: path, test: .oneOf(values))
        case "matches":
            return ArgumentCondition(path: path, test: .matches(try test.value.regex(place)))
        case "min": return ArgumentCondition(path: path, test: .atLeast(try test.value.double(place)))
        case "max": return ArgumentCondition(path: path, test: .atMost(try test.value.double(place)))
        case "exists": return ArgumentCondition(path: path, test: .exists(try test.value.bool(place)))
        default:
            throw ConfigError(
                .unknownKey, "\(what) argument \"\(pair.key)\" has no test \"\(test.key)\"", at: test.keyLocation,
                hint: "tests: equals, in, matches, min, max, exists")
        }
    }

    static func readLimits(_ node: ConfigNode) throws(ConfigError) -> RunLimits {
        var fields = try node.mapping("limits")
        let limits = RunLimits(
            maxSteps: try fields.optional("max_steps")?.int("limits.max_steps", in: 1...Int.max),
            maxToolCalls: try fields.optional("max_tool_calls")?.int("limits.max_tool_calls", in: 0...Int.max),
            timeoutMs: try fields.optional("timeout_ms")?.int("limits.timeout_ms", in: 1...Int.max),
            tokenBudget: try fields.optional("token_budget")?.int("limits.token_budget", in: 1...Int.max))
        try fields.finish()
        return limits
    }

    static func readItems(_ node: ConfigNode, what: String) throws(ConfigError) -> [ContextItem] {
        var items: [ContextItem] = []
        for (index, item) in try node.list(what).enumerated() {
            var fields = try item.mapping("\(what)[\(index)]")
            items.append(
                ContextItem(
                    id: try fields.required("id").nonEmptyString("\(what)[\(index)].id"),
                    text: try fields.required("text").string("\(what)[\(index)].text")))
            try fields.finish()
        }
        return items
    }

    enum FlushName: String, CaseIterable {
        case everyEvent = "every_event"
        case durabilityPoints = "durability_points"
        case batch
    }

    enum SyncName: String, CaseIterable {
        case never
        case durabilityPoints = "durability_points"
        case everyFlush = "every_flush"
    }

    static func readDurability(_ node: ConfigNode) throws(ConfigError) -> Durability {
        var fields = try node.mapping("durability")
        var durability = Durability()
        if let value = fields.optional("flush") {
            switch try value.choice("durability.flush", as: FlushName.self) {
            case .everyEvent: durability.flush = .everyEvent
            case .durabilityPoints: durability.flush = .durabilityPoints
            case .batch:
                let size = try fields.required("batch_size").int("durability.batch_size", in: 1...1_000_000)
                durability.flush = .batch(size)
            }
        }
        _ = fields.optional("batch_size")
        if let value = fields.optional("fsync") {
            switch try value.choice("durability.fsync", as: SyncName.self) {
            case .never: durability.sync = .never
            case .durabilityPoints: durability.sync = .durabilityPoints
            case .everyFlush: durability.sync = .everyFlush
            }
        }
        try fields.finish()
        return durability
    }
}
