public import AgentRuntime
import Foundation
public import ModelClients
import Synchronization
import TraceCore

/// Starts MCP servers for agent files' `mcp_servers` (docs/mcp.md), over stdio or Streamable
/// HTTP: a client of both eras of MCP — 2026-07-28 (stateless: every request carries the
/// envelope) when the server answers the `server/discover` probe with that version, else the
/// 2025 era's `initialize`. The conversation goes through an `MCPChannel` (AgentRuntime's
/// `JSONRPCPeer` over a `JSONLinesProcess`, or `StreamableHTTPChannel`); the runtime sees
/// `ToolServerConnector`.
///
/// ```swift
/// let agent = try AgentFile.load(path: "agent.yaml", servers: MCPServers())
/// ```
public struct MCPServers: ToolServerConnector {
    /// The name and version this client gives (`initialize`, or the envelope's `clientInfo`).
    public var clientName: String
    public var clientVersion: String
    /// The clock that times starting a server and each request (tests inject one they advance).
    public var clock: any Clock<Duration>
    /// The era to speak; nil finds it by probing (tests pin one).
    var era: MCPConnection.Era?
    /// Where the servers' answers are replayed from and recorded into (`--cassette`, docs/mcp.md
    /// "Cassettes"); nil: every request goes to the server.
    public var cassette: Cassette?

    public init(
        clientName: String = "agent-eval", clientVersion: String = "0.2.0", clock: any Clock<Duration> = LiveClock(),
        cassette: Cassette? = nil
    ) {
        self.clientName = clientName
        self.clientVersion = clientVersion
        self.clock = clock
        self.cassette = cassette
    }

    public func connect(_ settings: ToolServerSettings) async throws -> any ToolServerConnection {
        try await MCPConnection.start(settings, client: (clientName, clientVersion), era: era, clock: clock, cassette: cassette)
    }
}

/// Something went wrong with an MCP server: it did not start, did not answer in time, or
/// answered with something that is not the protocol.
struct MCPToolError: Diagnostic, Hashable {
    var message: String
    var hint: String?

    init(_ message: String, hint: String? = nil) {
        self.message = message
        self.hint = hint
    }

    var diagnosticCode: String { "mcp" }
    var place: SourceLocation? { nil }
}

/// One MCP server, for one run. A call that times out, a server that exits, or a line that is
/// not JSON-RPC ends that server process (the call's outcome says which); the next call starts
/// it again, in the era the first start found. Over HTTP, a session the server forgot is opened
/// again the same way.
final class MCPConnection: ToolServerConnection {
    /// The era of MCP a server speaks, as this client found it.
    enum Era: Sendable, Hashable {
        /// 2025: `initialize`, then requests without an envelope.
        case handshake
        /// 2026-07-28: no handshake; every request carries the envelope.
        case stateless
    }

    static let statelessVersion = MCPEra.statelessVersion
    static let handshakeVersion = "2025-11-25"
    /// How long the `server/discover` probe waits before the client falls back to `initialize`
    /// (a 2025 server may not answer an unknown method before `initialize`). A server slow to
    /// start that answers the probe after it (and so refuses the `initialize` that followed,
    /// with -32022) is probed once more.
    static let probeTimeoutMs = 5_000

    let settings: ToolServerSettings
    let identity: ToolServerIdentity
    let tools: [ServedTool]
    /// Each tool's `outputSchema`, as read to check its results (`ServedTool.checked`).
    private let outputSchemas: [String: JSONSchema]
    let era: Era
    private let clientInfo: (name: String, version: String)
    private let clock: any Clock<Duration>
    private let cassette: Cassette?
    private let cassetteCounts: CassetteChannel.Counts
    private let session: Mutex<(any MCPChannel)?>

    /// What the server said of itself when the conversation began.
    struct Opening: Sendable {
        var era: Era
        var name: String
        var version: String
        var protocolVersion: String
    }

    var timeoutGraceMs: Int { 2_000 }

