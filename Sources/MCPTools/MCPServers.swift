public import AgentRuntime
import Foundation
import MCP
import Synchronization
import TraceCore

/// Starts MCP servers over stdio for agent files' `mcp_servers` (docs/mcp.md). The only type
/// of this project that imports the MCP SDK; the runtime sees `ToolServerConnector`.
///
/// ```swift
/// let agent = try AgentFile.load(path: "agent.yaml", servers: MCPServers())
/// ```
public struct MCPServers: ToolServerConnector {
    /// The name and version this client gives in `initialize`.
    public var clientName: String
    public var clientVersion: String
    /// The clock that times starting a server and each request (tests inject one they advance).
    public var clock: any Clock<Duration>

    public init(clientName: String = "agent-eval", clientVersion: String = "0.2.0", clock: any Clock<Duration> = LiveClock()) {
        self.clientName = clientName
        self.clientVersion = clientVersion
        self.clock = clock
    }

    public func connect(_ settings: ToolServerSettings) async throws -> any ToolServerConnection {
        try await MCPConnection.start(settings, client: (clientName, clientVersion), clock: clock)
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

/// `tools/list` and `tools/call` with the result left as JSON: the result used is the raw
/// one the transport kept, so nothing the server said is lost to the SDK's types.
struct RawListTools: MCP.Method {
    static let name = "tools/list"
    typealias Parameters = ListTools.Parameters
    typealias Result = MCP.Value
}

struct RawCallTool: MCP.Method {
    static let name = "tools/call"
    typealias Parameters = CallTool.Parameters
    typealias Result = MCP.Value
}

/// One MCP server, for one run. A call that times out, a server that exits, or a line that is
/// not JSON-RPC ends that server process (the call's outcome says which); the next call starts
/// it again.
final class MCPConnection: ToolServerConnection {
    let settings: ToolServerSettings
    let identity: ToolServerIdentity
    let tools: [ServedTool]
    private let clientInfo: (name: String, version: String)
    private let clock: any Clock<Duration>
    private let session: Mutex<Session?>
    private let counter = Atomic<Int>(0)

    /// A started server and the SDK client talking to it.
    struct Session: Sendable {
        var server: JSONLinesProcess
        var client: Client
    }

    var timeoutGraceMs: Int { 2_000 }

    private init(
        settings: ToolServerSettings, identity: ToolServerIdentity, tools: [ServedTool], session: Session,
        clientInfo: (name: String, version: String), clock: any Clock<Duration>
    ) {
        self.settings = settings
        self.identity = identity
        self.tools = tools
        self.session = Mutex(session)
        self.clientInfo = clientInfo
        self.clock = clock
    }

    /// Starts the server, agrees on the protocol and lists its tools within the start timeout.
    static func start(
        _ settings: ToolServerSettings, client clientInfo: (name: String, version: String), clock: any Clock<Duration>
    ) async throws -> MCPConnection {
        let (session, initialized) = try await openSession(settings, clientInfo: clientInfo, clock: clock)
        do {
            let tools = try await listTools(session, settings: settings, clock: clock)
            let identity = ToolServerIdentity(
                name: settings.name, serverName: initialized.serverInfo.name, serverVersion: initialized.serverInfo.version,
                protocolVersion: initialized.protocolVersion)
            return MCPConnection(
                settings: settings, identity: identity, tools: tools, session: session, clientInfo: clientInfo, clock: clock)
        } catch {
            await session.client.disconnect()
            throw error
        }
    }

    private static func openSession(
        _ settings: ToolServerSettings, clientInfo: (name: String, version: String), clock: any Clock<Duration>
    ) async throws -> (Session, Initialize.Result) {
        let server: JSONLinesProcess
        do {
            server = try JSONLinesProcess(
                command: settings.command, directory: settings.directory, environment: settings.environment, name: settings.name)
        } catch {
            throw MCPToolError(error.message)
        }
        let client = Client(name: clientInfo.name, version: clientInfo.version)
        // The protocol lets either side ping; the SDK's client does not answer one by itself.
        await client.withMethodHandler(Ping.self) { _ in Empty() }
        let transport = ProcessTransport(server: server)
        let ending = await Race.first(
            timeoutMs: settings.startTimeoutMs, on: clock, server: server,
            abandon: {
                server.kill()
                await client.disconnect()
            }
        ) {
            try await client.connect(transport: transport)
        }
        switch ending {
        case .finished(.success(let result)):
            return (Session(server: server, client: client), result)
        case .finished(.failure(let error)):
            await client.disconnect()
            throw MCPToolError(
                "did not start: \(Self.describe(error))" + (server.lastErrorLine.map { " (stderr: \($0))" } ?? ""),
                hint: "run its command by hand to see why: \(ShellWords.command(settings.command))")
        case .failed(let why):
            await client.disconnect()
            throw MCPToolError(
                "did not start: \(why)", hint: "run its command by hand to see why: \(ShellWords.command(settings.command))")
        case .timedOut:
            server.kill()
            await client.disconnect()
            throw MCPToolError(
                "did not answer initialize within \(settings.startTimeoutMs) ms; it was stopped"
                    + (server.lastErrorLine.map { " (stderr: \($0))" } ?? ""),
                hint: "raise startup_timeout_ms if it is slow to start, or run its command by hand")
        case .cancelled:
            server.kill()
            await client.disconnect()
            throw CancellationError()
        }
    }

    /// Every page of `tools/list`.
    private static func listTools(_ session: Session, settings: ToolServerSettings, clock: any Clock<Duration>) async throws -> [ServedTool]
    {
        var tools: [ServedTool] = []
        var cursor: String?
        var pages = 0
        repeat {
            pages += 1
            let request = RawListTools.request(
                id: .string("agent-eval-list-\(pages)"), cursor.map { ListTools.Parameters(cursor: $0) } ?? ListTools.Parameters())
            let ending = await Race.first(
                timeoutMs: settings.startTimeoutMs, on: clock, server: session.server,
                abandon: {
                    session.server.kill()
                    await session.client.disconnect()
                }
            ) {
                try await session.client.send(request).value
            }
            let result: JSONValue
            switch ending {
            case .finished(.success):
                guard let raw = session.server.takeResult(id: JSONLinesProcess.key(.string("agent-eval-list-\(pages)"))) else {
                    throw MCPToolError("answered tools/list without a result")
                }
                result = raw
            case .finished(.failure(let error)): throw MCPToolError("tools/list failed: \(Self.describe(error))")
            case .failed(let why): throw MCPToolError("stopped while listing its tools: \(why)")
            case .timedOut:
                session.server.kill()
                throw MCPToolError("did not list its tools within \(settings.startTimeoutMs) ms; it was stopped")
            case .cancelled:
                session.server.kill()
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
        let current: Session
        if let live = session.withLock({ $0 }), live.server.failure == nil {
            current = live
        } else {
            // The last server process ended (a timeout, a crash): start another.
            do {
                current = try await Self.openSession(settings, clientInfo: clientInfo, clock: clock).0
            } catch is CancellationError {
                return ToolOutcome(status: .error, error: "the call was stopped because the run was interrupted")
            } catch {
                let message = (error as? any Diagnostic)?.message ?? "\(error)"
                return ToolOutcome(status: .error, error: "MCP server \"\(settings.name)\" \(message)", isRetryable: true)
            }
            let previous = session.withLock { session -> Session? in
                defer { session = current }
                return session
            }
            if let previous { await previous.client.disconnect() }
        }
        guard case .object(let object) = request.arguments else {
            return .failure("MCP tools take an object of arguments, and these are \(request.arguments.typeDescription)")
        }
        let id = "agent-eval-\(counter.add(1, ordering: .relaxed).newValue)"
        var arguments: [String: MCP.Value] = [:]
        for member in object { arguments[member.key] = member.value.mcp }
        let parameters = CallTool.Parameters(name: request.tool, arguments: arguments)
        let call = RawCallTool.request(id: .string(id), parameters)
        let mark = current.server.stderrMark
        let ending = await Race.first(
            timeoutMs: request.timeoutMs, on: clock, server: current.server,
            abandon: {
                current.server.kill()
                await current.client.disconnect()
            }
        ) {
            try await current.client.send(call).value
        }
        var outcome: ToolOutcome
        switch ending {
        case .finished(.success):
            outcome = ServedTool.outcome(ofMCPResult: current.server.takeResult(id: JSONLinesProcess.key(.string(id))))
        case .finished(.failure(let error)):
            outcome = .failure("MCP server \"\(settings.name)\" answered with an error: \(Self.describe(error))")
        case .failed(let why):
            outcome = .failure("MCP server \"\(settings.name)\" stopped during the call: \(why)", isRetryable: true)
            await current.client.disconnect()
        case .timedOut:
            current.server.kill()
            outcome = .failure(
                "MCP server \"\(settings.name)\" did not answer within \(request.timeoutMs) ms; it was stopped (the next call starts it again)",
                isRetryable: true)
            await current.client.disconnect()
        case .cancelled:
            current.server.kill()
            outcome = ToolOutcome(
                status: .error, error: "MCP server \"\(settings.name)\" was stopped because the run was interrupted")
            await current.client.disconnect()
        }
        outcome.stderr = current.server.stderr(since: mark)
        return outcome
    }

    /// A `tools/call` result as a tool outcome: the output is the result as the server wrote it
    /// (`content`, `structuredContent`), without `isError` and `_meta`; `isError: true` makes it
    /// a failure whose message is the text content.
    func close() async {
        let current = session.withLock { session -> Session? in
            defer { session = nil }
            return session
        }
        if let current { await current.client.disconnect() }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? MCPError {
            switch error {
            case .connectionClosed, .transportError: return "the connection closed"
            default: return "\(error.code): \(error.errorDescription ?? "no message")"
            }
        }
        if error is JSONLinesProcess.ServerClosed { return "the connection closed" }
        return (error as? any Diagnostic)?.message ?? "\(error)"
    }
}

extension JSONValue {
    /// The value as the MCP SDK holds it.
    var mcp: MCP.Value {
        switch self {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .int(let value): return .int(value)
        case .double(let value): return .double(value)
        case .string(let value): return .string(value)
        case .array(let items): return .array(items.map(\.mcp))
        case .object(let object):
            var members: [String: MCP.Value] = [:]
            for member in object { members[member.key] = member.value.mcp }
            return .object(members)
        }
    }
}

/// Waits for the first of: the work, a timeout on the injected clock, the server's failure,
/// the caller's cancellation. Structured: the work and the timer are child tasks, and the race
/// returns only when both have ended. The SDK's requests do not end on cancellation, so when the
/// work has not finished, `abandon` (which stops the server and disconnects the client: its
/// pending requests are failed) ends it before the race waits for it.
enum Race {
    enum Ending<T: Sendable>: Sendable {
        case finished(Result<T, any Error>)
        case failed(String)
        case timedOut
        case cancelled

        var isFinished: Bool {
            if case .finished = self { return true }
            return false
        }
    }

    /// The first ending given wins. Unchecked state is none: a `Mutex` guards all of it.
    final class Gate<T: Sendable>: Sendable {
        private let state = Mutex<(continuation: CheckedContinuation<Ending<T>, Never>?, ending: Ending<T>?, done: Bool)>(
            (nil, nil, false))

        func attach(_ continuation: CheckedContinuation<Ending<T>, Never>) {
            let ready = state.withLock { state -> Ending<T>? in
                if let ending = state.ending, !state.done {
                    state.done = true
                    return ending
                }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }

        func resolve(_ ending: Ending<T>) {
            let continuation = state.withLock { state -> CheckedContinuation<Ending<T>, Never>? in
                guard state.ending == nil else { return nil }
                state.ending = ending
                guard let continuation = state.continuation else { return nil }
                state.done = true
                return continuation
            }
            continuation?.resume(returning: ending)
        }
    }

    static func first<T: Sendable>(
        timeoutMs: Int, on clock: any Clock<Duration>, server: JSONLinesProcess, abandon: @escaping @Sendable () async -> Void,
        _ work: @escaping @Sendable () async throws -> T
    ) async -> Ending<T> {
        let gate = Gate<T>()
        let token = server.onFailure { gate.resolve(.failed($0)) }
        defer { server.removeWaiter(token) }
        return await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    gate.resolve(.finished(.success(try await work())))
                } catch {
                    // The server's failure ends requests in ways that look like other errors (another
                    // call that saw it first closes the client): the failure is what happened.
                    if let failure = server.failure {
                        gate.resolve(.failed(failure))
                    } else {
                        gate.resolve(.finished(.failure(error)))
                    }
                }
            }
            group.addTask {
                // Cancelled when the race is decided otherwise: then it resolves nothing.
                guard (try? await clock.sleep(for: .milliseconds(timeoutMs), tolerance: nil)) != nil else { return }
                gate.resolve(.timedOut)
            }
            let ending = await withTaskCancellationHandler {
                await withCheckedContinuation { gate.attach($0) }
            } onCancel: {
                gate.resolve(.cancelled)
            }
            group.cancelAll()
            if !ending.isFinished { await abandon() }
            // The group waits for the work here: it has finished, or `abandon` ended it.
            return ending
        }
    }
}
