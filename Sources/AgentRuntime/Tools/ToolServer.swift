import ConfigFile
import Foundation
public import TraceCore

/// A tool server as an agent file declares it (`mcp_servers:`, docs/mcp.md): a command that
/// speaks the Model Context Protocol on stdin and stdout, started for each run, or the URL of
/// a server that speaks it over HTTP (Streamable HTTP), which is running already.
public struct ToolServerSettings: Sendable, Hashable {
    /// The agent file's key for it; rules match it with `server:`.
    public var name: String
    /// The server's command; empty for a server at a `url`.
    public var command: [String]
    /// The endpoint of a server over HTTP (`http://…/mcp`); nil for a command.
    public var url: String?
    /// The headers every request to `url` carries (an `Authorization`), as the file gives them:
    /// `${NAME}` is read from the environment when the server is reached (`resolvedHeaders`).
    public var headers: [String: String]
    /// The environment variables the headers named: their values are redacted from the log.
    public var headerVariables: [String]
    public var directory: String
    /// The server's whole environment.
    public var environment: [String: String]
    /// From starting the process to the end of `tools/list`.
    public var startTimeoutMs: Int
    /// Per call, unless a tool says otherwise; a call past it kills the server.
    public var callTimeoutMs: Int
    /// Put before each tool's name in the agent (`git_` turns `git_status` into `git_git_status`),
    /// to keep the names of two servers apart.
    public var prefix: String
    /// The server's tools the agent offers (by the server's names); nil for all of them.
    public var include: [String]?
    /// The side effect every tool of the server is given, over what the server's annotations say.
    public var sideEffect: SideEffect?
    /// Where the agent file declares it, for errors found when the server starts.
    public var location: SourceLocation?

    public init(
        name: String, command: [String], directory: String, environment: [String: String] = [:], startTimeoutMs: Int = 30_000,
        callTimeoutMs: Int = 30_000, prefix: String = "", include: [String]? = nil, sideEffect: SideEffect? = nil,
        location: SourceLocation? = nil, url: String? = nil, headers: [String: String] = [:], headerVariables: [String] = []
    ) {
        self.name = name
        self.command = command
        self.url = url
        self.headers = headers
        self.headerVariables = headerVariables
        self.directory = directory
        self.environment = environment
        self.startTimeoutMs = startTimeoutMs
        self.callTimeoutMs = callTimeoutMs
        self.prefix = prefix
        self.include = include
        self.sideEffect = sideEffect
        self.location = location
    }
}

extension ToolServerSettings {
    /// A header value's `${NAME}` that cannot be read: malformed, or a variable that is not set.
    public struct HeaderProblem: Error, Sendable {
        public var message: String
        public var hint: String?
    }

    /// `text` with each `${NAME}` replaced by `lookup(NAME)`, and the names in order; throws for
    /// a `${` without its `}`, a name that is not a variable's, or a variable `lookup` lacks.
    public static func substitute(_ text: String, _ lookup: (String) -> String?) throws(HeaderProblem) -> (
        value: String, variables: [String]
    ) {
        var rest = Substring(text)
        var value = ""
        var variables: [String] = []
        while let start = rest.range(of: "${") {
            value += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                throw HeaderProblem(message: "has a ${ without its }")
            }
            let name = String(rest[start.upperBound..<end])
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                throw HeaderProblem(message: "names \"${\(name)}\", which is not a variable name")
            }
            guard let found = lookup(name) else {
                throw HeaderProblem(
                    message: "names ${\(name)}, which is not set in the environment",
                    hint: "export \(name) before the run; a header's secret is read from the environment, never the file")
            }
            value += found
            variables.append(name)
            rest = rest[rest.index(after: end)...]
        }
        return (value + rest, variables)
    }

    /// The headers with each `${NAME}` read from `environment`; throws naming the header and the
    /// first variable that is not set. A value with a line break in it is refused too.
    public func resolvedHeaders(environment: [String: String]) throws(HeaderProblem) -> [String: String] {
        var resolved: [String: String] = [:]
        for (name, template) in headers.sorted(by: { $0.key < $1.key }) {
            do throws(HeaderProblem) {
                let value = try Self.substitute(template) { environment[$0] }.value
                guard !value.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                    throw HeaderProblem(message: "holds a line break once its variables are read")
                }
                resolved[name] = value
            } catch {
                throw HeaderProblem(message: "headers.\(name) \(error.message)", hint: error.hint)
            }
        }
        return resolved
    }
}

