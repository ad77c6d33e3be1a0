import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `agent-eval record` on agents written with real frameworks from PyPI (Pydantic AI,
/// smolagents) and on a Node.js program that calls the API with `fetch`: each records the same
/// trajectory as the plain SDK loops, streamed or whole, with the 429 its client retried.
@Suite("record: agents written with frameworks", .tags(.python), .needsPython, .ownThread)
struct RecordFrameworkTests {
    /// One way to run the refund agent: its command line after the interpreter, and the API it speaks.
    struct Agent: CustomTestStringConvertible, Sendable {
        var name: String
        var interpreter: Interpreter
        var arguments: [String]
        var format: String

        enum Interpreter: Sendable { case python, node }

        var testDescription: String { name }

        func command() async throws -> [String] {
            switch interpreter {
            case .python:
                return [try await RecordCommandTests.python(), ExampleRuns.fixtures.appendingPathComponent(arguments[0]).path]
                    + arguments.dropFirst()
            case .node:
                let node = try #require(
                    Subprocess.which("node"), "the Node.js agent needs node on PATH: scripts/bootstrap installs Debian's nodejs")
                return [node, ExampleRuns.fixtures.appendingPathComponent(arguments[0]).path] + arguments.dropFirst()
            }
        }
    }

    static let agents: [Agent] =
        ["chat", "responses", "anthropic"].flatMap { api in
            [false, true].map { stream in
                Agent(
                    name: "Pydantic AI, \(api)\(stream ? ", streamed" : "")", interpreter: .python,
                    arguments: ["external/pydantic_ai_agent.py", "--api", api] + (stream ? ["--stream"] : []),
                    format: api == "anthropic" ? "anthropic.messages" : "openai.chat")
            }
        }
        + [false, true].map { stream in
            Agent(
                name: "smolagents\(stream ? ", streamed" : "")", interpreter: .python,
                arguments: ["external/smolagents_agent.py"] + (stream ? ["--stream"] : []), format: "openai.chat")
        }
        + [false, true].map { stream in
            Agent(
                name: "Node.js fetch\(stream ? ", streamed" : "")", interpreter: .node,
                arguments: ["external/node_fetch_agent.mjs"] + (stream ? ["--stream"] : []), format: "openai.chat")
        }

    @Test(
        "each framework's agent records the refund trajectory, its first request's 429 with the decision the retry got", arguments: agents)
    func recordsFramework(agent: Agent) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("run.jsonl.gz")
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log, "--json", "--timeout", "120"] + RecordCommandTests.upstreams(server, "refund-429")
                + ["--"] + (try await agent.command()) + ["Order A-1042 arrived broken."],
            environment: ["OPENAI_API_KEY": RecordCommandTests.key, "ANTHROPIC_API_KEY": RecordCommandTests.key])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try JSONParser.parse(Array(result.stdout))
        #expect(summary["stop_reason"] == "success", "\(summary)")
        let events = try RecordCommandTests.events(log)
        #expect(RecordCommandTests.trajectory(events) == RecordCommandTests.refundTrajectory)
        let decisions = RecordCommandTests.decisions(events)
        #expect(decisions.count == 3)
        #expect(decisions.allSatisfy { $0.format == agent.format })
        #expect(decisions.first?.attempts.map(\.status) == [429], "the client's retry of the 429 is recorded with the answer it got")
        let verify = try await agentEval(["log", "verify", log])
        #expect(verify.status == 0, "\(verify.stdoutText)\(verify.stderr)")
        #expect(
            !String(decoding: try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", log]).stdout, as: UTF8.self).contains(
                RecordCommandTests.key))
    }

    @Test("a tool failure is recorded as the framework marks it: Pydantic AI's retry prompt on Anthropic is an error result")
    func frameworkErrorResult() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("run.jsonl.gz")
        let agent = Agent(
            name: "Pydantic AI", interpreter: .python, arguments: ["external/pydantic_ai_agent.py", "--api", "anthropic", "--fail-refund"],
            format: "anthropic.messages")
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log] + RecordCommandTests.upstreams(server, "refund") + ["--"]
                + (try await agent.command()) + ["Order A-1042 arrived broken."],
            environment: ["ANTHROPIC_API_KEY": RecordCommandTests.key])
        #expect(result.status == 0, "\(result.stderr)")
        let state = try RecordCommandTests.state(log)
        let refund = state.calls.first { $0.tool == "refund_order" }
        #expect(refund?.lastResult?.status == .error)
        #expect(refund?.lastResult?.error?.contains("the payment service is down") == true, "\(String(describing: refund?.lastResult))")
    }
}
