import Foundation

/// The real MCP servers the tests run: `mcp-server-time` and `mcp-server-git` from PyPI and
/// `scripts/mcp_failure_server.py` (written with the official `mcp` package), installed into a
/// virtual environment by `scripts/mcp_venv` the first time a test asks.
public enum MCPTestServers {
    /// The virtual environment's folder (`scripts/python_venv mcp`); throws, saying why, when it
    /// cannot be made.
    public static func environment() async throws -> String {
        try await PythonEnvironment.mcp.path()
    }

    /// `[python, scripts/mcp_failure_server.py] + flags`.
    public static func failureServer(_ flags: [String] = []) async throws -> [String] {
        [try await environment() + "/bin/python", scripts.appendingPathComponent("mcp_failure_server.py").path] + flags
    }

    /// `[python, scripts/mcp_legacy_server.py] + flags`: a server of the 2025 era only, with no
    /// dependencies (`--exit-before-initialize`: it exits on a request before `initialize`).
    public static func legacyServer(_ flags: [String] = []) async throws -> [String] {
        [try await environment() + "/bin/python", scripts.appendingPathComponent("mcp_legacy_server.py").path] + flags
    }

    /// `[python, scripts/mcp_odd_questions_server.py]`: a server of the 2026-07-28 revision only
    /// (it refuses `initialize`), with no dependencies, whose tools ask questions no policy can
    /// read, and one (`plain`) that answers at once.
    public static func modernOnlyServer() async throws -> [String] {
        [try await environment() + "/bin/python", scripts.appendingPathComponent("mcp_odd_questions_server.py").path]
    }

    /// `mcp-server-time` with UTC as its local zone.
    public static func timeServer() async throws -> [String] {
        [try await environment() + "/bin/mcp-server-time", "--local-timezone", "UTC"]
    }

    /// `mcp-server-git` on `repository`.
    public static func gitServer(repository: String) async throws -> [String] {
        [try await environment() + "/bin/mcp-server-git", "--repository", repository]
    }

    static var scripts: URL { PythonEnvironment.scripts }
}

extension MCPTestServers {
    /// `scripts/mcp_http_server.py` (the `mcp` 2.x server over Streamable HTTP, both eras) on
    /// 127.0.0.1, started for the test; `--json-response`, `--token T` as its flags say. Each
    /// request it received is a JSON line of `requestLog` when given.
    public static func httpServer(_ flags: [String] = [], requestLog: String? = nil) async throws -> LocalScriptServer {
        let python = try await environment() + "/bin/python"
        return try LocalScriptServer(
            [python, scripts.appendingPathComponent("mcp_http_server.py").path] + flags,
            environment: requestLog.map { ["MCP_HTTP_SERVER_REQUESTS": $0] } ?? [:])
    }

    /// `scripts/mcp_legacy_server.py --http`: a 2025-only server over Streamable HTTP, with
    /// sessions, on 127.0.0.1.
    public static func legacyHTTPServer() async throws -> LocalScriptServer {
        let python = try await environment() + "/bin/python"
        return try LocalScriptServer([python, scripts.appendingPathComponent("mcp_legacy_server.py").path, "--http"])
    }
}

extension MCPTestServers {
    /// `[python, scripts/mcp_tasks_server.py]`: a 2026-07-28 server, with no dependencies, that
    /// answers calls with tasks (the tasks extension); each `tasks/cancel` is a line of `journal`.
    public static func tasksServer(journal: String? = nil) async throws -> [String] {
        [try await environment() + "/bin/python", scripts.appendingPathComponent("mcp_tasks_server.py").path]
            + (journal.map { ["--journal", $0] } ?? [])
    }
}
