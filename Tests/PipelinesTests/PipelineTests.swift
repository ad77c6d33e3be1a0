import AgentRuntime
import ConfigFile
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Pipelines

/// Pipelines run with real subprocesses (command tasks), real agent runs (scripted models,
/// fixture tools) and real gzip logs.
@Suite struct PipelineTests {
    static func examplePath(_ name: String) -> String {
        ExampleRuns.fixtures.appendingPathComponent("pipelines/\(name)/pipeline.yaml").path
    }

    /// Writes a pipeline file into `directory` and loads it.
    static func write(_ text: String, in directory: TemporaryDirectory, name: String = "pipeline.yaml") throws -> String {
        let path = directory.path(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func load(_ text: String, in directory: TemporaryDirectory) throws -> PipelineDefinition {
        try PipelineFile.load(path: try write(text, in: directory))
    }

    static func errors(_ text: String) throws -> [String] {
        try TemporaryDirectory.with { directory in
            do {
                _ = try load(text, in: directory)
                return []
            } catch let errors as ConfigErrors {
                return errors.errors.map { "\($0.location.line):\($0.location.column) \($0.message)" }
            }
        }
    }

    static func run(_ definition: PipelineDefinition, in directory: TemporaryDirectory, jobs: Int? = nil) async throws -> PipelineOutcome {
        try await PipelineRunner(definition: definition).start(directory: directory.path("run"), runId: "pipe-test", jobs: jobs)
    }

    @Test("a chain of 200,000 tasks is walked without recursing once per task; a cycle is still named in its order")
    func longChainHasNoCycle() {
        func task(_ id: String, needs: [String]) -> PipelineTask {
            PipelineTask(
                id: id, work: .command(arguments: ["true"], directory: "/", isText: false), inputs: [], needs: needs, timeoutMs: nil,
                validation: OutputValidation(schema: nil, command: nil), recovery: [:], breaker: nil,
                location: SourceLocation(path: "p.yaml"))
        }
        // Listed so that each task needs the next: a depth-first walk goes 200,000 deep.
        let chain = (0..<200_000).map { task("t\($0)", needs: $0 + 1 < 200_000 ? ["t\($0 + 1)"] : []) }
        #expect(PipelineGraph.findCycle(chain) == nil)
        let cycle = [task("a", needs: ["c"]), task("b", needs: ["a"]), task("c", needs: ["b"])]
        #expect(PipelineGraph.findCycle(cycle) == ["b", "c", "a"], "as data flows: b feeds c, c feeds a, a feeds b")
        // A plan read from a log that names a task twice does not trap the breakers (the first counts).
        let breakers = CircuitBreakers(
            settings: [:],
            plan: [
                PipelineTaskPlan(id: "a", kind: .command, needs: [], breaker: "x"),
                PipelineTaskPlan(id: "a", kind: .command, needs: [], breaker: "y"),
            ])
        #expect(breakers.key(of: "a") == "x")
    }

    @Test func checksTheGraphBeforeAnythingRuns() throws {
        let cycle = try Self.errors(
            """
            pipeline: p
            tasks:
              - {id: a, command: [cat], inputs: {x: c}}
              - {id: b, command: [cat], inputs: {x: a}}
              - {id: c, command: [cat], inputs: {x: b}}
            """)
        #expect(cycle.count == 1)
        #expect(cycle.first?.contains("the tasks form a cycle: a → b → c → a") == true || cycle.first?.contains("cycle") == true)
        let unknown = try Self.errors(
            """
            pipeline: p
            tasks:
              - {id: analyze, command: [cat]}
              - {id: plan, command: [cat], inputs: {x: analyse.summary}}
            """)
        #expect(unknown == ["4:5 task \"plan\" needs \"analyse\", which is not a task of this pipeline"])
        let several = try Self.errors(
            """
            pipeline: p
            tasks:
              - id: a
                agent: missing.yaml
                command: [cat]
              - id: b
                command: [cat]
                on_error: {failure: {then: skip}, timout: {retry: 1}}
            """)
        #expect(several.count == 3)
        #expect(several.contains { $0.hasPrefix("3:5") && $0.contains("both \"agent\" and \"command\"") })
        #expect(several.contains { $0.contains("skips but gives no default output") })
        #expect(several.contains { $0.contains("no error class \"timout\"") })
        // A skip's default is the task's output from then on: the task's schema holds it as any output.
        let unchecked = try Self.errors(
            """
            pipeline: p
            tasks:
              - id: a
                command: [cat]
                validate: {schema: {type: object, required: [labels]}}
                on_error: {failure: {then: skip, default: {ok: false}}}
            """)
        #expect(
            unchecked.count == 1 && unchecked[0].hasPrefix("6:15")
                && unchecked[0].contains("skips with a default output that its validate.schema refuses"), "\(unchecked)")
    }

    @Test func warnsAboutOutputsNobodyUses() throws {
        try TemporaryDirectory.with { directory in
            let definition = try Self.load(
                """
                pipeline: p
                outputs: [b]
                tasks:
                  - {id: a, command: [cat]}
                  - {id: b, command: [cat], after: [a]}
                  - {id: stray, command: [cat]}
                """, in: directory)
            let warnings = definition.warnings.map(\.message)
            #expect(warnings.contains { $0.contains("task \"stray\" does not lead to any of the pipeline's outputs") })
            #expect(warnings.contains { $0.contains("the output of task \"a\" is not used") })
        }
    }

    @Test func releaseNotesRunsWithChildRunsAndMatchingDigests() async throws {
        try await TemporaryDirectory.with { directory in
            let outcome = try await Self.run(try PipelineFile.load(path: Self.examplePath("release-notes")), in: directory)
            #expect(outcome.isSucceeded)
            #expect(outcome.state.settledOrder == ["collect", "write", "lint", "publish"])
            let publish = try #require(outcome.state.task("publish")?.output)
            #expect(publish["draft"] == .bool(true))
            #expect(publish["title"] == .string("Release 2.4.0"))
            // The agent task is a child run with its own log, which replays on its own.
            let child = directory.path("run/tasks/write-1.jsonl.gz")
            var childState = RunState()
            _ = try LogReader(path: child).forEachEvent { RunState.reduce(into: &childState, $0.event) }
            #expect(childState.runId == "pipe-test.write.1")
            #expect(childState.stop?.reason == .success)
            for log in [outcome.logPath, child] {
                #expect(try await Subprocess.run("/usr/bin/env", ["gzip", "-t", log]).status == 0)
            }
            let replay = try PipelineReplay(log: outcome.logPath)
            #expect(replay.state == outcome.state)
            #expect(replay.mismatches.isEmpty)
            #expect(replay.checkedDigests == 5)
        }
    }

    @Test func aFailingNodeRecoversByRetryFallbackAndSkip() async throws {
        try await TemporaryDirectory.with { directory in
            let outcome = try await Self.run(try PipelineFile.load(path: Self.examplePath("triage-recovery")), in: directory)
            #expect(outcome.isSucceeded)
            let classify = try #require(outcome.state.task("classify"))
            #expect(classify.attempts.map { $0.finished?.recovery?.action } == [.retry, .fallback])
            #expect(classify.outputFrom == "classify_with_agent")
            #expect(classify.output == ["T-1": "billing", "T-2": "bug"])
            #expect(outcome.state.breakers["rules-service"]?.state == .open)
            let enrich = try #require(outcome.state.task("enrich"))
            #expect(enrich.status == .skipped)
            #expect(enrich.output == ["enriched": false])
            #expect(outcome.state.stop?.outputs["report"]?["report"]?["classes"] == ["T-1": "billing", "T-2": "bug"])
        }
    }

    /// Eight tasks that finish in random order still write the same sequence of events.
    @Test func concurrencyIsDeterministicInTheLog() async throws {
        try await TemporaryDirectory.with { directory in
            var tasks = ""
            for index in 0..<8 {
                tasks += "  - {id: t\(index), command: [sh, -c, 'cat >/dev/null; sleep 0.0$(( $$ % 7 )); echo \(index)']}\n"
            }
            tasks += "  - {id: join, command: [cat], inputs: {a: t0, b: t7}, after: [t1, t2, t3, t4, t5, t6]}\n"
            let definition = try Self.load("pipeline: fan\ntasks:\n" + tasks, in: directory)
            var sequences: Set<[String]> = []
            for trial in 0..<4 {
                let outcome = try await PipelineRunner(definition: definition).start(
                    directory: directory.path("run-\(trial)"), runId: "pipe-\(trial)", jobs: 4)
                #expect(outcome.isSucceeded)
                var sequence: [String] = []
                _ = try LogReader(path: outcome.logPath).forEachEvent { recorded in
                    switch recorded.event.payload {
                    case .pipeline(.taskStarted(let started)): sequence.append("start \(started.task)")
                    case .pipeline(.taskFinished(let finished)): sequence.append("finish \(finished.task)")
                    default: sequence.append(recorded.event.kind)
                    }
                }
                sequences.insert(sequence)
            }
            #expect(sequences.count == 1)
            #expect(sequences.first?.prefix(5) == ["pipeline_started", "start t0", "start t1", "start t2", "start t3"])
        }
    }

    /// A task sees its declared inputs and nothing else, even from tasks that ran before it.
    @Test func aTaskSeesOnlyItsDeclaredInputs() async throws {
        try await TemporaryDirectory.with { directory in
            let definition = try Self.load(
                """
                pipeline: isolation
                input: {secret: s3cr3t, public: hello}
                tasks:
                  - {id: a, command: [sh, -c, 'cat >/dev/null; echo "{\\"value\\": 1}"']}
                  - {id: b, command: [sh, -c, 'cat >/dev/null; echo "{\\"hidden\\": 2}"']}
                  - {id: c, command: [cat], inputs: {from_a: a.value, greeting: $input.public}, after: [b]}
                """, in: directory)
            let outcome = try await Self.run(definition, in: directory, jobs: 1)
            #expect(outcome.state.task("c")?.output == ["from_a": 1, "greeting": "hello"])
            #expect(outcome.state.task("c")?.attempts.first?.started.input == ["from_a": 1, "greeting": "hello"])
        }
    }

    @Test func rollbackRerunsDescendantsAndKeepsTheOldBranch() async throws {
        try await TemporaryDirectory.with { directory in
            let definition = try PipelineFile.load(path: Self.examplePath("release-notes"))
            let first = try await Self.run(definition, in: directory)
            let outcome = try await PipelineRunner(definition: definition).rollback(log: first.logPath, to: "write")
            #expect(outcome.isSucceeded)
            #expect(outcome.state.rollbacks.map(\.discarded) == [["write", "lint", "publish"]])
            let write = try #require(outcome.state.task("write"))
            #expect(write.attempts.map(\.attempt) == [1, 2])
            #expect(write.attempts.map(\.isDiscarded) == [true, false])
            #expect(outcome.state.task("collect")?.attempts.count == 1)
            // Both child logs stay on disk: the old branch is a fork, not an erasure.
            for attempt in [1, 2] {
                #expect(FileManager.default.fileExists(atPath: directory.path("run/tasks/write-\(attempt).jsonl.gz")))
            }
            #expect(try PipelineReplay(log: outcome.logPath).mismatches.isEmpty)
        }
    }

    @Test func pauseThenResumeFinishesWithTheSameOutputs() async throws {
        try await TemporaryDirectory.with { directory in
            let definition = try PipelineFile.load(path: Self.examplePath("release-notes"))
            let reference = try await PipelineRunner(definition: definition).start(directory: directory.path("reference"), runId: "ref")
            try FileManager.default.createDirectory(atPath: directory.path("run"), withIntermediateDirectories: true)
            // A pause requested before the start: nothing runs, the pipeline pauses.
            _ = FileManager.default.createFile(atPath: directory.path("run/" + PipelineRunner.pauseRequestName), contents: Data())
            let paused = try await Self.run(definition, in: directory)
            #expect(paused.isPaused)
            #expect(paused.state.tasks.allSatisfy { $0.attempts.isEmpty })
            let resumed = try await PipelineRunner(definition: definition).resume(log: paused.logPath)
            #expect(resumed.isSucceeded)
            #expect(resumed.state.resumeCount == 1)
            #expect(resumed.state.stop?.outputs == reference.state.stop?.outputs)
        }
    }

    @Test func resumeRefusesAChangedPipelineFile() async throws {
        try await TemporaryDirectory.with { directory in
            let path = try Self.write("pipeline: p\ntasks:\n  - {id: a, command: [cat]}\n", in: directory)
            try FileManager.default.createDirectory(atPath: directory.path("run"), withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: directory.path("run/" + PipelineRunner.pauseRequestName), contents: Data())
            let paused = try await Self.run(try PipelineFile.load(path: path), in: directory)
            try "pipeline: p\ntasks:\n  - {id: a, command: [cat, -]}\n".write(toFile: path, atomically: true, encoding: .utf8)
            await #expect(throws: PipelineError.self) {
                try await PipelineRunner(definition: try PipelineFile.load(path: path)).resume(log: paused.logPath)
            }
        }
    }

