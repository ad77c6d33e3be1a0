import AgentRuntime
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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
    /// The cluster's superuser's URL (`agent_eval_admin`), for what the catalog's role may not do.
    public let adminURL: String
    public let port: Int
    /// The cluster's directory (`scripts/postgres_server stop DIRECTORY` ends the server).
    public let directory: String

    private init(url: String, adminURL: String, port: Int, directory: String) {
        self.url = url
        self.adminURL = adminURL
        self.port = port
        self.directory = directory
    }

    /// Starts a server: for a test, without fsync (its files are thrown away); `durable`, with
    /// PostgreSQL's own durability settings (for a benchmark).
    public static func start(durable: Bool = false) async throws -> PostgresTestServer {
        // Two clusters made at a time: ten suites' `initdb`s at once, beside the rest of the
        // suite, once took longer than the script's time (every PostgreSQL test failed).
        guard
            await starting.wait(
                within: .seconds(600), on: ContinuousClock(),
                until: { running in
                    guard running < 2 else { return false }
                    running += 1
                    return true
                })
        else {
            throw PostgresServerError(message: "no turn to start a PostgreSQL server came within 10 minutes")
        }
        defer { starting.withLock { $0 -= 1 } }
        let port = try LocalPort.free()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-pg-\(UUID().uuidString)").path
        let result = try await Self.script(["start", directory, String(port)] + (durable ? ["durable"] : []))
        guard result.status == 0 else {
            // A script stopped at its time may have started the server (in a session of its own).
            _ = try? await Self.script(["stop", directory])
            throw PostgresServerError(message: "scripts/postgres_server could not start a server (exit \(result.status)): \(result.stderr)")
        }
        let urls = result.stdoutText.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard urls.count == 2 else {
            _ = try? await Self.script(["stop", directory])
            throw PostgresServerError(message: "scripts/postgres_server printed no catalog and admin URLs: \(result.stdoutText)")
        }
        return PostgresTestServer(url: urls[0], adminURL: urls[1], port: port, directory: directory)
    }

    /// Stops the server (fast shutdown: connected clients are cut off) and removes its files.
    public func stop() async {
        _ = try? await Self.script(["stop", directory])
    }

    /// Sends `signal` to the server and every process it started: SIGSTOP makes a server that
    /// takes connections and statements and never answers (as one cut off by the network),
    /// SIGCONT brings it back.
    public func signal(_ signal: String) async throws {
        let first = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8).split(separator: "\n").first
        guard let pid = first.map(String.init) else { throw PostgresServerError(message: "the server wrote no postmaster.pid") }
        _ = try await Subprocess.run("/usr/bin/env", ["pkill", "-\(signal)", "-P", pid])
        _ = try await Subprocess.run("/usr/bin/env", ["kill", "-\(signal)", pid])
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

    /// How many servers are being started now (`start` lets two at a time).
    private static let starting = WatchedState(0)

    /// Runs scripts/postgres_server with `arguments`, within five minutes.
    static func script(_ arguments: [String]) async throws -> ProcessResult {
        let result = try await ChildProcess(
            command: ["/bin/bash", PythonEnvironment.scriptPath("postgres_server")] + arguments, timeoutMs: 300_000, outputLimit: 1 << 20
        ).run()
        return ProcessResult(
            status: result.exitStatus ?? -1, stdout: result.stdout, stderr: String(decoding: result.stderr, as: UTF8.self), elapsed: .zero)
    }
}

public struct PostgresServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
