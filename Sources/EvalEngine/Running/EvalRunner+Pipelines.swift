import AgentRuntime
import ConfigFile
import Foundation
import Pipelines
import TraceCore

/// Cases over pipelines: a recorded pipeline log, or a pipeline file run live. The pipeline
/// log is read and its digests checked; pipeline-level expectations are checked against its
/// state, and each task's trajectory expectations against the child run of its last attempt,
/// read and checked exactly as a recorded run is.
extension EvalRunner {
    /// Runs a pipeline case once, into `<out>/<caseId>-<repeat>/`, then grades it from the
    /// logs it wrote.
    static func runPipeline(
        _ evalCase: EvalCase, file: String, repeatIndex: Int, agents: AgentCache, options: EvalOptions, judge: RubricJudge
    ) async -> RunResult {
        let directory = "\(options.outputDirectory)/\(evalCase.id)-\(repeatIndex)"
        let log = "\(directory)/\(PipelineRunner.logName)"
        func failed(_ error: DiagnosticRecord) -> RunResult {
            RunResult(logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: error, summary: RunSummary())
        }
        if FileManager.default.fileExists(atPath: directory) {
            return failed(
                DiagnosticRecord(
                    EvalError(
                        .logExists, "the directory for this pipeline run exists already: \(directory)",
                        location: SourceLocation(path: directory), hint: "write live runs to a new output directory")))
        }
        let definition: PipelineDefinition
        do throws(ConfigErrors) {
            definition = try PipelineFile.load(path: file) { path throws(ConfigError) in
                try agents.agent(at: path, cassette: evalCase.cassette)
            }
        } catch {
            let first = error.errors.first.map { DiagnosticRecord($0) }
            let more =
                error.errors.count > 1 ? " (and \(error.errors.count - 1) more: agent-eval pipeline check \(ShellWords.quoted(file)))" : ""
            return failed(
                first.map { record in
                    var record = record
                    record.message += more
                    return record
                } ?? DiagnosticRecord(code: "config.error", message: "the pipeline file \(file) cannot be loaded"))
        }
        let base = options.environment.makeRunId()
        let runId = base.hasPrefix("run-") ? "pipe-" + base.dropFirst("run-".count) : base
        do {
            _ = try await PipelineRunner(definition: definition, environment: options.environment)
                .start(directory: directory, runId: runId, input: evalCase.pipelineInput)
        } catch {
            await closed(CaseResult.childRunLogs(ofPipelineLog: log), options: options)
            return failed(DiagnosticRecord(describing: error))
        }
        await closed(CaseResult.childRunLogs(ofPipelineLog: log), options: options)
        return await check(log: log, repeatIndex: repeatIndex, case: evalCase, options: options, judge: judge)
    }

    /// Checks a case's pipeline expectations against a recorded pipeline log. A pipeline whose
    /// record cannot be trusted (digests differ, anomalies, not stopped unless the case allows
    /// it) is a harness error, never a pass — as for runs.
    static func checkPipeline(
        _ expected: PipelineExpectations, log: String, repeatIndex: Int, case evalCase: EvalCase, options: EvalOptions,
        judge: RubricJudge
    ) async -> RunResult {
        var result = RunResult(logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: nil, summary: RunSummary())
        func cannotRun(_ code: EvalError.Code, _ message: String, hint: String) -> RunResult {
            result.error = DiagnosticRecord(EvalError(code, message, location: SourceLocation(path: log), hint: hint))
            return result
        }
        let replay: PipelineReplay
        do throws(PipelineError) {
            replay = try PipelineReplay(log: log)
        } catch  where error.code == .notPipeline {
            return cannotRun(
                .badCase, error.message,
                hint: "a run log is checked with run-level expectations; expected.pipeline and expected.tasks need a pipeline.jsonl.gz")
        } catch {
            // An unreadable log (torn, corrupt) keeps the log's own diagnosis, as for runs.
            result.error = DiagnosticRecord(error)
            return result
        }
        let state = replay.state
        let times = replay.events.map(\.timeUs)
        result.summary = RunSummary(state, durationMs: ((times.last ?? 0) - (times.first ?? 0)) / 1000)
        if let mismatch = replay.mismatches.first {
            return cannotRun(
                .digestMismatch, "a pipeline state digest differs from the state the log folds to (\(mismatch))",
                hint: "\(EvalReport.replayCommand(log: log, step: nil)) shows every digest check")
        }
        if let anomaly = state.anomalies.first {
            return cannotRun(
                .anomalousRun, "the pipeline log does not fit together: \(anomaly)",
                hint: "\(EvalReport.replayCommand(log: log, step: nil)) shows the state it folds to")
        }
        if state.stop == nil {
            let why = state.isPaused ? "it is paused" : "the log ends while tasks ran"
            guard evalCase.allowsUnfinished else {
                return cannotRun(
                    .unfinishedRun, "the pipeline did not finish (\(why)); a pipeline that did not finish cannot show what it did not do",
                    hint: "resume it (agent-eval pipeline resume), or set allowUnfinished: true to check what it recorded so far")
            }
            result.notes.append(CheckNote(message: "the pipeline did not finish (\(why)): checked over what it recorded", step: nil))
        }
        if let error = Evidence.ofPipeline(state, log: log) {
            result.error = error
            return result
        }
        // The runs the pipeline points to are part of its record: one missing, edited or put in
        // another's place leaves what its tasks did unproven (a task's status comes from its run).
        if let problem = replay.childLogProblems(log: log).first {
            return cannotRun(
                .anomalousRun, "the pipeline's record of its tasks' runs does not hold: \(problem)",
                hint: "agent-eval pipeline show \(log) lists every child log's problem; run the pipeline again")
        }
        if let problem = PipelineCheck.problem(with: expected, in: state) {
            return cannotRun(.unknownTask, problem.message, hint: problem.hint)
        }
        result.failures = PipelineCheck.check(expected, against: state, breakersOpened: PipelineCheck.breakersOpened(in: replay.events))
        let directory = (log as NSString).deletingLastPathComponent
        for expectation in expected.tasks {
            guard let run = expectation.run, let task = state.task(expectation.task) else { continue }
            let name = "tasks.\(task.id)"
            guard let child = task.currentAttempts.last(where: { $0.started.log != nil })?.started.log else {
                result.failures.append(
                    ExpectationFailure(
                        expectation: name, expected: "a run of \(task.id) whose trajectory to check",
                        actual: "\(task.id) has no run: \(PipelineCheck.describe(task))"))
                continue
            }
            let childLog = directory.isEmpty ? child : "\(directory)/\(child)"
            var taskCase = evalCase
            taskCase.expected = run
            taskCase.source = .recorded(patterns: [childLog])
            let checked = await check(log: childLog, repeatIndex: repeatIndex, case: taskCase, options: options, judge: judge)
            result.judgements += checked.judgements.map { judgement in
                var judgement = judgement
                judgement.expectation = "\(name).\(judgement.expectation)"
                return judgement
            }
            if var error = checked.error ?? unknownTool(in: CaseResult(evalCase: taskCase, runs: [checked])) {
                error.message = "task \(task.id): \(error.message)"
                result.error = error
                return result
            }
            result.failures += checked.failures.map { failure in
                var failure = failure
                failure.expectation = "\(name).\(failure.expectation)"
                failure.log = failure.log ?? childLog
                return failure
            }
            result.notes += checked.notes.map { CheckNote(message: "\(task.id): \($0.message)", step: $0.step) }
        }
        return result
    }
}
