import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Pipelines

/// `PipelineRunner.fork` (docs/pipelines.md, "Fork"): a pipeline run copied under its own run id,
/// forked at a task, with real subprocesses for command tasks and real gzip logs.
@Suite struct PipelineForkTests {
    /// Three command tasks, a → b → c. Each appends its name to `ran` when it runs (a side effect
    /// a fork must not repeat for the tasks before the fork point); b answers what `b-answer`
    /// holds when it runs, so changing that file between the parent and the fork is the "what if".
    static func sideEffectPipeline(in directory: TemporaryDirectory) throws -> PipelineDefinition {
        let ran = directory.path("ran")
        let answer = directory.path("b-answer")
        try "{\"verdict\": \"refund\"}".write(toFile: answer, atomically: true, encoding: .utf8)
        return try PipelineTests.load(
            """
            pipeline: side-effects
            tasks:
              - {id: a, command: [sh, -c, 'cat >/dev/null; echo a >> \(ran); echo "{\\"order\\": 1042}"']}
              - {id: b, command: [sh, -c, 'cat >/dev/null; echo b >> \(ran); cat \(answer)'], inputs: {order: a.order}}
              - {id: c, command: [sh, -c, 'echo c >> \(ran); cat'], inputs: {decision: b.verdict}}
            """, in: directory)
    }

