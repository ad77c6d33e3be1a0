import AgentRuntime
import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import ModelClients
import Recording
import TraceCore
import TraceLog

/// `agent-eval record -- COMMAND`: record an agent written with any framework, through the
/// model gateway.
struct RecordCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Run any agent through a recording model gateway and record its run as an event log.",
        discussion: """
            The command runs with OPENAI_BASE_URL and ANTHROPIC_BASE_URL pointing at a gateway on 127.0.0.1 \
            that forwards each model request (OpenAI Chat Completions and Responses, Anthropic Messages; \
            streamed or not) to the real provider and records what it sees: the conversation the agent sent, \
            the model's decision, each tool call and — once the agent sends it back — its result, and how the \
            command ended. The log is an ordinary one: replay, diff, view, index and eval cases read it. \
            API keys go to the provider, never into the log or the cassette. docs/record.md has the details.

            The command's OpenTelemetry trace exporter is pointed at the gateway too \
            (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTLP/HTTP): an instrumented agent's tool spans give its calls \
            their measured duration and error, and add the calls its own code ran without asking the model; \
            model spans are matched to the requests the gateway saw and not recorded twice (--no-otlp leaves \
            the variables alone).

            With --cassette DIR the model's answers are recorded (--record new or all) or replayed offline \
            (--record none, the default with a cassette): the same agent code then gives the same trajectory, \
            with no network and no key; a request the cassette lacks stops the command and names the \
            difference.

            Exit codes: the command's own exit status (128 + N when signal N ended it); 1 when the recording \
            stopped it (--timeout, --max-requests, --max-tokens, a cassette miss); 2 when the gateway or the \
            command could not start, or the log could not be written; 64 usage error.

            Examples:
              agent-eval record -- python3 agent.py "Order A-1042 arrived broken"
              agent-eval record --cassette cassettes/refund --record new -- python3 agent.py
              agent-eval record --cassette cassettes/refund --name refund --json -- python3 agent.py
            """
    )

    @OptionGroup
    var destination: NewLogOptions

    @Option(help: "The agent's name in the log and its file name (default: the script or program the command runs).")
    var name: String?

    @Option(help: "The run's goal in the log (default: the first user message the agent sends).")
    var goal: String?

    @Option(help: "Given to the command on its standard input and as AGENT_EVAL_INPUT.")
    var input: String?

    @Option(
        help: ArgumentHelp(
            "Stop the command after this many seconds, at most 31536000 (stop: budget_exhausted, timeout).", valueName: "seconds"))
    var timeout: Int = 600

    @Option(
        help:
            "Refuse model requests past this many and stop the command (stop: budget_exhausted, max_steps); a looping agent is stopped, not billed."
    )
    var maxRequests: Int = ExchangeRecorder.Limits.defaultMaxRequests

    @Option(help: "Stop the command once its model requests used more tokens than this, input and output (token_budget).")
    var maxTokens: Int?

    @Option(
        name: .customLong("upstream"),
        help: ArgumentHelp(
            "Where a provider's requests go, as openai=URL (with /v1) or anthropic=URL (repeatable). Default: OPENAI_BASE_URL "
                + "or ANTHROPIC_BASE_URL as set when agent-eval started, else the provider's public API.", valueName: "provider=URL"))
    var upstreams: [String] = []

    @Option(help: "A cassette directory: the model's answers are replayed from it, and recorded into it with --record.")
    var cassette: String?

    @Option(
        help: ArgumentHelp(
            "With --cassette: none replays only (a request with no recording stops the command), new records what is missing, "
                + "all records everything again.", valueName: "none|new|all"))
    var record: String = "none"

    @Flag(help: "Leave the command's OTEL_EXPORTER_OTLP_TRACES_* variables alone: its spans are not taken into the run.")
    var noOtlp = false

    @Flag(help: "Print a machine-readable summary as JSON on standard output (the command's own output then goes to standard error).")
    var json = false

    @OptionGroup(title: "Catalog")
    var catalog: CatalogUse

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command to run, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        guard !command.isEmpty else {
            throw ValidationError("give the command to record after --: agent-eval record -- python3 agent.py")
        }
        guard Cassette.Mode(rawValue: record) != nil else { throw ValidationError("--record takes none, new or all; got \(record)") }
        if record != "none" && cassette == nil { throw ValidationError("--record needs --cassette DIR") }
        guard timeout > 0, timeout <= 365 * 86_400 else {
            throw ValidationError("--timeout must be from 1 second to 31536000 (a year), got \(timeout)")
        }
        if maxRequests < 1 { throw ValidationError("--max-requests must be at least 1, got \(maxRequests)") }
        if let maxTokens, maxTokens < 1 { throw ValidationError("--max-tokens must be at least 1, got \(maxTokens)") }
        _ = try Self.upstreamValues(upstreams)
    }

    /// `--upstream` values by provider.
    static func upstreamValues(_ upstreams: [String]) throws -> [String: String] {
        var values: [String: String] = [:]
        for given in upstreams {
            let parts = given.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, ["openai", "anthropic"].contains(parts[0]),
                parts[1].hasPrefix("http://") || parts[1].hasPrefix("https://")
            else {
                throw ValidationError("--upstream takes openai=URL or anthropic=URL (an http or https URL); got \(given)")
            }
            values[parts[0]] = parts[1]
        }
        return values
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let outcome: CommandRecording.Outcome
        let interrupted: Int32?
        do {
            let cassette = try self.cassette.map { try Cassette(directory: $0, mode: Cassette.Mode(rawValue: record) ?? .none) }
            let environment = ProcessInfo.processInfo.environment
            let name = self.name.map(RuntimeEnvironment.fileNameComponent) ?? CommandRecording.agentName(for: command)
            let (id, path) = destination.destination(agent: name)
            var recording = CommandRecording(
                command: command, input: input, logPath: path, runId: id, goal: goal,
                agentName: name, timeoutMs: timeout * 1000, limits: .init(maxRequests: maxRequests, maxTokens: maxTokens),
                upstreams: Upstreams.resolve(given: try Self.upstreamValues(upstreams), environment: environment), cassette: cassette,
                environment: environment)
            recording.outputDescriptor = json ? 2 : 1
            recording.finishedLogs = await catalog.indexingSink()
            recording.takesSpans = !noOtlp
            (outcome, interrupted) = try await withInterruption { [recording] in try await recording.run() }
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(Self.json(outcome))
        } else {
            for line in Self.describe(outcome) { printError(line) }
        }
        if maxTokens != nil, outcome.unmeteredReplies > 0 {
            printError(
                "note: \(counted(outcome.unmeteredReplies, "model reply", plural: "model replies")) carried no token usage, so --max-tokens "
                    + "counted one token per four bytes of request and reply for them (have the agent ask for usage: OpenAI's "
                    + "stream_options: {include_usage: true})")
        }
        if let interrupted { throw ExitCode(128 + interrupted) }
        if outcome.stopCause != nil || outcome.isTimedOut { throw Exit.failure }
        if let signal = outcome.signal { throw ExitCode(128 + signal) }
        if outcome.exitStatus == 0 && outcome.requests == 0 && outcome.proxiedCalls == 0 {
            // A recording with no model request and no tool call an MCP proxy judged holds
            // nothing a replay or a gate can use: a step of CI that records must not pass on it.
            if outcome.refusedRequests > 0 {
                printError(
                    "error: the command exited 0, but the gateway refused \(outcome.refusedRequests == 1 ? "its request" : "all \(outcome.refusedRequests) of its requests") "
                        + "before any reached a model (\(outcome.firstRefusal ?? "see above")), so nothing was recorded")
            } else if outcome.failedRequests > 0 {
                printError(
                    "error: the command exited 0, but none of the \(counted(outcome.failedRequests, "model request")) it made through "
                        + "the gateway was answered in a way that could be recorded (\(outcome.stop.error ?? "see the log")), so nothing "
                        + "was recorded that a replay or a gate could use")
            } else {
                printError(
                    "error: the command exited 0 without a model request through the gateway (or a tool call through an MCP proxy), "
                        + "so nothing was recorded (does it take its base URL from OPENAI_BASE_URL / ANTHROPIC_BASE_URL? docs/record.md)")
            }
            throw Exit.failure
        }
        if outcome.exitStatus == 0, outcome.stop.isModelFailure {
            // The run's last model request failed: what the agent did after it is not the
            // model's, and a case over this log could not run. A step of CI that records fails.
            printError(
                "error: the command exited 0, but the run's last model request failed (\(outcome.stop.error ?? "")): "
                    + "the recording is not a run a replay or a gate can judge")
            throw Exit.failure
        }
        throw ExitCode(outcome.exitStatus ?? 0)
    }

    static func json(_ outcome: CommandRecording.Outcome) -> JSONValue {
        var object = ObjectBuilder()
        object.set("run_id", outcome.runId)
        object.set("log", outcome.logPath)
        object.set("stop_reason", outcome.stop.reason)
        object.set("limit", outcome.stop.limit)
        object.set("answer", outcome.stop.answer)
        object.set("error", outcome.stop.error)
        object.set("requests", outcome.requests)
        object.set("exit_status", outcome.exitStatus.map(Int.init))
        if outcome.spans.spans > 0 {
            let spans = outcome.spans
            let counts: JSONValue = [
                "received": .int(spans.spans), "model_matched": .int(spans.modelMatched), "model_unmatched": .int(spans.modelUnmatched),
                "tool_timed": .int(spans.toolTimed), "own_tool_calls": .int(spans.toolCalls), "tool_late": .int(spans.toolLate),
            ]
            object.set("spans", counts)
        }
        object.set("signal", outcome.signal.map(Int.init))
        return object.json
    }

    static func describe(_ outcome: CommandRecording.Outcome) -> [String] {
        var headline = "recorded: \(outcome.stop.reason.rawValue)"
        if let limit = outcome.stop.limit { headline += " (\(limit.rawValue))" }
        var lines = [headline]
        if let answer = outcome.stop.answer { lines.append("answer: \(answer)") }
        if let error = outcome.stop.error { lines.append("why: \(error)") }
        lines.append("model requests: \(outcome.requests)")
        let spans = outcome.spans
        if spans.spans > 0 {
            lines.append(
                "spans: \(spans.spans) received; \(counted(spans.modelMatched, "model call")) matched to the gateway's requests; "
                    + "\(counted(spans.toolTimed, "tool call")) timed by \(spans.toolTimed == 1 ? "its span" : "their spans")"
                    + (spans.toolCalls > 0 ? ", \(counted(spans.toolCalls, "call")) run by the agent's own code" : "")
                    + (spans.toolLate > 0 ? ", \(spans.toolLate) too late to time (recorded before their span came)" : ""))
            if spans.modelUnmatched > 0 {
                lines.append(
                    "warning: \(spans.modelUnmatched) model call\(spans.modelUnmatched == 1 ? "" : "s") in the spans did not pass through the "
                        + "gateway (a base URL set in code?): kept with the spans, not recorded as steps")
            }
        }
        lines.append("log: \(outcome.logPath)")
        if case .notRecorded(_, let step)? = outcome.stopCause {
            lines.append("look: \(EvalReport.replayCommand(log: outcome.logPath, step: step))")
            lines.append(
                "hint: the agent asked something the cassette has no answer for; if the change is intended, record again with "
                    + "--record new (needs the model)")
        } else {
            lines.append("replay: \(EvalReport.replayCommand(log: outcome.logPath, step: nil))")
        }
        return lines
    }
}
