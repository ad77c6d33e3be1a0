import Foundation
import Synchronization

/// The real MCP servers the tests run: `mcp-server-time` and `mcp-server-git` from PyPI and
/// `scripts/mcp_failure_server.py` (written with the official `mcp` package), installed into a
/// virtual environment by `scripts/mcp_venv` the first time a test asks.
public enum MCPTestServers {
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    private static let made = Mutex<Result<String, Unavailable>?>(nil)

    /// The virtual environment's folder; throws, saying why, when it cannot be made.
    public static func environment() throws -> String {
        try made.withLock { made in
            if let made { return try made.get() }
            let result = Result { () throws(Unavailable) in try makeEnvironment() }
            made = result
            return try result.get()
        }
    }

    /// `[python, scripts/mcp_failure_server.py] + flags`.
    public static func failureServer(_ flags: [String] = []) throws -> [String] {
        [try environment() + "/bin/python", scripts.appendingPathComponent("mcp_failure_server.py").path] + flags
    }

    /// `mcp-server-time` with UTC as its local zone.
    public static func timeServer() throws -> [String] {
        [try environment() + "/bin/mcp-server-time", "--local-timezone", "UTC"]
    }

    /// `mcp-server-git` on `repository`.
    public static func gitServer(repository: String) throws -> [String] {
        [try environment() + "/bin/mcp-server-git", "--repository", repository]
    }

    static var scripts: URL { ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("scripts") }

    private static func makeEnvironment() throws(Unavailable) -> String {
        let process = Process()
        process.executableURL = scripts.appendingPathComponent("mcp_venv")
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw Unavailable(description: "cannot run scripts/mcp_venv: \(error)")
        }
        let path = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let problem = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Unavailable(
                description: "the MCP servers for the tests could not be installed (scripts/mcp_venv exited "
                    + "\(process.terminationStatus)): \(problem.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        return path.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
