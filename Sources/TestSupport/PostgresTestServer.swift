import AgentRuntime
public import Foundation

/// A real PostgreSQL server for a test, from Debian's packages through
/// `scripts/postgres_server`: a new cluster in a temporary directory, on 127.0.0.1 at a free
/// port, with one database, `catalog`. `stop()` ends it and removes its files. When the
/// server's programs are missing the start fails with the script's message (run
/// scripts/bootstrap): a test that needs one never passes without it.
///
/// The script runs through AgentRuntime's `ChildProcess`, not Foundation's `Process`: inside
/// the test runner, `Process.waitUntilExit` never saw the script end once it had started the
/// server (the script sat a zombie; outside the runner the same code returned). The server
/// leaves the script's process group (pg_ctl starts it in a session of its own), so the group
/// kill that ends a `ChildProcess` does not reach it.
public final class PostgresTestServer: Sendable {
    /// The catalog URL of the server's database.
    public let url: String
    public let port: Int
    private let directory: String

    private init(url: String, port: Int, directory: String) {
        self.url = url
        self.port = port
        self.directory = directory
    }

    /// Starts a server.
    public static func start() async throws -> PostgresTestServer {
        let port = try await Self.freePort()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-pg-\(UUID().uuidString)").path
        let result = try await Self.script(["start", directory, String(port)])
        guard result.status == 0 else {
            throw PostgresServerError(message: "scripts/postgres_server could not start a server (exit \(result.status)): \(result.stderr)")
        }
        return PostgresTestServer(url: result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines), port: port, directory: directory)
    }

    /// The URL of another database on the same server, created now.
    public func newDatabase(_ name: String) async throws -> String {
        let result = try await Self.script(["createdb", directory, String(port), name])
        guard result.status == 0 else { throw PostgresServerError(message: "createdb \(name) failed: \(result.stderr)") }
        return "postgres://agent_eval@127.0.0.1:\(port)/\(name)"
    }

    /// Stops the server (fast shutdown: connected clients are cut off) and removes its files.
    public func stop() async {
        _ = try? await Self.script(["stop", directory])
    }

    /// Runs `body` with a server started for it, and stops the server afterwards.
    public static func with<T>(_ body: (PostgresTestServer) async throws -> T) async throws -> T {
        let server = try await start()
        do {
            let value = try await body(server)
            await server.stop()
            return value
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Runs scripts/postgres_server with `arguments`, within two minutes.
    static func script(_ arguments: [String]) async throws -> ProcessResult {
        let result = try await ChildProcess(
            command: ["/bin/bash", PythonEnvironment.scriptPath("postgres_server")] + arguments, timeoutMs: 120_000, outputLimit: 1 << 20
        ).run()
        return ProcessResult(
            status: result.exitStatus ?? -1, stdout: result.stdout, stderr: String(decoding: result.stderr, as: UTF8.self), elapsed: .zero)
    }

    /// A port nothing listens on now, from the kernel.
    static func freePort() async throws -> Int {
        let result = try await Subprocess.run(
            "/usr/bin/env", ["python3", "-c", "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"])
        guard result.status == 0, let port = Int(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw PostgresServerError(message: "no free port: \(result.stderr)")
        }
        return port
    }
}

public struct PostgresServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
