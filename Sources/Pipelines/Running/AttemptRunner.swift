import AgentRuntime
import Foundation
import TraceCore

/// How one attempt ended, before the pipeline decides what follows.
struct AttemptResult: Sendable {
    enum Status: Sendable {
        case succeeded(JSONValue)
        case failed(TaskErrorClass, String)
    }

    var status: Status
    var stopReason: String?
    var durationUs: Int
    /// The process running the pipeline was asked to stop (Ctrl-C) while the attempt ran: it
    /// is left unfinished in the log, for resume to deal with.
    var wasInterrupted = false
    /// What follows regardless of the task's policy: a resume re-runs an attempt that was cut
    /// short where nothing with a side effect may have run.
    var recovery: TaskRecovery?
}

/// Runs one task attempt in isolation: the task sees its declared inputs and nothing else.
/// An agent task is a child run with its own log, limits and policy; a command task gets its
/// input as JSON on stdin and answers on stdout. The output is then validated.
struct AttemptRunner: Sendable {
    var environment: RuntimeEnvironment
    /// The most a command may print on stdout.
    static let outputLimit = 16 << 20

    /// Runs one attempt. `processRecord` is where a command task's process is recorded while it
    /// runs (`ProcessIdentity`), for a resume after a crash to find it if it still runs.
    func run(
        _ task: PipelineTask, input: JSONValue, childLog: String?, runId: String?, processRecord: String?, delayMs: Int,
        observe: (@Sendable (Event) -> Void)?
    ) async -> AttemptResult {
        if delayMs > 0 {
            do {
                try await environment.sleep(delayMs)
            } catch {
                return AttemptResult(
                    status: .failed(.interrupted, "interrupted before the attempt started"), durationUs: 0, wasInterrupted: true)
            }
        }
        let elapsed = environment.stopwatch()
        var result: AttemptResult
        switch task.work {
        case .agent(_, let agent, let goal):
            result = await runAgent(
                agent, goal: PipelineGoal.render(goal, input: input), task: task, log: childLog ?? "", runId: runId, observe: observe)
        case .command(let arguments, let directory, let isText):
            result = await runCommand(
                arguments, directory: directory, isText: isText, input: input, timeoutMs: task.timeoutMs, record: processRecord)
        }
        await validated(&result, task)
        result.durationUs = environment.recordedDuration(elapsed())
        return result
    }

    /// A succeeded `result` of `task` whose output its validation refuses becomes an
    /// `invalid_output` failure: every output a task goes on with passed it, a resumed one too.
    func validated(_ result: inout AttemptResult, _ task: PipelineTask) async {
        if case .succeeded(let output) = result.status, let problem = await validate(output, task.validation) {
            result.status = .failed(.invalidOutput, problem)
        }
    }

    private func runAgent(
        _ agent: Agent, goal: String, task: PipelineTask, log: String, runId: String?, observe: (@Sendable (Event) -> Void)?
    ) async -> AttemptResult {
        var childEnvironment = environment
        if let observe {
            childEnvironment.observe = { update in
                if case .event(let event) = update { observe(event) }
            }
        }
        let runtime = AgentRuntime(agent: agent, environment: childEnvironment)
        let run: @Sendable () async -> Result<RunOutcome, RuntimeError> = {
            do throws(RuntimeError) {
                return .success(try await runtime.run(goal: goal, log: log, runId: runId))
            } catch {
                return .failure(error)
            }
        }
        // Past the task's timeout the run is cancelled; it records its own stop, and is waited
        // for so that its log is closed.
        let (ended, timedOut) =
            if let timeoutMs = task.timeoutMs {
                await Deadline.run(within: .milliseconds(timeoutMs), on: environment.clock, run)
            } else {
                (await run(), false)
            }
        switch (ended, timedOut) {
        case (let ended, true):
            let outcome = try? ended.get()
            // Stopped while its model was being asked (a context built, no decision for it): the
            // model did not answer in time, and what the agent would have done is not known.
            let waitedOnModel = outcome.map { $0.state.contextPacketCount > $0.state.decisions.count } ?? false
            return AttemptResult(
                status: .failed(
                    .timeout,
                    (waitedOnModel ? "\(RunStopped.modelFailurePrefix) the agent's model gave no answer before " : "")
                        + "the agent run did not finish within \(task.timeoutMs ?? 0) ms and was stopped"),
                stopReason: outcome?.stop.reason.rawValue, durationUs: 0)
        case (.failure(let error), false):
            return AttemptResult(
                status: .failed(.failure, "\(TaskFinished.couldNotRunPrefix) the agent run could not run: \(error.message)"), durationUs: 0)
        case (.success(let outcome), false):
            let stop = outcome.stop
            if Task.isCancelled || stop.isInterruption {
                return AttemptResult(
                    status: .failed(.interrupted, stop.error ?? "interrupted"), stopReason: stop.reason.rawValue, durationUs: 0,
                    wasInterrupted: true)
            }
            guard stop.reason == .success else {
                let why = stop.error.map { ": \($0)" } ?? ""
                return AttemptResult(
                    status: .failed(.failure, "the agent run stopped with \(stop.reason.rawValue)\(why)"), stopReason: stop.reason.rawValue,
                    durationUs: 0)
            }
            return AttemptResult(
                status: .succeeded(Self.output(ofAnswer: stop.answer ?? "")), stopReason: stop.reason.rawValue, durationUs: 0)
        }
    }

