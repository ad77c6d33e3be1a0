import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

/// Model-graded expectations with judges served over HTTP by a real local server on
/// 127.0.0.1 (scripts/model_server.py), through the CLI: recorded into a cassette and replayed
/// from it with the server gone, a judge's "no" explained, a judge that cannot be reached, and
/// a judge that changes its mind across `--repeat`, kept in the catalog.
@Suite("run with judge models over HTTP", .ownThread, .serialized)
struct JudgeCommandTests {
    static let recorded = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    /// A project with the recorded support run and one case whose judge is served at `baseURL`.
    func project(in directory: TemporaryDirectory, provider: String, baseURL: String, rubric: String) throws {
        try FileManager.default.copyItem(atPath: Self.recorded, toPath: directory.path("support-refund.jsonl.gz"))
        try """
        caseId: refund-judged
        logs: support-refund.jsonl.gz
        expected:
          stopReason: success
          answer:
            rubric: \(rubric)
            model: {provider: \(provider), name: judge-model, base_url: "\(baseURL)", max_retries: 0, timeout_ms: 5000}

        """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
    }

    func json(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    @Test(
        "a judge's verdicts are recorded into a cassette, then replayed from it offline with the same verdicts",
        arguments: ["openai", "anthropic"])
    func cassette(provider: String) async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try project(in: directory, provider: provider, baseURL: server.baseURL("judge"), rubric: "The answer names the refund id.")
            let live = try await agentEval(
                ["run", "case.yaml", "--cassette", "cassette", "--record", "new", "--no-catalog", "--json"], in: directory.url)
            #expect(live.status == 0, "\(live.stderr)")
            let judgement = try #require(
                try json(live.stdoutText)["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["judgements"]?.arrayValue?.first)
            #expect(judgement["passed"] == .bool(true))
            #expect(judgement["reason"]?.stringValue == "It names refund rf-9.")
            #expect(judgement["judge"]?.stringValue == "\(provider):judge-model")
            #expect(judgement["reply_format"]?.stringValue == (provider == "openai" ? "openai.chat" : "anthropic.messages"))
            #expect(judgement["usage"] != nil)
            // The server saw the question: no tools, the rubric and the answer in the user turn.
            let request = try #require(try server.requests().last)
            let body = try #require(request["body"] as? [String: Any])
            #expect(body["tools"] == nil)
            #expect("\(body["messages"] ?? "")".contains("refund rf-9"))
            server.stop()

            // The server is gone: only the cassette can answer, and it answers the same.
            let replayed = try await agentEval(["run", "case.yaml", "--cassette", "cassette", "--no-catalog", "--json"], in: directory.url)
            #expect(replayed.status == 0, "\(replayed.stderr)")
            let again = try json(replayed.stdoutText)["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["judgements"]?.arrayValue?
                .first
            #expect(again?["reply"] == judgement["reply"])
            #expect(again?["passed"] == .bool(true))

            // Without the cassette, a judge that cannot be reached makes the case "could not run".
            let unreachable = try await agentEval(["run", "case.yaml", "--no-catalog"], in: directory.url)
            #expect(unreachable.status == 2)
            #expect(
                unreachable.stdoutText.contains("the judge \(provider):judge-model could not grade answer.rubric"),
                "\(unreachable.stdoutText)")
            #expect(unreachable.stdoutText.contains("case.yaml:6:"))
        }
    }

    @Test("a judge's no on a call's arguments is a failed expectation with its reason, the call and the step to look at")
    func judgeSaysNo() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try FileManager.default.copyItem(atPath: Self.recorded, toPath: directory.path("support-refund.jsonl.gz"))
            // The local judge passes only what names the refund id, which lookup_order's call cannot.
            try """
            caseId: lookup-judged
            logs: support-refund.jsonl.gz
            expected:
              arguments:
                lookup_order:
                  rubric: The order id is the one the customer named.
                  model: {provider: openai, name: judge-model, base_url: "\(server.baseURL("judge"))"}

            """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let judged = try await agentEval(["run", "case.yaml", "--no-catalog"], in: directory.url)
            #expect(judged.status == 1, "\(judged.stdoutText)\(judged.stderr)")
            #expect(
                judged.stdoutText.contains(
                    "✘ arguments.lookup_order.rubric: expected the arguments of call-1 meet the rubric \"The order id is the one the customer named.\""
                ), "\(judged.stdoutText)")
            #expect(judged.stdoutText.contains("happened: the judge openai:judge-model says no: It does not name the refund id."))
            #expect(judged.stdoutText.contains("look: agent-eval replay support-refund.jsonl.gz --step 1"))
        }
    }

    @Test("--repeat judges a recorded log each round; a judge that changes its mind makes the case flaky, in the report and the catalog")
    func disagreement() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try project(in: directory, provider: "anthropic", baseURL: server.baseURL("judge-moody"), rubric: "Anything.")
            let catalog = directory.path("catalog.sqlite")
            let environment = ["AGENT_EVAL_CATALOG": catalog]
            let console = try await agentEval(
                ["run", "case.yaml", "--repeat", "3", "--jobs", "1"], in: directory.url, environment: environment)
            #expect(console.status == 1, "\(console.stderr)")
            #expect(console.stdoutText.contains("✘ refund-judged  (1 log, judged 3 times, 2/3 passed, flaky)"), "\(console.stdoutText)")
            #expect(
                console.stdoutText.contains(
                    "judge: the judge disagreed on answer.rubric of support-refund.jsonl.gz: it passed 2 of 3 rounds"))
            #expect(console.stdoutText.contains("repeat 2: support-refund.jsonl.gz"))

            let rows = try await agentEval(
                [
                    "sql", "SELECT repeat_index, outcome, json_extract(judgements, '$[0].reason') FROM eval_results ORDER BY repeat_index",
                    "--json",
                ],
                in: directory.url, environment: environment)
            #expect(rows.status == 0, "\(rows.stderr)")
            #expect(
                rows.stdoutText.contains("attempt 1") && rows.stdoutText.contains("attempt 2") && rows.stdoutText.contains("attempt 3"),
                "\(rows.stdoutText)")

            let report = try await agentEval(
                ["run", "case.yaml", "--repeat", "3", "--jobs", "1", "--no-catalog", "--json"], in: directory.url, environment: environment)
            let disagreements = try json(report.stdoutText)["cases"]?.arrayValue?.first?["judge_disagreements"]?.arrayValue
            #expect(disagreements?.count == 1)
            #expect(disagreements?.first?["expectation"]?.stringValue == "answer.rubric")
            #expect(disagreements?.first?["rounds"] == .int(3))
            // Attempts 4, 5, 6 of the server: fail, pass, fail.
            #expect(disagreements?.first?["passed"] == .int(1))
        }
    }
}
