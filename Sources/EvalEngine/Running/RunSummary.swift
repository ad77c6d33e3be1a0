public import TraceCore

/// The trajectory facts reports and baselines keep of a run.
public struct RunSummary: Sendable, Hashable {
    /// Executed tools, in proposal order, with repeats.
    public var tools: [String] = []
    /// Tools proposed but never run (denied, refused, waiting, cut off by a limit).
    public var attempted: [String] = []
    public var stopReason: StopReason?
    public var limit: LimitKind?
    public var steps = 0
    public var tokens = 0
    public var durationMs = 0
    /// Where the log was cut, for a torn log.
    public var tear: String?
    /// The tools the run had (its `run_started` tool list), in that order.
    public var availableTools: [String] = []
    /// The MCP servers those tools came from, each once, in that order.
    public var availableServers: [String] = []
    /// For a pipeline run: how it stopped (`succeeded`, `failed`), and the tasks that ran in
    /// its current branch, in plan order.
    public var pipelineStatus: String?
    public var tasks: [String] = []
    /// For a conversation: the user turns it had, and the tokens the user's model spent (never
    /// part of `tokens`, which are the agent's); nil for a run that is no conversation.
    public var userTurns: Int?
    public var userTokens: Int?
    /// The run's id and start time (its `run_started`); nil for a log that holds none. A log
    /// and its copy (or a copy of part of it) share both: one run, however many files hold it.
    public var runId: String?
    public var startedAtUs: Int?

    public init() {}

    /// The stop reason of a run, or the status of a pipeline: what baselines compare.
    public var stopName: String? { stopReason?.rawValue ?? pipelineStatus }

    /// A pipeline run's summary; `durationMs` is from its first event to its last.
    public init(_ state: PipelineState, durationMs: Int) {
        pipelineStatus = state.stop?.status.rawValue
        tasks = state.tasks.filter { !$0.currentAttempts.isEmpty }.map(\.id)
        self.durationMs = durationMs
    }

    public init(_ state: RunState) {
        runId = state.runId
        startedAtUs = state.startedAtUs
        tools = state.toolNames(executed: true)
        attempted = state.toolNames(executed: false)
        stopReason = state.stopReason
        limit = state.limitFired
        steps = state.decisionStepCount
        tokens = state.usage.totalTokens
        durationMs = state.elapsedUs / 1000
        availableTools = state.start?.tools.map(\.name) ?? []
        var servers = Set<String>()
        availableServers = (state.start?.tools ?? []).compactMap(\.server).filter { servers.insert($0).inserted }
        if state.isConversation {
            userTurns = state.userTurns.count
            userTokens = state.userUsage.totalTokens
        }
    }
}
