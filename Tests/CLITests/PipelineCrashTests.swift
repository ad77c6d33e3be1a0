import Foundation
import Pipelines
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `agent-eval pipeline run` killed with SIGKILL at random points (and its resume killed too,
/// sometimes), then resumed: the same final outputs as an uninterrupted run, no settled task
/// run twice, and a pipeline log that gzip and replay accept.
@Suite("Pipelines killed and resumed", .ownThread)
struct PipelineCrashTests {
    /// Six leaf tasks, two joins, an agent task (read-only tools) and a final join; two at a time.
    /// Each command takes a few tenths of a second: the kill points (the log watched every few
    /// milliseconds, then up to 40 ms more) must land inside the run on a busy machine too, where
    /// tasks of 30–50 ms once let the run end before five of eight kills (CI of stop 100's clone).
    static func pipelineFile(in directory: TemporaryDirectory) throws -> String {
        let agent = ExampleRuns.fixtures.appendingPathComponent("pipelines/triage-recovery/triage.agent.yaml").path
        var text = "pipeline: crashy\njobs: 2\ninput: {tickets: [{id: T-1, text: charged twice}, {id: T-2, text: app crashes}]}\n"
        text += "outputs: [final]\ntasks:\n"
        for index in 0..<6 {
            text += "  - {id: leaf\(index), command: [sh, -c, 'cat >/dev/null; sleep 0.3; echo \"{\\\"leaf\\\": \(index)}\"']}\n"
        }
        text += "  - {id: left, command: [sh, -c, 'sleep 0.2; cat'], inputs: {a: leaf0, b: leaf1, c: leaf2}}\n"
        text += "  - {id: right, command: [sh, -c, 'sleep 0.2; cat'], inputs: {a: leaf3, b: leaf4, c: leaf5}}\n"
        text += "  - id: classify\n    agent: \(agent)\n    goal: 'Classify: {{tickets}}'\n    inputs: {tickets: $input.tickets}\n"
        text += "  - {id: final, command: [cat], inputs: {left: left, right: right, classes: classify}}\n"
        let path = directory.path("crashy.yaml")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Starts `pipeline run` or `resume` and kills it once the pipeline log shows `settled` tasks
    /// settled, `extra` seconds later (if still running). The kill point follows the run's
    /// progress, not the clock, so a slow or busy machine still sees kills while work is under
    /// way; `extra` puts them at random points inside the next tasks.
    static func runKilled(
        _ arguments: [String], log: String, whenSettled settled: Int, extra: Double, in directory: TemporaryDirectory
    ) async throws {
        let (process, _) = try startAgentEval(arguments, in: directory.url)
        let end = ContinuousClock.now + .seconds(300)
        while process.isRunning && ContinuousClock.now < end {
            if let state = try? PipelineReplay(log: log).state, settledAttempts(state).values.reduce(0, +) >= settled { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .seconds(extra))
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        await wait(for: process)
    }

    /// Per task, the attempts of the current branch that succeeded or were skipped.
    static func settledAttempts(_ state: PipelineState) -> [String: Int] {
        Dictionary(
            uniqueKeysWithValues: state.tasks.map { task in
                (task.id, task.currentAttempts.filter { $0.finished?.status == .succeeded || $0.finished?.recovery?.action == .skip }.count)
            })
    }

    /// Starts `arguments` and kills it with SIGKILL once `ready` says so (checked every 10 ms, for
    /// at most 120 s).
    static func killWhen(_ arguments: [String], in directory: TemporaryDirectory, _ ready: () -> Bool) async throws {
        let (process, _) = try startAgentEval(arguments, in: directory.url)
        let end = ContinuousClock.now + .seconds(120)
        while process.isRunning && ContinuousClock.now < end && !ready() { try await Task.sleep(for: .milliseconds(10)) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        await wait(for: process)
    }

    @Test(
        "resume checks an agent attempt's output with the task's validation, as a run does; a pipeline resumed to its end after a killed attempt can be graded"
    )
    func resumeValidatesAndGrades() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = ExampleRuns.fixtures.appendingPathComponent("pipelines/triage-recovery/triage.agent.yaml").path
            // The agent answers at once; its validation refuses the answer, slowly: killed while it runs.
            try """
            pipeline: checked
            input: {tickets: [{id: T-1, text: charged twice}]}
            outputs: [classify]
            tasks:
              - id: classify
                agent: \(agent)
                goal: 'Classify: {{tickets}}'
                inputs: {tickets: $input.tickets}
                validate: {command: [sh, -c, 'cat >/dev/null; sleep 3; exit 1']}

            """.write(toFile: directory.path("checked.yaml"), atomically: true, encoding: .utf8)
            let checked = directory.path("runs/checked-v")
            try await Self.killWhen(["pipeline", "run", "checked.yaml", "--out", "runs", "--run-id", "v"], in: directory) {
                // The agent's run has stopped on its own: the validation is running.
                guard let state = try? PipelineReplay(log: checked + "/pipeline.jsonl.gz").state,
                    let child = state.tasks.first?.attempts.last?.started.log
                else { return false }
                var run = RunState()
                _ = try? LogReader(path: checked + "/" + child).forEachEvent { RunState.reduce(into: &run, $0.event) }
                return run.stop != nil
            }
            // A copy of the killed run whose child log is then another run's: resume takes no answer from it.
            let swapped = directory.path("runs/checked-swapped")
            try FileManager.default.copyItem(atPath: checked, toPath: swapped)
            let childLog = try #require(
                try PipelineReplay(log: swapped + "/pipeline.jsonl.gz").state.tasks.first?.attempts.last?.started.log)
            try FileManager.default.removeItem(atPath: swapped + "/" + childLog)
            try FileManager.default.copyItem(atPath: fixture("support-sample.jsonl.gz"), toPath: swapped + "/" + childLog)
            let fromSwapped = try await agentEval(["pipeline", "resume", swapped, "--wait"], in: directory.url)
            #expect(fromSwapped.status == 1, "\(fromSwapped.stdoutText)\(fromSwapped.stderr)")
            let swappedAttempt = try PipelineReplay(log: swapped + "/pipeline.jsonl.gz").state.tasks.first?.attempts.last?.finished
            #expect(swappedAttempt?.isHarnessFault == true, "\(String(describing: swappedAttempt))")
            #expect(
                swappedAttempt?.error?.contains("holds run run-support-refund, not the run") == true,
                "\(String(describing: swappedAttempt))")

            let resumed = try await agentEval(["pipeline", "resume", checked, "--wait"], in: directory.url)
            #expect(resumed.status == 1, "the validation refuses the output: \(resumed.stdoutText)\(resumed.stderr)")
            let state = try PipelineReplay(log: checked + "/pipeline.jsonl.gz").state
            #expect(state.stop?.status == .failed)
            #expect(state.tasks.first?.attempts.last?.finished?.errorClass == .invalidOutput, "\(String(describing: state.tasks.first))")

            // A command killed mid-run, retried by resume to the end: the pipeline can be graded.
            try """
            pipeline: retried
            input: {}
            outputs: [slow]
            tasks:
              - {id: slow, command: [sh, -c, 'cat >/dev/null; sleep 1; echo "{\\"done\\": true}"']}

            """.write(toFile: directory.path("retried.yaml"), atomically: true, encoding: .utf8)
            let retried = directory.path("runs/retried-r")
            try await Self.killWhen(["pipeline", "run", "retried.yaml", "--out", "runs", "--run-id", "r"], in: directory) {
                (try? PipelineReplay(log: retried + "/pipeline.jsonl.gz").state.tasks.first?.attempts.isEmpty == false) ?? false
            }
            // From another directory, the file the run started with (retried.yaml, relative) is not
            // there: the error says where it was relative to, and what to give.
            let elsewhere = try await agentEval(["pipeline", "resume", retried, "--wait"], in: URL(fileURLWithPath: "/"))
            #expect(elsewhere.status == 2, "\(elsewhere.stdoutText)\(elsewhere.stderr)")
            #expect(
                elsewhere.stderr.contains("the pipeline run started with retried.yaml, relative to the directory it was started in")
                    && elsewhere.stderr.contains("--file"), "\(elsewhere.stderr)")
            let again = try await agentEval(["pipeline", "resume", retried, "--wait"], in: directory.url)
            #expect(again.status == 0, "\(again.stdoutText)\(again.stderr)")
            let retriedState = try PipelineReplay(log: retried + "/pipeline.jsonl.gz").state
            #expect(retriedState.tasks.first?.currentAttempts.first?.finished?.errorClass == .interrupted)
            try "caseId: retried\nlogs: \(retried)/pipeline.jsonl.gz\nexpected:\n  pipeline: {status: succeeded}\n".write(
                toFile: directory.path("retried.case.yaml"), atomically: true, encoding: .utf8)
            let graded = try await agentEval(["run", directory.path("retried.case.yaml"), "--no-catalog"], in: directory.url)
            #expect(graded.status == 0, "\(graded.stdoutText)\(graded.stderr)")
        }
    }

    @Test("kill -9 at random points, then resume: the same outputs as an uninterrupted run, no settled task run again")
    func killedAndResumed() async throws {
        try await TemporaryDirectory.with { directory in
            let file = try Self.pipelineFile(in: directory)
            let reference = try await agentEval([
                "pipeline", "run", file, "--out", directory.path("reference"), "--run-id", "ref", "--json",
            ])
            #expect(reference.status == 0, "\(reference.stderr)")
            let referenceState = try PipelineReplay(log: directory.path("reference/crashy-ref/pipeline.jsonl.gz")).state
            let expectedOutputs = try #require(referenceState.stop?.outputs)
            let tasks = referenceState.tasks.count
            var random = SeededGenerator(seed: 15)
            var killedBeforeTheEnd = 0
            for trial in 0..<8 {
                let id = "trial-\(trial)"
                let runDirectory = directory.path("trials/crashy-\(id)")
                let log = runDirectory + "/pipeline.jsonl.gz"
                // Killed after 1 to all-but-one tasks settled, somewhere inside the next ones.
                let settled = Int.random(in: 1..<tasks, using: &random)
                try await Self.runKilled(
                    ["pipeline", "run", file, "--out", directory.path("trials"), "--run-id", id], log: log, whenSettled: settled,
                    extra: Double.random(in: 0...0.04, using: &random), in: directory)
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: log), (attributes[.size] as? Int ?? 0) > 0 else {
                    Issue.record("trial \(trial): no pipeline log at \(log)")
                    continue
                }
                // Half the resumes are killed too, before the last one runs to the end. A kill -9
                // leaves the killed run's commands (and what they started) running a moment
                // longer; resume refuses to run a task beside them unless told to wait, as a
                // user told by its hint would (CI of stop 95: a `sleep` of leaf5 still ran).
                if Bool.random(using: &random) {
                    try await Self.runKilled(
                        ["pipeline", "resume", runDirectory, "--wait"], log: log,
                        whenSettled: Int.random(in: settled..<tasks, using: &random),
                        extra: Double.random(in: 0...0.04, using: &random), in: directory)
                }
                let resumed = try await agentEval(["pipeline", "resume", runDirectory, "--wait"])
                if resumed.status == 2 {
                    // The kill came after the pipeline stopped: there is nothing to resume.
                    #expect(resumed.stderr.contains("nothing to resume"), "\(resumed.stderr)")
                } else {
                    #expect(resumed.status == 0, "trial \(trial): \(resumed.stdoutText)\(resumed.stderr)")
                    killedBeforeTheEnd += 1
                }
                let replay = try PipelineReplay(log: log)
                #expect(replay.mismatches.isEmpty, "trial \(trial): \(replay.mismatches)")
                #expect(replay.state.anomalies.isEmpty, "trial \(trial): \(replay.state.anomalies)")
                #expect(replay.state.stop?.status == .succeeded, "trial \(trial)")
                #expect(replay.state.stop?.outputs == expectedOutputs, "trial \(trial)")
                for (task, count) in Self.settledAttempts(replay.state) {
                    #expect(count == 1, "trial \(trial): \(task) settled \(count) times")
                }
                let gzip = try await Subprocess.run(gzipPath, ["-t", log])
                #expect(gzip.status == 0, "trial \(trial): \(gzip.stderr)")
                let show = try await agentEval(["pipeline", "show", runDirectory])
                #expect(
                    show.status == 0,
                    "trial \(trial): \(show.stdoutText.split(separator: "\n").suffix(4).joined(separator: "\n"))\(show.stderr)")
            }
            // The random points must have hit the run while it worked, or the test shows nothing.
            #expect(killedBeforeTheEnd >= 4, "only \(killedBeforeTheEnd) of 8 kills came before the pipeline stopped")
        }
    }
}
