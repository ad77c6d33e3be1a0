import CProcess
import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

func runFixture(_ name: String) -> String {
    ExampleRuns.directory.appendingPathComponent(name).path
}

@Suite("agent-eval replay and diff", .ownThread)
struct ReplayCommandTests {
    @Test("replay prints every step and checks every digest: exit 0")
    func replayAll() async throws {
        let result = try await agentEval(["replay", runFixture("support-refund.jsonl.gz"), "--plain"])
        #expect(result.status == 0)
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.last == "replayed 5 steps, 25 events; 4 state digests checked, all match the rebuilt state")
        #expect(lines.contains("verdict   call-4 delete_customer → DENY (rule no-deletes): deleting customer data is never done from chat"))
        #expect(lines.contains("  omitted tool:delete_customer (policy: rule no-deletes: deleting customer data is never done from chat)"))
        #expect(lines.contains { $0.hasPrefix("digest    ✔ ") })
    }

    @Test("a run's cost is shown in dollars with six decimals, however small (not as 1e-06)")
    func smallCost() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("cost.jsonl.gz")
            let writer = try LogWriter.create(at: path, runId: "run-cost")
            let clock = SteppingClock()
            let recorder = RunRecorder(writer: writer, clock: { clock.now() })
            try recorder.record(.runStarted(SampleRun.supportStart()))
            recorder.step = 1
            try recorder.record(.decisionMade(DecisionMade(raw: "ask", outcome: .valid(.askHuman("Which order?")), costUSD: 0.000001)))
            try recorder.endStep()
            try writer.close()
            let result = try await agentEval(["replay", path, "--step", "1", "--plain"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdoutText.contains("cost $0.000001\n"), "\(result.stdoutText)")
        }
    }

    @Test("--step N shows that step and the state at its end; --json is machine-readable")
    func oneStep() async throws {
        try await TemporaryDirectory.with { directory in
            let environment = ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")]
            let text = try await agentEval(["replay", runFixture("research-budget.jsonl.gz"), "--step", "3"], environment: environment)
            #expect(text.status == 0)
            #expect(text.stdoutText.hasPrefix("── step 3 · seq 21–29"))
            #expect(text.stdoutText.contains("  REJECTED unparseable: the reply is not JSON"))
            #expect(text.stdoutText.contains("state at the end of step 3:\n  30 events"))
            let json = try await agentEval(
                ["replay", runFixture("research-budget.jsonl.gz"), "--step", "4", "--json"], environment: environment)
            let value = try JSONParser.parse(json.stdout)
            #expect(value["schema"] == "agent-eval/replay-step")
            #expect(value["step"]?["step"] == 4)
            #expect(value["step"]?["state"]?["stop_reason"] == .null || value["step"]?["state"]?["stop_reason"] == nil)
            let missing = try await agentEval(["replay", runFixture("research-budget.jsonl.gz"), "--step", "99"], environment: environment)
            #expect(missing.status == 2)
            #expect(missing.stderr.contains("has no step 99; its steps are 0 to 5"))
        }
    }

    @Test("a torn log replays to the tear and says where it was cut; a corrupt one stops with what to run")
    func damagedLogs() async throws {
        let torn = try await agentEval([
            "replay", FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path, "--plain",
        ])
        #expect(torn.status == 1, "replayed to the cut, but not a whole replay")
        #expect(torn.stderr.contains("warning: ") && torn.stderr.contains("is torn"))
        #expect(torn.stderr.contains("ends inside the gzip member"))
        try await TemporaryDirectory.with { directory in
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: runFixture("support-refund.jsonl.gz"))))
            bytes[bytes.count - 30] ^= 0x01
            try Data(bytes).write(to: directory.url.appendingPathComponent("bad.jsonl.gz"))
            let corrupt = try await agentEval(["replay", directory.path("bad.jsonl.gz"), "--plain"])
            #expect(corrupt.status == 2)
            #expect(corrupt.stderr.contains("agent-eval log verify"))
        }
    }

    @Test("a 0-byte log is empty, not cut off: replay, log verify and run exit 2 saying so, and nothing says repair or all match")
    func emptyLog() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("empty.jsonl.gz")
            #expect(FileManager.default.createFile(atPath: log, contents: Data()))
            for arguments in [
                ["replay", log, "--plain"], ["replay", log, "--json"], ["replay", log, "--step", "1"], ["log", "verify", log],
            ] {
                let result = try await agentEval(arguments, environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
                #expect(result.status == 2, "\(arguments)")
                #expect(
                    result.stderr.hasPrefix("error: the file is empty (0 bytes): it holds no gzip member and no event\n"),
                    "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("--> \(log)"), "\(arguments): \(result.stderr)")
                let said = result.stdoutText + result.stderr
                #expect(!said.contains("repair") && !said.contains("cut off") && !said.contains("all match"), "\(arguments): \(said)")
            }
            try "caseId: empty-log\nlogs: empty.jsonl.gz\nallowUnfinished: true\nexpected: {toolsNotCalled: [delete_customer]}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", directory.path("case.yaml")])
            #expect(run.status == 2, "\(run.stdoutText)\(run.stderr)")
            #expect(run.stdoutText.contains("the file is empty (0 bytes)"), "\(run.stdoutText)")
            #expect(!run.stdoutText.contains("PASS"), "\(run.stdoutText)")
        }
    }

    @Test("a log cut before its first event: replay and run exit 2 saying no event could be read, with no repair hint")
    func cutBeforeTheFirstEvent() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("cut.jsonl.gz")
            let head = try await Subprocess.run("/usr/bin/env", ["head", "-c", "64", runFixture("support-refund.jsonl.gz")])
            #expect(FileManager.default.createFile(atPath: log, contents: Data(head.stdout)))
            let replay = try await agentEval(["replay", log, "--plain"])
            #expect(replay.status == 2)
            #expect(
                replay.stderr.hasPrefix(
                    "error: no event could be read: the file (64 bytes) ends inside the gzip member at byte 0, before its first event was complete\n"
                ), "\(replay.stderr)")
            #expect(!replay.stderr.contains("repair"), "\(replay.stderr)")
            #expect(!replay.stdoutText.contains("all match"), "\(replay.stdoutText)")
            // Allowed to be unfinished or not, a case over it could not run: there is no run to check.
            try "caseId: cut-log\nlogs: cut.jsonl.gz\nallowUnfinished: true\nexpected: {toolsNotCalled: [delete_customer]}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", directory.path("case.yaml")])
            #expect(run.status == 2, "\(run.stdoutText)\(run.stderr)")
            #expect(run.stdoutText.contains("no event could be read"), "\(run.stdoutText)")
        }
    }

    @Test("a log that records no state digest replays with exit 0 and says there was none to check, never that all match")
    func noDigestToCheck() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("no-digests.jsonl.gz")
            try LogWriter.withWriter(creating: log, runId: "run-no-digests") { writer in
                _ = try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
                _ = try writer.append(.runStopped(RunStopped(reason: .success, answer: "done")), step: 1, timeUs: 2)
            }
            let result = try await agentEval(["replay", log, "--plain"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(
                result.stdoutText.split(separator: "\n").last
                    == "replayed 2 steps, 2 events; no state digest to check (no step_ended in what was replayed), so nothing proves the rebuilt state"
            )
            #expect(!result.stdoutText.contains("all match"))
        }
    }

    @Test("diff: the same run exits 0; different runs exit 1 with the first divergence; an unreadable log exits 2")
    func diff() async throws {
        let same = try await agentEval(["diff", runFixture("support-refund.jsonl.gz"), runFixture("support-refund.jsonl.gz")])
        #expect(same.status == 0)
        #expect(same.stdoutText.hasPrefix("same trajectory"))
        let different = try await agentEval([
            "diff", runFixture("support-refund.jsonl.gz"), runFixture("research-budget.jsonl.gz"), "--json",
        ])
        #expect(different.status == 1)
        let value = try JSONParser.parse(different.stdout)
        #expect(value["first_divergence"]?["path"] == "call-1 tool")
        let missing = try await agentEval(["diff", runFixture("support-refund.jsonl.gz"), "/nonexistent.jsonl.gz"])
        #expect(missing.status == 2)
    }

    @Test("rerun with the unchanged agent is identical (0); with a stricter policy it names step, call and rule (1)")
    func rerun() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = ExampleRuns.agentPath("support")
            let same = try await agentEval(["rerun", runFixture("support-refund.jsonl.gz"), "--agent", agent])
            #expect(same.status == 0)
            #expect(same.stdoutText.hasPrefix("identical:"))
            let alias = try await agentEval(["replay", runFixture("support-refund.jsonl.gz"), "--rerun", "--agent", agent])
            #expect(alias.stdout == same.stdout)
            #expect(alias.status == 0)
            // replay's stepping options do not apply to a re-run: a usage error, not silently dropped.
            let conflicting = try await agentEval([
                "replay", runFixture("support-refund.jsonl.gz"), "--rerun", "--agent", agent, "--step", "2",
            ])
            #expect(conflicting.status == 64)
            #expect(conflicting.stderr.contains("--step do not apply"))
            // A torn log lacks the run's end: a strict re-run says so (2), not that the code diverged (1).
            let log = try Data(contentsOf: URL(fileURLWithPath: runFixture("support-refund.jsonl.gz")))
            try log.prefix(2500).write(to: URL(fileURLWithPath: directory.path("torn.jsonl.gz")))
            let torn = try await agentEval(["rerun", directory.path("torn.jsonl.gz"), "--agent", agent])
            #expect(torn.status == 2, "\(torn.stdoutText)\(torn.stderr)")
            #expect(torn.stderr.contains("cannot re-run") && torn.stderr.contains("strictly: it is torn"), "\(torn.stderr)")
            #expect(torn.stderr.contains("--mode prefix"), "\(torn.stderr)")
            let text = try String(contentsOfFile: agent, encoding: .utf8)
                .replacingOccurrences(of: "when: {tool: \"delete_*\"}", with: "when: {tool: \"*_order\"}")
            try text.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try FileManager.default.copyItem(
                atPath: ExampleRuns.fixtures.appendingPathComponent("agents/support/support.model.yaml").path,
                toPath: directory.path("support.model.yaml"))
            let changed = try await agentEval([
                "replay", runFixture("support-refund.jsonl.gz"), "--rerun", "--agent", directory.path("agent.yaml"), "--json",
            ])
            #expect(changed.status == 1)
            let value = try JSONParser.parse(changed.stdout)
            #expect(value["identical"] == false)
            #expect(value["divergence"]?["step"] == 1)
        }
    }

    @Test("interactive stepping on an 80x24 pseudo-terminal: next, next failure, go to, previous, quit")
    func interactive() throws {
        try TemporaryDirectory.with { directory in
            let session = try PseudoTerminalSession(
                arguments: ["replay", runFixture("support-refund.jsonl.gz")],
                environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
            try session.waitFor("step 0 (1/5)")
            try session.send("n")
            try session.waitFor("step 1 (2/5)")
            try session.send("f")
            try session.waitFor("step 2 (3/5)")
            try session.send("g4\r")
            try session.waitFor("step 4 (5/5)")
            try session.send("p")
            try session.waitFor("step 3 (4/5)")
            try session.send("q")
            #expect(try session.waitForExit() == 0)
            // Every line fits the 80-column terminal (escape sequences move the cursor: they end a line too).
            let visible = session.output.replacing(/\u{1B}\[[0-9;?]*[A-Za-z]/, with: "\n")
            for line in visible.split(whereSeparator: \.isNewline) {
                #expect(line.count <= 80, "\(line)")
            }
        }
    }
}

@Suite("agent-eval run on a terminal", .ownThread)
struct RunOnTerminalTests {
    @Test("on a terminal, run shows a progress line while cases run, and the same case lines as when piped")
    func progress() throws {
        try TemporaryDirectory.with { directory in
            let session = try PseudoTerminalSession(
                arguments: [
                    "run", repositoryRoot.appendingPathComponent("EvalCases").path, "--out", directory.path("runs"), "--jobs", "1",
                ],
                // Its own catalog: not the checkout's, which the default would find from here.
                environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
            try session.waitFor("11 cases, 11 passed")
            #expect(try session.waitForExit() == 0)
            #expect(session.output.contains("running…"))
            #expect(session.output.contains("✔ support-refund-live  (1 live run)"))
            #expect(session.output.contains("✔ triage-recovery-live  (1 live pipeline run)"))
        }
    }
}

/// The agent-eval binary on a real pseudo-terminal (80x24), driven key by key.
final class PseudoTerminalSession {
    private let master: Int32
    private let process: Process
    private(set) var output = ""

    init(arguments: [String], environment: [String: String]) throws {
        var name = [CChar](repeating: 0, count: 128)
        master = cprocess_open_pty(&name, UInt(name.count))
        guard master >= 0 else { throw CLITestError.binaryNotFound(["no pseudo-terminal"]) }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let slave = open(path, O_RDWR | O_NOCTTY)
        var size = winsize(ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(slave, UInt(TIOCSWINSZ), &size)
        process = Process()
        process.executableURL = URL(fileURLWithPath: try agentEvalBinary())
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let handle = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        process.standardInput = handle
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    deinit {
        if process.isRunning { process.terminate() }
        close(master)
    }

    func send(_ keys: String) throws {
        _ = keys.utf8CString.withUnsafeBufferPointer { write(master, $0.baseAddress, keys.utf8.count) }
    }

    /// Reads the terminal until `text` appears after what was seen before; fails after 20 s.
    func waitFor(_ text: String) throws {
        let start = output.endIndex
        let deadline = ContinuousClock.now + .seconds(20)
        while output[start...].range(of: text) == nil {
            guard ContinuousClock.now < deadline else {
                Issue.record("the terminal never showed \"\(text)\"; it showed: \(output.suffix(400))")
                return
            }
            var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 200) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(master, &buffer, buffer.count)
            if count > 0 { output += String(decoding: buffer[0..<count], as: UTF8.self) }
        }
    }

    func waitForExit() throws -> Int32 {
        let deadline = ContinuousClock.now + .seconds(20)
        while process.isRunning && ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 100) > 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = read(master, &buffer, buffer.count)
                if count > 0 { output += String(decoding: buffer[0..<count], as: UTF8.self) }
            }
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        return process.waitForEnd(within: .seconds(10)) ? process.terminationStatus : -1
    }
}
