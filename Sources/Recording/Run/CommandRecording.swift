public import AgentRuntime
import Foundation
public import ModelClients
import Synchronization
public import TraceCore
public import TraceLog

/// `agent-eval record -- COMMAND`: runs a command with its model traffic going through a
/// recording gateway, and records the run as an ordinary log (docs/record.md).
///
/// The command gets `OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL` pointing at the gateway (the
/// variables the official SDKs and the frameworks built on them read), `AGENT_EVAL_RECORDER`
/// pointing at its proxy endpoint (an `agent-eval mcp-proxy` it starts records there), `AGENT_EVAL_INPUT` and
/// its standard input set to `input` when one is given, and its output goes to this process's
/// as it comes. With a cassette in `none` mode, nothing goes to a provider, so an API key the
/// environment lacks is set to a placeholder (the SDKs refuse to start without one).
public struct CommandRecording: Sendable {
    public var command: [String]
    public var directory: String?
    public var input: String?
    /// The log to write.
    public var logPath: String
    public var runId: String
    /// The run's goal; nil takes the first request's first user message.
    public var goal: String?
    /// The agent's name in `run_started`.
    public var agentName: String
    public var timeoutMs: Int
    public var limits: ExchangeRecorder.Limits
    public var upstreams: Upstreams
    public var cassette: Cassette?
    public var requestLimits: RequestLimits
    /// The command's environment, before the gateway's variables are added.
    public var environment: [String: String]
    public var logOptions: LogWriter.Options
    /// Where the command's standard output goes as it comes: 1, or 2 when this process's own
    /// standard output is for a machine (`--json`); nil discards it and its standard error (eval
    /// runs, many at once), keeping only their tails: the last line of its standard error goes
    /// into the stop of a run it ended badly.
    public var outputDescriptor: Int32? = 1
    /// What answers the model requests in place of the upstreams over HTTP (a cassette still
    /// comes first); nil sends them to the upstreams.
    public var upstream: (any ModelTransport)?
    /// Given the log once the run is recorded and closed (the CLI's `record`: index it, export
    /// it); nil for nothing. Eval runs leave it nil: the session gives a case's logs to its own.
    public var finishedLogs: (any FinishedLogSink)?
    /// Whether the command's OpenTelemetry exporters are pointed at the gateway
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`…) and their spans merged into the run.
    public var takesSpans = true
    /// The recorded run this one forks (`agent-eval fork` of a log `record` wrote); nil for a run
    /// of its own.
    public var fork: RecordedFork?
    /// The simulated user the command talks with (`CommandConversation`): its first turn is the
    /// command's input and the run's goal, each later one a line on its standard input. Nil for a
    /// run on one input.
    public var conversation: Conversation?

    public init(
        command: [String], directory: String? = nil, input: String? = nil, logPath: String, runId: String, goal: String? = nil,
        agentName: String, timeoutMs: Int, limits: ExchangeRecorder.Limits = .init(), upstreams: Upstreams, cassette: Cassette? = nil,
        requestLimits: RequestLimits = CommandRecording.defaultRequestLimits, environment: [String: String],
        logOptions: LogWriter.Options = LogWriter.Options()
    ) {
        self.command = command
        self.directory = directory
        self.input = input
        self.logPath = logPath
        self.runId = runId
        self.goal = goal
        self.agentName = agentName
        self.timeoutMs = timeoutMs
        self.limits = limits
        self.upstreams = upstreams
        self.cassette = cassette
        self.requestLimits = requestLimits
        self.environment = environment
        self.logOptions = logOptions
    }

    /// A model request may take 10 minutes, the answer included (long reasoning replies).
    public static let defaultRequestLimits = RequestLimits(timeoutMs: 600_000, connectTimeoutMs: 10_000, idleTimeoutMs: 600_000)

    /// The placeholder key given to a command replaying offline without one.
    public static let offlineKey = "agent-eval-offline-replay"

    /// A name for the agent from its command: the script an interpreter runs
    /// (`python3 agents/refund.py` → `refund`), else the program's name.
    public static func agentName(for command: [String]) -> String {
        let interpreters: Set<String> = ["python", "python3", "node", "bun", "deno", "uv", "npx", "bash", "sh", "ruby", "env"]
        // `env NAME=value …` sets variables (a key, a base URL): never part of a name. Told on the
        // word as given, before its last path component is taken (`URL=http://h/v1` is not `v1`).
        var words = command.filter { !ShellWords.isAssignment($0) }.map { ($0 as NSString).lastPathComponent }
        while let first = words.first, interpreters.contains(first) || first.hasPrefix("python3.") || first.hasPrefix("-") || first == "run"
        {
            words.removeFirst()
        }
        let name = ((words.first ?? command.first ?? "agent") as NSString).deletingPathExtension
        return RuntimeEnvironment.fileNameComponent(name.isEmpty ? "agent" : name)
    }

    /// The values of the environment's credentials (`*_API_KEY`, `*_TOKEN`, `*_SECRET`): the
    /// command may print them, and they are kept out of the log.
    static func secrets(in environment: [String: String]) -> Set<String> {
        Set(
            environment.filter { name, value in
                !value.isEmpty && value != offlineKey && ["_API_KEY", "_TOKEN", "_SECRET"].contains { name.uppercased().hasSuffix($0) }
            }.values)
    }

    /// How the recording went.
    public struct Outcome: Sendable {
        public var logPath: String
        public var runId: String
        public var stop: RunStopped
        /// The command's exit status, when it exited.
        public var exitStatus: Int32?
        /// The signal that ended it, when one did.
        public var signal: Int32?
        public var isTimedOut: Bool
        /// Model requests answered.
        public var requests: Int
        /// Model requests the upstream answered with a status that still failed (a reply that
        /// could not be read, an HTTP error): made, but not answered.
        public var failedRequests = 0
        /// Requests the gateway refused before they could be recorded (a wrong path, a body that
        /// is not a JSON object), and why the first was.
        public var refusedRequests = 0
        public var firstRefusal: String?
        /// Answered requests whose reply carried no token usage: `--max-tokens` counted an
        /// estimate for each.
        public var unmeteredReplies = 0
        /// Why the recorder stopped the command, when it did.
        public var stopCause: ExchangeRecorder.StopCause?
        /// Tool calls MCP proxies judged into the run (`mcp-proxy` under `record`).
        public var proxiedCalls = 0
        /// What became of the command's OpenTelemetry spans.
        public var spans = ExchangeRecorder.SpanCounts()
        /// A fork's edited calls whose result no request carried to the model (`RecordedFork`).
        public var unshownEdits: [String] = []
    }

    /// Runs the command to its end and records it; throws when the gateway or the command cannot
    /// start, or the log cannot be written.
    public func run() async throws -> Outcome {
        // Identical requests are numbered only for a cassette's keys.
        var keys: RequestKeys?
        var transport = upstream ?? ModelTransports.live
        var prefixTransport: (any ModelTransport)?
        if cassette != nil || fork != nil {
            // One numbering for both cassettes: a fork's requests are numbered as its parent's were.
            let numbering = RequestKeys()
            keys = numbering
            if let cassette { transport = cassette.transport(provider: "gateway", live: transport, keyedBy: numbering.key(for:)) }
            prefixTransport = fork.map {
                $0.cassette.transport(provider: "gateway", live: ModelTransports.live, keyedBy: numbering.key(for:))
            }
        }
        let stopper = Stopper()
        // A conversation opens with the user's first turn: the command's input and the run's goal.
        var input = self.input
        var goal = self.goal
        var opening: UserTurn?
        var openingFault: SimulatorFault?
        if let conversation {
            do {
                opening = try await CommandConversation.opening(of: conversation, runId: runId)
            } catch let fault as SimulatorFault {
                openingFault = fault
            }
            input = opening?.text ?? ""
            goal = input
        }
        var logOptions = self.logOptions
        if logOptions.redactor == nil || logOptions.redactor == Redactor.standard {
            // The keys of the command's environment never reach the log, wherever they appear:
            // its command line, a tool result, a stored request.
            // So do the values its command line gives options named like secrets (`--api-key KEY`).
            logOptions.redactor = Redactor(
                environmentNames: ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
                childEnvironments: [self.environment, ProcessInfo.processInfo.environment],
                environment: self.environment
            ).adding(Redactor.secrets(inArguments: command), rule: "argument")
        }
        let recorder = ExchangeRecorder(
            logPath: logPath, runId: runId, goal: goal, agentName: agentName, command: command, limits: limits, keys: keys,
            options: logOptions, secrets: Self.secrets(in: environment), fork: fork, onStop: { _ in stopper.stop() })
        if let openingFault {
            // The user could not open: the program is never started, and the attempt could not run.
            recorder.beginConversation(opening: nil)
            recorder.endConversation(.blocked, error: "\(RunStopped.simulatorFaultPrefix) \(openingFault.message)")
            let stop = try recorder.finish(.exited(0))
            await finishedLogs?.logsFinished([logPath])
            return Outcome(
                logPath: logPath, runId: runId, stop: stop, exitStatus: nil, signal: nil, isTimedOut: false, requests: 0, stopCause: nil)
        }
        let feed = conversation.map { _ in ChildProcess.InputFeed() }
        if let opening { recorder.beginConversation(opening: opening) }
        let gateway: ModelGateway
        do {
            gateway = try await ModelGateway(
                handler: GatewayHandler(
                    upstreams: upstreams, forwarder: ModelForwarder(transport: transport, limits: requestLimits),
                    prefixForwarder: prefixTransport.map { ModelForwarder(transport: $0, limits: requestLimits) }, recorder: recorder,
                    traces: takesSpans ? TraceReceiver(sink: recorder, maxRequestBytes: Self.maxSpanRequestBytes) : nil))
        } catch {
            throw RecordingError(.gatewayFailed, "the recording gateway cannot listen on 127.0.0.1: \(error)")
        }
        var environment = self.environment
        environment["OPENAI_BASE_URL"] = gateway.openAIBaseURL
        environment["ANTHROPIC_BASE_URL"] = gateway.anthropicBaseURL
        // An `agent-eval mcp-proxy` the command starts records its gate into this run.
        environment[RemoteProxyLog.variable] = gateway.proxyURL
        if takesSpans { Self.pointExporters(at: gateway.otlpEndpoint, in: &environment) }
        if let input { environment["AGENT_EVAL_INPUT"] = input }
        if cassette?.mode == Cassette.Mode.none {
            for key in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] where environment[key]?.isEmpty ?? true {
                environment[key] = Self.offlineKey
            }
        }
        if conversation != nil { environment["AGENT_EVAL_CONVERSATION"] = "1" }
        var child = ChildProcess(
            command: command, directory: directory, environment: environment.map { "\($0.key)=\($0.value)" }.sorted(),
            // A conversation's turns are lines: the first ends with one, as every later one does.
            input: Array(((input ?? "") + (conversation != nil ? "\n" : "")).utf8), timeoutMs: timeoutMs, outputLimit: 1 << 20)
        child.inputFeed = feed
        // Output not passed on goes to /dev/null: the process keeps only the tail of each stream
        // (for the stop's last line) however much the command prints.
        let discard = outputDescriptor == nil ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1
        defer { if discard >= 0 { close(discard) } }
        if let outputDescriptor {
            child.forwardsOutput = (outputDescriptor, 2)
        } else if discard >= 0 {
            child.forwardsOutput = (discard, discard)
        }
        let running = Task { [child] in try await child.run() }
        stopper.watch(running)
        let talking = conversation.flatMap { conversation in
            feed.map { feed in
                Task {
                    await CommandConversation.drive(conversation, recorder: recorder, feed: feed, stopper: stopper, timeoutMs: timeoutMs)
                }
            }
        }
        let result: ChildProcess.Result
        do {
            result = try await withTaskCancellationHandler {
                try await running.value
            } onCancel: {
                recorder.interrupted()
                running.cancel()
                talking?.cancel()
            }
            recorder.programEnded()
            if let talking {
                // A program that exited by itself after its answer: the user's reply to that answer
                // may still end the conversation (`say`), whichever came first — asked to its end,
                // within a bound. Any other ending: nothing more is asked.
                if result.exitStatus == 0, !result.isTimedOut, !result.isCancelled {
                    await recorder.waitForUser(timeoutMs: CommandConversation.userAfterEndMs)
                }
                talking.cancel()
                await talking.value
            }
        } catch {
            recorder.programEnded()
            talking?.cancel()
            await talking?.value
            await gateway.stop()
            let message = (error as? ChildProcess.SpawnFailure)?.message ?? "\(error)"
            // A spawn that failed says so itself, naming the program ("cannot start X: why").
            throw RecordingError(
                .commandFailed, message.hasPrefix("cannot start ") ? message : "cannot start \(ShellWords.command(command)): \(message)",
                hint: "give the command after --, as you would run it: agent-eval record -- python3 agent.py")
        }
        recorder.commandEnded()
        await gateway.stop()
        let ending: ExchangeRecorder.Ending
        if result.isTimedOut {
            ending = .timedOut(ms: timeoutMs)
        } else if result.isCancelled {
            ending = .stopped
        } else if let signal = result.signal {
            ending = .signalled(signal)
        } else {
            ending = .exited(result.exitStatus ?? 0)
        }
        let stop = try recorder.finish(ending, stderrTail: String(decoding: result.stderr, as: UTF8.self))
        await finishedLogs?.logsFinished([logPath])
        var outcome = Outcome(
            logPath: logPath, runId: runId, stop: stop, exitStatus: result.exitStatus, signal: result.signal, isTimedOut: result.isTimedOut,
            requests: recorder.requestCount, failedRequests: recorder.failedRequestCount,
            unmeteredReplies: recorder.unmeteredReplyCount, stopCause: recorder.stopCause,
            proxiedCalls: recorder.proxiedCallCount, spans: recorder.spanCounts, unshownEdits: recorder.unshownEdits)
        (outcome.refusedRequests, outcome.firstRefusal) = recorder.refusedRequests
        return outcome
    }

    /// The largest OTLP request the gateway takes from the command (what `collect` takes by default).
    public static let maxSpanRequestBytes = 20 << 20

    /// Points the OpenTelemetry SDKs' OTLP trace exporter at `endpoint` (docs/record.md,
    /// "OpenTelemetry spans"): `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, over OTLP/HTTP (a gRPC setting
    /// is replaced: the gateway speaks HTTP), and, unless the command sets its own, the batch span processor exporting each
    /// span as it ends (a batch of 1, 100 ms at most), so that a tool's span comes while its
    /// result is being recorded.
    static func pointExporters(at endpoint: String, in environment: inout [String: String]) {
        // Traces only: the command's metrics and logs exporters go where they went.
        environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint + "/v1/traces"
        let protocolSetting = environment["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] ?? environment["OTEL_EXPORTER_OTLP_PROTOCOL"]
        if protocolSetting == "grpc" { environment["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf" }
        if environment["OTEL_BSP_SCHEDULE_DELAY"] == nil { environment["OTEL_BSP_SCHEDULE_DELAY"] = "100" }
        if environment["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] == nil { environment["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "1" }
    }
}

/// Stops the command when the recorder asks (a spent budget, a cassette miss): cancels the task
/// that waits for it, which kills its process group.
final class Stopper: Sendable {
    // Guarded by the mutex: the task running the command, and whether a stop came first.
    private let state = Mutex<(task: Task<ChildProcess.Result, any Error>?, isStopped: Bool)>((nil, false))

    func watch(_ task: Task<ChildProcess.Result, any Error>) {
        let stopped = state.withLock { state in
            state.task = task
            return state.isStopped
        }
        if stopped { task.cancel() }
    }

    func stop() {
        let task = state.withLock { state in
            state.isStopped = true
            return state.task
        }
        task?.cancel()
    }
}