    @Test func breakerOpensFailsFastProbesAndCloses() throws {
        let plan = [PipelineTaskPlan(id: "a", kind: .command, needs: [], breaker: "api")]
        var breakers = CircuitBreakers(settings: ["api": BreakerSettings(failures: 2, windowMs: 1000, openMs: 500)], plan: plan)
        var sequence = 0
        func event(_ payload: PipelineEvent, at timeMs: Int) -> Event {
            defer { sequence += 1 }
            return Event(runId: "p", sequence: sequence, step: 0, timeUs: timeMs * 1000, previousHash: "", payload: .pipeline(payload))
        }
        func failed(_ attempt: Int) -> TaskFinished {
            TaskFinished(task: "a", attempt: attempt, status: .failed, errorClass: .failure, error: "503", durationUs: 0, stateDigest: "")
        }
        #expect(breakers.admission("api", nowUs: 0) == .run)
        breakers.observe(event(.taskFinished(failed(1)), at: 0))
        #expect(breakers.change(after: failed(1), key: "api", nowUs: 0) == nil)
        breakers.observe(event(.taskFinished(failed(2)), at: 100))
        let opened = try #require(breakers.change(after: failed(2), key: "api", nowUs: 100_000))
        #expect(opened.state == .open)
        #expect(opened.failures == 2)
        breakers.observe(event(.breakerChanged(opened), at: 100))
        guard case .failFast(let why) = breakers.admission("api", nowUs: 300_000) else {
            Issue.record("an open breaker lets a task through")
            return
        }
        #expect(why.contains("breaker api is open"))
        #expect(breakers.admission("api", nowUs: 600_000) == .probe)
        breakers.observe(event(.breakerChanged(BreakerChanged(breaker: "api", state: .halfOpen, failures: 0, reason: "")), at: 600))
        breakers.observe(event(.taskStarted(TaskStarted(task: "a", attempt: 3, input: .null, isProbe: true)), at: 600))
        #expect(breakers.admission("api", nowUs: 610_000) != .run)
        let success = TaskFinished(task: "a", attempt: 3, status: .succeeded, output: 1, durationUs: 0, stateDigest: "")
        breakers.observe(event(.taskFinished(success), at: 620))
        #expect(breakers.change(after: success, key: "api", nowUs: 620_000)?.state == .closed)
        // A failed probe opens it again.
        #expect(breakers.change(after: failed(3), key: "api", nowUs: 620_000)?.state == .open)
    }

