import AgentRuntime
import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import Interop
import MCPTools
import ModelClients
import Synchronization
import TraceCore
import TraceLog

/// `agent-eval exec`: run an agent from its agent file and record the run.
struct ExecCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run an agent on an input and record the run as an event log.",
        discussion: """
            The runtime builds a context packet, asks the model for a decision, validates it, checks policy, runs \
            the allowed tool calls and records every step, until a stop reason ends the run: success, blocked, \
            approval_required, budget_exhausted, invalid_decision, policy_denied or tool_failure.

            A run that stopped with approval_required is continued in the same log with --resume and one \
            --approve or --deny per waiting call.

            Ctrl-C (SIGINT) or SIGTERM stop the run cleanly: running tools are killed with their process \
            groups, the stop is recorded (blocked, "interrupted…"), and the log is closed, whole.

            Exit codes: 0 the run stopped with success; 1 it stopped for any other reason (including \
            approval_required); 2 it could not run (bad agent file, unwritable log); 64 usage error; \
            130 interrupted by SIGINT, 143 by SIGTERM.

            Examples:
              agent-eval exec Fixtures/agents/support/agent.yaml --input "Order A-1042 arrived broken."
              agent-eval exec Fixtures/agents/support/agent.yaml --resume runs/support-agent-run-….jsonl.gz \\
                  --approve call-2 --approver maria
            """
    )

    @Argument(help: ArgumentHelp("The agent file (YAML), or give it with --agent.", valueName: "agent-file"))
    var agentFile: String?

    @Option(help: "The agent file (YAML). See docs/agent-files.md.")
    var agent: String?

    @OptionGroup(title: "Model")
    var models: ModelArguments

    @Option(help: "The goal or user input for a new run.")
    var input: String?

    @OptionGroup
    var destination: NewLogOptions

    @Option(help: "Who the run acts for (overrides the agent file's actor), for policy rules.")
    var actor: String?

    @Option(help: "The entry point the run came through (overrides the agent file's route).")
    var route: String?

    @Option(help: "Continue the run recorded in this log, which stopped with approval_required.")
    var resume: String?

    @Option(help: "Approve a waiting call (repeatable), with --resume.")
    var approve: [String] = []

    @Option(help: "Refuse a waiting call (repeatable), with --resume.")
    var deny: [String] = []

    @Option(help: "Who approved or refused, recorded with the approval.")
    var approver: String?

    @Option(
        help:
            "Sign the log with this Ed25519 key (from `agent-eval log keygen`): any later edit, cut or extension shows in `log verify --key`."
    )
    var signKey: String?

    @Flag(help: "Print a machine-readable summary as JSON.")
    var json = false

    @Flag(
        name: .shortAndLong, help: "Print only the log's path (for log=$(agent-eval exec --quiet …)); the exit status says how it stopped.")
    var quiet = false

    @OptionGroup(title: "Catalog")
    var catalog: CatalogUse

    @OptionGroup(title: "OpenTelemetry")
    var otlp: LiveExportOptions

    @Flag(
        help: """
            Print each event as it is recorded, and the model's text as it streams in, before the summary. \
            With --json: one JSON object a line, {"event": <the event as logged>} or {"text": "<model text>"}, \
            then the summary.
            """)
    var stream = false

    @Option(
        help: ArgumentHelp(
            """
            The log format version to write: 3 links the log's gzip members in its hash chain (about a fifth smaller); \
            2 links every line, and writes a context packet as a delta on the one before when that is smaller, for \
            agent-eval 0.3's readers; 1 also writes every packet whole, for readers that know only version 1. A \
            resumed run keeps its log's version. (default: the agent file's log_version, else 3)
            """, valueName: "1|2|3"))
    var logVersion: Int?

    /// The agent file, however it was given.
    var agentPath: String { agentFile ?? agent ?? "" }

    func validate() throws {
        switch (agentFile, agent) {
        case (nil, nil): throw ValidationError("give the agent file: agent-eval exec AGENT.yaml --input \"…\" (or --agent AGENT.yaml)")
        case (.some, .some): throw ValidationError("give the agent file once, as the argument or with --agent")
        default: break
        }
        if let logVersion, !Event.writableVersions.contains(logVersion) {
            throw ValidationError(
                "--log-version must be 1, 2 or 3, found \(logVersion)")
        }
        try models.requireCassetteForRecord()
        if quiet && (json || stream) { throw ValidationError("--quiet prints only the log's path; leave out --json and --stream") }
        switch (input, resume) {
        case (nil, nil): throw ValidationError("give --input for a new run, or --resume with a stopped run's log")
        case (.some, .some): throw ValidationError("--input and --resume do not go together")
        default: break
        }
        if resume == nil && !(approve.isEmpty && deny.isEmpty) {
            throw ValidationError("--approve and --deny only apply with --resume")
        }
        if let both = approve.first(where: deny.contains) {
            throw ValidationError("call \(both) is both approved and denied: give it one answer, --approve or --deny")
        }
        if resume != nil && approve.isEmpty && deny.isEmpty {
            throw ValidationError("--resume needs at least one --approve <call-id> or --deny <call-id>")
        }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        // Made first: a malformed OTLP headers variable stops the command before the run.
        let exporter = try otlp.exporter()
        let outcome: RunOutcome
        let interrupted: Int32?
        do {
            let signer = try signKey.map { path throws(LogError) in try LogSigner(keyFile: path) }
            var environment = RuntimeEnvironment.live
            if stream {
                let printer = StreamPrinter(json: json)
                environment.observe = { printer.show($0) }
            }
            // The models and the MCP servers record into (or replay from) one cassette.
            let shelf = CassetteShelf()
            var agent = try AgentFile.load(
                path: agentPath, models: try models.options(shelf: shelf), servers: try models.toolServers(shelf: shelf))
            if let logVersion {
                agent.writesContextDeltas = logVersion >= Event.deltaVersion
                agent.logFormatVersion = logVersion >= Event.memberChainVersion ? Event.memberChainVersion : 1
            }
            // The finished log is indexed, then its trace sent (--otlp-endpoint).
            let runtime = AgentRuntime(
                agent: agent, environment: environment, signer: signer,
                finishedLogs: FinishedLogSinks.combining([await catalog.indexingSink(), exporter]))
            let (resume, approve, deny, approver) = (self.resume, self.approve, self.deny, self.approver)
            let (input, actor, route) = (self.input, self.actor, self.route)
            let (id, path) = destination.destination(agent: runtime.agent.name)
            // Ctrl-C or SIGTERM cancel the run: tools are killed, the stop is recorded, the log closed.
            (outcome, interrupted) = try await withInterruption { () async throws -> RunOutcome in
                if let resume {
                    let approvals =
                        approve.map { ApprovalRecorded(callId: $0, isGranted: true, approver: approver) }
                        + deny.map { ApprovalRecorded(callId: $0, isGranted: false, approver: approver) }
                    return try await runtime.resume(log: resume, approvals: approvals)
                }
                return try await runtime.run(goal: input ?? "", log: path, runId: id, actor: actor, route: route)
            }
        } catch {
            throw diagnose(error)
        }
        let exported = await exporter?.finish()
        if json {
            printJSON(exported?.added(to: outcome.json) ?? outcome.json)
        } else if quiet {
            say(outcome.logPath)
        } else {
            for line in Self.describe(outcome, agentPath: agentPath, signKey: signKey) { say(line) }
            if let exported { say(exported.sentence) }
        }
        if let interrupted { throw ExitCode(128 + interrupted) }
        throw outcome.stop.reason == .success ? Exit.success : Exit.failure
    }

    /// Failed calls the summary names; the rest are counted.
    static let failedCallsShown = 5

    /// `signKey`: the key the run was signed with, which its resume must sign with too.
    static func describe(_ outcome: RunOutcome, agentPath: String, signKey: String? = nil) -> [String] {
        let state = outcome.state
        let stop = outcome.stop
        var lines: [String] = []
        var headline = "stopped: \(stop.reason.rawValue)"
        if let limit = stop.limit { headline += " (\(limit.rawValue))" }
        lines.append(headline)
        if let answer = stop.answer { lines.append("answer: \(answer)") }
        if let error = stop.error { lines.append("why: \(error)") }
        let denied = state.counters.deniedCalls
        lines.append(
            "steps: \(outcome.steps)"
                // The interruption names the step it cut short. Cut before its decision, that
                // step is one past the steps taken; the stop ends it, so the steps ended (the
                // start's step 0 among them) are then more than the steps taken plus one.
                + (stop.isInterruption && state.stepsCompleted > outcome.steps + 1
                    ? " (step \(outcome.steps + 1) was cut short before its decision)" : "")
                + ", tool calls: \(state.toolCallCount)" + (denied > 0 ? " (+\(denied) denied)" : "")
                + ", tokens: \(state.usage.totalTokens)")
        let failed = state.calls.filter { $0.isExecuted && $0.lastResult?.status != .ok }
        if !failed.isEmpty {
            // The first few name the problem; a long run's hundreds would bury the rest.
            let shown = failed.prefix(Self.failedCallsShown).map { "\($0.tool) (\($0.id)): \($0.lastResult?.error ?? "no result")" }
            let more = failed.count - shown.count
            lines.append(
                "FAILED calls: \(failed.count) of \(state.toolCallCount): " + shown.joined(separator: "; ")
                    + (more > 0 ? "; … and \(more) more (\(EvalReport.replayCommand(log: outcome.logPath, step: nil)) shows each)" : ""))
        }
        lines.append("log: \(outcome.logPath)")
        let waiting = state.callsAwaitingApproval
        if !waiting.isEmpty {
            let approvals = waiting.map { "--approve \(ShellWords.quoted($0.id))" }.joined(separator: " ")
            lines.append(
                "waiting for approval: "
                    + waiting.map { "\($0.id) (\($0.tool) \(JSONWriter.encodeString($0.arguments)))" }.joined(separator: ", "))
            lines.append(
                "resume: agent-eval exec \(ShellWords.quoted(agentPath)) --resume \(ShellWords.quoted(outcome.logPath)) \(approvals)"
                    + (signKey.map { " --sign-key \(ShellWords.quoted($0))" } ?? ""))
        }
        return lines
    }
}

/// `exec --stream`: events and model text as they happen, from whichever task records them.
final class StreamPrinter: Sendable {
    let json: Bool
    /// Whether the last thing printed was model text without its line end.
    private let midLine = Mutex(false)

    init(json: Bool) {
        self.json = json
    }

    func show(_ update: RunUpdate) {
        midLine.withLock { midLine in
            switch update {
            case .event(let event):
                if midLine { printOutput("") }
                midLine = false
                if json {
                    printOutput("{\"event\":" + String(decoding: event.encodedLine(), as: UTF8.self) + "}")
                } else {
                    say(event.summaryLine)
                }
            case .modelText(let text):
                if json {
                    printJSON(["text": .string(text)])
                } else {
                    if !midLine { printOutput("model     ", terminator: "") }
                    printOutput(terminalSafe(text), terminator: "")
                    midLine = !text.hasSuffix("\n")
                }
            case .finished:
                break
            }
            fflush(nil)  // all streams: the line is out before the run goes on
        }
    }
}