/// One tool as a server lists it.
public struct ServedTool: Sendable, Hashable {
    public var name: String
    public var description: String
    public var inputSchema: JSONValue
    /// What the server's hints say (`readOnlyHint` → read, `destructiveHint: false` → draft,
    /// otherwise write); nil when it gives none.
    public var sideEffect: SideEffect?
    /// The schema the server says the tool's `structuredContent` follows (MCP's `outputSchema`),
    /// when it gives one.
    public var outputSchema: JSONValue?

    public init(name: String, description: String, inputSchema: JSONValue, sideEffect: SideEffect? = nil, outputSchema: JSONValue? = nil) {
        self.name = name
        self.description = description
        self.inputSchema = inputSchema
        self.outputSchema = outputSchema
        self.sideEffect = sideEffect
    }

    /// The tools of one page of an MCP `tools/list` result, in its order (the MCP tools and
    /// `agent-eval mcp-proxy` read a listing this one way). Throws a sentence naming the item
    /// that is not a tool.
    public static func tools(ofMCPListing result: JSONValue) throws(ListingError) -> [ServedTool] {
        guard let list = result["tools"]?.arrayValue else { throw ListingError(message: "answered tools/list without a \"tools\" list") }
        var tools: [ServedTool] = []
        for (index, item) in list.enumerated() {
            guard let name = item["name"]?.stringValue, !name.isEmpty else {
                throw ListingError(message: "tools/list item \(index) has no name")
            }
            let schema = item["inputSchema"] ?? ["type": "object"]
            guard schema.objectValue != nil else {
                throw ListingError(message: "tool \"\(name)\" has an input schema that is not an object")
            }
            tools.append(
                ServedTool(
                    name: name, description: item["description"]?.stringValue ?? item["title"]?.stringValue ?? "",
                    inputSchema: schema, sideEffect: sideEffect(mcpAnnotations: item["annotations"]),
                    outputSchema: item["outputSchema"].flatMap { $0.objectValue == nil ? nil : $0 }))
        }
        return tools
    }

    /// What an MCP tool's annotations say of its side effect: `readOnlyHint` → read;
    /// `destructiveHint: false` → draft; other hints → write; none → nil.
    public static func sideEffect(mcpAnnotations hints: JSONValue?) -> SideEffect? {
        guard let hints = hints?.objectValue else { return nil }
        if hints["readOnlyHint"]?.boolValue == true { return .read }
        if hints["destructiveHint"]?.boolValue == false { return .draft }
        if hints["readOnlyHint"] != nil || hints["destructiveHint"] != nil { return .write }
        return nil
    }

    /// What an MCP `tools/call` result says: `ok` with the result (less `isError`, `_meta` and `resultType`)
    /// as output, or `error` with the text of its content when `isError` is set. The MCP tools
    /// and `agent-eval mcp-proxy` read a result this one way, so a call records the same output
    /// through either.
    public static func outcome(ofMCPResult result: JSONValue?) -> ToolOutcome {
        guard let result = result?.objectValue else {
            return .failure("the server answered tools/call without a result object")
        }
        // A result of another shape is not taken as the tool's answer: `content` is a list (and a
        // result has it, or at least `structuredContent`), `isError` true or false.
        // `null` is taken as absent (a serializer that writes every member).
        if let content = result["content"], content != .null, content.arrayValue == nil {
            return .failure(
                "the server's tools/call result has content that is \(content.typeDescription), not a list: \(JSONWriter.encodeString(.object(result)).prefix(300))"
            )
        }
        if (result["content"] ?? .null) == .null && (result["structuredContent"] ?? .null) == .null {
            return .failure(
                "the server's tools/call result has neither content nor structuredContent: \(JSONWriter.encodeString(.object(result)).prefix(300))"
            )
        }
        if let flag = result["isError"], flag != .null, flag.boolValue == nil {
            return .failure(
                "the server's tools/call result says isError \(JSONWriter.encodeString(flag).prefix(100)), not true or false: "
                    + "whether the call failed is not said\(Self.contentText(of: result).map { " (its text: \($0.prefix(300)))" } ?? "")")
        }
        // What the protocol adds (`isError`, `_meta`, 2026-07-28's `resultType`) is not the tool's
        // output: the same call records the same output in either era.
        let output = JSONValue.object(
            JSONObject(result.filter { !["isError", "_meta", "resultType"].contains($0.key) }.map { ($0.key, $0.value) }))
        guard result["isError"]?.boolValue == true else { return .ok(output) }
        return ToolOutcome(
            status: .error, output: output, error: contentText(of: result) ?? "the tool reported an error (isError) without text")
    }