    @Test("the checked-in example pipeline run is reproduced byte for byte", arguments: ExamplePipelines.recorded)
    func reproducesTheRecordedExample(_ name: String) async throws {
        try await TemporaryDirectory.with { directory in
            let outcome = try await ExamplePipelines.record(name, into: directory.path("run"))
            #expect(outcome.isSucceeded)
            let checkedIn = ExamplePipelines.recordedDirectory(name)
            let written = try FileManager.default.subpathsOfDirectory(atPath: directory.path("run")).filter { $0.hasSuffix(".gz") }.sorted()
            if FixtureLogs.isUpdating {
                try? FileManager.default.removeItem(at: checkedIn)
                try FileManager.default.createDirectory(at: checkedIn.appendingPathComponent("tasks"), withIntermediateDirectories: true)
                for file in written {
                    try Data(contentsOf: URL(fileURLWithPath: directory.path("run/\(file)"))).write(
                        to: checkedIn.appendingPathComponent(file))
                }
            }
            let expected = try FileManager.default.subpathsOfDirectory(atPath: checkedIn.path).filter { $0.hasSuffix(".gz") }.sorted()
            #expect(written == expected)
            for file in written {
                let now = try Data(contentsOf: URL(fileURLWithPath: directory.path("run/\(file)")))
                #expect(
                    now == (try Data(contentsOf: checkedIn.appendingPathComponent(file))),
                    "\(file): re-record with AGENT_EVAL_UPDATE_FIXTURES=1 swift test")
            }
        }
    }
}
