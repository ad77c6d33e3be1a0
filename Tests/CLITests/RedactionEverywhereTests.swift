import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// Every writer of a log redacts, by default, with the same rule (`Redactor.standard`): the
/// key-shaped values `record` and `exec` always redacted, and the values of agent-eval's own
/// variables whose names look secret. The writers that did not — a standalone `mcp-proxy`,
/// `collect` and `import` — are driven as real processes here, and neither their logs nor what
/// is made from them (`log cat`, the `view` page) hold a key.
@Suite("every log writer redacts keys", .tags(.python), .needsPython, .ownThread)
struct RedactionEverywhereTests {
    /// Key-shaped values of each format the patterns know (made up: the shapes, not real keys).
    static let keys = [
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv", "sk-ant-api03-Zy9xWv8uTs7rQp6oNm5l", "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "AKIAIOSFODNN7EXAMPLE", "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    ]
    /// A secret known only by the name of the variable that holds it in agent-eval's environment.
    static let token = "tok-4f1c9e2ab7d3-not-a-pattern"

    /// The log's text, its `log cat` and its `view` page: none may hold a key or the token.
    static func expectNothingKept(in log: String, secrets: [String] = keys, directory: TemporaryDirectory, _ what: String) async throws {
        let text = try await Subprocess.run(gzipPath, ["-dc", log]).stdoutText
        let cat = try await agentEval(["log", "cat", log]).stdoutText
        let page = directory.path("page-\(UUID().uuidString).html")
        let viewed = try await agentEval(["view", log, "--out", page])
        #expect(viewed.status == 0 || viewed.status == 1, "\(viewed.stderr)")
        let html = (try? String(contentsOfFile: page, encoding: .utf8)) ?? ""
        for secret in secrets {
            #expect(!text.contains(secret), "\(what): the log holds \(secret)")
            #expect(!cat.contains(secret), "\(what): log cat shows \(secret)")
            #expect(!html.contains(secret), "\(what): the view page shows \(secret)")
        }
        #expect(text.contains("[redacted:api-key:"), "\(what): \(text.prefix(400))")
    }

    @Test("import writes no key of a transcript into its log")
    func importRedacts() async throws {
        try await TemporaryDirectory.with { directory in
            let arguments = JSONWriter.encodeString(
                .string(String(decoding: JSONWriter.encode(["keys": .array(Self.keys.map { .string($0) })] as JSONValue), as: UTF8.self)))
            let transcript = """
                [{"role":"user","content":"My key is \(Self.keys[0]) and the token \(Self.token)."},
                 {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"store_keys","arguments":\(arguments)}}]},
                 {"role":"tool","tool_call_id":"call_1","content":"stored \(Self.keys[2])"},
                 {"role":"assistant","content":"Done with \(Self.keys[6])."}]
                """
            try transcript.write(toFile: directory.path("t.json"), atomically: true, encoding: .utf8)
            let imported = try await agentEval(
                ["import", "messages", "t.json", "--out", "imported", "--no-catalog"], in: directory.url,
                environment: ["SHOP_API_TOKEN": Self.token])
            #expect(imported.status == 0, "\(imported.stderr)")
            let log = try #require(
                try FileManager.default.contentsOfDirectory(atPath: directory.path("imported")).first { $0.hasSuffix(".jsonl.gz") })
            #expect(!imported.stdoutText.contains(Self.keys[6]))
            try await Self.expectNothingKept(
                in: directory.path("imported/\(log)"), secrets: Self.keys + [Self.token], directory: directory, "import")
        }
    }

    @Test("a standalone mcp-proxy writes no key of a call's arguments into its log")
    func proxyRedacts() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("proxy.jsonl.gz")
            let plan: JSONValue = [
                "calls": [["tool": "lookup_order", "arguments": ["order_id": .string(Self.keys.joined(separator: " "))]]]
            ]
            let (_, result) = try await MCPProxyCommandTests.run(
                try await MCPProxyCommandTests.client(plan, proxy: ["--log", log], server: try await MCPProxyCommandTests.shop(directory)),
                in: directory)
            #expect(result.status == 0, "\(result.stderr)")
            try await Self.expectNothingKept(in: log, directory: directory, "mcp-proxy")
        }
    }

    @Test("collect writes no key of a span's attributes into the trace's log")
    func collectRedacts() async throws {
        try await TemporaryDirectory.with { directory in
            let out = directory.path("collected")
            let collector = try await CollectCommandTests.Collector.start(out: out, settle: 600, scratch: directory)
            let arguments: JSONValue = ["keys": .array(Self.keys.map { .string($0) })]
            let output: JSONValue = [
                ["role": "assistant", "parts": [["type": "tool_call", "id": "c1", "name": "store_keys", "arguments": arguments]]]
            ]
            let trace = String(repeating: "cd", count: 16)
            let spans: [JSONValue] = [
                CollectCommandTests.span(trace, "0000000000000001", "invoke_agent", start: 0, [("gen_ai.operation.name", "invoke_agent")]),
                CollectCommandTests.span(
                    trace, "0000000000000002", "chat", start: 1,
                    [
                        ("gen_ai.operation.name", "chat"),
                        ("gen_ai.output.messages", String(decoding: JSONWriter.encode(output), as: UTF8.self)),
                    ],
                    parent: "0000000000000001"),
            ]
            let sent = try await CollectCommandTests.post(spans, to: collector.traces, in: directory, name: "keys")
            #expect(sent["status"] == 200, "\(sent)")
            let (status, _) = try await collector.stop()
            #expect(status == 0)
            let log = try #require(CollectCommandTests.logs(in: out).first)
            try await Self.expectNothingKept(in: log, directory: directory, "collect")
        }
    }
}
