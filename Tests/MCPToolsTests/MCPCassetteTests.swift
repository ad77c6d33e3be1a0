import AgentRuntime
import Foundation
import ModelClients
import TestSupport
import TestTags
import Testing
import TraceCore

@testable import MCPTools

/// MCP servers through a cassette: recorded from real servers (`mcp-server-time` over stdio, the
/// `mcp` 2.x server over HTTP), then replayed with no server at all.
@Suite("MCP servers through a cassette", .ownThread)
struct MCPCassetteTests {
    static let convert: JSONValue = ["source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"]

    /// A value's JSON with every date (`2026-11-28`) written as `DATE`: mcp-server-time answers
    /// with today's.
    static func undated(_ value: JSONValue?) -> String {
        let text = value.map { JSONWriter.encodeString($0) } ?? "nil"
        return text.replacingOccurrences(of: #"\d{4}-\d{2}-\d{2}"#, with: "DATE", options: .regularExpression)
    }

    @Test(
        "recorded from mcp-server-time, replayed with no server: the same identity, tools and output; a call not recorded names the field that differs",
        .tags(.python), .needsPython)
    func stdio() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cassette = directory.path("cassette")
        let settings = MCPServerTests.settings("time", try await MCPTestServers.timeServer())

        let recording = try await MCPServers(cassette: try Cassette(directory: cassette, mode: .new)).connect(settings)
        let live = try await recording.call("convert_time", Self.convert)
        #expect(live.status == .ok)
        await recording.close()
        let index = try String(contentsOfFile: cassette + "/index.json", encoding: .utf8)
        #expect(index.contains("\"provider\":\"mcp-time\""))
        #expect(index.contains("\"model\":\"tools/call\""))

        // Replayed: the command does not exist, and the client names itself otherwise (not in the key).
        var offline = settings
        offline.command = ["/nonexistent/mcp-server-time"]
        let replayed = try await MCPServers(clientName: "someone-else", cassette: try Cassette(directory: cassette, mode: .none)).connect(
            offline)
        #expect(replayed.identity == recording.identity)
        #expect(replayed.tools == recording.tools)
        let again = try await replayed.call("convert_time", Self.convert)
        #expect(again.status == live.status)
        #expect(again.output == live.output)

        let other: JSONValue = ["source_timezone": "UTC", "time": "13:00", "target_timezone": "Asia/Tokyo"]
        let missed = try await replayed.call("convert_time", other)
        #expect(missed.status == .error)
        #expect(!missed.isRetryable)
        let error = missed.error ?? ""
        #expect(error.contains("could not be replayed: the cassette \(cassette) has no recording of this mcp-time request"), "\(error)")
        #expect(error.contains("differs at params.arguments.time: recorded \"12:00\", now \"13:00\""), "\(error)")
        await replayed.close()

        // A cassette that holds nothing of this server (recorded before MCP servers were): the
        // server runs live, as it did then, and only the model would be replayed.
        try FileManager.default.createDirectory(atPath: directory.path("empty"), withIntermediateDirectories: true)
        let older = try await MCPServers(cassette: try Cassette(directory: directory.path("empty"), mode: .none)).connect(settings)
        // Live again: the same answer but for its date, which is today's (the run may cross midnight).
        let liveAgain = try await older.call("convert_time", Self.convert)
        #expect(
            liveAgain.status == .ok && Self.undated(liveAgain.output) == Self.undated(live.output),
            "\(String(describing: liveAgain.output))")
        await older.close()
        #expect(!FileManager.default.fileExists(atPath: directory.path("empty") + "/index.json"))

        // The same call twice in one connection: two recordings, each replayed in its turn.
        let twice = try await MCPServers(cassette: try Cassette(directory: cassette, mode: .new)).connect(settings)
        _ = try await twice.call("get_current_time", ["timezone": "UTC"])
        _ = try await twice.call("get_current_time", ["timezone": "UTC"])
        await twice.close()
        let grown = try String(contentsOfFile: cassette + "/index.json", encoding: .utf8)
        #expect(grown.components(separatedBy: "\"model\":\"tools/call\"").count - 1 == 3)
    }

    @Test(
        "a server over HTTP in the 2025 era, recorded then replayed: the session's version is in the key, the session id is not",
        .tags(.python), .needsPython)
    func http() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cassette = directory.path("cassette")
        let settings: ToolServerSettings
        let live: ToolOutcome
        let identity: ToolServerIdentity
        do {
            let server = try await MCPTestServers.legacyHTTPServer()
            defer { server.stop() }
            settings = MCPHTTPServerTests.settings("http://127.0.0.1:\(server.port)/mcp")
            let recording = try await MCPServers(cassette: try Cassette(directory: cassette, mode: .new)).connect(settings)
            live = try await recording.call("greet", ["name": "ada"])
            identity = recording.identity
            await recording.close()
        }
        #expect(live.output?["content"]?.arrayValue?.first?["text"] == "hello, ada")
        // The server is gone: the cassette answers alone.
        let replayed = try await MCPServers(cassette: try Cassette(directory: cassette, mode: .none)).connect(settings)
        #expect(replayed.identity == identity)
        #expect(replayed.identity.protocolVersion == "2025-06-18")
        #expect(try await replayed.call("greet", ["name": "ada"]).output == live.output)
        await replayed.close()
    }
}
