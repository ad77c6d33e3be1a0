import AgentRuntime
import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import Recording
import TraceCore
import TraceLog

/// `agent-eval mcp-proxy -- SERVER…`: put the policy gate and the log between any MCP client
/// and its stdio server.
struct MCPProxyCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "mcp-proxy",
        abstract: "Serve MCP over stdio in front of a real server: every tool call gated by a policy and recorded.",
        discussion: """
            Put it where an agent's MCP configuration starts its server: command agent-eval, arguments \
            mcp-proxy [options] -- the server's own command. The client and the server then speak as before, \
            and every tools/call gets a policy verdict (the rules of an agent file's policy: block, from \
            --policy FILE) recorded before anything is forwarded; a call naming a tool the server does not list \
            (another case, a trailing space, a look-alike letter) is refused (rule mcp.unlisted_tool). A denied call is answered with a tool error \
            the agent's model can read; an approval-required call waits for `agent-eval approve LOG CALL` (or \
            --approval-timeout); an allowed call's tool_intended is durable in the log before the server sees \
            it, and its result is recorded before the client sees it. Everything else passes through unchanged. \
            One client connection is one run: its log is closed when the client goes, after the calls still in \
            flight are answered or reach --call-timeout (a connection that only probed with server/discover \
            writes none). docs/mcp.md has the details.

            Both eras of MCP pass: 2025 (initialize) and 2026-07-28 (stateless, server/discover). A call the \
            server answers input_required is one call over its rounds: judged once, each round recorded, at \
            most 8; a retry that continues no waiting call is refused (rule mcp.continuation). The policy \
            file's input_requests: says what the server may ask the client (sampling, roots, form and URL \
            elicitation). A call answered with a task (the tasks extension) stays open until the client's \
            tasks/get finds the task ended: the task's result is the call's, and its questions are judged \
            like a round's.

            With --bridge, a client and a server of different eras work together (without it, the \
            specification's matrix has them fail): the proxy answers initialize for a server of 2026-07-28 \
            only, and server/discover for a 2025 server, adds or removes the envelope, and turns a 2025 \
            server's requests to the client during a call into that call's input_required rounds (and a \
            2026-07-28 server's input_required into requests to a 2025 client). What it bridged is kept in \
            the log (application/vnd.agent-eval.mcp-bridge+json).

            Standard output is the protocol's: the proxy prints its summary on standard error (--json-out FILE \
            writes it as JSON), and the server's standard error is passed on to it.

            Exit codes: 0 the client ended the session; 1 the server failed (exited, crashed, wrote what is \
            not JSON-RPC), the client sent a line past the limit, or the policy file names a tool the server does \
            not have (a misspelt rule never fires: every call is refused once the tools are listed, each name \
            reported at its line); 2 the server or the log could not be started or written; 64 usage error.

            Examples:
              agent-eval mcp-proxy -- python3 -m mcp_server_time
              agent-eval mcp-proxy --policy tools.policy.yaml --hide-denied -- npx -y @modelcontextprotocol/server-filesystem .
              agent-eval approve runs/mcp_server_time-run-….jsonl.gz mcp-3
            """
    )

    @OptionGroup
    var destination: NewLogOptions

    @Option(
        help:
            "A policy file: a policy: block as in an agent file, side_effects: (tool glob → read, draft or write), and input_requests: (what the server may ask)."
    )
    var policy: String?

    @Option(
        name: .customLong("pre-approve"),
        help: ArgumentHelp(
            "Approve the approval-required calls of tools matching this name or glob without asking (repeatable).", valueName: "tool"))
    var preApprovals: [String] = []

    /// The older spelling of --pre-approve (`--approve` names a waiting call everywhere else).
    @Option(name: .customLong("approve"), help: .hidden)
    var approveSpelling: [String] = []

    var approvals: [String] { preApprovals + approveSpelling }

    @Option(help: ArgumentHelp("How long an approval-required call waits for `agent-eval approve`.", valueName: "seconds"))
    var approvalTimeout: Double = 300

    @Option(help: ArgumentHelp("How long a forwarded call waits for the server's answer.", valueName: "seconds"))
    var callTimeout: Double = 300

    @Flag(help: "Leave out of tools/list the tools the policy denies on name, side effect, actor and route alone.")
    var hideDenied = false

    @Flag(
        help:
            "Bridge MCP eras: let a 2025 client (initialize) use a server of 2026-07-28 only, and a 2026-07-28 client use a 2025 server. The server is probed with server/discover at the client's first request."
    )
    var bridge = false

    @Option(
        help: ArgumentHelp(
            "With --bridge, how long the server/discover probe waits before the server is taken for a 2025 one (raise it for a server that starts slowly).",
            valueName: "seconds"))
    var bridgeProbeTimeout: Double = 5

    @Option(help: "Deny every call after this many have run.")
    var maxToolCalls: Int?

    @Option(help: "The server's name in the log and in rules' server conditions (default: its program or script).")
    var name: String?

    @Option(help: "Who the session acts for, for policy rules' actor conditions.")
    var actor: String?

    @Option(help: "The entry point, for policy rules' route conditions.")
    var route: String?

    @Option(help: "The run's goal in the log (default: \"MCP session of <client> with <server>\").")
    var goal: String?

    @Option(help: "Write the session's summary as JSON to this file when it ends.")
    var jsonOut: String?

    @OptionGroup(title: "Catalog")
    var catalog: CatalogUse

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The MCP server's command, after --.", valueName: "server"))
    var server: [String] = []

    func validate() throws {
        guard !server.isEmpty else {
            throw ValidationError("give the MCP server's command after --: agent-eval mcp-proxy -- python3 -m mcp_server_time")
        }
        // A year at most: beyond it a timeout is a mistake, and milliseconds would overflow.
        guard approvalTimeout > 0, approvalTimeout <= 31_536_000 else {
            throw ValidationError("--approval-timeout takes seconds, more than 0 and at most a year (31536000)")
        }
        guard callTimeout > 0, callTimeout <= 31_536_000 else {
            throw ValidationError("--call-timeout takes seconds, more than 0 and at most a year (31536000)")
        }
        guard bridgeProbeTimeout > 0, bridgeProbeTimeout <= 3_600 else {
            throw ValidationError("--bridge-probe-timeout takes seconds, more than 0 and at most an hour (3600)")
        }
        if let maxToolCalls, maxToolCalls < 0 { throw ValidationError("--max-tool-calls must be 0 or more, got \(maxToolCalls)") }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let outcome: MCPProxy.Outcome
        let interrupted: Int32?
        var policyFile = PolicyFile.allowAll
        if let policy {
            do throws(ConfigErrors) {
                policyFile = try PolicyFile.load(path: policy)
            } catch {
                for problem in error.errors { diagnose(problem) }
                throw Exit.unusable
            }
        }
        do {
            let serverName = name.map(RuntimeEnvironment.fileNameComponent) ?? MCPProxy.serverName(for: server)
            let (id, path) = destination.destination(agent: serverName)
            var settings = MCPProxy.Settings(
                server: server, directory: FileManager.default.currentDirectoryPath, environment: ProcessInfo.processInfo.environment,
                serverName: serverName, policy: policyFile, logPath: path, runId: id)
            settings.preApproved = approvals.map(Glob.init)
            settings.approvalTimeout = .milliseconds(Int(approvalTimeout * 1000))
            settings.callTimeout = .milliseconds(Int(callTimeout * 1000))
            settings.hidesDenied = hideDenied
            settings.bridges = bridge
            settings.bridgeProbeTimeout = .milliseconds(Int(bridgeProbeTimeout * 1000))
            settings.maxToolCalls = maxToolCalls
            settings.actor = actor
            settings.route = route
            settings.goal = goal
            settings.serverStderr = 2
            settings.notices = { printError("agent-eval mcp-proxy: \($0)") }
            settings.policyPath = policy.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            // Under `agent-eval record` (which sets the variable), the gate goes into the run it
            // records, unless a log of the proxy's own is asked for.
            if destination.log == nil, let url = ProcessInfo.processInfo.environment[MCPProxy.recorderVariable], !url.isEmpty {
                settings.recorderURL = url
            } else {
                settings.finishedLogs = await catalog.indexingSink()
            }
            let proxy = MCPProxy(settings: settings)
            (outcome, interrupted) = try await withInterruption { try await proxy.run() }
        } catch {
            throw diagnose(error)
        }
        for line in Self.describe(outcome) { printError("agent-eval mcp-proxy: \(line)") }
        if let jsonOut {
            do {
                try ReportFile.write(JSONWriter.encodePretty(Self.json(outcome)), to: jsonOut)
            } catch {
                throw diagnose(error)
            }
        }
        if let interrupted { throw ExitCode(128 + interrupted) }
        if outcome.writeFailure != nil { throw Exit.unusable }
        if outcome.isFailure { throw Exit.failure }
    }

    static func json(_ outcome: MCPProxy.Outcome) -> JSONValue {
        var object = ObjectBuilder()
        object.set("run_id", outcome.runId)
        object.set("log", outcome.logPath.map(JSONValue.string) ?? .null)
        object.set("stop_reason", outcome.stop.reason)
        object.set("error", outcome.stop.error)
        object.set("calls", outcome.calls)
        object.set("allowed", outcome.allowed)
        object.set("denied", outcome.denied)
        object.set("unfinished", outcome.unfinished)
        object.set("write_failure", outcome.writeFailure)
        return object.json
    }

    static func describe(_ outcome: MCPProxy.Outcome) -> [String] {
        var lines = ["session ended: \(outcome.stop.reason.rawValue)" + (outcome.stop.error.map { " (\($0))" } ?? "")]
        lines.append(
            "tool calls: \(outcome.calls) (\(outcome.allowed) forwarded, \(outcome.denied) denied or refused)"
                + (outcome.unfinished > 0 ? "; \(outcome.unfinished) unfinished when the session ended (recorded as such)" : ""))
        if let failure = outcome.writeFailure { lines.append("the log could not be written to its end: \(failure)") }
        lines.append(outcome.logPath.map { "log: \($0)" } ?? "log: none written (the client only probed the server with server/discover)")
        return lines
    }
}