    private init(
        settings: ToolServerSettings, identity: ToolServerIdentity, tools: [ServedTool], era: Era, session: any MCPChannel,
        clientInfo: (name: String, version: String), clock: any Clock<Duration>, cassette: Cassette?,
        cassetteCounts: CassetteChannel.Counts
    ) {
        self.settings = settings
        self.identity = identity
        self.tools = tools
        outputSchemas = ServedTool.outputSchemas(of: tools)
        self.era = era
        self.session = Mutex(Optional(session))
        self.clientInfo = clientInfo
        self.clock = clock
        self.cassette = cassette
        self.cassetteCounts = cassetteCounts
    }

    /// Starts the server, finds its era and lists its tools, each step within the start timeout.
    static func start(
        _ settings: ToolServerSettings, client clientInfo: (name: String, version: String), era: Era?, clock: any Clock<Duration>,
        cassette: Cassette? = nil
    ) async throws -> MCPConnection {
        let counts = CassetteChannel.Counts()
        let (session, opening) = try await openSession(
            settings, clientInfo: clientInfo, era: era, clock: clock, cassette: cassette, counts: counts)
        do {
            let tools = try await listTools(session, era: opening.era, settings: settings, clientInfo: clientInfo, clock: clock)
            let identity = ToolServerIdentity(
                name: settings.name, serverName: opening.name, serverVersion: opening.version, protocolVersion: opening.protocolVersion)
            return MCPConnection(
                settings: settings, identity: identity, tools: tools, era: opening.era, session: session, clientInfo: clientInfo,
                clock: clock, cassette: cassette, cassetteCounts: counts)
        } catch {
            await session.stop()
            throw error
        }
    }

    /// Starts the server process (and its reader), or makes the channel to its URL; through
    /// `cassette` when there is one (which, replaying only, needs neither).
    private static func spawn(_ settings: ToolServerSettings, cassette: Cassette?, counts: CassetteChannel.Counts) throws(MCPToolError)
        -> any MCPChannel
    {
        guard let cassette else { return try live(settings) }
        // A cassette that holds nothing of this server (recorded before MCP servers were) leaves
        // it live, as it was then: only the model is replayed from it.
        if cassette.mode == .none && !cassette.holds(provider: CassetteChannel.provider(settings.name)) { return try live(settings) }
        return CassetteChannel(
            cassette: cassette, settings: settings, live: cassette.mode == .none ? nil : try live(settings), counts: counts)
    }

    private static func live(_ settings: ToolServerSettings) throws(MCPToolError) -> any MCPChannel {
        if settings.url != nil { return try StreamableHTTPChannel(settings) }
        return try ProcessChannel(settings)
    }

    /// A request's params in the era: with the envelope in `_meta` for 2026-07-28.
    static func params(_ params: JSONObject, era: Era, clientInfo: (name: String, version: String)) -> JSONValue {
        var params = params
        if era == .stateless {
            // It follows tasks (the extension), so it says so: a server may answer a call with one.
            params["_meta"] = MCPEra.envelope(
                clientName: clientInfo.name, version: clientInfo.version,
                capabilities: ["extensions": .object(JSONObject([(MCPEra.tasksExtension, [:])]))])
        }
        return .object(params)
    }

