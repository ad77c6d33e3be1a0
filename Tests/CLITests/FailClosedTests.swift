import Foundation
import Recording
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// The five paths that turned a real regression, a dead model or an unsafe write into a green
/// check, each as the user met it (issue "Fail closed"); the matrix in `EvidenceMatrixTests`
/// covers every fault in every kind of run, these check what each path says and leaves behind.
@Suite("fail closed: a green verdict needs evidence", .tags(.python), .needsPython, .ownThread)
struct FailClosedTests {
    /// A live case over an agent whose HTTP model is the local server's `scenario`; the case only
    /// forbids a tool, the check a dead or cut-off run would pass.
    static func liveCase(in directory: TemporaryDirectory, baseURL: String) throws {
        try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
        try EvidenceMatrixTests.agentFile(baseURL: baseURL).write(
            toFile: directory.path("cases/agent.yaml"), atomically: true, encoding: .utf8)
        try "caseId: never-refunds\nagent: agent.yaml\ninput: Where is order A-1042?\nexpected: {toolsNotCalled: [refund_order]}\n"
            .write(toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
    }

    @Test("Ctrl-C during --update-baseline leaves the baseline as it was, and the JSON report says 130 like the process")
    func cancelledBaselineUpdate() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            try Self.liveCase(in: directory, baseURL: server.baseURL("agent"))
            let first = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/1", "--update-baseline"], in: directory.url)
            #expect(first.status == 0, "\(first.stdoutText)\(first.stderr)")
            let file = directory.path("cases/.baseline/never-refunds.json")
            let before = try String(contentsOfFile: file, encoding: .utf8)

            // The model now hangs: the run is cut off by Ctrl-C, and says nothing of the agent.
            try Self.liveCase(in: directory, baseURL: server.baseURL("hang"))
            let (status, errors) = try await interruptAgentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/2", "--update-baseline", "--json-out", "report.json"], in: directory,
                what: "the live run", signal: SIGINT
            ) {
                ((try? server.requests()) ?? []).contains { ($0["path"] as? String)?.hasPrefix("/hang/") == true }
            }
            #expect(status == 130, "\(errors)")
            #expect(errors.contains("baseline not written: the run was interrupted"), "\(errors)")
            #expect(try String(contentsOfFile: file, encoding: .utf8) == before, "the baseline is as it was")
            let report = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: directory.path("report.json")))))
            #expect(report["verdict"]?["exit_status"] == 130)
            #expect(report["verdict"]?["interrupted_by"] == "SIGINT")
            #expect(
                report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["diagnostic"]?["code"] == "eval.interrupted", "\(report)")
        }
    }

    @Test("a report file that cannot be written ends the run with exit 2, and the ones written before it are removed: none says it passed")
    func reportsAllOrNone() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            try "caseId: passes\nlogs: \(log)\nexpected: {stopReason: success}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            try "a file, not a folder".write(toFile: directory.path("blocker"), atomically: true, encoding: .utf8)
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--json-out", "reports/ok.json", "--junit", "blocker/junit.xml"], in: directory.url)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("reports/ok.json")), "a report that says PASS was left behind")
            #expect(result.stderr.contains("the report files written before it were removed: reports/ok.json"), "\(result.stderr)")
        }
    }

    @Test("a dead model is not a pass: down, 500 or garbage, the case could not run and says the model did not answer")
    func deadModel() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            for (index, base) in ["http://127.0.0.1:9/v1", server.baseURL("always-busy"), server.baseURL("html")].enumerated() {
                try Self.liveCase(in: directory, baseURL: base)
                let result = try await agentEval(["run", "cases", "--no-catalog", "--out", "runs/\(index)", "--json"], in: directory.url)
                #expect(result.status == 2, "\(base): \(result.stdoutText)\(result.stderr)")
                let report = try JSONParser.parse(result.stdout)
                #expect(
                    report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["diagnostic"]?["code"] == "eval.model_failed",
                    "\(base): \(report)")
                #expect(
                    report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["error"]?.stringValue?.contains(
                        "the agent's model did not answer") == true)
            }
        }
    }

    @Test("the baseline is found from a case file or a subfolder; --fail-on regression without one is an error unless allowed")
    func baselineFromAnyPath() async throws {
        try await TemporaryDirectory.with { directory in
            // A project: its root has .git; the cases' baseline is in cases/.baseline.
            try FileManager.default.createDirectory(atPath: directory.path(".git"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory.path("cases/support"), withIntermediateDirectories: true)
            let log = fixture("support-sample.jsonl.gz")
            try "caseId: no-deletes\nlogs: \(log)\nexpected: {toolsNotCalled: [delete_customer]}\n".write(
                toFile: directory.path("cases/support/case.yaml"), atomically: true, encoding: .utf8)
            let write = try await agentEval(["run", "cases", "--no-catalog", "--update-baseline"], in: directory.url)
            #expect(write.status == 0, "\(write.stdoutText)\(write.stderr)")
            #expect(FileManager.default.fileExists(atPath: directory.path("cases/.baseline/no-deletes.json")))

            for path in ["cases/support/case.yaml", "cases/support", "cases"] {
                let gated = try await agentEval(["run", path, "--no-catalog", "--fail-on", "regression"], in: directory.url)
                #expect(gated.status == 0, "\(path): \(gated.stdoutText)\(gated.stderr)")
                #expect(gated.stdoutText.contains("0 regressed"), "\(path) compares with the baseline: \(gated.stdoutText)")
                if path != "cases" { #expect(gated.stderr.contains("baseline: cases/.baseline"), "\(path): \(gated.stderr)") }
            }

            try FileManager.default.removeItem(atPath: directory.path("cases/.baseline"))
            let none = try await agentEval(
                ["run", "cases/support/case.yaml", "--no-catalog", "--fail-on", "regression"], in: directory.url)
            #expect(none.status == 2, "\(none.stdoutText)\(none.stderr)")
            #expect(none.stderr.contains("--fail-on regression needs a baseline"), "\(none.stderr)")
            #expect(none.stderr.contains("--allow-no-baseline"), "\(none.stderr)")
            let allowed = try await agentEval(
                ["run", "cases/support/case.yaml", "--no-catalog", "--fail-on", "regression", "--allow-no-baseline"], in: directory.url)
            #expect(allowed.status == 0, "\(allowed.stdoutText)\(allowed.stderr)")
            #expect(allowed.stderr.contains("baseline: none found"), "\(allowed.stderr)")
            let usage = try await agentEval(["run", "cases", "--no-catalog", "--allow-no-baseline"], in: directory.url)
            #expect(usage.status == 64, "--allow-no-baseline goes with --fail-on regression: \(usage.stderr)")
        }
    }

    @Test("a misspelt tool in a policy file: mcp-proxy refuses every call once the tools are listed; audit and check say where")
    func misspeltPolicy() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try """
        policy:
          default: allow
          rules:
            - id: large-refunds
              when:
                tool: refund_ordr
                arguments: {amount: {min: 10001}}
              verdict: approval_required
        side_effects:
          add_nte: draft
        """.write(toFile: directory.path("typo.policy.yaml"), atomically: true, encoding: .utf8)
        let log = directory.path("session.jsonl.gz")
        let plan: JSONValue = ["calls": [["tool": "refund_order", "arguments": ["order_id": "A-1", "amount": 89900]]]]
        let (lines, result) = try await MCPProxyCommandTests.run(
            try await MCPProxyCommandTests.client(
                plan, proxy: ["--log", log, "--policy", "typo.policy.yaml"], server: try await MCPProxyCommandTests.shop(directory)),
            in: directory)
        #expect(lines.dropFirst().map { $0["is_error"] } == [true], "\(result.stdoutText)\(result.stderr)")
        #expect(lines.last?["text"]?.stringValue?.contains("refused this call") == true, "\(result.stdoutText)")
        #expect(MCPProxyCommandTests.journal(directory).isEmpty, "the refund never reached the server")
        #expect(result.stderr.contains("typo.policy.yaml:6"), "the rule's line: \(result.stderr)")
        #expect(result.stderr.contains("did you mean \"refund_order\"?"), "\(result.stderr)")
        #expect(result.stderr.contains("side_effects \"add_nte\" matches none"), "\(result.stderr)")
        let stop = try #require(
            MCPProxyCommandTests.events(log).compactMap { event -> RunStopped? in
                if case .runStopped(let stop) = event.payload { return stop }
                return nil
            }.last)
        #expect(stop.reason == .blocked && stop.error?.contains("has 2 entries that would never apply to the server") == true, "\(stop)")

        // The same file over a recorded run: audit cannot vouch for anything it judged.
        let audit = try await agentEval(["audit", "--policy", directory.path("typo.policy.yaml"), fixture("support-sample.jsonl.gz")])
        #expect(audit.status == 2, "\(audit.stdoutText)\(audit.stderr)")
        #expect(audit.stderr.contains("names the tool \"refund_ordr\""), "\(audit.stderr)")
        // A file of input_requests: alone has no rules to judge by: audit refuses it rather than
        // pass every call (mcp-proxy takes it: the questions are what it judges there).
        try "input_requests:\n  sampling: deny\n".write(toFile: directory.path("questions.yaml"), atomically: true, encoding: .utf8)
        let noRules = try await agentEval(["audit", "--policy", directory.path("questions.yaml"), fixture("support-sample.jsonl.gz")])
        #expect(noRules.status == 2, "\(noRules.stdoutText)\(noRules.stderr)")
        #expect(noRules.stderr.contains("questions.yaml:1") && noRules.stderr.contains("no policy: block"), "\(noRules.stderr)")
        // check reads policy files like the other files it knows.
        let check = try await agentEval(["check", directory.path("typo.policy.yaml")])
        #expect(check.status == 0, "a policy file alone cannot know its tools: \(check.stdoutText)\(check.stderr)")
        #expect(check.stdoutText.contains("policy"), "\(check.stdoutText)")
        try "policy:\n  default: maybe\n".write(toFile: directory.path("broken.policy.yaml"), atomically: true, encoding: .utf8)
        let broken = try await agentEval(["check", directory.path("broken.policy.yaml")])
        #expect(broken.status == 2 && broken.stderr.contains("broken.policy.yaml:2"), "\(broken.stdoutText)\(broken.stderr)")
    }

    @Test("a run recorded through the gateway labels its tools write, not read: a rule on writes judges the refund")
    func recordedToolsAreWrites() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let log = directory.path("refund.jsonl.gz")
            let recorded = try await agentEval(
                ["record", "--no-catalog", "--log", log] + RecordCommandTests.upstreams(server, "refund")
                    + [
                        "--", try await RecordCommandTests.python(), RecordCommandTests.agent, "--api", "chat",
                        "Order A-1042 arrived broken.",
                    ],
                environment: ["OPENAI_API_KEY": RecordCommandTests.key])
            #expect(recorded.status == 0, "\(recorded.stderr)")
            let events = try MCPProxyCommandTests.events(log)
            guard case .runStarted(let started)? = events.first?.payload else {
                Issue.record("no run_started")
                return
            }
            #expect(started.tools.map(\.name) == ["lookup_order", "refund_order"])
            #expect(started.tools.allSatisfy { $0.sideEffect == .write }, "\(started.tools.map(\.sideEffect))")
            try
                "policy:\n  default: allow\n  rules:\n    - id: writes\n      when: {side_effect: write}\n      verdict: approval_required\n"
                .write(toFile: directory.path("writes.yaml"), atomically: true, encoding: .utf8)
            let audit = try await agentEval(["audit", "--policy", directory.path("writes.yaml"), log])
            #expect(audit.status == 1, "the refund ran without the approval a write needs: \(audit.stdoutText)\(audit.stderr)")
        }
    }

    @Test("a command case takes env: and name: (no `env VAR=…` prefix), and a command's name skips env assignments")
    func commandEnvironment() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: RecordCommandTests.agent, toPath: directory.path("cases/refund_agent.py"))
            let python = try await RecordCommandTests.python()
            try """
            caseId: refund-env
            command: ["\(python)", refund_agent.py, --api, chat, "{input}"]
            name: refund-bot
            env: {OPENAI_API_KEY: \(RecordCommandTests.key), AGENT_MODE: 3}
            input: Order A-1042 arrived broken.
            upstream: {openai: "\(server.baseURL("refund"))"}
            expected: {toolsCalled: [lookup_order, refund_order], stopReason: success}
            """.write(toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
            // No key in agent-eval's own environment: the case gives it.
            let result = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs"], in: directory.url, environment: ["OPENAI_API_KEY": ""])
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let events = try MCPProxyCommandTests.events(directory.path("runs/refund-env-1.jsonl.gz"))
            guard case .runStarted(let started)? = events.first?.payload else {
                Issue.record("no run_started")
                return
            }
            #expect(started.agent.name == "refund-bot")
            let text = try await Subprocess.run(gzipPath, ["-dc", directory.path("runs/refund-env-1.jsonl.gz")]).stdoutText
            #expect(!text.contains(RecordCommandTests.key), "the key given in env: is kept out of the log")

            try "caseId: bad-env\ncommand: [python3]\nenv: {1BAD: x}\nexpected: {stopReason: success}\n".write(
                toFile: directory.path("bad.yaml"), atomically: true, encoding: .utf8)
            let bad = try await agentEval(["check", "bad.yaml"], in: directory.url)
            #expect(bad.status == 2 && bad.stderr.contains("bad.yaml:3") && bad.stderr.contains("is not a variable name"), "\(bad.stderr)")
        }
    }

    @Test("a misspelt cassette in a command case is named at its cassette: line, not blamed on command:")
    func misspeltCassette() async throws {
        try await TemporaryDirectory.with { directory in
            try
                "caseId: typo\ncommand: [python3, -c, \"print(1)\"]\ninput: hi\ncassette: ../cassetes/refund\nexpected: {stopReason: success}\n"
                .write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", "case.yaml", "--no-catalog", "--out", "runs"], in: directory.url)
            #expect(result.status == 2, "\(result.stdoutText)")
            #expect(result.stdoutText.contains("case.yaml:4:11"), "\(result.stdoutText)")
            #expect(
                result.stdoutText.contains("does not exist") && !result.stdoutText.contains("check the program"), "\(result.stdoutText)")
        }
    }

    @Test(
        "--record new keeps only whole answers: a stream cut short before its end marker is retried live, and the cassette replays the whole one"
    )
    func cutStreamNotRecorded() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
            try EvidenceMatrixTests.agentFile(baseURL: server.baseURL("cut-clean"))
                .replacingOccurrences(of: "max_retries: 0", with: "max_retries: 2")
                .write(toFile: directory.path("cases/agent.yaml"), atomically: true, encoding: .utf8)
            try
                "caseId: whole\nagent: agent.yaml\ninput: Where is order A-1042?\ncassette: ../cassettes/w\nexpected: {stopReason: success}\n"
                .write(toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
            let environment = ["OPENAI_API_KEY": RecordCommandTests.key]
            let first = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/1", "--record", "new"], in: directory.url, environment: environment)
            #expect(first.status == 0, "the retry reached the model: \(first.stdoutText)\(first.stderr)")
            #expect(try server.requests().count == 2, "the cut answer, then the whole one")
            server.stop()
            let second = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/2"], in: directory.url, environment: environment)
            #expect(second.status == 0, "the cassette holds the whole answer: \(second.stdoutText)\(second.stderr)")
        }
    }

    @Test("--record new says which recordings of a cassette the run no longer used")
    func staleRecordings() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            try Self.liveCase(in: directory, baseURL: server.baseURL("agent"))
            let casePath = directory.path("cases/case.yaml")
            try (try String(contentsOfFile: casePath, encoding: .utf8) + "cassette: ../cassettes/c\n").write(
                toFile: casePath, atomically: true, encoding: .utf8)
            let first = try await agentEval(["run", "cases", "--no-catalog", "--out", "runs/1", "--record", "new"], in: directory.url)
            #expect(first.status == 0, "\(first.stdoutText)\(first.stderr)")
            #expect(!first.stderr.contains("did not use"), "\(first.stderr)")
            // Another question: the first recordings are no longer asked for.
            try (try String(contentsOfFile: casePath, encoding: .utf8)).replacingOccurrences(of: "Where is order", with: "What about order")
                .write(toFile: casePath, atomically: true, encoding: .utf8)
            let second = try await agentEval(["run", "cases", "--no-catalog", "--out", "runs/2", "--record", "new"], in: directory.url)
            #expect(second.status == 0, "\(second.stdoutText)\(second.stderr)")
            #expect(second.stderr.contains("holds 2 recordings this run did not use"), "\(second.stderr)")
        }
    }

    @Test("a number given as a string cannot walk around a numeric rule: mcp-proxy holds \"50000\" as it holds 50000")
    func numericConditionAsString() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try """
        policy:
          default: allow
          rules:
            - id: large-refunds
              when:
                tool: refund_order
                arguments: {amount: {min: 10001}}
              verdict: deny
              reason: refunds over 100.00 need a person
        """.write(toFile: directory.path("refunds.policy.yaml"), atomically: true, encoding: .utf8)
        let calls: [JSONValue] = [
            ["tool": "refund_order", "arguments": ["order_id": "A-1", "amount": "50000"]],
            ["tool": "refund_order", "arguments": ["order_id": "A-2", "amount": "a lot"]],
            ["tool": "refund_order", "arguments": ["order_id": "A-3", "amount": 500]],
        ]
        let (lines, result) = try await MCPProxyCommandTests.run(
            try await MCPProxyCommandTests.client(
                ["calls": .array(calls)], proxy: ["--log", directory.path("s.jsonl.gz"), "--policy", "refunds.policy.yaml"],
                server: try await MCPProxyCommandTests.shop(directory)),
            in: directory)
        #expect(lines.dropFirst().map { $0["is_error"] } == [true, true, false], "\(result.stdoutText)\(result.stderr)")
        #expect(lines[2]["text"]?.stringValue?.contains("applied because argument amount is \"a lot\"") == true, "\(lines)")
        #expect(MCPProxyCommandTests.journal(directory) == ["refund A-3 500"], "only the small refund reached the server")
    }

    @Test("SIGHUP (a closed terminal) stops record like SIGTERM: the stop is recorded and the log is whole")
    func hangUp() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let log = directory.path("hup.jsonl.gz")
            let (status, errors) = try await interruptAgentEval(
                ["record", "--no-catalog", "--log", log] + RecordCommandTests.upstreams(server, "hang")
                    + [
                        "--", "/usr/bin/env", "OPENAI_API_KEY=\(RecordCommandTests.key)", try await RecordCommandTests.python(),
                        RecordCommandTests.agent, "--api", "chat", "--stream", "Hello.",
                    ], in: directory, what: "the recording", signal: SIGHUP
            ) {
                ((try? server.requests()) ?? []).contains { ($0["path"] as? String)?.hasPrefix("/hang/") == true }
            }
            #expect(status == 129, "\(errors)")
            #expect(try await Subprocess.run(gzipPath, ["-t", log]).status == 0, "the log is whole")
            let stop = try MCPProxyCommandTests.events(log).compactMap { event -> RunStopped? in
                if case .runStopped(let stop) = event.payload { return stop }
                return nil
            }
            #expect(stop.count == 1 && stop.first?.isInterruption == true, "\(stop)")
        }
    }

    @Test("record prints the final answer as the log holds it: a key-shaped value the user typed is redacted in text and --json")
    func recordedAnswerRedacted() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let secret = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX123456"
            for (index, json) in [false, true].enumerated() {
                let log = directory.path("echo-\(index).jsonl.gz")
                let result = try await agentEval(
                    ["record", "--no-catalog", "--log", log] + (json ? ["--json"] : []) + RecordCommandTests.upstreams(server, "echo")
                        + [
                            "--", try await RecordCommandTests.python(), RecordCommandTests.agent, "--api", "chat", "--stream",
                            "my key is \(secret), keep it",
                        ], environment: ["OPENAI_API_KEY": RecordCommandTests.key])
                #expect(result.status == 0, "\(result.stderr)")
                // What agent-eval prints of the run (the agent's own output passes through as it wrote it).
                let printed =
                    json
                    ? (try JSONParser.parse(result.stdout))["answer"]?.stringValue ?? ""
                    : (result.stdoutText + result.stderr).split(separator: "\n").filter { $0.hasPrefix("answer: ") }.joined()
                #expect(printed.contains("You said: my key is [redacted:api-key:"), "\(result.stdoutText)\(result.stderr)")
                #expect(!printed.contains(secret), "printed: \(printed)")
                let text = try await Subprocess.run(gzipPath, ["-dc", log]).stdoutText
                #expect(!text.contains(secret), "the log holds it redacted too")
            }
        }
    }

    @Test("a recorded tool name with a newline cannot inject a CI workflow command into replay, log cat, diff, audit or run")
    func workflowCommandInjection() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("hostile.jsonl.gz")
            let writer = try LogWriter.create(at: log, runId: "run-hostile", options: LogWriter.Options())
            let clock = SteppingClock()
            let recorder = RunRecorder(writer: writer, clock: { clock.now() })
            let name = "lookup\n::stop-commands::pwned"
            var start = SampleRun.supportStart()
            start.tools = [ToolSpec(name: name, description: "", inputSchema: ["type": "object"], sideEffect: .read)]
            try recorder.record(.runStarted(start))
            try recorder.endStep()
            let call = ToolCall(id: "c1", name: name, arguments: [:])
            try recorder.record(.decisionMade(DecisionMade(raw: "x", outcome: .valid(.toolCalls([call])))))
            try recorder.record(.verdictGiven(VerdictGiven(callId: "c1", tool: name, verdict: .allow)))
            try recorder.record(.toolIntended(ToolIntended(callId: "c1", tool: name, arguments: [:], attempt: 1)))
            try recorder.record(.toolCompleted(ToolCompleted(callId: "c1", tool: name, attempt: 1, status: .ok, durationUs: 1)))
            try recorder.endStep()
            try recorder.record(.decisionMade(DecisionMade(raw: "y", outcome: .valid(.answer("done")))))
            try recorder.endStep()
            try recorder.record(.runStopped(RunStopped(reason: .success, answer: "done")))
            try writer.close()
            try "policy: {default: allow}\n".write(toFile: directory.path("allow.yaml"), atomically: true, encoding: .utf8)
            try "caseId: h\nlogs: hostile.jsonl.gz\nexpected: {toolsCalled: [nothing]}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            for command in [
                ["replay", "--plain", log], ["log", "cat", log], ["diff", log, fixture("support-sample.jsonl.gz")],
                ["audit", "--all", "--policy", "allow.yaml", log], ["run", "case.yaml", "--no-catalog"],
            ] {
                let result = try await agentEval(command, in: directory.url)
                let lines = (result.stdoutText + result.stderr).split(separator: "\n", omittingEmptySubsequences: false)
                #expect(!lines.contains { $0.hasPrefix("::") }, "\(command): \(result.stdoutText)\(result.stderr)")
            }
        }
    }

    @Test(
        "a call a live command case's proxy asks about is approved with approve on run's own log, and no runs/ is left in the case's folder"
    )
    func approvalInsideLiveCase() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let cases = directory.path("cases")
            try FileManager.default.createDirectory(atPath: cases, withIntermediateDirectories: true)
            try
                "policy:\n  default: allow\n  rules:\n    - id: refunds-need-a-person\n      when: {tool: refund_order}\n      verdict: approval_required\n"
                .write(toFile: cases + "/ask.policy.yaml", atomically: true, encoding: .utf8)
            let python = try await RecordCommandTests.python()
            let shop = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("scripts/mcp_shop_server.py").path
            try """
            caseId: refund-approved
            command: ["\(python)", "\(ExampleRuns.fixtures.appendingPathComponent("external/mcp_sdk_agent.py").path)", "{input}", "--",
              "\(try agentEvalBinary())", mcp-proxy, --policy, ask.policy.yaml, --approval-timeout, "120", "--",
              "\(python)", "\(shop)", --journal, "\(directory.path("journal"))"]
            env: {OPENAI_API_KEY: \(RecordCommandTests.key)}
            input: Order A-1042 arrived broken.
            upstream: {openai: "\(server.baseURL("refund"))"}
            expected:
              toolsCalled: [lookup_order, refund_order]
              verdicts: {noUnapprovedExecution: true}
            """.write(toFile: cases + "/case.yaml", atomically: true, encoding: .utf8)
            async let run = agentEval(["run", "cases", "--no-catalog", "--out", "runs"], in: directory.url)
            // The person: waits for the proxy's question beside run's log, and answers it there.
            let log = directory.path("runs/refund-approved-1.jsonl.gz")
            var answered: ProcessResult?
            for _ in 0..<600 {
                let pending = (try? FileManager.default.contentsOfDirectory(atPath: log + ".approvals")) ?? []
                if let file = pending.first(where: { $0.hasSuffix(".pending.json") }) {
                    let callId = String(file.dropLast(".pending.json".count))
                    answered = try await agentEval(["approve", log, callId, "--approver", "ana"], in: directory.url, queued: false)
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            let result = try await run
            let approval = try #require(answered, "no call waited for approval beside \(log): \(result.stdoutText)\(result.stderr)")
            #expect(approval.status == 0 && approval.stdoutText.hasPrefix("approved"), "\(approval.stdoutText)\(approval.stderr)")
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            #expect(
                MCPProxyCommandTests.trajectory(try MCPProxyCommandTests.events(log)).contains {
                    $0.hasPrefix("approval ") && $0.hasSuffix(" true")
                })
            #expect(!FileManager.default.fileExists(atPath: cases + "/runs"), "nothing of the run is left in the case's folder")
        }
    }

    @Test("approve and deny racing on one call: exactly one answer is taken; the other is told, exit 1")
    func approvalRace() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("session.jsonl.gz")
            try FileManager.default.copyItem(atPath: fixture("support-sample.jsonl.gz"), toPath: log)
            // This process holds the log's write lock, as the proxy that asks does.
            let (writer, _) = try LogWriter.open(at: log)
            defer { try? writer.close() }
            for round in 1...5 {
                let callId = "mcp-\(round)"
                let folder = log + ".approvals"
                // As the proxy asks: the call's proof, then its pending file.
                try MCPApprovals.ask(
                    log: log, call: MCPApprovals.PendingCall(callId: callId, tool: "refund_order", arguments: ["amount": 50000]))
                async let approve = agentEval(["approve", log, callId, "--approver", "ana"], in: directory.url)
                async let deny = agentEval(["deny", log, callId, "--approver", "bo"], in: directory.url)
                let results = try await [approve, deny]
                #expect(results.map(\.status).sorted() == [0, 1], "round \(round): \(results.map { $0.stdoutText + $0.stderr })")
                let loser = results.first { $0.status == 1 }
                #expect(loser?.stderr.contains("already; this answer was not taken") == true, "\(loser?.stderr ?? "")")
                let kept = try String(contentsOfFile: folder + "/\(callId).json", encoding: .utf8)
                let approvedWon = results.contains { $0.status == 0 && $0.stdoutText.hasPrefix("approved") }
                #expect(kept.contains(approvedWon ? "\"ana\"" : "\"bo\""), "the answer kept is the winner's: \(kept)")
            }
        }
    }

    @Test(
        "a pending file rewritten beside the log (by an agent) shows nothing: approve lists, and approves, the call as the proxy asked about it"
    )
    func forgedPendingFile() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("session.jsonl.gz")
            try FileManager.default.copyItem(atPath: fixture("support-sample.jsonl.gz"), toPath: log)
            // This process holds the log's write lock, as the proxy that asks does.
            let (writer, _) = try LogWriter.open(at: log)
            defer { try? writer.close() }
            try MCPApprovals.ask(
                log: log, call: MCPApprovals.PendingCall(callId: "mcp-1", tool: "refund_order", arguments: ["amount": 9_999_999]))
            // The agent, which can write beside the log, makes the call look harmless.
            try #"{"call_id":"mcp-1","tool":"lookup_order","arguments":{"amount":5},"reason":"read-only lookup"}"#.write(
                toFile: log + ".approvals/mcp-1.pending.json", atomically: true, encoding: .utf8)
            let listed = try await agentEval(["approve", log], in: directory.url)
            #expect(listed.status == 0 && listed.stdoutText.contains("mcp-1  refund_order {\"amount\":9999999}"), "\(listed.stdoutText)")
            #expect(!listed.stdoutText.contains("lookup_order"), "\(listed.stdoutText)")
            let approved = try await agentEval(["approve", log, "mcp-1"], in: directory.url)
            #expect(approved.status == 0 && approved.stdoutText.contains("approved mcp-1 (refund_order)"), "\(approved.stdoutText)")
        }
    }

    @Test(
        "a call whose proxy is gone (nothing holds the log's write lock) is not listed as waiting, and an answer to it is refused: nothing would take it"
    )
    func answerWithNoProxy() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("session.jsonl.gz")
            try FileManager.default.copyItem(atPath: fixture("support-sample.jsonl.gz"), toPath: log)
            let (writer, _) = try LogWriter.open(at: log)
            try MCPApprovals.ask(
                log: log, call: MCPApprovals.PendingCall(callId: "mcp-1", tool: "refund_order", arguments: ["amount": 50000]))
            // The proxy dies (its lock goes with it): its pending file is left beside the log.
            try writer.close()
            #expect(FileManager.default.fileExists(atPath: log + ".approvals/mcp-1.pending.json"))
            let listed = try await agentEval(["approve", log], in: directory.url)
            #expect(!listed.stdoutText.contains("mcp-1"), "\(listed.stdoutText)")
            let approved = try await agentEval(["approve", log, "mcp-1"], in: directory.url)
            #expect(approved.status != 0, "\(approved.stdoutText)")
            #expect(approved.stderr.contains("no process waits for its answer now"), "\(approved.stderr)")
            #expect(!FileManager.default.fileExists(atPath: log + ".approvals/mcp-1.json"), "no answer left for nothing to take")
        }
    }
}
