import Foundation
import Synchronization

/// The real MCP servers the tests run: `mcp-server-time` and `mcp-server-git` from PyPI and
/// `scripts/mcp_failure_server.py` (written with the official `mcp` package), installed into a
/// virtual environment by `scripts/mcp_venv` the first time a test asks.
public enum MCPTestServers {
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    /// The one installation of this process, shared by every test that asks.
    private static let installation = Mutex<Task<String, any Error>?>(nil)

    /// The virtual environment's folder; throws, saying why, when it cannot be made. The first
    /// call installs it (about 15 s) on a thread of its own, so tests waiting for it never hold
    /// a thread of the cooperative pool that other tests need.
    public static func environment() async throws -> String {
        let task = installation.withLock { current -> Task<String, any Error> in
            if let current { return current }
            let task = Task<String, any Error> {
                try await withCheckedThrowingContinuation { continuation in
                    let thread = Thread { continuation.resume(with: Result { try makeEnvironment() }) }
                    thread.start()
                }
            }
            current = task
            return task
        }
        return try await task.value
    }

    /// `[python, scripts/mcp_failure_server.py] + flags`.
    public static func failureServer(_ flags: [String] = []) async throws -> [String] {
        [try await environment() + "/bin/python", scripts.appendingPathComponent("mcp_failure_server.py").path] + flags
    }

    /// `mcp-server-time` with UTC as its local zone.
    public static func timeServer() async throws -> [String] {
        [try await environment() + "/bin/mcp-server-time", "--local-timezone", "UTC"]
    }

    /// `mcp-server-git` on `repository`.
    public static func gitServer(repository: String) async throws -> [String] {
        [try await environment() + "/bin/mcp-server-git", "--repository", repository]
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
