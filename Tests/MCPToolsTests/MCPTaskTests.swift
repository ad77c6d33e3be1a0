import AgentRuntime
import Foundation
import ModelClients
import TestSupport
import TestTags
import Testing
import TraceCore

@testable import MCPTools

/// Calls a server answers with a task (MCP 2026-07-28's tasks extension), against
/// `scripts/mcp_tasks_server.py`: the task is polled to its end, and its result is the call's.
@Suite("MCP tasks", .ownThread)
struct MCPTaskTests {

    static func journal(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    @Test(
        "a task is polled until it ends: its result is the call's, its error the call's error; one that asks for input, or outlives the call's time, is cancelled",
        .tags(.python), .needsPython)
    func followed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let journal = directory.path("journal")
        let connection = try await MCPServers().connect(
            MCPServerTests.settings("jobs", try await MCPTestServers.tasksServer(journal: journal)))
        #expect(connection.identity.protocolVersion == "2026-07-28")

        let report = try await connection.call("report", ["polls": 3])
        #expect(report.status == .ok, "\(String(describing: report.error))")
        #expect(report.output?["content"]?.arrayValue?.first?["text"] == "report ready after 3 polls")
        #expect(report.output?["resultType"] == nil)
        #expect(report.output?["taskId"] == nil)

        let doomed = try await connection.call("doomed")
        #expect(doomed.status == .error)
        #expect(doomed.error == "MCP server \"jobs\" answered with an error: -32603: the job crashed")

        let asking = try await connection.call("asking")
        #expect(asking.status == .error)
        #expect(!asking.isRetryable)
        #expect(
            asking.error
                == "MCP server \"jobs\" asked for input while its task task-3 ran (elicitation/create), which agent-eval's MCP tools do not give: the task was cancelled"
        )
        #expect(Self.journal(journal) == ["cancel task-3"])

        // Long enough for the call to make its task on a machine loaded by the whole suite (3 s
        // was not, once, in CI); the task outlives it.
        let endless = try await connection.call("endless", timeoutMs: 8_000)
        #expect(endless.status == .error)
        #expect(endless.isRetryable)
        #expect(endless.error?.contains("did not answer within 8000 ms") == true, "\(String(describing: endless.error))")
        #expect(Self.journal(journal) == ["cancel task-3", "cancel task-4"])

        // The server was stopped at the timeout: the next call starts it again, and needs no task.
        #expect(try await connection.call("quick").output?["content"]?.arrayValue?.first?["text"] == "quick answer")
        await connection.close()
    }

    @Test(
        "a poll the call's time runs out on, while the server is still working on it, is followed by the task's cancel before the server is stopped",
        .tags(.python), .needsPython)
    func pollOutlived() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let journal = directory.path("journal")
        let connection = try await MCPServers().connect(
            MCPServerTests.settings("jobs", try await MCPTestServers.tasksServer(journal: journal)))
        // The server answers each poll of this task after 3.2 s: the call's 3 s end while its
        // first poll waits (when the task came within 1.8 s), and the server, busy but alive, must
        // still be told within the cancel's 2 s.
        let sluggish = try await connection.call("sluggish", timeoutMs: 3_000)
        #expect(sluggish.status == .error)
        #expect(sluggish.error?.contains("did not answer within 3000 ms") == true, "\(String(describing: sluggish.error))")
        #expect(Self.journal(journal) == ["cancel task-1"])
        #expect(try await connection.call("quick").output?["content"]?.arrayValue?.first?["text"] == "quick answer")
        await connection.close()
    }

    @Test(
        "a call that made a task, recorded in a cassette, is replayed with no server: the task's result, at once", .tags(.python),
        .needsPython)
    func replayed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cassette = directory.path("cassette")
        let settings = MCPServerTests.settings("jobs", try await MCPTestServers.tasksServer())
        let recording = try await MCPServers(cassette: try Cassette(directory: cassette, mode: .new)).connect(settings)
        let live = try await recording.call("report", ["polls": 2])
        await recording.close()
        #expect(live.status == .ok)

        var offline = settings
        offline.command = ["/nonexistent/mcp-tasks-server"]
        let replayed = try await MCPServers(cassette: try Cassette(directory: cassette, mode: .none)).connect(offline)
        let again = try await replayed.call("report", ["polls": 2])
        #expect(again.output == live.output)
        await replayed.close()
    }
}
