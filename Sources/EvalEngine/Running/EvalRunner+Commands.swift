public import AgentRuntime
import Foundation
import TraceCore

/// One run of a `command:` case, as the runner asks for it.
public struct CommandCaseRun: Sendable {
    /// The command line, `{input}` already replaced.
    public var command: [String]
    /// Where it runs (the case file's directory).
    public var directory: String
    /// Given on its standard input and as `AGENT_EVAL_INPUT`.
    public var input: String
    /// The log to write; it does not exist yet.
    public var logPath: String
    public var runId: String
    /// By provider (`openai`, `anthropic`): the case's `upstream:`.
    public var upstreams: [String: String]
    /// The case's cassette directory, if it names one.
    public var cassette: String?
    public var timeoutMs: Int
    /// The case's `env:`, over the runner's environment.
    public var environment: [(name: String, value: String)] = []
    /// The case's `name:` for the agent; nil derives it from the command line.
    public var agentName: String?
    /// The case's simulated user (`user:`): the command is given its first turn as its input and
    /// each later one as a line on its standard input (docs/conversations.md); nil for one input.
    public var conversation: Conversation?
}

/// How a command case's run ended, beyond what its log says.
public struct CommandCaseOutcome: Sendable {
    /// The step at which the agent asked something its cassette had no answer for; nil when
    /// nothing was missing.
    public var missedStep: Int?
    /// What was missing, in the cassette's words.
    public var missMessage: String?

    public init(missedStep: Int? = nil, missMessage: String? = nil) {
        self.missedStep = missedStep
        self.missMessage = missMessage
    }
}

/// A command case's cassette that cannot be used (a directory that does not exist in replay, an
/// index that does not read): what the recorder throws so that the runner puts the error at the
/// case's `cassette:`, not at its `command:`.
public struct CommandCaseCassetteError: Error, Sendable {
    public var message: String
    public var hint: String?

    public init(message: String, hint: String?) {
        self.message = message
        self.hint = hint
    }
}

/// What runs `command:` cases: the recording model gateway (the Recording module, given by the
/// CLI; the eval engine does not import it). It runs the command to its end and leaves a
/// finished log at `logPath`; it throws when the command or the gateway could not start.
public protocol CommandCaseRecorder: Sendable {
    func record(_ run: CommandCaseRun) async throws -> CommandCaseOutcome
}

extension EvalRunner {
    /// Runs a command case once through the recording gateway, then grades it from the log the
    /// gateway wrote, read back like any other. A cassette miss makes the run "could not run"
    /// at the step where the agent diverged: a replay cannot say what it would have done.
    static func runCommand(
        _ evalCase: EvalCase, command: ExternalCommand, repeatIndex: Int, agents: AgentCache, options: EvalOptions, judge: RubricJudge
    ) async -> RunResult {
        let log = "\(options.outputDirectory)/\(evalCase.id)-\(repeatIndex).jsonl.gz"
        func cannotRun(_ error: any Error) -> RunResult {
            RunResult(
                logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: DiagnosticRecord(describing: error),
                summary: RunSummary())
        }
        guard let recorder = options.commands else {
            return cannotRun(
                EvalError(
                    .commandFailed, "case \"\(evalCase.id)\" runs a command, and this runner has no recording gateway",
                    location: evalCase.location(ofKey: "command"), hint: "run it with agent-eval run, which records commands"))
        }
        if FileManager.default.fileExists(atPath: log) {
            return cannotRun(
                EvalError(
                    .logExists, "the log for this live run exists already: \(log)", location: SourceLocation(path: log),
                    hint: "write live runs to a new output directory"))
        }
        let input = evalCase.input ?? ""
        let outcome: CommandCaseOutcome
        let conversation: Conversation?
        do {
            conversation = try agents.conversation(of: evalCase)
        } catch {
            return cannotRun(error)
        }
        do {
            try FileManager.default.createDirectory(atPath: options.outputDirectory, withIntermediateDirectories: true)
            var run = CommandCaseRun(
                command: command.commandLine(input: input), directory: command.directory, input: input, logPath: log,
                runId: options.environment.makeRunId(), upstreams: command.upstreams, cassette: evalCase.cassette,
                timeoutMs: command.timeoutSeconds * 1000)
            run.environment = command.environment
            run.agentName = command.agentName
            run.conversation = conversation
            outcome = try await recorder.record(run)
        } catch let error as CommandCaseCassetteError {
            await closed([log], options: options)
            return cannotRun(
                EvalError(
                    .badCase, "case \"\(evalCase.id)\": \(error.message)", location: evalCase.location(ofKey: "cassette"),
                    hint: (error.hint.map { $0 + "; " } ?? "") + "the path is relative to the case file's folder"))
        } catch {
            await closed([log], options: options)
            let reason = (error as? any Diagnostic)?.message ?? "\(error)"
            return cannotRun(
                EvalError(
                    .commandFailed, "case \"\(evalCase.id)\": \(reason)", location: evalCase.location(ofKey: "command"),
                    hint: "check the program and its arguments in command: (they run in the case file's folder, without a shell)"))
        }
        await closed([log], options: options)
        var result = await checkLive(log: log, repeatIndex: repeatIndex, case: evalCase, agents: agents, options: options, judge: judge)
        if let step = outcome.missedStep {
            result.failures = []
            result.error = DiagnosticRecord(
                EvalError(
                    .cassetteMiss,
                    "cassette miss at step \(step): the agent asked the model something its cassette has no answer for (its code, "
                        + "prompt or a tool's result changed since the recording; a replay cannot say what it would do next)"
                        + (outcome.missMessage.map { ": \($0)" } ?? ""),
                    location: SourceLocation(path: log),
                    hint: "look: \(EvalReport.replayCommand(log: log, step: step)); if the change is intended, record again with the "
                        + "model reachable: agent-eval run \(ShellWords.quoted(evalCase.location.path)) --record new"))
        }
        return result
    }
}