    /// Starts a server and begins the conversation. Without a known era, the server is probed
    /// with `server/discover` (the 2026-07-28 way); a server that does not answer it with that
    /// version is spoken to with `initialize` — on the same process, or on a new one when the
    /// probe ended it (a 2025 server may exit on a request before `initialize`).
    private static func openSession(
        _ settings: ToolServerSettings, clientInfo: (name: String, version: String), era known: Era?, clock: any Clock<Duration>,
        cassette: Cassette?, counts: CassetteChannel.Counts
    ) async throws -> (any MCPChannel, Opening) {
        var session = try spawn(settings, cassette: cassette, counts: counts)
        var probed = false
        /// The probe waited its time out with no answer (one answered with an error was answered).
        var probeUnanswered = false
        if known != .handshake {
            let timeout = known == .stateless ? settings.startTimeoutMs : min(settings.startTimeoutMs, probeTimeoutMs)
            // Without a known era, a probe given up on leaves the server for initialize.
            let answer = await session.request(
                "server/discover", params: params(JSONObject(), era: .stateless, clientInfo: clientInfo), within: .milliseconds(timeout),
                on: clock, endsServerWhenAbandoned: known == .stateless)
            switch answer {
            case .success(let result):
                let versions = (result["supportedVersions"]?.arrayValue ?? []).compactMap(\.stringValue)
                if versions.contains(statelessVersion) {
                    let info = MCPEra.serverInfo(of: result)
                    return (
                        session,
                        Opening(
                            era: .stateless, name: info?.name ?? settings.name, version: info?.version ?? "",
                            protocolVersion: statelessVersion)
                    )
                }
            case .failure(.cancelled):
                await session.stop()
                throw CancellationError()
            case .failure(.failed(let why)) where known == .stateless || !session.isProcess:
                // Over HTTP, a probe that found no server leaves nothing to fall back on.
                throw startFailure(settings, session: session, "\(didNotStart(session)): \(why)")
            case .failure(.timedOut) where known == .stateless:
                session.kill()
                throw startFailure(
                    settings, session: session,
                    "did not answer server/discover within \(timeout) ms" + (session.isProcess ? "; it was stopped" : ""))
            case .failure(.failed):
                // The probe ended the server: a 2025 server may refuse any request before
                // initialize. (A server that cannot start at all is so started twice; the error
                // is the second start's.)
                if Task.isCancelled {
                    await session.stop()
                    throw CancellationError()
                }
                await session.stop()
                session = try spawn(settings, cassette: cassette, counts: counts)
            case .failure(.remote(let error)) where [401, 403].contains(error.data?["httpStatus"]?.intValue ?? 0):
                // Refused for want of credentials: no era to find, and initialize would be refused too.
                throw startFailure(
                    settings, session: session, "was refused: \(error.message)",
                    hint: "check the credentials the server's headers: give (and the variables they name)")
            case .failure(.remote):
                break
            case .failure(.timedOut):
                probeUnanswered = true
            }
            probed = true
        }
        let answer = await session.request(
            "initialize",
            params: [
                "protocolVersion": .string(handshakeVersion), "capabilities": [:],
                "clientInfo": ["name": .string(clientInfo.name), "version": .string(clientInfo.version)],
            ], within: .milliseconds(settings.startTimeoutMs), on: clock, endsServerWhenAbandoned: true)
        if Task.isCancelled {
            await session.stop()
            throw CancellationError()
        }
        switch answer {
        case .success(let result):
            guard let version = result["protocolVersion"]?.stringValue else {
                await session.stop()
                throw MCPToolError("answered initialize without a protocolVersion: it does not speak MCP")
            }
            // A version this client does not speak: the specification has the client disconnect.
            guard MCPEra.handshakeVersions.contains(version) else {
                throw startFailure(
                    settings, session: session,
                    "answered initialize with protocol version \"\(version.prefix(60))\", which agent-eval does not speak "
                        + "(it speaks \((MCPEra.handshakeVersions + [statelessVersion]).joined(separator: ", ")))",
                    hint: "run a version of the server that speaks one of these")
            }
            do {
                try await session.notify("notifications/initialized", params: nil)
            } catch {
                let why = (error as? any Diagnostic)?.message ?? "\(error)"
                throw startFailure(settings, session: session, "\(didNotStart(session)): \(session.failure ?? why)")
            }
            let info = result["serverInfo"]
            return (
                session,
                Opening(
                    era: .handshake, name: info?["name"]?.stringValue ?? settings.name, version: info?["version"]?.stringValue ?? "",
                    protocolVersion: version)
            )
        case .failure(.remote(let error)) where error.code == -32022 && probed && known == nil:
            // The probe's late answer made the connection 2026-07-28's: ask again, now waiting.
            await session.stop()
            return try await openSession(
                settings, clientInfo: clientInfo, era: .stateless, clock: clock, cassette: cassette, counts: counts)
        case .failure(.remote(let error)):
            throw startFailure(
                settings, session: session,
                "\(didNotStart(session)): it answered initialize with error \(error.code): \(error.message)")
        case .failure(.failed(let why)):
            throw startFailure(settings, session: session, "\(didNotStart(session)): \(why)")
        case .failure(.timedOut):
            session.kill()
            throw startFailure(
                settings, session: session,
                "did not answer initialize within \(settings.startTimeoutMs) ms"
                    + (probeUnanswered ? " (nor the server/discover probe before it)" : "") + (session.isProcess ? "; it was stopped" : ""),
                hint: session.isProcess
                    ? "raise startup_timeout_ms if it is slow to start, or run its command by hand"
                    : "raise startup_timeout_ms if it is slow to answer; \(session.startHint)")
        case .failure(.cancelled):
            await session.stop()
            throw CancellationError()
        }
    }

