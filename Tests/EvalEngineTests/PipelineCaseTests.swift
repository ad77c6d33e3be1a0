import ConfigFile
import EvalEngine
import Foundation
import Pipelines
import TestSupport
import Testing
import TraceCore

/// Eval cases over pipelines: live runs of the example pipelines (real subprocesses, scripted
/// agents) and the recorded triage run in Fixtures/pipelines/recorded/.
@Suite("Pipeline cases")
struct PipelineCaseTests {
    static let recordedLog = ExamplePipelines.recordedDirectory("triage-recovery").appendingPathComponent("pipeline.jsonl.gz").path

    /// Loads the cases in `text` (written as a case file in `directory`).
    static func cases(_ text: String, in directory: TemporaryDirectory) throws -> [EvalCase] {
        let path = directory.path("cases-\(UUID().uuidString).yaml")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return try EvalCaseFile.load(path: path)
    }

    static func errors(_ text: String) throws -> [String] {
        try TemporaryDirectory.with { directory in
            do {
                _ = try cases(text, in: directory)
                return []
            } catch let errors as ConfigErrors {
                return errors.errors.map { "\($0.location.line):\($0.location.column) \($0.message)" }
            }
        }
    }

    static func run(_ cases: [EvalCase], in directory: TemporaryDirectory) async -> [CaseResult] {
        await EvalRunner(
            options: EvalOptions(jobs: 2, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "run-eval"))
        ).run(cases)
    }

    @Test("the bundled pipeline cases pass, live and recorded, and say so per pipeline run")
    func bundledCasesPass() async throws {
        try await TemporaryDirectory.with { directory in
            let folder = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("EvalCases/pipelines").path
            let (cases, problems) = EvalSuite.load(paths: [folder])
            #expect(problems.isEmpty)
            #expect(cases.count == 3)
            let results = await Self.run(cases, in: directory)
            for result in results {
                #expect(result.passed, "\(result.id): \(EvalReport.consoleLines(for: result, comparison: nil, hasBaseline: false))")
            }
            let live = try #require(results.first { $0.id == "triage-recovery-live" })
            let run = try #require(live.runs.first)
            #expect(run.logPath == directory.path("runs/triage-recovery-live-1/pipeline.jsonl.gz"))
            #expect(run.summary.pipelineStatus == "succeeded")
            #expect(run.summary.tasks == ["fetch", "classify", "classify_with_agent", "enrich", "report"])
            #expect(
                EvalReport.consoleLines(for: live, comparison: nil, hasBaseline: false).first
                    == "✔ triage-recovery-live  (1 live pipeline run)")
        }
    }

    @Test(
        "every pipeline-level and per-task expectation that does not hold fails with what happened, and a task's trajectory points at its child log"
    )
    func failuresSayWhatHappened() async throws {
        try await TemporaryDirectory.with { directory in
            let cases = try Self.cases(
                """
                caseId: wrong-about-triage
                logs: \(Self.recordedLog)
                expected:
                  pipeline:
                    status: failed
                    tasksRan: [fetch]
                    tasksNotRan: [classify_with_agent]
                    order: [report, fetch]
                    maxRetries: 0
                    noBreakerOpened: true
                    outputs: {report: {report: {classes: {T-1: bug}}}}
                  tasks:
                    enrich: {status: succeeded, output: {enriched: true}}
                    classify: {retries: 0}
                    classify_with_agent:
                      toolsNotCalled: [categories]
                      stopReason: budget_exhausted
                """, in: directory)
            let result = try #require(await Self.run(cases, in: directory).first)
            #expect(result.harnessError == nil)
            let failures = try #require(result.runs.first).failures
            #expect(
                failures.map(\.expectation) == [
                    "pipeline.status", "pipeline.tasksNotRan", "pipeline.order", "pipeline.maxRetries", "pipeline.noBreakerOpened",
                    "pipeline.outputs", "tasks.enrich.status", "tasks.enrich.output", "tasks.classify.retries",
                    "tasks.classify_with_agent.toolsNotCalled", "tasks.classify_with_agent.stopReason",
                ])
            let byName = Dictionary(failures.map { ($0.expectation, $0) }, uniquingKeysWith: { first, _ in first })
            #expect(byName["pipeline.status"]?.actual == "succeeded")
            #expect(byName["pipeline.order"]?.actual.contains("fetch → classify → classify_with_agent → enrich → report") == true)
            #expect(byName["pipeline.maxRetries"]?.actual == "1 (classify: 1)")
            #expect(byName["pipeline.noBreakerOpened"]?.actual.hasPrefix("opened: rules-service") == true)
            #expect(byName["tasks.enrich.status"]?.actual.hasPrefix("skipped after 1 attempt: invalid_output") == true)
            let childLog = ExamplePipelines.recordedDirectory("triage-recovery").appendingPathComponent(
                "tasks/classify_with_agent-1.jsonl.gz"
            ).path
            #expect(byName["tasks.classify_with_agent.toolsNotCalled"]?.log == childLog)
            #expect(byName["tasks.classify_with_agent.toolsNotCalled"]?.step == 1)
            #expect(byName["pipeline.status"]?.log == nil)
            let lines = EvalReport.consoleLines(for: result, comparison: nil, hasBaseline: false)
            #expect(lines.contains("          look: agent-eval replay \(childLog) --step 1"))
        }
    }

    @Test(
        "a case naming a task the pipeline lacks, or a command task's trajectory, cannot run; so can a run log under pipeline expectations")
    func unusableCasesCannotRun() async throws {
        try await TemporaryDirectory.with { directory in
            let support = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            let cases = try Self.cases(
                """
                - {caseId: typo, logs: \(Self.recordedLog), expected: {tasks: {clasify: {status: succeeded}}}}
                - {caseId: command, logs: \(Self.recordedLog), expected: {tasks: {fetch: {toolsCalled: [categories]}}}}
                - {caseId: tool-typo, logs: \(Self.recordedLog), expected: {tasks: {classify_with_agent: {toolsCalled: [categoris]}}}}
                - {caseId: run-log, logs: \(support), expected: {pipeline: {status: succeeded}}}
                """, in: directory)
            let results = await Self.run(cases, in: directory)
            let errors = results.map { $0.harnessError }
            #expect(errors[0]?.diagnosticCode == "eval.unknown_task")
            #expect(errors[0]?.message.contains("the task \"clasify\"") == true)
            #expect(errors[0]?.hint == "did you mean \"classify\"?")
            #expect(errors[1]?.diagnosticCode == "eval.unknown_task")
            #expect(errors[1]?.message.contains("a command task") == true)
            #expect(errors[2]?.diagnosticCode == "eval.unknown_tool")
            #expect(errors[2]?.message.hasPrefix("task classify_with_agent: ") == true)
            #expect(errors[3]?.message.contains("not a pipeline log") == true)
            #expect(results.allSatisfy { !$0.passed })
        }
    }

    @Test(
        "a pipeline whose command could not start cannot be graded: the recovery that followed (a retry, a fallback) is the machine's doing, not the design's"
    )
    func commandThatCannotStart() async throws {
        try await TemporaryDirectory.with { directory in
            // The triage pipeline, its rules client not installed: classify falls back to the agent
            // as it would when the rules service is down, and the pipeline succeeds.
            let source = ExampleRuns.fixtures.appendingPathComponent("pipelines/triage-recovery")
            let copy = directory.path("triage")
            try FileManager.default.copyItem(atPath: source.path, toPath: copy)
            let file = copy + "/pipeline.yaml"
            let text = try String(contentsOfFile: file, encoding: .utf8)
            try text.replacingOccurrences(of: "command: [sh, classify.sh]", with: "command: [./rules-client-not-installed]")
                .write(toFile: file, atomically: true, encoding: .utf8)
            let cases = try Self.cases(
                "caseId: missing-client\npipeline: \(file)\nexpected:\n  pipeline: {status: succeeded}\n", in: directory)
            let result = try #require(await Self.run(cases, in: directory).first)
            #expect(!result.passed)
            #expect(result.harnessError?.diagnosticCode == "eval.command_failed", "\(String(describing: result.harnessError))")
            #expect(result.harnessError?.message.contains("the command could not start") == true)
        }
    }

    @Test("a paused pipeline cannot be graded unless the case allows it, then it is checked over what it recorded")
    func unfinishedPipelines() async throws {
        try await TemporaryDirectory.with { directory in
            let run = directory.path("paused")
            try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: run + "/" + PipelineRunner.pauseRequestName, contents: Data())
            let definition = try PipelineFile.load(path: ExamplePipelines.file("release-notes"))
            let paused = try await PipelineRunner(definition: definition).start(directory: run, runId: "pipe-paused")
            #expect(paused.isPaused)
            let cases = try Self.cases(
                """
                - {caseId: strict, logs: \(paused.logPath), expected: {pipeline: {tasksNotRan: [publish]}}}
                - {caseId: lenient, allowUnfinished: true, logs: \(paused.logPath), expected: {pipeline: {tasksNotRan: [publish], status: succeeded}}}
                """, in: directory)
            let results = await Self.run(cases, in: directory)
            #expect(results[0].harnessError?.diagnosticCode == "eval.unfinished_run")
            #expect(results[0].harnessError?.message.contains("it is paused") == true)
            let lenient = try #require(results[1].runs.first)
            #expect(lenient.error == nil)
            #expect(lenient.failures.map(\.expectation) == ["pipeline.status"])
            #expect(lenient.failures.first?.actual == "the pipeline is paused")
            #expect(lenient.notes.first?.message.contains("did not finish") == true)
        }
    }

    @Test("case files: pipeline and run expectations do not mix, and every mistake is named with its place")
    func caseFileErrors() throws {
        let pipeline = ExamplePipelines.file("triage-recovery")
        let agent = ExampleRuns.agentPath("support")
        let mixed = try Self.errors("{caseId: a, pipeline: \(pipeline), expected: {toolsCalled: [x]}}")
        #expect(mixed.count == 1)
        #expect(mixed.first?.hasSuffix("case \"a\" runs a pipeline but expects run-level facts (toolsCalled, stopReason…) of it") == true)
        let agentCase = try Self.errors("{caseId: a, agent: \(agent), input: hi, expected: {pipeline: {status: succeeded}}}")
        #expect(agentCase.count == 1)
        #expect(agentCase.first?.hasSuffix("case \"a\" runs an agent but has pipeline expectations (pipeline:, tasks:)") == true)
        let text = """
            caseId: a
            pipeline: \(pipeline)
            expected:
              pipeline:
                status: done
                tasksRun: [fetch]
                breakersOpened: [x]
                noBreakerOpened: true
              tasks:
                fetch: {}
                classify: {retries: {min: 2, max: 1}}
            """
        let errors = try Self.errors(text)
        #expect(errors.contains { $0.hasPrefix("5:13 pipeline.status") })
        #expect(errors.contains { $0.hasPrefix("6:5 expected.pipeline has no setting \"tasksRun\"") })
        #expect(errors.contains { $0.hasPrefix("5:5 pipeline.noBreakerOpened contradicts pipeline.breakersOpened") })
        #expect(errors.contains { $0.hasPrefix("10:5 tasks.fetch expects nothing") })
        #expect(errors.contains { $0.contains("tasks.classify.retries max (1) is below min (2)") })
        // An output matcher every output holds expects nothing: it would pass a pipeline that failed.
        let vacuous = try Self.errors(
            "{caseId: a, pipeline: \(pipeline), expected: {pipeline: {outputs: {}}, tasks: {fetch: {output: {mode: ignore}}}}}")
        #expect(vacuous.contains { $0.contains("pipeline.outputs expects nothing: every output holds {}") }, "\(vacuous)")
        #expect(vacuous.contains { $0.contains("tasks.fetch.output expects nothing") }, "\(vacuous)")
        #expect(
            try Self.errors("{caseId: a, pipeline: x.yaml, agent: y.yaml, input: hi, expected: {pipeline: {status: failed}}}").first?
                .contains("has pipeline and agent") == true)
    }

    @Test("a baseline keeps the tasks a pipeline ran; a task that runs now and never did before is a regression")
    func baselineNewTask() throws {
        try TemporaryDirectory.with { directory in
            let evalCase = try #require(
                try Self.cases("{caseId: p, logs: \(Self.recordedLog), expected: {pipeline: {status: succeeded}}}", in: directory).first)
            func result(tasks: [String], status: String) -> CaseResult {
                var summary = RunSummary()
                summary.pipelineStatus = status
                summary.tasks = tasks
                return CaseResult(
                    evalCase: evalCase,
                    runs: [RunResult(logPath: "pipeline.jsonl.gz", repeatIndex: 0, failures: [], notes: [], error: nil, summary: summary)])
            }
            try Baseline.write([result(tasks: ["fetch", "classify", "report"], status: "succeeded")], to: directory.path("baseline"))
            let baseline = try #require(try Baseline.read(for: [evalCase], from: directory.path("baseline"))["p"])
            #expect(baseline.tasksSeen == ["classify", "fetch", "report"])
            #expect(baseline.runs.first?.stopReason == "succeeded")
            let now = BaselineComparison.compare(
                result(tasks: ["fetch", "classify", "classify_with_agent", "report"], status: "failed"), with: baseline)
            #expect(now.status == .regressed)
            #expect(
                now.regressions.map(\.message) == [
                    "pipeline.jsonl.gz: stopped with failed, was succeeded",
                    "the task classify_with_agent runs now and did not in the baseline",
                ])
        }
    }
}
