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
struct MCPProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp-proxy",
        abstract: "Serve MCP over stdio in front of a real server: every tool call gated by a policy and recorded.",
        discussion: """
            Put it where an agent's MCP configuration starts its server: command agent-eval, arguments \
            mcp-proxy [options] -- the server's own command. The client and the server then speak as before, \
            and every tools/call gets a policy verdict (the rules of an agent file's policy: block, from \
            --policy FILE) recorded before anything is forwarded. A denied call is answered with a tool error \
            the agent's model can read; an approval-required call waits for `agent-eval approve LOG CALL` (or \
            --approval-timeout); an allowed call's tool_intended is durable in the log before the server sees \
            it, and its result is recorded before the client sees it. Everything else passes through unchanged. \
            One client connection is one run: its log is closed when the client goes. docs/mcp.md has the \
            details.

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

    @Option(help: "A policy file: a policy: block as in an agent file, and side_effects: (tool glob → read, draft or write).")
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
        if let maxToolCalls, maxToolCalls < 0 { throw ValidationError("--max-tool-calls must be 0 or more, got \(maxToolCalls)") }
    }

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
                settings.finishedLogs = catalog.indexingSink()
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
        object.set("log", outcome.logPath)
        object.set("stop_reason", outcome.stop.reason)
        object.set("error", outcome.stop.error)
        object.set("calls", outcome.calls)
        object.set("allowed", outcome.allowed)
        object.set("denied", outcome.denied)
        object.set("write_failure", outcome.writeFailure)
        return object.json
    }

    static func describe(_ outcome: MCPProxy.Outcome) -> [String] {
        var lines = ["session ended: \(outcome.stop.reason.rawValue)" + (outcome.stop.error.map { " (\($0))" } ?? "")]
        lines.append("tool calls: \(outcome.calls) (\(outcome.allowed) forwarded, \(outcome.denied) denied or refused)")
        if let failure = outcome.writeFailure { lines.append("the log could not be written to its end: \(failure)") }
        lines.append("log: \(outcome.logPath)")
        return lines
    }
}

/// `agent-eval approve LOG CALL`: answer a call that waits for approval in a running proxy.
struct ApproveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "approve",
        abstract: "Approve (or --deny) a tool call that waits for approval in a running agent-eval mcp-proxy.",
        discussion: """
            The proxy names the log and the call when a call waits (on its standard error); without a call, \
            this lists the calls that wait. The answer is recorded in the run's log as approval_recorded, with \
            --approver and --reason. docs/mcp.md, "Approvals".

            Examples:
              agent-eval approve runs/fs-run-1.jsonl.gz
              agent-eval approve runs/fs-run-1.jsonl.gz mcp-3
              agent-eval approve runs/fs-run-1.jsonl.gz mcp-3 --deny --reason "not on a Friday"
            """
    )

    @Argument(help: "The log the proxy writes.")
    var log: String

    @Argument(help: "The call to answer (mcp-N); none lists the calls that wait.")
    var call: String?

    @Flag(help: "Refuse the call instead of approving it.")
    var deny = false

    @Option(help: "Who answers (default: the USER variable).")
    var approver: String?

    @Option(help: "Why, recorded with the answer.")
    var reason: String?

    @Flag(help: "Print JSON on standard output.")
    var json = false

    func run() throws {
        // The proxy makes its log before any call can wait: no log, no proxy (a mistyped path
        // would otherwise list nothing and pass).
        guard FileManager.default.fileExists(atPath: log) else {
            throw diagnose(
                CommandError(
                    "no_log", "there is no log at \(log)", at: SourceLocation(path: log),
                    hint: "give the log the proxy writes: it names it on its standard error when a call waits"))
        }
        // It must be a log: one being written may be torn or still empty, but a file that is no
        // log, or a damaged one, has no call to answer (a listing of none would pass).
        var state = RunState()
        do {
            _ = try LogReader(path: log).forEachEvent { _ = RunState.reduce(into: &state, $0.event) }
        } catch let error as LogError where error.code == .empty || error.code == .noEvent {
        } catch {
            throw diagnose(error)
        }
        // A run that stopped for approval (exec, run) is answered by resuming it, not here.
        let resumeHint =
            state.stop?.reason == .approvalRequired
            ? "this run stopped for approval: answer it by resuming it, agent-eval exec AGENT_FILE --resume \(ShellWords.quoted(log)) "
                + "--approve \(call ?? "ID") (or --deny \(call ?? "ID"))" : nil
        guard let call else {
            let waiting = MCPApprovals.pending(log: log)
            if waiting.isEmpty, let resumeHint, !json { printError("note: \(resumeHint)") }
            if json {
                printJSON(.array(waiting.map(\.json)))
            } else if waiting.isEmpty {
                say("no call waits for approval in \(log)")
            } else {
                for item in waiting {
                    say(
                        "\(item.callId)  \(item.tool) \(String(decoding: JSONWriter.encode(item.arguments), as: UTF8.self))"
                            + (item.reason.map { "  (\($0))" } ?? ""))
                }
            }
            return
        }
        let answered: MCPApprovals.PendingCall
        do {
            answered = try MCPApprovals.answer(
                log: log, callId: call,
                with: MCPApprovals.Answer(
                    isGranted: !deny, approver: approver ?? ProcessInfo.processInfo.environment["USER"] ?? "agent-eval approve",
                    reason: reason))
        } catch  where error.code == .alreadyAnswered {
            // The call was answered, by someone else: this answer lost the race and is not taken.
            throw diagnose(error, exit: Exit.failure)
        } catch let error as any Diagnostic {
            guard let resumeHint else { throw diagnose(error) }
            throw diagnose(CommandError("not_waiting", error.message, at: SourceLocation(path: log), hint: resumeHint))
        } catch {
            throw diagnose(error)
        }
        if json {
            var object = ObjectBuilder()
            object.set("call_id", answered.callId)
            object.set("tool", answered.tool)
            object.set("granted", !deny)
            printJSON(object.json)
        } else {
            say("\(deny ? "denied" : "approved") \(answered.callId) (\(answered.tool))")
        }
    }
}
