import AgentRuntime
import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

@testable import MCPTools

/// Answers that are not what MCP says, from a real server on stdio or on 127.0.0.1
/// (`scripts/mcp_malformed_server.py`): none is ever taken as a tool's result. Each was a call
/// recorded `ok`, and a case over it green.
@Suite("MCP answers that are malformed", .ownThread, .tags(.python), .needsPython)
struct MCPMalformedAnswerTests {
    static func script(_ mode: String, http: Bool = false) async throws -> [String] {
        [
            try await MCPTestServers.environment() + "/bin/python", PythonEnvironment.scriptPath("mcp_malformed_server.py"), "--mode",
            mode,
        ] + (http ? ["--http"] : [])
    }

    /// One call of `echo` on the server in `mode`, started for it (on 127.0.0.1 with `http`).
    static func callEcho(mode: String, http: Bool) async throws -> ToolOutcome {
        let command = try await script(mode, http: http)
        var server: LocalScriptServer?
        let settings: ToolServerSettings
        if http {
            let started = try LocalScriptServer(command)
            server = started
            settings = ToolServerSettings(
                name: "odd", command: [], directory: FileManager.default.currentDirectoryPath, callTimeoutMs: 30_000,
                url: "http://127.0.0.1:\(started.port)/mcp")
        } else {
            settings = MCPServerTests.settings("odd", command)
        }
        defer { server?.stop() }
        let connection = try await MCPServers().connect(settings)
        let outcome = try await connection.call("echo", ["text": "hi"])
        await connection.close()
        return outcome
    }

    @Test(
        "a result with neither content nor structuredContent, isError that is not a boolean, no resultType in the 2026-07-28 era, an answer for another id or on HTTP 500 or with both a result and an error, structuredContent missing or not of the tool's outputSchema: each is an error, never ok"
    )
    func neverOk() async throws {
        let cases: [(mode: String, http: Bool, says: String)] = [
            ("empty", false, "has neither content nor structuredContent"),
            ("iserror-string", false, "says isError \"true\", not true or false"),
            ("no-result-type", false, "without the resultType a 2026-07-28 result carries"),
            ("wrong-id", true, "the server answered request \"someone-else\", not this one"),
            ("result-and-error", false, "not a JSON-RPC 2.0 message"),
            ("error-null", false, "answered with \"error\": null and no result"),
            ("status500", true, "answered HTTP 500 with a result"),
            ("struct-mismatch", false, "the result does not follow the tool's outputSchema: structuredContent.n"),
            ("no-struct", false, "the tool declares an outputSchema, and its result has no structuredContent"),
            ("task-bogus", false, "gave its task t-1 the status \"bogus\", which is not one of working"),
        ]
        for item in cases {
            let outcome = try await Self.callEcho(mode: item.mode, http: item.http)
            #expect(outcome.status == .error, "\(item.mode): \(outcome)")
            #expect(outcome.error?.contains(item.says) == true, "\(item.mode): \(String(describing: outcome.error))")
        }
    }

    @Test("a server that answers initialize with a protocol version agent-eval does not speak is not started")
    func unknownVersion() async throws {
        let command = try await Self.script("version")
        await #expect {
            _ = try await MCPServers().connect(MCPServerTests.settings("odd", command))
        } throws: { error in
            let message = (error as? any Diagnostic)?.message ?? "\(error)"
            return message.contains("answered initialize with protocol version \"1999-01-01\", which agent-eval does not speak")
        }
    }

    @Test("a credential in a server's URL (a query's access_token, a password before @) is never shown in what a start that failed says")
    func urlCredentialsNotShown() async throws {
        let free = try LocalPort.free()
        let url = "http://agent:pa55word-xyz@127.0.0.1:\(free)/mcp?access_token=URLSECRET123456&region=eu"
        await #expect {
            _ = try await MCPServers().connect(
                ToolServerSettings(name: "web", command: [], directory: FileManager.default.currentDirectoryPath, url: url))
        } throws: { error in
            let diagnostic = error as? any Diagnostic
            let said = (diagnostic?.message ?? "\(error)") + " " + (diagnostic?.hint ?? "")
            return !said.contains("URLSECRET123456") && !said.contains("pa55word-xyz") && said.contains("[redacted]")
        }
    }

    @Test("what a server writes to stderr before it answers is that call's, however many servers run at once")
    func stderrBeforeTheAnswerIsTheCalls() async throws {
        let command = try await Self.script("stderr")
        try await withThrowingTaskGroup(of: [String].self) { group in
            for server in 0..<4 {
                group.addTask {
                    let connection = try await MCPServers().connect(MCPServerTests.settings("odd", command))
                    var missing: [String] = []
                    for call in 0..<10 {
                        let text = "s\(server)-c\(call)"
                        let outcome = try await connection.call("echo", ["text": .string(text)])
                        if outcome.stderr?.contains("stderr of \(text)") != true {
                            missing.append("\(text): \(outcome.stderr ?? "nothing")")
                        }
                    }
                    await connection.close()
                    return missing
                }
            }
            var missing: [String] = []
            for try await found in group { missing += found }
            #expect(missing.isEmpty, "calls without their stderr: \(missing)")
        }
    }

    @Test("over stdio, a server that answers another request id than the one waiting is said to, not taken for one that was silent")
    func strayAnswerIsSaid() async throws {
        let command = try await Self.script("wrong-id")
        let connection = try await MCPServers().connect(MCPServerTests.settings("odd", command))
        let outcome = try await connection.call("echo", ["text": "hi"], timeoutMs: 500)
        await connection.close()
        #expect(outcome.status == .error, "\(outcome)")
        #expect(
            outcome.error?.contains("meanwhile it answered request \"someone-else\", which nothing was waiting for") == true,
            "\(String(describing: outcome.error))")
    }

    @Test(
        "what is well formed enough still answers: a probe refused on HTTP 400 with an SDK's error id, isError and structuredContent null, a task handle without a status whose result does not repeat resultType"
    )
    func wellFormedEnoughAnswers() async throws {
        for (mode, http) in [("probe-400", true), ("nulls", false), ("task-plain", false)] {
            let outcome = try await Self.callEcho(mode: mode, http: http)
            #expect(outcome.status == .ok, "\(mode): \(outcome)")
        }
    }
}
