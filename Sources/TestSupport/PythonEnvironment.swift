import AgentRuntime
import Foundation
import Synchronization

/// A Python virtual environment with real components for the tests, made by
/// `scripts/python_venv <name>` the first time a test asks: `mcp` (MCP servers from PyPI) and
/// `interop` (the OpenTelemetry SDK and protobuf definitions, Inspect AI), `browser` (Selenium,
/// driving Debian's headless Chromium, which the script installs when missing).
public enum PythonEnvironment: String, Sendable, CaseIterable {
    case mcp
    /// The official `mcp` package of the 1.x line, which speaks only the 2025 era: a legacy-only
    /// client and server for `mcp-proxy --bridge` (scripts/mcp1_client.py, scripts/mcp1_server.py).
    case mcp1
    case interop
    case browser
    /// The official openai and anthropic SDKs, for the external agents in Fixtures/external.
    case agents
    /// The openai SDK with real OpenTelemetry instrumentations (openai-v2, OpenInference) and the
    /// SDK's OTLP/HTTP exporter, for Fixtures/external/otel_agent.py.
    case otel
    /// Google ADK, whose eval set models write the eval sets `case from-evalset` reads.
    case adk
    /// pytest, which runs the pytest plugin's own tests (python/tests, through pytester).
    case pytest
    /// auditwheel, which says which platforms the Python wheel (`scripts/build-wheel`) covers, and
    /// pip, which downloads the wheels the clean Debian root installs beside it.
    case wheel

    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    /// One installation per environment and process, shared by every test that asks.
    private static let installations = Mutex<[PythonEnvironment: Task<String, any Error>]>([:])

    /// The environment's folder; throws, saying why, when it cannot be made. The first call
    /// installs it through the house's `ChildProcess` (waited for on a thread of its own, so
    /// tests waiting for it never hold a thread of the cooperative pool that other tests need).
    public func path() async throws -> String {
        let task = Self.installations.withLock { installations -> Task<String, any Error> in
            if let current = installations[self] { return current }
            let task = Task<String, any Error> { try await make() }
            installations[self] = task
            return task
        }
        return try await task.value
    }

    /// `[python, scripts/<script>] + arguments`: a script of the repository run in this environment.
    public func script(_ script: String, _ arguments: [String] = []) async throws -> [String] {
        [try await path() + "/bin/python", Self.scripts.appendingPathComponent(script).path] + arguments
    }

    /// The path of a script in the repository's `scripts/` (one that needs no environment of its own).
    public static func scriptPath(_ script: String) -> String { scripts.appendingPathComponent(script).path }

    static var scripts: URL { ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("scripts") }

    /// Runs scripts/python_venv, within 30 minutes (pip downloads what is not cached yet; the
    /// wheel environment's Debian root takes a few minutes more).
    private func make() async throws(Unavailable) -> String {
        let result: ChildProcess.Result
        do {
            result = try await ChildProcess(
                command: [Self.scripts.appendingPathComponent("python_venv").path, rawValue], timeoutMs: 30 * 60_000, outputLimit: 1 << 20
            ).run()
        } catch {
            throw Unavailable(description: "cannot run scripts/python_venv \(rawValue): \(error)")
        }
        let problem = String(decoding: result.stderr, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.exitStatus == 0 else {
            let ending =
                result.isTimedOut
                ? "did not end within 30 minutes" : result.exitStatus.map { "exited \($0)" } ?? "was killed by signal \(result.signal ?? 0)"
            throw Unavailable(
                description:
                    "the \(rawValue) test environment could not be installed (scripts/python_venv \(rawValue) \(ending)): \(problem)")
        }
        return String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
