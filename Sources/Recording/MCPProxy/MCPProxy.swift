public import AgentRuntime
public import ConfigFile
import Foundation
public import TraceCore
public import TraceLog

/// `agent-eval mcp-proxy -- SERVER…`: an MCP server over stdio that forwards to a real one, so
/// an agent written with any framework gets agent-eval's runtime guarantees for its tools by
/// changing one line of its MCP configuration (docs/mcp.md, "The MCP proxy"):
/// - every `tools/call` gets a policy verdict (the agent file's rules, `PolicyFile`) recorded
///   before anything is forwarded; a denied call is answered with a tool error the agent's
///   model can read, an approval-required one waits for `agent-eval approve` or a timeout;
/// - an allowed call's `tool_intended` is durable in the log before the server sees the call,
///   its result or error is recorded before the client sees it;
/// - everything else passes through unchanged (initialisation, listings, resources, prompts,
///   notifications, and the server's own requests to the client, which are also stored).
///
/// One proxy process serves one client connection and writes one run's log.
public struct MCPProxy: Sendable {
    public struct Settings: Sendable {
        /// The real server's command line.
        public var server: [String]
        public var directory: String
        /// The server's environment (the proxy's own, as a rule).
        public var environment: [String: String]
        /// The server's name in the log and in rules' `server` conditions.
        public var serverName: String
        public var policy: PolicyFile
        /// Tools whose approval-required calls are approved without asking (`--pre-approve`).
        public var preApproved: [Glob]
        /// How long an approval-required call waits for `agent-eval approve`.
        public var approvalTimeout: Duration
        /// How long a forwarded call waits for the server's answer.
        public var callTimeout: Duration
        /// Whether `tools/list` answers leave out the tools the policy denies on name, side
        /// effect, actor and route alone.
        public var hidesDenied: Bool
        /// Whether the proxy bridges a client and a server of different MCP eras (`--bridge`,
        /// `MCPBridge`): a 2025 client with a server of 2026-07-28 only, and the reverse.
        public var bridges = false
        /// How long `--bridge`'s `server/discover` probe waits before the server is taken for a
        /// 2025 one.
        public var bridgeProbeTimeout = MCPBridge.probeTimeout
        public var actor: String?
        public var route: String?
        /// Calls allowed to run in the session; past it every call is denied.
        public var maxToolCalls: Int?
        public var goal: String?
        public var logPath: String
        public var runId: String
        public var logOptions: LogWriter.Options
        /// Told of the log once it is closed (the catalog, a live exporter).
        public var finishedLogs: (any FinishedLogSink)?
        /// Where the server's stderr is copied as it comes (the proxy's own stderr); nil keeps
        /// only its tail for messages.
        public var serverStderr: Int32?
        /// Where the proxy says what waits for whom (an approval); nil says nothing.
        public var notices: (@Sendable (String) -> Void)?
        /// The policy file's path, as given (`agent-eval record`'s gateway reads it again).
        public var policyPath: String?
        /// The gateway of the `agent-eval record` this proxy runs under (`AGENT_EVAL_RECORDER`):
        /// the gate is recorded in that run's log instead of a log of the proxy's own.
        public var recorderURL: String?
        /// Timeouts are kept on it; tests inject one they advance.
        public var clock: any Clock<Duration>
        /// Microseconds since the epoch, for events.
        public var now: @Sendable () -> Int

        /// The gate these settings describe (its tools come as the server lists them).
        var gate: ProxyGate {
            ProxyGate(
                policy: policy, actor: actor, route: route, maxToolCalls: maxToolCalls, tokenBudget: nil, preApproved: preApproved,
                serverName: serverName)
        }

        public init(
            server: [String], directory: String, environment: [String: String], serverName: String? = nil,
            policy: PolicyFile = .allowAll, logPath: String, runId: String
        ) {
            self.server = server
            self.directory = directory
            self.environment = environment
            self.serverName = serverName ?? MCPProxy.serverName(for: server)
            self.policy = policy
            preApproved = []
            approvalTimeout = .seconds(300)
            callTimeout = .seconds(300)
            hidesDenied = false
            self.logPath = logPath
            self.runId = runId
            logOptions = LogWriter.Options()
            clock = ContinuousClock()
            now = RuntimeEnvironment.live.now
        }
    }

    /// How a session ended.
    public struct Outcome: Sendable {
        public var runId: String
        /// The run's log; nil when none was written (the client only probed the server with
        /// `server/discover`, and went).
        public var logPath: String?
        public var stop: RunStopped
        /// `tools/call` requests the client made, and how many the policy let through.
        public var calls: Int
        public var allowed: Int
        public var denied: Int
        /// Calls the session ended before they did (an answer, a task, a question or an approval
        /// still awaited), each recorded as an error (or, waiting for approval, refused).
        public var unfinished = 0
        /// Why the log could not be written to the end, when it could not.
        public var writeFailure: String?
        /// The server failed (exited, crashed, wrote what is not JSON-RPC).
        public var isServerFailure: Bool { stop.reason == .toolFailure }
        /// The session did not end as the client ended it: the server failed, or the policy file
        /// named tools the server does not have (every call refused).
        public var isFailure: Bool { stop.reason != .success }
    }