    /// The text of a result's `content` blocks, joined; nil when there is none.
    private static func contentText(of result: JSONObject) -> String? {
        let text = (result["content"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue }.joined(separator: "\n")
        return text.isEmpty ? nil : text
    }

    /// The output schemas `tools` declare, by tool name, as `checked(_:against:)` takes them: the
    /// MCP tools and `mcp-proxy` check a result against the same one. A schema that cannot be read
    /// is left out (it was read the same way when the tools were listed).
    public static func outputSchemas(of tools: [ServedTool]) -> [String: JSONSchema] {
        var schemas: [String: JSONSchema] = [:]
        for tool in tools {
            if let json = tool.outputSchema, let schema = try? JSONSchema(json: json, unknownKeywords: .ignore) {
                schemas[tool.name] = schema
            }
        }
        return schemas
    }

    /// `outcome` held to the tool's `outputSchema` (MCP: a server MUST give `structuredContent`
    /// that conforms to the schema it declares, and a client SHOULD check it): an `ok` result
    /// without `structuredContent`, or with one the schema does not take, is an error saying
    /// where, its output kept. Keywords past the subset agent-eval checks (`JSONSchema`,
    /// `.ignore`) are not checked; a schema it cannot read at all checks nothing.
    public static func checked(_ outcome: ToolOutcome, against schema: JSONSchema?) -> ToolOutcome {
        guard let schema, outcome.status == .ok, let output = outcome.output else { return outcome }
        let problem =
            output["structuredContent"].map { structured in
                schema.violation(of: structured, root: "structuredContent").map {
                    "the result does not follow the tool's outputSchema: \($0)"
                }
            } ?? "the tool declares an outputSchema, and its result has no structuredContent"
        guard let problem else { return outcome }
        var failed = outcome
        failed.status = .error
        failed.error = problem
        return failed
    }

    /// A `tools/list` result that is not a list of tools.
    public struct ListingError: Error {
        public var message: String
    }
}

/// A running tool server: what it is, what it offers, and calls to it (`invoke` receives the
/// server's own tool names).
public protocol ToolServerConnection: ToolHost {
    var identity: ToolServerIdentity { get }
    var tools: [ServedTool] { get }
    /// Stops the server. Idempotent.
    func close() async
}

/// Starts tool servers. The `MCPTools` module's `MCPServers` is the one this project has; the
/// runtime only sees this protocol, so it never imports an MCP SDK.
public protocol ToolServerConnector: Sendable {
    /// Starts the server, agrees on the protocol and lists its tools, within
    /// `settings.startTimeoutMs`. Throws a `Diagnostic` that says what went wrong.
    func connect(_ settings: ToolServerSettings) async throws -> any ToolServerConnection
}

/// A tool the agent file names (in a policy rule) that may be one a server offers: checked
/// when the servers have listed their tools.
public struct ToolReference: Sendable, Hashable {
    public var name: String
    public var location: SourceLocation
    /// What names it, for the message: `rule "no-writes"`.
    public var what: String
    /// Whether the name is an MCP server's (a rule's `server:`), not a tool's.
    public var isServer = false

    public init(name: String, location: SourceLocation, what: String, isServer: Bool = false) {
        self.name = name
        self.location = location
        self.what = what
        self.isServer = isServer
    }
}

/// A server's tool as the agent calls it: requests carry the agent's name for the tool, the
/// server gets its own.
struct ServerToolHost: ToolHost {
    var connection: any ToolServerConnection
    var remoteName: String

