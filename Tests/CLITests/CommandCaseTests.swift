import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `command:` eval cases: an agent written with any framework, run by `agent-eval run` through
/// the recording gateway, recorded into a cassette once and replayed offline from it after.
@Suite("run: command cases through the recording gateway", .tags(.python), .needsPython, .ownThread)
struct CommandCaseTests {
    /// A suite folder with one command case running the raw SDK agent (copied beside it, where
    /// the command runs) and its cassette in `cassettes/refund`.
    static func suite(in directory: TemporaryDirectory, upstream: String, agentOptions: [String] = []) async throws -> String {
        let cases = directory.path("cases")
        try FileManager.default.createDirectory(atPath: cases, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: RecordCommandTests.agent, toPath: cases + "/refund_agent.py")
        let python = try await RecordCommandTests.python()
        let words = ([python, "refund_agent.py", "--api", "responses"] + agentOptions + ["{input}"]).map { "\"\($0)\"" }
        try """
        # The raw SDK agent, run through the gateway; CI replays the model from the cassette.
        caseId: refund-external
        command: [\(words.joined(separator: ", "))]
        input: Order A-1042 arrived broken.
        upstream: {openai: "\(upstream)"}
        cassette: ../cassettes/refund
        timeout: 60
        expected:
          toolsCalled: [lookup_order, refund_order]
          sequence: [lookup_order, refund_order]
          arguments:
            refund_order: {order_id: A-1042}
          stopReason: success
          answer: {contains: [Refunded]}
        """.write(toFile: cases + "/refund.yaml", atomically: true, encoding: .utf8)
        return cases
    }

    static func report(_ result: ProcessResult) throws -> JSONValue { try JSONParser.parse(Array(result.stdout)) }

    @Test("recorded live once (a 429 first), a command case replays offline with repeats and jobs; a changed agent is a cassette miss")
    func recordsThenReplays() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        let cases = try await Self.suite(in: directory, upstream: server.baseURL("refund-429"))

        let live = try await agentEval(
            ["run", cases, "--no-catalog", "--json", "--out", directory.path("live"), "--record", "new"],
            environment: ["OPENAI_API_KEY": RecordCommandTests.key])
        #expect(live.status == 0, "\(live.stdoutText)\(live.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.path("cassettes/refund/index.json")))
        let liveLog = directory.path("live/refund-external-1.jsonl.gz")
        let decisions = RecordCommandTests.decisions(try RecordCommandTests.events(liveLog))
        #expect(decisions.first?.attempts.map(\.status) == [429])
        server.stop()

        // Offline: no server, no key; three repeats at once, each its own log with the same trajectory.
        let offline = try await agentEval(
            ["run", cases, "--no-catalog", "--json", "--out", directory.path("offline"), "--repeat", "3", "--jobs", "3"],
            environment: ["OPENAI_API_KEY": ""])
        #expect(offline.status == 0, "\(offline.stdoutText)\(offline.stderr)")
        let report = try Self.report(offline)
        #expect(report["summary"]?["passed"] == 1)
        let entry = report["cases"]?.arrayValue?.first
        #expect(entry?["source"] == "live")
        #expect(entry?["runs"]?.arrayValue?.count == 3)
        let expected = RecordCommandTests.trajectory(try RecordCommandTests.events(liveLog))
        for index in 1...3 {
            let log = directory.path("offline/refund-external-\(index).jsonl.gz")
            #expect(RecordCommandTests.trajectory(try RecordCommandTests.events(log)) == expected)
            let verify = try await agentEval(["log", "verify", log])
            #expect(verify.status == 0, "\(verify.stdoutText)")
        }

        // Run from the case's own folder by its bare file name (and as "."): the command starts there.
        for target in ["refund.yaml", "."] {
            let here = try await agentEval(
                ["run", target, "--no-catalog", "--json", "--out", directory.path("here-\(target == "." ? "dot" : "file")")],
                in: URL(fileURLWithPath: cases),
                environment: ["OPENAI_API_KEY": ""])
            #expect(here.status == 0, "run \(target): \(here.stdoutText)\(here.stderr)")
        }

