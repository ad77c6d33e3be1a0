import Foundation
import TestSupport
import Testing
import TraceCore

@Suite("agent-eval import, then run over the imported logs")
struct ImportCommandTests {
    /// A GenAI trace whose agent span and model calls declare two tools in
    /// `gen_ai.tool.definitions` (a JSON string), of which the run calls one.
    static var trace: String {
        func attribute(_ key: String, _ value: String) -> JSONValue { ["key": .string(key), "value": ["stringValue": .string(value)]] }
        let tools =
            #"[{"type": "function", "name": "lookup_order", "description": "Look up an order.", "parameters": {"type": "object"}}, "#
            + #"{"type": "function", "name": "web_search", "description": "Search the web.", "parameters": {"type": "object"}}]"#
        func span(_ id: String, _ name: String, at start: Int, _ attributes: [JSONValue]) -> JSONValue {
            [
                "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": .string(id),
                "parentSpanId": id == "00f067aa0ba902b7" ? "" : "00f067aa0ba902b7", "name": .string(name),
                "startTimeUnixNano": .string("17900000\(start)0000000000"), "endTimeUnixNano": .string("17900000\(start)0500000000"),
                "attributes": .array(attributes),
            ]
        }
        let spans: [JSONValue] = [
            span(
                "00f067aa0ba902b7", "invoke_agent orders", at: 0,
                [
                    attribute("gen_ai.operation.name", "invoke_agent"), attribute("gen_ai.agent.name", "orders"),
                    attribute("gen_ai.tool.definitions", tools),
                ]),
            span(
                "00f067aa0ba902b8", "chat m", at: 1,
                [
                    attribute("gen_ai.operation.name", "chat"), attribute("gen_ai.tool.definitions", tools),
                    attribute(
                        "gen_ai.output.messages",
                        #"[{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "lookup_order", "arguments": {"order_id": "A-1"}}]}]"#
                    ),
                ]),
            span(
                "00f067aa0ba902b9", "execute_tool lookup_order", at: 2,
                [
                    attribute("gen_ai.operation.name", "execute_tool"), attribute("gen_ai.tool.name", "lookup_order"),
                    attribute("gen_ai.tool.call.id", "c1"), attribute("gen_ai.tool.call.result", #"{"status": "shipped"}"#),
                ]),
            span(
                "00f067aa0ba902ba", "chat m", at: 3,
                [
                    attribute("gen_ai.operation.name", "chat"), attribute("gen_ai.tool.definitions", tools),
                    attribute(
                        "gen_ai.output.messages",
                        #"[{"role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": "It has shipped."}]}]"#),
                ]),
        ]
        return JSONWriter.encodeString(["resourceSpans": [["scopeSpans": [["spans": .array(spans)]]]]])
    }

    /// The agent answered; the user asked again and the transcript stops: the agent was cut off.
    static let cutOff = """
        [{"role": "user", "content": "Where is order A-1?"}, {"role": "assistant", "content": "It has shipped."},
         {"role": "user", "content": "When will it arrive?"}]
        """

    @Test(
        "a tool the trace declares and never calls passes toolsNotCalled; a transcript cut off on a user turn is unfinished, not a success")
    func declaredToolsAndCutOffTranscripts() async throws {
        try await TemporaryDirectory.with { directory in
            try Self.trace.write(toFile: directory.path("trace.json"), atomically: true, encoding: .utf8)
            try Self.cutOff.write(toFile: directory.path("cut.json"), atomically: true, encoding: .utf8)
            let imported = try await agentEval(
                ["import", "auto", "trace.json", "cut.json", "--out", "imported", "--no-catalog"], in: directory.url)
            #expect(imported.status == 0, "\(imported.stdoutText)\(imported.stderr)")
            #expect(imported.stdoutText.contains("(2 steps, 1 call, success)"), "\(imported.stdoutText)")
            #expect(imported.stdoutText.contains("imported/cut.jsonl.gz (1 step, 0 calls, unfinished)"), "\(imported.stdoutText)")
            #expect(imported.stdoutText.contains("  note: the transcript ends on a user turn (message 3)"), "\(imported.stdoutText)")
            // Again into the same folder: each run fails, as an error (not a warning), and the exit says so.
            let again = try await agentEval(
                ["import", "auto", "trace.json", "cut.json", "--out", "imported", "--no-catalog"], in: directory.url)
            #expect(again.status == 2 && again.stdoutText.contains("0 runs imported into imported, 2 failed"), "\(again.stdoutText)")
            #expect(
                again.stderr.contains("error: imported/cut.jsonl.gz exists already") && !again.stderr.contains("warning:"),
                "\(again.stderr)")

            try "caseId: declared\nlogs: imported/trace-*.jsonl.gz\nexpected: {toolsCalled: [lookup_order], toolsNotCalled: [web_search]}\n"
                .write(toFile: directory.path("declared.yaml"), atomically: true, encoding: .utf8)
            let declared = try await agentEval(["run", "declared.yaml", "--no-catalog"], in: directory.url)
            #expect(declared.status == 0, "\(declared.stdoutText)\(declared.stderr)")
            #expect(declared.stdoutText.contains("1 case, 1 passed, 0 failed"), "\(declared.stdoutText)")

            // Graded on its last reply, the cut-off run would pass stopReason: success.
            try "caseId: cut\nlogs: imported/cut.jsonl.gz\nexpected: {stopReason: success}\n".write(
                toFile: directory.path("cut.yaml"), atomically: true, encoding: .utf8)
            let cut = try await agentEval(["run", "cut.yaml", "--no-catalog"], in: directory.url)
            #expect(cut.status == 2, "\(cut.stdoutText)\(cut.stderr)")
            #expect(cut.stdoutText.contains("the run did not finish"), "\(cut.stdoutText)")
        }
    }

    @Test("--json prints, --json-out writes; the old `--json FILE` and `--json -` spellings are usage errors that name the new one")
    func jsonConvention() async throws {
        try await TemporaryDirectory.with { directory in
            try Self.trace.write(toFile: directory.path("trace.json"), atomically: true, encoding: .utf8)
            let printed = try await agentEval(["import", "auto", "trace.json", "--out", "a", "--no-catalog", "--json"], in: directory.url)
            #expect(printed.status == 0, "\(printed.stderr)")
            #expect(try JSONParser.parse(Array(printed.stdout))["runs"]?.arrayValue?.count == 1, "\(printed.stdoutText)")

            let written = try await agentEval(
                ["import", "auto", "trace.json", "--out", "b", "--no-catalog", "--json-out", "out/imported.json"], in: directory.url)
            #expect(written.status == 0, "\(written.stderr)")
            #expect(written.stdoutText.contains("1 run imported into b"), "\(written.stdoutText)")
            #expect(try JSONParser.parse(Array(Data(contentsOf: directory.url.appendingPathComponent("out/imported.json"))))["runs"] != nil)

            let oldFile = try await agentEval(
                ["import", "auto", "trace.json", "--out", "c", "--no-catalog", "--json", "imported.json"], in: directory.url)
            #expect(oldFile.status == 64, "\(oldFile.stdoutText)\(oldFile.stderr)")
            #expect(oldFile.stderr.contains("error: --json imported.json: --json prints JSON on standard output and takes no file"))
            #expect(oldFile.stderr.contains("hint: write the file with --json-out imported.json"), "\(oldFile.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("c")), "nothing is imported on a usage error")

            let oldDash = try await agentEval(["results", "merge", "trace.json", "--json", "-"], in: directory.url)
            #expect(oldDash.status == 64, "\(oldDash.stderr)")
            #expect(oldDash.stderr.contains("hint: leave out the -"), "\(oldDash.stderr)")
        }
    }
}