    /// A start that failed, with the server's last words on stderr; the session is stopped.
    private static func startFailure(_ settings: ToolServerSettings, session: any MCPChannel, _ message: String, hint: String? = nil)
        -> MCPToolError
    {
        session.kill()
        let words = session.lastErrorLine
        return MCPToolError(message + (words.map { message.contains($0) ? "" : " (stderr: \($0))" } ?? ""), hint: hint ?? session.startHint)
    }

    /// How a failed start is told: a process did not start; a URL could not be reached; a
    /// cassette replaying alone could not answer.
    private static func didNotStart(_ session: any MCPChannel) -> String {
        if let replaying = session as? CassetteChannel, replaying.live == nil { return "could not be replayed" }
        return session.isProcess ? "did not start" : "could not be reached"
    }

    /// Every page of `tools/list`.
    private static func listTools(
        _ session: any MCPChannel, era: Era, settings: ToolServerSettings, clientInfo: (name: String, version: String),
        clock: any Clock<Duration>
    ) async throws -> [ServedTool] {
        var tools: [ServedTool] = []
        var cursor: String?
        var pages = 0
        repeat {
            pages += 1
            var page = JSONObject()
            if let cursor { page["cursor"] = .string(cursor) }
            let answer = await session.request(
                "tools/list", params: params(page, era: era, clientInfo: clientInfo), within: .milliseconds(settings.startTimeoutMs),
                on: clock, endsServerWhenAbandoned: true)
            if Task.isCancelled { throw CancellationError() }
            let result: JSONValue
            switch answer {
            case .success(let value): result = value
            case .failure(.remote(let error)): throw MCPToolError("tools/list failed: \(error.code): \(error.message)")
            case .failure(.failed(let why)): throw MCPToolError("stopped while listing its tools: \(why)")
            case .failure(.timedOut):
                session.kill()
                throw MCPToolError(
                    "did not list its tools within \(settings.startTimeoutMs) ms" + (session.isProcess ? "; it was stopped" : ""))
            case .failure(.cancelled):
                session.kill()
                throw CancellationError()
            }
            do {
                tools += try ServedTool.tools(ofMCPListing: result)
            } catch {
                throw MCPToolError(error.message)
            }
            cursor = result["nextCursor"]?.stringValue
        } while cursor != nil && pages < 100
        return tools
    }

    // MARK: Calls