        // The agent's code changed: its refund tool now fails, so its third request is new.
        let file = try String(contentsOfFile: cases + "/refund.yaml", encoding: .utf8)
        try file.replacingOccurrences(of: "\"--api\", \"responses\"", with: "\"--api\", \"responses\", \"--fail-refund\"")
            .write(toFile: cases + "/refund.yaml", atomically: true, encoding: .utf8)
        let changed = try await agentEval(
            ["run", cases, "--no-catalog", "--out", directory.path("changed")], environment: ["OPENAI_API_KEY": ""])
        #expect(changed.status == 2, "a miss is a run that could not be checked, not a pass: \(changed.stdoutText)")
        #expect(changed.stdoutText.contains("cassette miss at step 2"), "\(changed.stdoutText)")
        #expect(changed.stdoutText.contains("look: agent-eval replay \(directory.path("changed/refund-external-1.jsonl.gz")) --step 2"))
        #expect(changed.stdoutText.contains("--record new"))
    }

    @Test("a command that fails is checked as what it was: the stop names its exit status and its last words")
    func failingCommand() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let cases = try await Self.suite(in: directory, upstream: server.baseURL("refund"))
        // No key and a live upstream: the SDK refuses to start, before any model request.
        let result = try await agentEval(
            ["run", cases, "--no-catalog", "--out", directory.path("runs"), "--record", "new"],
            environment: ["OPENAI_API_KEY": ""])
        #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
        #expect(result.stdoutText.contains("✘ refund-external"))
        #expect(result.stdoutText.contains("the command exited with status 1"), "\(result.stdoutText)")
        #expect(!result.stdoutText.contains("none of its runs has"), "a run that never asked the model says nothing of tool names")
    }

    @Test("a command whose model requests declare no tool cannot be held to toolsNotCalled: any name, a misspelt one too, is could not run")
    func toollessCommand() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        try """
        import openai, sys
        reply = openai.OpenAI(max_retries=0).chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": sys.argv[1]}])
        print(reply.choices[0].message.content)
        """.write(toFile: directory.path("text_only.py"), atomically: true, encoding: .utf8)
        let python = try await RecordCommandTests.python()
        try """
        caseId: never-cancels
        command: ["\(python)", text_only.py, "{input}"]
        input: Where is my order? Cancel it.
        upstream: {openai: "\(server.baseURL("support-chat"))"}
        expected:
          toolsNotCalled: [cancel_ordr]

        """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
        let result = try await agentEval(
            ["run", "case.yaml", "--no-catalog", "--out", "runs"], in: directory.url,
            environment: ["OPENAI_API_KEY": RecordCommandTests.key])
        #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
        #expect(
            (result.stdoutText + result.stderr).contains("forbids the tool \"cancel_ordr\", but its program declared no tool"),
            "\(result.stdoutText)\(result.stderr)")
    }

    @Test("check reads command cases: every error in the keys at its line, a program or script that is not there named")
    func checksCommandCases() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try """
        - caseId: not-a-list
          command: python3 agent.py
          input: hi
          expected: {stopReason: success}
        - caseId: bad-keys
          command: [python3, "{input}"]
          upstream: {openai: "127.0.0.1:9", azure: "http://x"}
          timeout: 0
          input: hi
          expected: {stopReason: success}
        - caseId: two-sources
          command: [python3]
          agent: agent.yaml
          input: hi
          expected: {stopReason: success}
        - caseId: no-program
          command: [no-such-program-xyz, "{input}"]
          input: hi
          expected: {stopReason: success}
        - caseId: no-script
          command: [python3, agents/missing.py, "{input}"]
          input: hi
          expected: {stopReason: success}
        - caseId: stray-upstream
          upstream: {openai: "http://127.0.0.1:9/v1"}
          logs: runs/*.jsonl.gz
          expected: {stopReason: success}
        - caseId: unquoted-input
          command: [python3, {input}]
          input: hi
          expected: {stopReason: success}
        - caseId: inline-shell
          command: [bash, -lc, "cd . && python3 agent.py"]
          input: hi
          expected: {stopReason: success}
        """.write(toFile: directory.path("cases.yaml"), atomically: true, encoding: .utf8)
        let result = try await agentEval(["check", directory.path("cases.yaml")])
        #expect(result.status == 2)
        let file = directory.path("cases.yaml")
        for (line, text) in [
            (2, "command must be a list"), (7, "upstream.openai must be an http or https URL"), (7, #"upstream has no setting "azure""#),
            (8, "timeout (seconds) must be between 1 and 86400, found 0"), (11, #"case "two-sources" has command and agent"#),
            (17, "runs no-such-program-xyz, which is not on PATH"), (21, "runs the script agents/missing.py, which is not there"),
            (25, #"case "stray-upstream" has upstream, which only a command case uses"#),
            (29, "command[1] is {input} unquoted, which YAML reads as a mapping"),
        ] {
            #expect(result.stderr.contains(text), "\(text)\n\(result.stderr)")
            #expect(result.stderr.contains("\(file):\(line):"), "line \(line) for \(text)")
        }
        #expect(!result.stderr.contains("inline-shell"), "a shell's -c text is no script: \(result.stderr)")
    }
}
