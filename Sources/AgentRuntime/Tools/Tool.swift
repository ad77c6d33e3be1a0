public import TraceCore

/// A tool the runtime can call: what the model sees (`spec`), how its input is checked
/// (`schema`), where it runs (`host`), and how long and how often it may be tried.
public struct Tool: Sendable {
    public var spec: ToolSpec
    public var schema: JSONSchema
    public var host: any ToolHost
    /// Per-attempt time limit.
    public var timeoutMs: Int
    public var retry: RetryPolicy

    /// A tool; throws `SchemaError` when `spec.inputSchema` is not a schema this runtime reads
    /// (keywords outside the subset are an error unless `unknownKeywords` is `.ignore`).
    public init(
        spec: ToolSpec, host: any ToolHost, timeoutMs: Int = 30_000, retry: RetryPolicy = RetryPolicy(),
        unknownKeywords: JSONSchema.UnknownKeywords = .reject
    ) throws(SchemaError) {
        self.spec = spec
        // The schema is recorded in run_started: it must stay within what readers accept.
        if spec.inputSchema.nests(deeperThan: JSONValue.recordableDepth - 8) {
            throw SchemaError(path: [], message: "nests deeper than \(JSONValue.recordableDepth - 8) levels, more than a log can hold")
        }
        self.schema = try JSONSchema(json: spec.inputSchema, unknownKeywords: unknownKeywords)
        self.host = host
        self.timeoutMs = timeoutMs
        self.retry = retry
    }

    public var name: String { spec.name }
}

/// How failed attempts marked retryable are tried again.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included (1 = no retries).
    public var maxAttempts: Int
    /// The wait before the first retry.
    public var backoffMs: Int
    /// Each further wait is the previous times this.
    public var multiplier: Double

    public init(maxAttempts: Int = 1, backoffMs: Int = 100, multiplier: Double = 2) {
        self.maxAttempts = maxAttempts
        self.backoffMs = backoffMs
        self.multiplier = multiplier
    }

    /// The wait before `attempt` (2 for the first retry), in milliseconds.
    public func backoff(before attempt: Int) -> Int {
        Backoff.exponential(initialMs: backoffMs, multiplier: multiplier).boundMs(retry: attempt - 1)
    }
}

/// The tools of an agent, in the agent's order (the order the model is shown them).
public struct ToolRegistry: Sendable {
    public private(set) var tools: [Tool] = []

    public init(_ tools: [Tool] = []) {
        for tool in tools { register(tool) }
    }

    /// Adds a tool, replacing one of the same name.
    public mutating func register(_ tool: Tool) {
        if let index = tools.firstIndex(where: { $0.name == tool.name }) {
            tools[index] = tool
        } else {
            tools.append(tool)
        }
    }

    public subscript(name: String) -> Tool? {
        tools.first { $0.name == name }
    }

    public var specs: [ToolSpec] { tools.map(\.spec) }
    public var names: [String] { tools.map(\.name) }
}