    func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
        let current: any MCPChannel
        if let live = session.withLock({ $0 }), live.failure == nil {
            current = live
        } else {
            // The last server process ended (a timeout, a crash): start another, in the same era.
            do {
                current = try await Self.openSession(
                    settings, clientInfo: clientInfo, era: era, clock: clock, cassette: cassette, counts: cassetteCounts
                ).0
            } catch is CancellationError {
                return ToolOutcome(status: .error, error: "the call was stopped because the run was interrupted")
            } catch {
                let message = (error as? any Diagnostic)?.message ?? "\(error)"
                return ToolOutcome(status: .error, error: "MCP server \"\(settings.name)\" \(message)", isRetryable: true)
            }
            let previous = session.withLock { session -> (any MCPChannel)? in
                defer { session = current }
                return session
            }
            if let previous { await previous.stop() }
        }
        guard case .object(let arguments) = request.arguments else {
            return .failure("MCP tools take an object of arguments, and these are \(request.arguments.typeDescription)")
        }
        let mark = current.stderrMark
        let strays = current.strayAnswers.count
        // Given up (the timeout, the run interrupted): a server process is killed at once, which
        // also ends a write it never read; over HTTP the request's connection is closed.
        let clock: any Clock<Duration> = self.clock
        let ending = await call(
            Self.params(
                JSONObject([("name", .string(request.tool)), ("arguments", .object(arguments))]), era: era, clientInfo: clientInfo),
            timeoutMs: request.timeoutMs, on: current, clock: clock)
        let answer: JSONRPCPeer.Answer
        switch ending {
        case .answer(let answered):
            answer = answered
        case .taskEnded(let why):
            var outcome = ToolOutcome.failure("MCP server \"\(settings.name)\" \(why)")
            await current.settleStderr()
            outcome.stderr = current.stderr(since: mark)
            return outcome
        }
        var outcome: ToolOutcome
        switch Task.isCancelled ? .failure(.cancelled) : answer {
        case .success(let result):
            // Read as `mcp-proxy` reads its answers: one reading of a result.
            outcome = ServedTool.checked(
                MCPEra.outcome(ofCallResult: result, server: settings.name, isStateless: era == .stateless),
                against: outputSchemas[request.tool])
        case .failure(.remote(let error)):
            outcome = .failure("MCP server \"\(settings.name)\" answered with an error: \(error.code): \(error.message)")
        case .failure(.failed(let why)) where (current as? CassetteChannel)?.live == nil && current is CassetteChannel:
            // Replaying alone: a call the cassette does not hold is not worth trying again.
            outcome = .failure("MCP server \"\(settings.name)\" could not be replayed: \(why)")
        case .failure(.failed(let why)):
            outcome = .failure(
                "MCP server \"\(settings.name)\" " + (current.isProcess ? "stopped during the call: \(why)" : "did not answer: \(why)"),
                isRetryable: true)
        case .failure(.timedOut):
            current.kill()
            // It answered, but another request than this one: said, not taken for silence.
            let stray = current.strayAnswers
            let mixedUp =
                stray.count > strays
                ? " (meanwhile it answered request \(stray.last ?? "?"), which nothing was waiting for: does it mix up request ids?)" : ""
            outcome = .failure(
                "MCP server \"\(settings.name)\" did not answer within \(request.timeoutMs) ms\(mixedUp)"
                    + (current.isProcess ? "; it was stopped (the next call starts it again)" : "; the request was given up"),
                isRetryable: true)
        case .failure(.cancelled):
            current.kill()
            outcome = ToolOutcome(status: .error, error: "MCP server \"\(settings.name)\" was stopped because the run was interrupted")
        }
        // What the server wrote before it answered may still be in the pipe: it is this call's.
        if case .answer = ending { await current.settleStderr() }
        outcome.stderr = current.stderr(since: mark)
        return outcome
    }

    /// How a call ended: the server's answer (the task's, when it made one), or a task that
    /// ended without one (it asked for input, or the server cancelled it): why, as a sentence.
    enum CallEnding {
        case answer(JSONRPCPeer.Answer)
        case taskEnded(String)
    }

    /// Sends `tools/call`, and follows the task the server may answer with (the tasks extension,
    /// 2026-07-28): `tasks/get` at the interval the server asks for (10 ms to 5 s) until the task
    /// ends, all within `timeoutMs` of the call's start. The task's result is the call's; its
    /// JSON-RPC error is the call's error. A task that asks for input, or that the call's time
    /// runs out on, is cancelled (`tasks/cancel`): this client answers no questions.
    func call<C: Clock<Duration>>(_ params: JSONValue, timeoutMs: Int, on channel: any MCPChannel, clock: C) async -> CallEnding {
        let start = clock.now
        let budget = Duration.milliseconds(timeoutMs)
        let first = await channel.request("tools/call", params: params, within: budget, on: clock, endsServerWhenAbandoned: true)
        guard case .success(let handle) = first, handle["resultType"]?.stringValue == "task" else { return .answer(first) }
        guard let taskId = handle["taskId"]?.stringValue else {
            return .taskEnded("answered with a task that has no taskId")
        }
        var interval = Self.pollInterval(handle)
        var state = handle
        while true {
            let left = budget - start.duration(to: clock.now)
            switch state["status"]?.stringValue {
            case "completed"?:
                guard var result = state["result"]?.objectValue else {
                    return .taskEnded("ended its task \(taskId) completed without a result")
                }
                // The task says its result is complete; the result need not say it again.
                if result["resultType"] == nil { result["resultType"] = "complete" }
                return .answer(.success(.object(result)))
            case "failed"?:
                let error = state["error"]
                return .answer(
                    .failure(
                        .remote(
                            JSONRPCPeer.RemoteError(
                                code: error?["code"]?.intValue ?? 0,
                                message: error?["message"]?.stringValue ?? state["statusMessage"]?.stringValue ?? "the task failed",
                                data: error?["data"]))))
            case "cancelled"?:
                return .taskEnded(
                    "cancelled its task \(taskId)" + (state["statusMessage"]?.stringValue.map { ": \($0)" } ?? ""))
            case "input_required"?:
                await cancel(taskId, on: channel, clock: clock)
                let asked = (state["inputRequests"]?.objectValue.map { Array($0) } ?? []).compactMap { $0.value["method"]?.stringValue }
                return .taskEnded(
                    "asked for input while its task \(taskId) ran (\(asked.isEmpty ? "input_required" : asked.joined(separator: ", "))), "
                        + "which agent-eval's MCP tools do not give: the task was cancelled")
            case "working"?, nil:
                // Working, or not said (a handle that gives only its id): asked again.
                break
            case let other?:
                // A status the tasks extension does not have: polling on would wait out the call's
                // time and say only that the server did not answer.
                await cancel(taskId, on: channel, clock: clock)
                return .taskEnded(
                    "gave its task \(taskId) the status \"\(other.prefix(60))\", which is not one of working, "
                        + "input_required, completed, failed, cancelled: the task was cancelled")
            }
            guard left > .zero else {
                await cancel(taskId, on: channel, clock: clock)
                return .answer(.failure(.timedOut))
            }
            do {
                try await clock.sleep(for: min(interval, left))
            } catch {
                abandon(taskId, on: channel, clock: clock)
                return .answer(.failure(.cancelled))
            }
            let remaining = budget - start.duration(to: clock.now)
            guard remaining > .zero else {
                await cancel(taskId, on: channel, clock: clock)
                return .answer(.failure(.timedOut))
            }
            // A poll the call's time runs out on leaves the server running, so that it can be told
            // to cancel the task; the caller stops a server process after that.
            let polled = await channel.request(
                "tasks/get", params: Self.params(JSONObject([("taskId", .string(taskId))]), era: era, clientInfo: clientInfo),
                within: remaining, on: clock, endsServerWhenAbandoned: false)
            switch polled {
            case .success(let next):
                state = next
                interval = Self.pollInterval(next, otherwise: interval)
            case .failure(.timedOut):
                await cancel(taskId, on: channel, clock: clock)
                return .answer(polled)
            case .failure(.cancelled):
                abandon(taskId, on: channel, clock: clock)
                return .answer(polled)
            case .failure:
                return .answer(polled)
            }
        }
    }

    /// The interval a task asks to be polled at, held to 10 ms – 5 s.
    static func pollInterval(_ task: JSONValue, otherwise: Duration = .milliseconds(500)) -> Duration {
        guard let ms = task["pollIntervalMs"]?.intValue else { return otherwise }
        return .milliseconds(min(max(ms, 10), 5_000))
    }

    /// The run was interrupted while a task ran: the server is told (`tasks/cancel`) from a task
    /// of its own, which the interruption does not cancel (a server over HTTP goes on running).
    private func abandon<C: Clock<Duration>>(_ taskId: String, on channel: any MCPChannel, clock: C) {
        let params = Self.params(JSONObject([("taskId", .string(taskId))]), era: era, clientInfo: clientInfo)
        Task {
            _ = await channel.request("tasks/cancel", params: params, within: .seconds(2), on: clock, endsServerWhenAbandoned: false)
        }
    }

    /// Tells the server a task is no longer wanted (`tasks/cancel`), waiting up to 2 s.
    private func cancel<C: Clock<Duration>>(_ taskId: String, on channel: any MCPChannel, clock: C) async {
        _ = await channel.request(
            "tasks/cancel", params: Self.params(JSONObject([("taskId", .string(taskId))]), era: era, clientInfo: clientInfo),
            within: .seconds(2), on: clock, endsServerWhenAbandoned: false)
    }

    func close() async {
        let current = session.withLock { session -> (any MCPChannel)? in
            defer { session = nil }
            return session
        }
        if let current { await current.stop() }
    }
}
