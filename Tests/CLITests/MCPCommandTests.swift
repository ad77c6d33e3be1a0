import Foundation
import TestSupport
import TestTags
import Testing

/// An agent whose tools come from a real MCP server (`mcp-server-time`), through the CLI:
/// exec records it, replay shows the server, a suite run gates on it, and a server that cannot
/// start is an error that points at the agent file.
@Suite("exec, replay and run with an MCP server")
struct MCPCommandTests {
    @Test("exec records the server, replay shows it, run passes a case on its calls", .tags(.python), .needsPython)
    func execReplayRun() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let time = try await MCPTestServers.timeServer().map { "\"\($0)\"" }.joined(separator: ", ")
        try """
        name: clock
        model: {script: clock.model.yaml}
        mcp_servers:
          time: {command: [\(time)]}
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        try """
        name: clock-script
        decisions:
          - tool_calls:
              - {name: convert_time, arguments: {source_timezone: UTC, time: "12:00", target_timezone: Asia/Tokyo}}
          - answer: It is 21:00 in Tokyo.
        """.write(toFile: directory.path("clock.model.yaml"), atomically: true, encoding: .utf8)

        let exec = try await agentEval([
            "exec", "--agent", directory.path("agent.yaml"), "--input", "Noon UTC in Tokyo?", "--log", directory.path("run.jsonl.gz"),
        ])
        #expect(exec.status == 0, "\(exec.stderr)")
        let replay = try await agentEval(["replay", directory.path("run.jsonl.gz"), "--step", "0"])
        #expect(replay.stdoutText.contains("convert_time (read, mcp time)"), "\(replay.stdoutText)")
        #expect(replay.stdoutText.contains("server  time: mcp mcp-time"), "\(replay.stdoutText)")

        try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
        try """
        caseId: tokyo
        agent: ../agent.yaml
        input: Noon UTC in Tokyo?
        expected:
          toolsCalled: [convert_time]
          toolsNotCalled: [get_current_time]
          stopReason: success
        """.write(toFile: directory.path("cases/tokyo.yaml"), atomically: true, encoding: .utf8)
        let run = try await agentEval(["run", directory.path("cases"), "--out", directory.path("eval-runs")])
        #expect(run.status == 0, "\(run.stdoutText)\n\(run.stderr)")
    }

    @Test(
        "a server that cannot start stops exec with exit 2, the agent file's place and the server's last words", .tags(.python),
        .needsPython)
    func serverThatCannotStart() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let broken = try await MCPTestServers.failureServer(["--exit-at-start"]).map { "\"\($0)\"" }.joined(separator: ", ")
        try """
        name: clock
        model: {script: clock.model.yaml}
        mcp_servers:
          broken:
            command: [\(broken)]
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        try "name: s\ndecisions:\n  - answer: done\n".write(toFile: directory.path("clock.model.yaml"), atomically: true, encoding: .utf8)
        let exec = try await agentEval(["exec", "--agent", directory.path("agent.yaml"), "--input", "x", "--out", directory.path("runs")])
        #expect(exec.status == 2)
        #expect(exec.stderr.contains("MCP server \"broken\": did not start: the server exited with status 2"), "\(exec.stderr)")
        #expect(exec.stderr.contains("refusing to start"))
        #expect(exec.stderr.contains("agent.yaml:4:3"), "\(exec.stderr)")
        let written = (try? FileManager.default.contentsOfDirectory(atPath: directory.path("runs"))) ?? []
        #expect(written.isEmpty, "no log for a run that never started")
    }
}