    /// An agent's answer as a task output: a JSON object or list when the answer is one, the
    /// text otherwise.
    static func output(ofAnswer answer: String) -> JSONValue {
        let trimmed = answer.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") || trimmed.hasPrefix("["), let value = try? JSONParser.parse(Array(trimmed.utf8)) { return value }
        return .string(answer)
    }

    private func runCommand(
        _ arguments: [String], directory: String, isText: Bool, input: JSONValue, timeoutMs: Int?, record: String?
    ) async -> AttemptResult {
        if let missing = Self.missingScript(arguments, directory: directory) {
            return AttemptResult(
                status: .failed(.failure, "\(TaskFinished.couldNotRunPrefix) the command could not start: \(missing)"), durationUs: 0)
        }
        var process = ChildProcess(
            command: arguments, directory: directory, input: JSONWriter.encode(input) + [0x0A], timeoutMs: timeoutMs ?? 86_400_000,
            outputLimit: Self.outputLimit)
        process.recordPath = record
        let result: ChildProcess.Result
        do {
            result = try await process.run()
        } catch let failure as ChildProcess.SpawnFailure {
            return AttemptResult(
                status: .failed(.failure, "\(TaskFinished.couldNotRunPrefix) the command could not start: \(failure.message)"),
                durationUs: 0)
        } catch {
            return AttemptResult(
                status: .failed(.failure, "\(TaskFinished.couldNotRunPrefix) the command could not start: \(error)"), durationUs: 0)
        }
        if result.isCancelled {
            return AttemptResult(status: .failed(.interrupted, "the command was stopped from outside"), durationUs: 0, wasInterrupted: true)
        }
        if result.isTimedOut {
            return AttemptResult(
                status: .failed(.timeout, "the command did not finish within \(timeoutMs ?? 0) ms and was killed"), durationUs: 0)
        }
        if result.isOutputTruncated {
            return AttemptResult(
                status: .failed(.invalidOutput, "the command printed more than \(Self.outputLimit >> 20) MiB on stdout and was killed"),
                durationUs: 0)
        }
        guard result.exitStatus == 0 else {
            let how = result.signal.map { "was killed by signal \($0)" } ?? "exited with status \(result.exitStatus ?? -1)"
            // 126 and 127: the shell (or env) found no program to run, or could not run it.
            let prefix = [126, 127].contains(result.exitStatus) ? "\(TaskFinished.couldNotRunPrefix) " : ""
            return AttemptResult(status: .failed(.failure, "\(prefix)the command \(how)\(Self.tail(result.stderr))"), durationUs: 0)
        }
        if isText { return AttemptResult(status: .succeeded(.string(String(decoding: result.stdout, as: UTF8.self))), durationUs: 0) }
        do {
            return AttemptResult(status: .succeeded(try JSONParser.parse(result.stdout)), durationUs: 0)
        } catch {
            let start = String(decoding: result.stdout.prefix(80), as: UTF8.self)
            return AttemptResult(
                status: .failed(
                    .invalidOutput,
                    "the command's stdout is not JSON (\(error)); it began \(JSONWriter.encodeString(.string(start))) — print JSON, or set output: text"
                ),
                durationUs: 0)
        }
    }

    /// Why `output` fails the task's validation, or nil when it passes.
    private func validate(_ output: JSONValue, _ validation: OutputValidation) async -> String? {
        if let schema = validation.schema, let violation = schema.violation(of: output, root: "output") {
            return "the output does not match the schema: \(violation)"
        }
        guard let command = validation.command else { return nil }
        // A validation that gave no answer (it could not start, found no program, hung, was
        // killed) judged nothing: the harness's fault, never the output's rejection.
        let harness = "\(TaskFinished.couldNotRunPrefix) the validation command"
        if let missing = Self.missingScript(command, directory: validation.directory) { return "\(harness) could not start: \(missing)" }
        let process = ChildProcess(
            command: command, directory: validation.directory, input: JSONWriter.encode(output) + [0x0A], timeoutMs: 60_000,
            outputLimit: 1 << 20)
        do {
            let result = try await process.run()
            if result.exitStatus == 0 { return nil }
            if result.isTimedOut { return "\(harness) did not finish within 60 s and was killed" }
            if result.isCancelled { return "\(harness) was stopped from outside" }
            if let signal = result.signal { return "\(harness) was killed by signal \(signal)\(Self.tail(result.stderr))" }
            if [126, 127].contains(result.exitStatus) {
                return "\(harness) found no program to run (exit \(result.exitStatus ?? -1))\(Self.tail(result.stderr))"
            }
            return "the validation command rejected the output (exit \(result.exitStatus ?? -1))\(Self.tail(result.stderr))"
        } catch let failure as ChildProcess.SpawnFailure {
            return "\(harness) could not start: \(failure.message)"
        } catch {
            return "\(harness) could not start: \(error)"
        }
    }

    /// Why a command that runs a script through an interpreter (`[sh, classify.sh]`,
    /// `[python3, check.py]`) cannot start: the script is not there (relative to `directory`).
    /// The interpreter would say so and exit like a program that ran and failed (`sh`: 2), which a
    /// retry, a fallback or a skip would take for the task's own failure.
    static func missingScript(_ arguments: [String], directory: String) -> String? {
        guard arguments.count >= 2 else { return nil }
        let program = (arguments[0] as NSString).lastPathComponent
        let interpreters = ["sh", "bash", "dash", "zsh", "ksh", "node", "ruby", "perl"]
        guard interpreters.contains(program) || program.hasPrefix("python") else { return nil }
        let script = arguments[1]
        guard !script.hasPrefix("-") else { return nil }
        let path = script.hasPrefix("/") ? script : (directory as NSString).appendingPathComponent(script)
        guard !FileManager.default.fileExists(atPath: path) else { return nil }
        return "\(program)'s script \(script) does not exist (in \(directory))"
    }

    static func tail(_ stderr: [UInt8]) -> String {
        let text = String(decoding: stderr.suffix(400), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "" : ": \(text)"
    }
}
