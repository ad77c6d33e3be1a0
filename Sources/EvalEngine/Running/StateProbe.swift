public import AgentRuntime
import Foundation
public import TraceCore

/// `expected.state:` — the environment's final state after a live run (τ-bench's "did the
/// database end as it should"): a command, run in the case file's folder once the run has closed
/// its log, prints the state as JSON, and the state must equal a gold file (canonical JSON) or
/// meet an argument matcher (docs/eval-cases.md, "The environment's final state").
///
/// The command is told which run it is about (`AGENT_EVAL_LOG`, `AGENT_EVAL_RUN_ID`,
/// `AGENT_EVAL_CASE`, `AGENT_EVAL_REPEAT`), so an environment kept per run can answer for that
/// run while other attempts go on. A command that fails, hangs past 60 s or prints what is not
/// JSON leaves the state unseen: the attempt could not run, never a pass.
public struct StateExpectation: Sendable {
    public var command: [String]
    /// Where the command runs: the case file's folder.
    public var directory: String
    /// What the state must be: `equals:`'s file as an exact matcher, or `match:`'s matcher.
    public var matcher: ArgumentMatcher
    /// How the expectation names what it expects (`equals gold/after.json`, the matcher).
    public var expected: String

    public init(command: [String], directory: String, matcher: ArgumentMatcher, expected: String) {
        self.command = command
        self.directory = directory
        self.matcher = matcher
        self.expected = expected
    }

    /// How long the command may take.
    public static let timeoutMs = 60_000
    /// The most it may print.
    public static let outputLimit = 16 * 1024 * 1024

    /// What the state check found for the run of `log`: nil when the state is as expected, a
    /// failure when it is not, or the reason it could not be seen.
    public func check(log: String, runId: String, caseId: String, repeatIndex: Int) async -> Result<ExpectationFailure?, EvalError> {
        var environment = ProcessInfo.processInfo.environment
        environment["AGENT_EVAL_LOG"] = (log as NSString).isAbsolutePath ? log : FileManager.default.currentDirectoryPath + "/" + log
        environment["AGENT_EVAL_RUN_ID"] = runId
        environment["AGENT_EVAL_CASE"] = caseId
        environment["AGENT_EVAL_REPEAT"] = String(repeatIndex)
        let process = ChildProcess(
            command: command, directory: directory, environment: environment.map { "\($0.key)=\($0.value)" }.sorted(),
            timeoutMs: Self.timeoutMs, outputLimit: Self.outputLimit)
        let shown = command.map(ShellWords.quoted).joined(separator: " ")
        let result: ChildProcess.Result
        do {
            result = try await process.run()
        } catch {
            return .failure(EvalError(.stateUnseen, "the state command \(shown) could not start: \(error)", hint: Self.hint))
        }
        let stderr = String(decoding: result.stderr, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let why: String? =
            result.isTimedOut
            ? "ran past \(Self.timeoutMs / 1000) s and was stopped"
            : result.isOutputTruncated
                ? "printed more than \(Self.outputLimit / 1024 / 1024) MiB"
                : result.signal.map { "was ended by signal \($0)" }
                    ?? (result.exitStatus == 0 ? nil : "exited with status \(result.exitStatus ?? -1)")
        if let why {
            return .failure(
                EvalError(
                    .stateUnseen, "the state command \(shown) \(why)" + (stderr.isEmpty ? "" : ": \(stderr.suffix(400))"), hint: Self.hint))
        }
        let state: JSONValue
        do {
            state = try JSONParser.parse(result.stdout)
        } catch {
            let start = String(decoding: result.stdout.prefix(80), as: UTF8.self)
            return .failure(
                EvalError(
                    .stateUnseen, "the state command \(shown) printed no JSON (\(error)): \"\(start)\"",
                    hint: "it must print the environment's state as one JSON value on standard output"))
        }
        guard var mismatch = matcher.mismatch(state) else { return .success(nil) }
        // The matcher names the whole value "arguments"; here it is the state.
        if mismatch.hasPrefix("arguments is ") { mismatch = "the state is " + mismatch.dropFirst("arguments is ".count) }
        return .success(
            ExpectationFailure(
                expectation: "state", expected: "the environment's final state \(expected)",
                actual: "\(mismatch) (as \(shown) printed it)"))
    }

    static let hint =
        "the command runs in the case file's folder once the run has ended (AGENT_EVAL_LOG and AGENT_EVAL_RUN_ID say which run); "
        + "it must exit 0 and print the state as JSON"
}