    func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
        var request = request
        request.tool = remoteName
        return try await connection.invoke(request)
    }

    var timeoutGraceMs: Int { connection.timeoutGraceMs }
}

/// Why a run could not get its tool servers going; the run does not start and no log is written.
public struct ToolServerError: Diagnostic, Hashable {
    public var message: String
    public var location: SourceLocation?
    public var hint: String?

    public init(_ message: String, at location: SourceLocation? = nil, hint: String? = nil) {
        self.message = message
        self.location = location
        self.hint = hint
    }

    public var diagnosticCode: String { "runtime.tool_server" }
    public var place: SourceLocation? { location }
}

extension Agent {
    /// The agent with its tool servers started and their tools registered after its own, and
    /// the connections to close when the run ends. An agent without servers comes back as it is.
    public func connectingToolServers() async throws(ToolServerError) -> (Agent, [any ToolServerConnection]) {
        guard !toolServers.isEmpty else {
            try checkToolReferences(tools)
            return (self, [])
        }
        guard let connector = toolServerConnector else {
            throw ToolServerError(
                "the agent uses MCP servers, which this program cannot start (it was built without the MCPTools module)",
                at: toolServers[0].location, hint: "use the agent-eval command")
        }
        var connections: [any ToolServerConnection] = []
        do throws(ToolServerError) {
            var agent = self
            for settings in toolServers {
                let connection: any ToolServerConnection
                do {
                    connection = try await connector.connect(settings)
                } catch {
                    let diagnostic = error as? any Diagnostic
                    throw ToolServerError(
                        "MCP server \"\(settings.name)\": \(diagnostic?.message ?? "\(error)")", at: settings.location,
                        hint: diagnostic?.hint)
                }
                connections.append(connection)
                try agent.register(connection, settings: settings)
                agent.toolServerIdentities.append(connection.identity)
            }
            try agent.checkToolReferences(agent.tools)
            agent.startedToolServers += toolServers
            agent.toolServers = []
            return (agent, connections)
        } catch {
            for connection in connections { await connection.close() }
            throw error
        }
    }

    private mutating func register(_ connection: any ToolServerConnection, settings: ToolServerSettings) throws(ToolServerError) {
        let offered = connection.tools.map(\.name)
        for name in settings.include ?? [] where !offered.contains(name) {
            throw ToolServerError(
                "MCP server \"\(settings.name)\" has no tool \"\(name)\" (it offers \(offered.joined(separator: ", ")))",
                at: settings.location,
                hint: ConfigNode.suggestion(for: name, among: offered).map { "did you mean \"\($0)\"?" })
        }
        for served in connection.tools where settings.include?.contains(served.name) ?? true {
            let name = settings.prefix + served.name
            if let existing = tools[name] {
                let owner = existing.spec.server.map { "MCP server \"\($0)\"" } ?? "the agent file"
                throw ToolServerError(
                    "MCP server \"\(settings.name)\" offers a tool \"\(name)\", and \(owner) has one of that name", at: settings.location,
                    hint: "give the server a prefix (prefix: \(settings.name)_) or list the tools to take (tools: [...])")
            }
            let spec = ToolSpec(
                name: name, description: served.description, inputSchema: served.inputSchema,
                sideEffect: settings.sideEffect ?? served.sideEffect ?? .write, server: settings.name)
            do {
                tools.register(
                    try Tool(
                        spec: spec, host: ServerToolHost(connection: connection, remoteName: served.name),
                        timeoutMs: settings.callTimeoutMs, unknownKeywords: .ignore))
            } catch {
                throw ToolServerError(
                    "MCP server \"\(settings.name)\" tool \"\(served.name)\": its input schema \(error.sentence)", at: settings.location)
            }
        }
    }

    /// Every tool a rule names exists, now that all tools are known.
    func checkToolReferences(_ registry: ToolRegistry) throws(ToolServerError) {
        for reference in toolReferences where registry[reference.name] == nil {
            throw ToolServerError(
                "\(reference.what) names the tool \"\(reference.name)\", which neither the agent file nor its MCP servers offer",
                at: reference.location,
                hint: ConfigNode.suggestion(for: reference.name, among: registry.names).map { "did you mean \"\($0)\"?" })
        }
    }
}