    public let settings: Settings

    /// The variable `agent-eval record` sets for its command: where a proxy records its gate.
    public static let recorderVariable = RemoteProxyLog.variable

    public init(settings: Settings) {
        self.settings = settings
    }

    /// The name a server is known by when none is given: its program, or the script or module
    /// an interpreter runs (`python3 -m mcp_server_time` → `mcp_server_time`).
    public static func serverName(for command: [String]) -> String {
        guard let first = command.first else { return "server" }
        let program = (first as NSString).lastPathComponent
        let interpreters = ["python", "python3", "node", "npx", "uvx", "uv", "bun", "deno"]
        if interpreters.contains(where: { program == $0 || program.hasPrefix($0 + ".") }) {
            var rest = command.dropFirst()
            while let word = rest.first, word.hasPrefix("-") {
                rest = rest.dropFirst()
                if ["-m", "--from", "run"].contains(word), let module = rest.first { return module }
            }
            if let script = rest.first {
                return RuntimeEnvironment.fileNameComponent(((script as NSString).lastPathComponent as NSString).deletingPathExtension)
            }
        }
        return RuntimeEnvironment.fileNameComponent(program)
    }

    /// Serves one client on `input` and `output` (the proxy's stdin and stdout) until the
    /// client closes its input, the server fails, or the task is cancelled; the log is closed
    /// and handed to `finishedLogs` before it returns. Throws `RecordingError` when the server
    /// cannot start.
    /// Starts the real server, its stderr passed on as the settings say.
    static func startServer(_ settings: Settings) throws(RecordingError) -> JSONLinesProcess {
        do {
            return try JSONLinesProcess(
                command: settings.server, directory: settings.directory, environment: settings.environment,
                name: settings.serverName, forwardsStderrTo: settings.serverStderr)
        } catch {
            throw RecordingError(
                .serverFailed, "the MCP server \(ShellWords.command(settings.server)) could not be started: \(error.message)",
                hint: "check the command after -- (it must be on PATH or a path)")
        }
    }

    public func run(input: Int32 = 0, output: Int32 = 1) async throws -> Outcome {
        let settings = self.settings
        // The log is made at the first thing recorded: one that is there already is said now, not
        // at the client's first call (every call refused, and a summary naming another run's log).
        if settings.recorderURL == nil, FileManager.default.fileExists(atPath: settings.logPath) {
            throw RecordingError(
                .logFailed, "a log already exists at \(settings.logPath)",
                hint: "give --log a new file, or --out DIR for a new file per session (the default, runs/)")
        }
        let server = try Self.startServer(settings)
        let client = ClientChannel(input: input, output: output)
        let log: any ProxyLog =
            settings.recorderURL.map { RemoteProxyLog(url: $0, gate: settings.gate, policyPath: settings.policyPath) }
            ?? LocalProxyLog(settings: settings, gate: settings.gate)
        let session = MCPProxySession(
            settings: settings, server: server, spawn: { try Self.startServer(settings) }, client: client, log: log)
        let end = await withTaskGroup(of: MCPProxySession.End.self) { group in
            group.addTask {
                for await line in client.lines { await session.fromClient(line) }
                // Calls in flight when the client closed its end are waited for (each to its
                // answer or its --call-timeout), so what they did is recorded.
                if !Task.isCancelled { await session.callsSettled() }
                return Task.isCancelled ? .interrupted : .clientClosed(longLine: client.endedOnLongLine)
            }
            group.addTask {
                while true {
                    let server = await session.server
                    do {
                        for try await message in server.messages { await session.fromServer(Array(message)) }
                    } catch {}
                    // A server that ended on the client's first probe is started again, once.
                    if await session.restartAfterProbe(ended: server) {
                        await server.stop()
                        continue
                    }
                    await session.serverStopped()
                    return Task.isCancelled ? .interrupted : .serverEnded(server.failure ?? "the server closed its output")
                }
            }
            let first = await group.next() ?? .interrupted
            group.cancelAll()
            // The client may close first because the server failed (its answers stopped): the
            // session ended on the server's failure, not as the client chose.
            if case .clientClosed = first, let failure = await session.server.failure { return MCPProxySession.End.serverEnded(failure) }
            return first
        }
        let outcome = await session.finish(end)
        let last = await session.server
        // Not in this task: after Ctrl-C it is cancelled, and the server's grace period (its
        // input closed, 2 s to exit) would be cut to nothing.
        await Task { await last.stop() }.value
        if let sink = settings.finishedLogs, FileManager.default.fileExists(atPath: settings.logPath) {
            await sink.logsFinished([settings.logPath])
        }
        return outcome
    }
}