    static func ran(_ directory: TemporaryDirectory) -> [String] {
        ((try? String(contentsOfFile: directory.path("ran"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    static func recorded(_ path: String) throws -> [RecordedEvent] {
        var options = LogReader.Options(hashesLines: true)
        options.isStrict = true
        return try LogReader(path: path, options: options).readAll().events
    }

    @Test func aForkRunsTheTaskAndItsDependantsAgainAndNothingBefore() async throws {
        try await TemporaryDirectory.with { directory in
            let definition = try Self.sideEffectPipeline(in: directory)
            let parent = try await PipelineRunner(definition: definition).start(directory: directory.path("parent"), runId: "pipe-parent")
            #expect(parent.isSucceeded)
            #expect(Self.ran(directory) == ["a", "b", "c"])
            let parentBytes = try Data(contentsOf: URL(fileURLWithPath: parent.logPath))

            // What if b had answered otherwise?
            try "{\"verdict\": \"deny\"}".write(toFile: directory.path("b-answer"), atomically: true, encoding: .utf8)
            let fork = try await PipelineRunner(definition: definition).fork(
                log: parent.logPath, at: "b", directory: directory.path("fork"), runId: "pipe-fork")
            #expect(fork.isSucceeded)
            #expect(fork.runId == "pipe-fork")
            // a ran once, in the parent; b and c ran again in the fork.
            #expect(Self.ran(directory) == ["a", "b", "c", "b", "c"])
            #expect(fork.state.task("a")?.attempts.count == 1)
            #expect(fork.state.task("b")?.attempts.map(\.isDiscarded) == [true, false])
            #expect(fork.state.task("c")?.output == ["decision": "deny"])
            #expect(fork.state.forked?.parentRunId == "pipe-parent")
            // The parent is not written to.
            #expect(try Data(contentsOf: URL(fileURLWithPath: parent.logPath)) == parentBytes)

            // The fork's log: the parent's events with their payloads and times, under the fork's
            // run id and chain, then pipeline_forked naming the parent's last line.
            let parentEvents = try Self.recorded(parent.logPath)
            let forkEvents = try Self.recorded(fork.logPath)
            #expect(forkEvents.allSatisfy { $0.event.runId == "pipe-fork" })
            for (copied, original) in zip(forkEvents, parentEvents) {
                #expect(copied.event.kind == original.event.kind)
                #expect(copied.event.timeUs == original.event.timeUs)
                #expect(copied.event.payload == original.event.payload)
            }
            let marker = forkEvents[parentEvents.count].event
            guard case .pipeline(.forked(let forked)) = marker.payload else {
                Issue.record("expected pipeline_forked after the copy, got \(marker.kind)")
                return
            }
            #expect(forked.parentHead == parentEvents.last?.hash)
            #expect(forked.copiedEvents == parentEvents.count)
            #expect(forkEvents[parentEvents.count + 1].event.kind == "pipeline_rolled_back")
            #expect(fork.state.rollbacks.map(\.discarded) == [["b", "c"]])

            // Every digest checks, the real gzip reads it, and the verifier finds it whole.
            #expect(try PipelineReplay(log: fork.logPath).mismatches.isEmpty)
            #expect(try LogVerifier.verify(path: fork.logPath).isIntact)
            #expect(try await Subprocess.run(gzipPath, ["-t", fork.logPath]).status == 0)

            // What changed, task by task.
            let changes = PipelineView.changes(from: parent.state, to: fork.state)
            #expect(changes.map(\.task) == ["b", "c"])
            #expect(changes.first?.parentOutput == ["verdict": "refund"])
            #expect(changes.first?.output == ["verdict": "deny"])
        }
    }

    @Test func aForkCopiesTheChildLogsAndAForkOfAForkKeepsItsLineage() async throws {
        try await TemporaryDirectory.with { directory in
            let definition = try PipelineFile.load(path: PipelineTests.examplePath("release-notes"))
            let parent = try await PipelineRunner(definition: definition).start(directory: directory.path("parent"), runId: "pipe-parent")
            let first = try await PipelineRunner(definition: definition).fork(
                log: parent.logPath, at: "lint", directory: directory.path("first"), runId: "pipe-first")
            #expect(first.isSucceeded)
            // The agent task before the fork point is the parent's: its child log is copied, not run again.
            let write = try #require(first.state.task("write"))
            #expect(write.attempts.count == 1)
            let childLog = try #require(write.attempts.first?.started.log)
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: directory.path("first/" + childLog)))
                    == Data(contentsOf: URL(fileURLWithPath: directory.path("parent/" + childLog))))
            #expect(PipelineView.changes(from: parent.state, to: first.state).isEmpty)

            let second = try await PipelineRunner(definition: definition).fork(
                log: first.logPath, at: "write", directory: directory.path("second"), runId: "pipe-second")
            #expect(second.isSucceeded)
            #expect(second.state.forked?.parentRunId == "pipe-first")
            let forks = try Self.recorded(second.logPath).compactMap { recorded -> String? in
                guard case .pipeline(.forked(let forked)) = recorded.event.payload else { return nil }
                return forked.parentRunId
            }
            #expect(forks == ["pipe-parent", "pipe-first"])
            #expect(second.state.task("write")?.attempts.map(\.attempt) == [1, 2])
            #expect(try PipelineReplay(log: second.logPath).mismatches.isEmpty)
        }
    }

    @Test func aBreakerTheParentLeftOpenIsClosedForTheTasksRunAgain() async throws {
        try await TemporaryDirectory.with { directory in
            let definition = try PipelineFile.load(path: PipelineTests.examplePath("triage-recovery"))
            let parent = try await PipelineRunner(definition: definition).start(directory: directory.path("parent"), runId: "pipe-parent")
            #expect(parent.state.breakers["rules-service"]?.state == .open, "the example's rules service fails twice")
            let fork = try await PipelineRunner(definition: definition).fork(
                log: parent.logPath, at: "classify", directory: directory.path("fork"), runId: "pipe-fork")
            let kinds = try Self.recorded(fork.logPath).map(\.event).drop { $0.kind != "pipeline_rolled_back" }.prefix(3).map { event in
                if case .pipeline(.breakerChanged(let changed)) = event.payload { return "\(event.kind) \(changed.state.rawValue)" }
                return event.kind
            }
            #expect(kinds == ["pipeline_rolled_back", "breaker_changed closed", "pipeline_resumed"])
            // classify's command ran again in the fork, rather than failing fast on the parent's breaker.
            let attempts = try #require(fork.state.task("classify")?.attempts.filter { !$0.isDiscarded })
            #expect(!attempts.isEmpty)
            #expect(attempts.first?.finished?.errorClass != .breakerOpen)

            // A rollback in place does the same.
            let rolledBack = try await PipelineRunner(definition: definition).rollback(log: parent.logPath, to: "classify")
            let again = try #require(rolledBack.state.task("classify")?.attempts.filter { !$0.isDiscarded })
            #expect(!again.isEmpty && again.first?.finished?.errorClass != .breakerOpen)
            let closed = try Self.recorded(parent.logPath).compactMap { recorded -> String? in
                guard case .pipeline(.breakerChanged(let changed)) = recorded.event.payload, changed.state == .closed else { return nil }
                return changed.reason
            }
            #expect(closed.first == "closed by the rollback to classify: its tasks run again")
        }
    }

    @Test func badForksAreRefusedAndWriteNothing() async throws {
        try await TemporaryDirectory.with { directory in
            let definition = try Self.sideEffectPipeline(in: directory)
            let parent = try await PipelineRunner(definition: definition).start(directory: directory.path("parent"), runId: "pipe-parent")
            let runner = PipelineRunner(definition: definition)
            func refusal(_ log: String, at task: String, into name: String = "fork") async -> PipelineError? {
                do throws(PipelineError) {
                    _ = try await runner.fork(log: log, at: task, directory: directory.path(name), runId: "pipe-fork")
                    return nil
                } catch {
                    return error
                }
            }
            do throws(PipelineError) {
                _ = try await runner.fork(log: parent.logPath, at: "b", directory: directory.path("fork"), runId: "pipe-parent")
                Issue.record("a fork under its parent's run id was made")
            } catch {
                #expect(error.message.contains("is its parent's"))
            }
            let unknown = await refusal(parent.logPath, at: "d")
            #expect(unknown?.code == .unknownTask)
            #expect(unknown?.hint == "tasks: a, b, c")
            #expect(!FileManager.default.fileExists(atPath: directory.path("fork")))

            // A directory that holds something already.
            try FileManager.default.createDirectory(atPath: directory.path("taken"), withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: directory.path("taken/keep"), contents: Data("x".utf8))
            let taken = await refusal(parent.logPath, at: "b", into: "taken")
            #expect(taken?.message.contains("already exists and is not empty") == true)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("taken")) == ["keep"])

            // Another pipeline file than the run's.
            let other = try PipelineTests.load(
                """
                pipeline: side-effects
                tasks:
                  - {id: a, command: [cat]}
                  - {id: b, command: [cat], inputs: {order: a.order}}
                  - {id: c, command: [cat], inputs: {decision: b.verdict}}
                """, in: directory)
            do throws(PipelineError) {
                _ = try await PipelineRunner(definition: other).fork(
                    log: parent.logPath, at: "b", directory: directory.path("fork"), runId: "pipe-fork")
                Issue.record("a fork with another pipeline file was made")
            } catch {
                #expect(error.code == .fileChanged)
            }

            // A torn parent: its last gzip member cut.
            let torn = directory.path("torn/pipeline.jsonl.gz")
            try FileManager.default.createDirectory(atPath: directory.path("torn"), withIntermediateDirectories: true)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: parent.logPath))
            try bytes.prefix(bytes.count - 9).write(to: URL(fileURLWithPath: torn))
            let tornRefusal = await refusal(torn, at: "b")
            #expect(tornRefusal?.code == .log)
            #expect(tornRefusal?.hint?.contains("agent-eval log repair") == true)

            // A parent whose recorded digest does not match its events.
            let damaged = directory.path("damaged/pipeline.jsonl.gz")
            try FileManager.default.createDirectory(atPath: directory.path("damaged"), withIntermediateDirectories: true)
            let writer = try LogWriter.create(at: damaged, runId: "pipe-damaged")
            for recorded in try Self.recorded(parent.logPath) {
                var payload = recorded.event.payload
                if case .pipeline(.taskFinished(var finished)) = payload, finished.task == "a" {
                    finished.stateDigest = "sha256:" + String(repeating: "0", count: 64)
                    payload = .pipeline(.taskFinished(finished))
                }
                _ = try writer.append(payload, step: 0, timeUs: recorded.event.timeUs)
            }
            try writer.close()
            let damagedRefusal = await refusal(damaged, at: "b")
            #expect(damagedRefusal?.message.contains("state digests do not match") == true)
            #expect(!FileManager.default.fileExists(atPath: directory.path("fork")))
            #expect(Self.ran(directory) == ["a", "b", "c"])
        }
    }
}
