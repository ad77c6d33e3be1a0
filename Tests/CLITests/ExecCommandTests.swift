import Foundation
import Synchronization
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

@Suite("agent-eval exec", .ownThread)
struct ExecCommandTests {
    @Test("runs the support example: stops for approval (exit 1), resumes with --approve to success (exit 0)")
    func supportRoundTrip() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("support.jsonl.gz")
            let agent = ExampleRuns.agentPath("support")
            let first = try await agentEval(["exec", "--agent", agent, "--input", "Order A-1042 arrived broken.", "--log", log])
            #expect(first.status == 1)
            #expect(first.stdoutText.hasPrefix("stopped: approval_required\n"))
            #expect(first.stdoutText.contains("waiting for approval: call-3 (refund_order"))
            #expect(first.stdoutText.contains("resume: agent-eval exec \(agent) --resume \(log) --approve call-3"))

            // The agent file as the argument, as the hint gives it.
            let second = try await agentEval(["exec", agent, "--resume", log, "--approve", "call-3", "--approver", "maria", "--json"])
            #expect(second.status == 0)
            let summary = try JSONParser.parse(second.stdout)
            #expect(summary["stop_reason"] == "success")
            #expect(summary["steps"] == 3)
            #expect(summary["tool_calls"] == 3)
            #expect(summary["denied_calls"] == 1)
            #expect(summary["log"] == .string(log))
            #expect(summary["awaiting_approval"] == [])
            #expect(summary["answer"]?.stringValue?.contains("rf-9") == true)
            // The real gzip agrees the log is whole.
            #expect(try await Subprocess.run(gzipPath, ["-t", log]).status == 0)
        }
    }

    @Test("the resume command it prints works pasted into a shell, with a space in the log's path")
    func resumeCommandPastes() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("my runs/support run.jsonl.gz")
            try FileManager.default.createDirectory(atPath: directory.path("my runs"), withIntermediateDirectories: true)
            let first = try await agentEval([
                "exec", ExampleRuns.agentPath("support"), "--input", "Order A-1042 arrived broken.", "--log", log,
            ])
            #expect(first.status == 1)
            let line = try #require(first.stdoutText.split(separator: "\n").first { $0.hasPrefix("resume: agent-eval ") })
            let command = ShellWords.quoted(try agentEvalBinary()) + " " + line.dropFirst("resume: agent-eval ".count)
            let resumed = try await Subprocess.run("/bin/sh", ["-c", command], environment: ["AGENT_EVAL_CATALOG": testCatalogPath])
            #expect(resumed.status == 0, "\(command): \(resumed.stderr)")
            #expect(resumed.stdoutText.hasPrefix("stopped: success\n"), "\(resumed.stdoutText)")
        }
    }

    @Test("a new run's log goes to <out>/<agent>-<run-id>.jsonl.gz, and the run id is sortable by time")
    func defaultLogPath() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await agentEval(
                ["exec", "--agent", ExampleRuns.agentPath("research"), "--input", "zstd?", "--out", directory.path("runs"), "--json"])
            #expect(result.status == 1)
            let summary = try JSONParser.parse(result.stdout)
            #expect(summary["stop_reason"] == "budget_exhausted")
            #expect(summary["limit"] == "token_budget")
            let runId = try #require(summary["run_id"]?.stringValue)
            #expect(runId.wholeMatch(of: /run-\d{8}-\d{6}-[0-9a-f]{8}/) != nil)
            #expect(summary["log"] == .string(directory.path("runs/research-agent-\(runId).jsonl.gz")))
            #expect(FileManager.default.fileExists(atPath: directory.path("runs/research-agent-\(runId).jsonl.gz")))
        }
    }

    @Test("--log-version 1 writes every context packet whole, as version 1 lines; 2 links lines with deltas; the default is version 3")
    func logVersion() async throws {
        try await TemporaryDirectory.with { directory in
            var packets: [String: (lines: Int, version2: Int)] = [:]
            var versions: [String: Set<Int>] = [:]
            for (name, extra) in [("default", [String]()), ("v1", ["--log-version", "1"]), ("v2", ["--log-version", "2"])] {
                let log = directory.path("\(name).jsonl.gz")
                let result = try await agentEval(["exec", ExampleRuns.agentPath("research"), "--input", "zstd?", "--log", log] + extra)
                #expect(result.status == 1, "\(result.stderr)")
                var counts = (lines: 0, version2: 0)
                _ = try LogReader(path: log).forEachEvent { recorded in
                    versions[name, default: []].insert(recorded.event.version)
                    guard case .contextBuilt(let packet) = recorded.event.payload else { return }
                    counts.lines += 1
                    if packet.delta != nil { counts.version2 += 1 }
                }
                packets[name] = counts
                #expect(try await Subprocess.run(gzipPath, ["-t", log]).status == 0)
            }
            #expect((packets["default"]?.version2 ?? 0) > 0)
            #expect((packets["v2"]?.version2 ?? 0) > 0)
            #expect(packets["v1"]?.version2 == 0)
            #expect(packets["v1"]?.lines == packets["default"]?.lines)
            #expect(versions == ["default": [3], "v2": [1, 2], "v1": [1]])
            let bad = try await agentEval(["exec", ExampleRuns.agentPath("research"), "--input", "x", "--log-version", "4"])
            #expect(bad.status == 64)
            #expect(bad.stderr.contains("--log-version must be 1, 2 or 3, found 4"))
            let none = try await agentEval(["exec", "--input", "x"])
            #expect(none.status == 64)
            #expect(none.stderr.contains("give the agent file"))
        }
    }

    /// Copies the support example's agent file and model script into `directory`; returns the
    /// original agent file's path.
    func copySupportAgent(into directory: TemporaryDirectory) throws -> String {
        let source = ExampleRuns.agentPath("support")
        let agentDirectory = (source as NSString).deletingLastPathComponent
        for file in try FileManager.default.contentsOfDirectory(atPath: agentDirectory) {
            try FileManager.default.copyItem(atPath: agentDirectory + "/" + file, toPath: directory.path(file))
        }
        return source
    }

    @Test("an agent name or run id with path characters cannot put the log outside --out")
    func safeFileNames() async throws {
        try await TemporaryDirectory.with { directory in
            let source = try copySupportAgent(into: directory)
            let text = try String(contentsOfFile: source, encoding: .utf8)
                .replacingOccurrences(of: "name: support-agent", with: "name: ../../escaped")
            try text.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval([
                "exec", "--agent", directory.path("agent.yaml"), "--input", "hi", "--out", directory.path("runs/deep"), "--run-id",
                "../x y", "--json",
            ])
            let log = try #require(try JSONParser.parse(result.stdout)["log"]?.stringValue)
            #expect(log == directory.path("runs/deep/_.-..-escaped-..-x-y.jsonl.gz"))
            #expect(FileManager.default.fileExists(atPath: log))
            #expect(!FileManager.default.fileExists(atPath: directory.path("escaped-../x y.jsonl.gz")))
        }
    }

    @Test("exec's summary names the first five failed calls and counts the rest, with where to see them all")
    func failedCallsSummary() async throws {
        try await TemporaryDirectory.with { directory in
            _ = try copySupportAgent(into: directory)
            // Six lookups of orders the fixture does not know (the agent allows six calls), each
            // failing, then an answer.
            let calls = (1...6).map { "  - tool_calls: [{name: lookup_order, arguments: {order_id: A-\($0)}}]\n" }.joined()
            try "decisions:\n\(calls)  - answer: none of them exist\n".write(
                toFile: directory.path("support.model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("run.jsonl.gz")
            let result = try await agentEval([
                "exec", "--agent", directory.path("agent.yaml"), "--input", "Where are my orders?", "--log", log,
            ])
            let line = try #require(result.stdoutText.split(separator: "\n").first { $0.hasPrefix("FAILED calls:") })
            #expect(
                line == "FAILED calls: 6 of 6: lookup_order (call-1): order not found; lookup_order (call-2): order not found; "
                    + "lookup_order (call-3): order not found; lookup_order (call-4): order not found; "
                    + "lookup_order (call-5): order not found; … and 1 more (agent-eval replay \(log) shows each)")
        }
    }

    @Test("control characters from a model or a tool never reach the terminal raw: exec, replay and run show them escaped")
    func terminalEscapes() async throws {
        try await TemporaryDirectory.with { directory in
            _ = try copySupportAgent(into: directory)
            let model = try String(contentsOfFile: directory.path("support.model.yaml"), encoding: .utf8)
            let answer =
                "  - answer: >-\n      I have refunded the full 49.99 EUR for order A-1042 (refund rf-9). I can't close your\n"
                + "      account from chat; a colleague will contact you about it.\n"
            #expect(model.contains(answer))
            try model.replacingOccurrences(of: answer, with: "  - answer: \"\\e]0;pwned\\a\\e[2J\\rI have refunded\"\n")
                .write(toFile: directory.path("support.model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("run.jsonl.gz")
            let agent = directory.path("agent.yaml")
            _ = try await agentEval(["exec", "--agent", agent, "--input", "Order A-1042 arrived broken.", "--log", log])
            let resumed = try await agentEval(["exec", "--agent", agent, "--resume", log, "--approve", "call-3"])
            let replay = try await agentEval(["replay", "--plain", log])
            for output in [resumed.stdoutText, replay.stdoutText] {
                #expect(!output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0 == "\r" })
                #expect(output.contains("\\x1b]0;pwned\\x07\\x1b[2J\\x0dI have refunded"), "\(output)")
            }
        }
    }

    @Test("an approved call whose arguments the log keeps redacted is not run from the log on resume: the run stops, saying why")
    func approvedRedactedCallIsNotRun() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            import sys
            open(sys.argv[1], "ab").write(sys.stdin.buffer.readline())
            print('{"ok": true}')
            """.write(toFile: directory.path("tool.py"), atomically: true, encoding: .utf8)
            try """
            name: setter
            model: {script: model.yaml}
            tools:
              - name: set_password
                description: Sets a password.
                side_effect: write
                command: [python3, tool.py, \(directory.path("got.txt"))]
            policy:
              default: allow
              rules:
                - {id: ask, when: {tool: set_password}, verdict: approval_required}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try """
            decisions:
              - tool_calls: [{name: set_password, arguments: {user: bob, password: "N3w-Passw0rd-2024!"}}]
              - answer: done
            """.write(toFile: directory.path("model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("run.jsonl.gz")
            let asked = try await agentEval(["exec", "--agent", directory.path("agent.yaml"), "--input", "go", "--log", log])
            #expect(asked.status == 1, "\(asked.stdoutText)\(asked.stderr)")
            let resumed = try await agentEval(["exec", "--agent", directory.path("agent.yaml"), "--resume", log, "--approve", "call-1"])
            #expect(resumed.status == 1, "\(resumed.stdoutText)\(resumed.stderr)")
            #expect(
                (resumed.stdoutText + resumed.stderr).contains("the log keeps its arguments redacted"),
                "\(resumed.stdoutText)\(resumed.stderr)")
            #expect(
                !FileManager.default.fileExists(atPath: directory.path("got.txt")), "the tool never ran with a placeholder for a password")
            let state = try RecordCommandTests.state(log)
            #expect(state.stop?.reason == .blocked && state.calls.first?.isExecuted == false)
        }
    }

    @Test(
        "calls proposed in one decision are each judged with the ones before it under way: tool_calls_left_below holds as for calls one at a time"
    )
    func parallelCallsCountAgainstWhatIsLeft() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: mailer
            model: {script: model.yaml}
            tools:
              - {name: send_email, description: Sends., side_effect: write, fixture: [{output: {sent: true}}]}
            policy:
              default: allow
              rules:
                - id: keep-the-last-two
                  when: {side_effect: write, tool_calls_left_below: 3}
                  verdict: deny
            limits: {max_tool_calls: 5}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            let calls = (1...5).map { "{name: send_email, arguments: {n: \($0)}}" }.joined(separator: ", ")
            try "decisions:\n  - tool_calls: [\(calls)]\n  - answer: done\n".write(
                toFile: directory.path("model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("run.jsonl.gz")
            _ = try await agentEval(["exec", "--agent", directory.path("agent.yaml"), "--input", "go", "--log", log])
            let state = try RecordCommandTests.state(log)
            #expect(state.calls.map { $0.verdict?.verdict } == [.allow, .allow, .allow, .deny, .deny], "\(state.calls.map(\.verdict))")
            #expect(state.calls.filter(\.isExecuted).count == 3)
            // The audit judges them the same way.
            try
                "policy:\n  default: allow\n  rules:\n    - {id: keep, when: {side_effect: write, tool_calls_left_below: 3}, verdict: deny}\n"
                .write(toFile: directory.path("policy.yaml"), atomically: true, encoding: .utf8)
            let audit = try await agentEval(["audit", "--policy", directory.path("policy.yaml"), "--all", "--json", log])
            let findings = try JSONParser.parse(audit.stdout).arrayValue?.first?["findings"]?.arrayValue ?? []
            #expect(
                findings.compactMap { $0["verdict"]?.stringValue } == ["allow", "allow", "allow", "deny", "deny"], "\(audit.stdoutText)")
        }
    }

    @Test("the run's timeout_ms holds while its tools run: a tool still running is stopped at it, and no retry starts after it")
    func runTimeoutCoversTools() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: slow
            model: {script: model.yaml}
            tools:
              - {name: slow, description: Sleeps., side_effect: read, command: [sh, -c, "sleep 20; echo '{}'"], timeout_ms: 60000}
              - name: flaky
                description: Fails twice.
                side_effect: write
                retry: {max_attempts: 3, backoff_ms: 5000, multiplier: 1}
                fixture: [{fail_attempts: 2, error: "503", output: {done: true}}]
            limits: {timeout_ms: 1500}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            for tool in ["slow", "flaky"] {
                try "decisions:\n  - tool_calls: [{name: \(tool), arguments: {}}]\n  - answer: done\n".write(
                    toFile: directory.path("model.yaml"), atomically: true, encoding: .utf8)
                let log = directory.path("\(tool).jsonl.gz")
                let ran = try await agentEval(["exec", "--agent", directory.path("agent.yaml"), "--input", "go", "--log", log])
                let state = try RecordCommandTests.state(log)
                #expect(state.stop?.limit == .timeout, "\(tool): \(ran.stdoutText)\(ran.stderr)")
                #expect(state.calls.first?.results.count == 1, "\(tool): one attempt, no retry after the time was up")
                // Stopped at the run's deadline, not answered after its own 20 s.
                #expect(state.calls.first?.lastResult?.status == .error, "\(tool)")
            }
        }
    }

    @Test("two processes resuming one run at once: the approved call runs once, one of them is refused, the log stays whole")
    func oneWriterPerLog() async throws {
        let agent = ExampleRuns.agentPath("support")
        try await TemporaryDirectory.with { directory in
            for trial in 0..<6 {
                let log = directory.path("race-\(trial).jsonl.gz")
                #expect(
                    try await agentEval(["exec", "--agent", agent, "--input", "Order A-1042 arrived broken.", "--log", log]).status == 1)
                let resume = ["exec", "--agent", agent, "--resume", log, "--approve", "call-3"]
                async let first = try? agentEval(resume)
                async let second = try? agentEval(resume)
                let statuses = await [first, second].compactMap { $0?.status }.sorted()
                #expect(statuses == [0, 2], "trial \(trial): one resumes, the other cannot (locked, or the run is over)")
                let events = try LogReader(path: log, options: .init(isStrict: true)).readAll().events.map(\.event)
                let intents = events.filter { if case .toolIntended(let intent) = $0.payload { intent.callId == "call-3" } else { false } }
                #expect(intents.count == 1, "trial \(trial): the approved refund ran \(intents.count) times")
                #expect(try LogVerifier.verify(path: log).ending == .complete)
            }
        }
    }

    @Test("repair leaves a log alone while another process writes it, and says which")
    func repairWaitsForTheWriter() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("live.jsonl.gz")
            let writer = try LogWriter.create(at: path, runId: "r")
            try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
            try writer.flush()
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            let repair = try await agentEval(["log", "repair", path])
            #expect(repair.status == 2)
            #expect(repair.stderr.contains("another process (pid \(getpid())) is writing to this log"), "\(repair.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
            try writer.close()
            #expect(try await agentEval(["log", "repair", path]).status == 0)
        }
    }

    @Test(
        "a command tool runs in the agent file's folder with PATH, HOME, LANG and what the agent file declares — not the caller's secrets")
    func toolEnvironment() async throws {
        try await TemporaryDirectory.with { directory in
            let folder = directory.path("agent")
            try FileManager.default.createDirectory(atPath: folder + "/tools", withIntermediateDirectories: true)
            let script = folder + "/tools/where.sh"
            try "#!/bin/sh\nprintf '{\"cwd\":\"%s\",\"env\":\"%s\"}' \"$(pwd)\" \"$(env | cut -d= -f1 | sort | tr '\\n' ' ')\"\n"
                .write(toFile: script, atomically: true, encoding: .utf8)
            #expect(chmod(script, 0o755) == 0)
            try """
            name: env-check
            model: {script: env.model.yaml}
            tools:
              - name: where
                description: Says where it runs.
                side_effect: read
                command: [./tools/where.sh]
                inherit_env: [WANTED_BY_AGENT]
                env: {MODE: test}
            policy: {default: allow}
            limits: {max_steps: 3}
            """.write(toFile: folder + "/agent.yaml", atomically: true, encoding: .utf8)
            try "decisions:\n  - tool_calls: [{name: where, arguments: {}}]\n  - answer: done\n".write(
                toFile: folder + "/env.model.yaml", atomically: true, encoding: .utf8)
            let log = directory.path("env.jsonl.gz")
            let result = try await agentEval(
                ["exec", "--agent", folder + "/agent.yaml", "--input", "where?", "--log", log],
                environment: ["PLANTED_SECRET_TOKEN": "sk-planted", "WANTED_BY_AGENT": "yes"])
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let completed = try LogReader(path: log).readAll().events.compactMap { recorded -> ToolCompleted? in
                if case .toolCompleted(let completed) = recorded.event.payload { completed } else { nil }
            }
            let output = try #require(completed.first?.output)
            #expect(output["cwd"]?.stringValue == URL(fileURLWithPath: folder).resolvingSymlinksInPath().path)
            let names = Set((output["env"]?.stringValue ?? "").split(separator: " ").map(String.init))
            #expect(names.isSuperset(of: ["PATH", "HOME", "MODE", "WANTED_BY_AGENT"]))
            #expect(!names.contains("PLANTED_SECRET_TOKEN"))
        }
    }

    /// An agent whose only tool starts a child, writes both pids to `marker` and hangs.
    func hangingAgent(in directory: TemporaryDirectory) throws -> (agent: String, marker: String) {
        let folder = directory.path("agent")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let marker = directory.path("tool.pid")
        try "#!/bin/sh\nsleep 300 &\necho $! > \(marker).child\necho $$ > \(marker)\nwait\n".write(
            toFile: folder + "/hang.sh", atomically: true, encoding: .utf8)
        #expect(chmod(folder + "/hang.sh", 0o755) == 0)
        try """
        name: hanger
        model: {script: hang.model.yaml}
        tools:
          - {name: hang, description: Hangs., side_effect: read, command: [./hang.sh], timeout_ms: 600000}
        policy: {default: allow}
        limits: {max_steps: 3}
        """.write(toFile: folder + "/agent.yaml", atomically: true, encoding: .utf8)
        try "decisions:\n  - tool_calls: [{name: hang, arguments: {}}]\n  - answer: never\n".write(
            toFile: folder + "/hang.model.yaml", atomically: true, encoding: .utf8)
        return (folder + "/agent.yaml", marker)
    }

    /// Starts `arguments`, waits (bounded) until the hanging tool runs, sends SIGINT, waits
    /// (bounded) for the end; returns the exit status and standard error.
    func interrupt(_ arguments: [String], marker: String, in directory: TemporaryDirectory) async throws -> (Int32, String) {
        try await interruptAgentEval(arguments, in: directory, what: "the tool") { FileManager.default.fileExists(atPath: marker) }
    }

    /// The tool and its child are gone (or zombies waiting for a reaper: dead either way).
    func expectToolGone(_ marker: String) throws {
        for file in [marker, marker + ".child"] {
            let pid = try #require(Int32(try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            let state = stat.split(separator: ")").last?.split(separator: " ").first.map(String.init)
            #expect(kill(pid, 0) != 0 || state == "Z", "process \(pid) is still running (state \(state ?? "?"))")
        }
    }

    /// The log ends complete, with the interruption recorded as the stop and on the tool's result.
    func expectInterruptedLog(_ log: String) throws {
        #expect(try LogVerifier.verify(path: log).ending == .complete)
        let state = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
        #expect(state.stopReason == .blocked)
        #expect(state.stop?.error?.hasPrefix("interrupted") == true)
        #expect(state.calls.first?.lastResult?.error?.contains("interrupted") == true)
    }

    @Test("Ctrl-C during exec: the hanging tool and its children are killed, the stop is recorded, the log is whole, exit 130")
    func interrupted() async throws {
        try await TemporaryDirectory.with { directory in
            let (agent, marker) = try hangingAgent(in: directory)
            let log = directory.path("hang.jsonl.gz")
            let (status, _) = try await interrupt(
                ["exec", "--agent", agent, "--input", "hang", "--log", log], marker: marker, in: directory)
            #expect(status == 130)
            try expectInterruptedLog(log)
            try expectToolGone(marker)
        }
    }

    @Test("Ctrl-C during run: live runs stop with the stop recorded and their logs whole, the report is still written, exit 130")
    func runInterrupted() async throws {
        try await TemporaryDirectory.with { directory in
            let (agent, marker) = try hangingAgent(in: directory)
            try "caseId: hang\nagent: \(agent)\ninput: hang\nexpected: {toolsCalled: [hang]}\n".write(
                toFile: directory.path("hang.yaml"), atomically: true, encoding: .utf8)
            let (status, errors) = try await interrupt(
                ["run", directory.path("hang.yaml"), "--out", directory.path("runs"), "--json-out", directory.path("report.json")],
                marker: marker, in: directory)
            #expect(status == 130)
            #expect(errors.contains("interrupted: live runs were stopped"))
            try expectInterruptedLog(directory.path("runs/hang-1.jsonl.gz"))
            #expect(FileManager.default.fileExists(atPath: directory.path("report.json")))
            try expectToolGone(marker)
        }
    }

    @Test("secrets planted in the environment, tool output, stderr, arguments and model replies reach no file a run writes")
    func noSecretInAnyFile() async throws {
        try await TemporaryDirectory.with { directory in
            let envSecret = "env-secret-5b9c0e7d1a"
            let apiKey = "sk-plantedAPIkey0123456789abcdef"
            let password = "hunter2-correct-horse"
            let bearer = "Bearer eyJhbGciOiJIUzI1NiJ9.planted"
            let folder = directory.path("agent")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try "#!/bin/sh\necho \"token $PLANTED_TOKEN\" >&2\nprintf '{\"seen\":\"%s\",\"key\":\"\(apiKey)\"}' \"$PLANTED_TOKEN\"\n".write(
                toFile: folder + "/leak.sh", atomically: true, encoding: .utf8)
            #expect(chmod(folder + "/leak.sh", 0o755) == 0)
            try """
            name: leaky
            model: {script: leaky.model.yaml}
            tools:
              - {name: leak, description: Leaks., side_effect: read, command: [./leak.sh], inherit_env: [PLANTED_TOKEN]}
            policy: {default: allow}
            limits: {max_steps: 3}
            redact: {env: [PLANTED_TOKEN], members: [password]}
            """.write(toFile: folder + "/agent.yaml", atomically: true, encoding: .utf8)
            try """
            decisions:
              - tool_calls: [{name: leak, arguments: {password: \(password), note: "\(apiKey)"}}]
              - answer: "use \(bearer) and \(envSecret)"
            """.write(toFile: folder + "/leaky.model.yaml", atomically: true, encoding: .utf8)
            try "caseId: leaky\nagent: agent/agent.yaml\ninput: go\nexpected: {toolsCalled: [leak]}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let environment = ["PLANTED_TOKEN": envSecret, "AGENT_EVAL_CATALOG": directory.path("written/catalog.sqlite")]
            let run = try await agentEval(
                [
                    "run", directory.path("case.yaml"), "--out", directory.path("written/runs"), "--json-out",
                    directory.path("written/r.json"),
                    "--junit", directory.path("written/r.xml"), "--markdown", directory.path("written/r.md"),
                ], environment: environment)
            #expect(run.status == 0, "\(run.stdoutText)\(run.stderr)")
            let log = directory.path("written/runs/leaky-1.jsonl.gz")
            let replay = try await agentEval(["replay", log, "--step", "1"], environment: environment)
            #expect(replay.status == 0)
            let printed = run.stdoutText + run.stderr + replay.stdoutText + replay.stderr
            // Every file the run wrote, logs decompressed.
            var written = printed
            let files = FileManager.default.enumerator(atPath: directory.path("written"))?.compactMap { $0 as? String } ?? []
            for file in files {
                let path = directory.path("written/" + file)
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
                let bytes =
                    path.hasSuffix(".gz")
                    ? try await Subprocess.run(gzipPath, ["-dc", path]).stdout : [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                written += String(decoding: bytes, as: UTF8.self)
            }
            #expect(files.contains("catalog.sqlite"), "the catalog, with the step table replay kept, was written")
            for secret in [envSecret, apiKey, password, "eyJhbGciOiJIUzI1NiJ9.planted"] {
                #expect(!written.contains(secret), "\(secret) leaked")
            }
            #expect(written.contains("[redacted:env:PLANTED_TOKEN:"))
            #expect(written.contains("[redacted:api-key:"))
            #expect(written.contains("[redacted:member:password:"))
            #expect(written.contains("[redacted:bearer-token:"))
        }
    }

    @Test(
        "a tool's output kept as stored content — bytes that are not UTF-8 (base64), or too large to keep inline — holds no secret, and is hashed as kept"
    )
    func storedContentRedacted() async throws {
        try await TemporaryDirectory.with { directory in
            let token = "Zq9xW2vB7nM4kL8pQ3rT-planted"
            let apiKey = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX"
            // What `raw` prints, and its hash before redaction: `big` prints that hash too, which
            // stays as printed (no text is rewritten), in a body its own hash still matches.
            let rawHash = ContentHash.sha256([0xFF] + Array(" token=\(token) key=\(apiKey)\n".utf8))
            try """
            name: stored
            model: {script: stored.model.yaml}
            instructions: You may use \(apiKey) for the shop.
            tools:
              - name: raw
                description: prints bytes that are not UTF-8
                side_effect: read
                command: [sh, -c, 'printf "\\377 token=%s key=\(apiKey)\\n" "$SERVICE_TOKEN"']
                inherit_env: [SERVICE_TOKEN]
              - name: big
                description: prints more than is kept inline
                side_effect: read
                command: [sh, -c, 'printf "{\\"token\\":\\"%s\\",\\"seen\\":\\"\(rawHash)\\",\\"rows\\":[1,2,3,4,5,6,7,8,9]}" "$SERVICE_TOKEN"']
                inherit_env: [SERVICE_TOKEN]
            context: {inline_output_bytes: 16}
            redact: {env: [SERVICE_TOKEN]}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try """
            decisions:
              - tool_calls: [{name: raw, arguments: {}}, {name: big, arguments: {}}]
              - answer: done
            """.write(toFile: directory.path("stored.model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("stored.jsonl.gz")
            let ran = try await agentEval(
                ["exec", directory.path("agent.yaml"), "--input", "go", "--log", log, "--no-catalog"], environment: ["SERVICE_TOKEN": token]
            )
            #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
            let events = try LogReader(path: log).readAll().events.map(\.event)
            var stored: [String: [UInt8]] = [:]
            for case .contentStored(let content) in events.map(\.payload) {
                let bytes = try #require(content.bytes)
                stored[content.hash] = bytes
                // Hashed as kept: the hash confirms no guess of a secret, and the content is intact.
                #expect(ContentHash.sha256(bytes) == content.hash)
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(!text.contains(token) && !text.contains(apiKey), "\(text)")
            }
            let raw = try #require(stored.values.first { $0.first == 0xFF }, "the raw output was stored")
            #expect(stored[rawHash] == nil, "the raw output is kept under the hash of what it holds")
            #expect(
                stored.values.contains { String(decoding: $0, as: UTF8.self).contains("\"seen\":\"\(rawHash)\"") },
                "big's output as printed")
            #expect(String(decoding: raw, as: UTF8.self).contains("[redacted:env:SERVICE_TOKEN:"))
            #expect(String(decoding: raw, as: UTF8.self).contains("[redacted:api-key:"))
            // Every reference names a content the log holds: the tools' results and the prompt.
            var references = 0
            for event in events {
                switch event.payload {
                case .toolCompleted(let completed):
                    let hash = try #require(completed.contentHash, "\(completed.tool) was stored")
                    #expect(stored[hash] != nil, "\(completed.tool) names \(hash), which the log does not hold")
                    references += 1
                case .contextBuilt(let packet):
                    if let hash = packet.promptHash {
                        #expect(stored[hash] != nil || packet.delta != nil, "the prompt \(hash) is not held")
                    }
                default: break
                }
            }
            #expect(references == 2)
            let verified = try await agentEval(["log", "verify", log])
            #expect(verified.status == 0, "\(verified.stdoutText)\(verified.stderr)")
            let gunzipped = try await Subprocess.run(gzipPath, ["-dc", log])
            #expect(!String(decoding: gunzipped.stdout, as: UTF8.self).contains(token))
        }
    }

    @Test("a bad agent file: exit 2, the message with file:line:column and a hint, nothing written")
    func badAgentFile() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = directory.path("agent.yaml")
            try "name: x\nmodel: {script: s.yaml}\ntools: []\nlimits: {max_step: 3}\n".write(
                toFile: agent, atomically: true, encoding: .utf8)
            try "decisions: [{answer: hi}]\n".write(toFile: directory.path("s.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["exec", "--agent", agent, "--input", "hi", "--out", directory.path("runs")])
            #expect(result.status == 2)
            #expect(
                result.stderr == """
                    error: limits has no setting "max_step"
                      --> \(agent):4:10
                    hint: did you mean "max_steps"?

                    """)
            #expect(!FileManager.default.fileExists(atPath: directory.path("runs")))
        }
    }

    @Test("instructions holding a key are stored redacted and named by that hash, in the first session and in a resumed one")
    func promptWithKeyAcrossResume() async throws {
        try await TemporaryDirectory.with { directory in
            let instructions = "You may use sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX for the shop."
            try """
            name: keyed
            model: {script: keyed.model.yaml}
            instructions: \(instructions)
            tools:
              - {name: refund, description: Refunds., side_effect: write, input_schema: {type: object}, fixture: [{output: {ok: 1}}]}
            policy: {default: approval_required}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try "decisions:\n  - tool_calls: [{name: refund, arguments: {}}]\n  - answer: done\n".write(
                toFile: directory.path("keyed.model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("keyed.jsonl.gz")
            // The first session under another redaction key: its placeholder, and so its prompt's
            // hash, differ from the resumed session's.
            let first = try await agentEval(
                ["exec", directory.path("agent.yaml"), "--input", "go", "--log", log, "--no-catalog"],
                environment: ["AGENT_EVAL_REDACTION_KEY": "ci-key-1"])
            #expect(first.status == 1, "\(first.stdoutText)\(first.stderr)")
            let resumed = try await agentEval([
                "exec", directory.path("agent.yaml"), "--resume", log, "--approve", "call-1", "--no-catalog",
            ])
            #expect(resumed.status == 0, "\(resumed.stdoutText)\(resumed.stderr)")
            let events = try LogReader(path: log, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
            let stored = Set(
                events.compactMap { event -> String? in
                    if case .contentStored(let content) = event.payload { return content.hash }
                    return nil
                })
            let named = events.compactMap { event -> String? in
                if case .contextBuilt(let packet) = event.payload { return packet.promptHash }
                return nil
            }
            #expect(named.count >= 2, "a packet in each session")
            #expect(named.allSatisfy(stored.contains), "\(named) \(stored)")
            #expect(!named.contains(ContentHash.sha256(Array(instructions.utf8))), "the hash of the key's text is in the log")
            #expect(try await agentEval(["log", "verify", log]).status == 0)
        }
    }

    @Test("a tool's command line that gives a secret to an option (--password VALUE), echoed by the tool, reaches no file the run writes")
    func commandLineSecret() async throws {
        try await TemporaryDirectory.with { directory in
            let secret = "hunter4secretXYZ"
            try """
            name: echoes
            model: {script: echoes.model.yaml}
            tools:
              - name: sync
                description: Syncs.
                side_effect: read
                command: [sh, -c, 'echo "failed: $0 $1 $2" >&2; echo "{\\"args\\": \\"$1 $2\\"}"; exit 4', --password, \(secret)]
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try "decisions:\n  - tool_calls: [{name: sync, arguments: {}}]\n  - answer: done\n".write(
                toFile: directory.path("echoes.model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("echoes.jsonl.gz")
            let ran = try await agentEval(["exec", directory.path("agent.yaml"), "--input", "go", "--log", log, "--no-catalog"])
            #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
            let written = String(decoding: try await Subprocess.run(gzipPath, ["-dc", log]).stdout, as: UTF8.self)
            #expect(!written.contains(secret) && !ran.stdoutText.contains(secret) && !ran.stderr.contains(secret))
            #expect(written.contains("[redacted:argument:"), "\(written)")
        }
    }

    @Test(
        "after a refused call of a tool, approved: no longer holds: the refused refund proposed again with another amount waits for a person"
    )
    func refusalEndsApproval() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: refunds
            model: {script: refunds.model.yaml}
            tools:
              - {name: refund, description: Refunds., side_effect: write, input_schema: {type: object}, fixture: [{output: {ok: 1}}]}
            policy:
              default: deny
              rules:
                - {id: ask, when: {tool: refund, approved: false}, verdict: approval_required}
                - {id: after, when: {tool: refund}, verdict: allow}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try """
            decisions:
              - tool_calls: [{name: refund, arguments: {amount: 1}}, {name: refund, arguments: {amount: 999}}]
              - tool_calls: [{name: refund, arguments: {amount: 998}}]
              - answer: done
            """.write(toFile: directory.path("refunds.model.yaml"), atomically: true, encoding: .utf8)
            let log = directory.path("refunds.jsonl.gz")
            let first = try await agentEval(["exec", directory.path("agent.yaml"), "--input", "go", "--log", log, "--no-catalog"])
            #expect(first.status == 1, "\(first.stdoutText)\(first.stderr)")
            let resumed = try await agentEval(
                ["exec", directory.path("agent.yaml"), "--resume", log, "--approve", "call-1", "--deny", "call-2", "--no-catalog"])
            #expect(resumed.status == 1, "\(resumed.stdoutText)\(resumed.stderr)")
            #expect(resumed.stdoutText.contains("waiting for approval: call-3"), "\(resumed.stdoutText)")
            let events = try LogReader(path: log).readAll().events.map(\.event)
            let third = events.compactMap { event -> String? in
                if case .verdictGiven(let verdict) = event.payload, verdict.callId == "call-3" {
                    return "\(verdict.verdict.rawValue) \(verdict.rule ?? "")"
                }
                if case .toolCompleted(let completed) = event.payload, completed.callId == "call-3" { return "ran" }
                return nil
            }
            #expect(third == ["approval_required ask"])
        }
    }

    @Test(
        "a run its model's invalid replies stopped (on_invalid_decision) is cut short: a case forbidding a tool fails, one expecting the stop passes"
    )
    func invalidDecisionsCutShort() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: garbled
            model: {script: garbled.model.yaml}
            tools:
              - {name: lookup, description: Looks up., side_effect: read, input_schema: {type: object}, fixture: [{output: {ok: 1}}]}
              - {name: refund, description: Refunds., side_effect: write, input_schema: {type: object}, fixture: [{output: {ok: 1}}]}
            on_invalid_decision: {retries: 0}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try """
            decisions:
              - tool_calls: [{name: lookup, arguments: {}}]
              - raw: "garbage, not a decision {"
              - tool_calls: [{name: refund, arguments: {}}]
              - answer: done
            """.write(toFile: directory.path("garbled.model.yaml"), atomically: true, encoding: .utf8)
            for (expected, status) in [
                ("{toolsNotCalled: [refund]}", Int32(1)), ("{toolsNotCalled: [refund], stopReason: invalid_decision}", 0),
            ] {
                try "caseId: never-refunds\nagent: agent.yaml\ninput: go\nexpected: \(expected)\n".write(
                    toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
                let result = try await agentEval(["run", directory.path("case.yaml"), "--no-catalog", "--out", directory.path("runs")])
                #expect(result.status == status, "\(expected): \(result.stdoutText)\(result.stderr)")
                if status == 1 { #expect(result.stdoutText.contains("no valid decision (on_invalid_decision)"), "\(result.stdoutText)") }
                try? FileManager.default.removeItem(atPath: directory.path("runs"))
            }
        }
    }

    @Test("the largest numbers a file may hold are limits or errors at their line, never an arithmetic trap: check, exec and run")
    func hugeNumbers() async throws {
        try await TemporaryDirectory.with { directory in
            let huge = "9223372036854776"  // times 1000 overflows Int
            try "decisions: [{answer: hi, latency_ms: \(huge)}]\n".write(
                toFile: directory.path("slow.yaml"), atomically: true, encoding: .utf8)
            let checked = try await agentEval(["check", directory.path("slow.yaml")])
            #expect(checked.status == 2, "\(checked.stdoutText)\(checked.stderr)")
            #expect(checked.stderr.contains("slow.yaml:1:"), "\(checked.stderr)")
            #expect(checked.stderr.contains("latency_ms must be between 0 and 86400000"), "\(checked.stderr)")

            try "decisions: [{answer: hi}]\n".write(toFile: directory.path("s.yaml"), atomically: true, encoding: .utf8)
            let agent = directory.path("agent.yaml")
            try """
            name: x
            model: {script: s.yaml}
            tools: []
            limits: {timeout_ms: 9223372036854775807, token_budget: 9223372036854775807}
            context: {token_budget: 9223372036854775807}

            """.write(toFile: agent, atomically: true, encoding: .utf8)
            let ran = try await agentEval(["exec", agent, "--input", "hi", "--log", directory.path("x.jsonl.gz"), "--no-catalog"])
            #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
            try """
            caseId: long
            logs: x.jsonl.gz
            expected: {maxDurationMs: 9223372036854775807, stopReason: success}

            """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let cases = try await agentEval(["run", directory.path("case.yaml"), "--no-catalog"])
            #expect(cases.status == 0, "\(cases.stdoutText)\(cases.stderr)")
        }
    }

    @Test("a tool whose interpreter's script is not there is an error of the agent file at its line: check says so, exec does not start")
    func missingToolScript() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: x
            model: {script: s.yaml}
            tools:
              - name: lookup
                description: Looks up.
                side_effect: read
                command: [python3, tools/lookup.py]
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try "decisions: [{answer: hi}]\n".write(toFile: directory.path("s.yaml"), atomically: true, encoding: .utf8)
            let checked = try await agentEval(["check", directory.path("agent.yaml")])
            #expect(checked.status == 2)
            #expect(checked.stderr.contains("the script tools/lookup.py is not there"), "\(checked.stderr)")
            #expect(checked.stderr.contains("agent.yaml:7:"), "\(checked.stderr)")
            let ran = try await agentEval(["exec", directory.path("agent.yaml"), "--input", "hi", "--out", directory.path("runs")])
            #expect(ran.status == 2)
            #expect(!FileManager.default.fileExists(atPath: directory.path("runs")))
            // There, it runs.
            try FileManager.default.createDirectory(atPath: directory.path("tools"), withIntermediateDirectories: true)
            try "print('{}')\n".write(toFile: directory.path("tools/lookup.py"), atomically: true, encoding: .utf8)
            #expect(try await agentEval(["check", directory.path("agent.yaml")]).status == 0)
        }
    }

    @Test("a policy rule's argument its tool does not take is an error at its line: a misspelt key made a deny rule that never fires")
    func undeclaredRuleArgument() async throws {
        try await TemporaryDirectory.with { directory in
            func agent(_ key: String, closed: Bool) -> String {
                """
                name: x
                model: {script: s.yaml}
                tools:
                  - name: refund_order
                    description: Refunds.
                    side_effect: write
                    input_schema: {type: object, properties: {order_id: {type: string}, amount_cents: {type: integer}}\(closed ? ", additionalProperties: false" : "")}
                    fixture: [{output: {ok: 1}}]
                policy:
                  default: allow
                  rules:
                    - {id: large-refunds, when: {tool: refund_order, arguments: {\(key): {min: 50001}}}, verdict: deny}
                """
            }
            try "decisions: [{answer: hi}]\n".write(toFile: directory.path("s.yaml"), atomically: true, encoding: .utf8)
            for (key, closed, status) in [
                ("amount_cent", true, Int32(2)), ("amount_cent", false, 2), ("amount_cents", true, 0), ("currency", false, 0),
                ("currency", true, 2),
            ] {
                try agent(key, closed: closed).write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
                let checked = try await agentEval(["check", directory.path("agent.yaml")])
                #expect(checked.status == status, "\(key), closed \(closed): \(checked.stderr)")
                if status == 2 {
                    #expect(checked.stderr.contains("\(key) is not an argument refund_order takes"), "\(checked.stderr)")
                    #expect(checked.stderr.contains("agent.yaml:12:"), "\(checked.stderr)")
                }
            }
        }
    }

    @Test("usage errors exit 64 with a clear message")
    func usage() async throws {
        let agent = ExampleRuns.agentPath("support")
        let neither = try await agentEval(["exec", "--agent", agent])
        #expect(neither.status == 64)
        #expect(neither.stderr.contains("give --input for a new run, or --resume with a stopped run's log"))
        let approveAlone = try await agentEval(["exec", "--agent", agent, "--input", "x", "--approve", "call-1"])
        #expect(approveAlone.status == 64)
    }

    @Test("resuming a run that did not stop for approval exits 2 and says why")
    func resumeFinishedRun() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("r.jsonl.gz")
            _ = try await agentEval(["exec", "--agent", ExampleRuns.agentPath("research"), "--input", "q", "--log", log])
            let result = try await agentEval(["exec", "--agent", ExampleRuns.agentPath("research"), "--resume", log, "--approve", "call-1"])
            #expect(result.status == 2)
            #expect(
                result.stderr.hasPrefix(
                    "error: the run stopped with budget_exhausted; only a run stopped for approval can be resumed\n  --> \(log)"))
        }
    }
}
