import Foundation

/// `scripts/model_server.py` on 127.0.0.1: a real HTTP server speaking OpenAI Chat
/// Completions and Anthropic Messages, started by a test and stopped when it is done
/// (closing its standard input ends it, also when the test process dies).
public final class LocalModelServer: Sendable {
    public let port: Int
    private let server: LocalScriptServer
    /// Where the server appends each request it receives, one JSON line each.
    private let requestLog: String

    /// Starts the server; throws with a clear message when python3 is missing.
    public init() throws {
        let script = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("scripts/model_server.py").path
        let requestLog = NSTemporaryDirectory() + "/agent-eval-model-server-\(UUID().uuidString).jsonl"
        do {
            server = try LocalScriptServer(["python3", script], environment: ["MODEL_SERVER_REQUESTS": requestLog])
        } catch {
            throw ServerError(message: "the local model server (python3 is needed for it): \(error)")
        }
        port = server.port
        self.requestLog = requestLog
    }

    /// `http://127.0.0.1:<port>/<scenario>/v1`: the base URL of one scenario.
    public func baseURL(_ scenario: String) -> String { "http://127.0.0.1:\(port)/\(scenario)/v1" }

    /// The requests the server received: path, headers and body each.
    public func requests() throws -> [[String: Any]] {
        guard let data = FileManager.default.contents(atPath: requestLog) else { return [] }
        return try data.split(separator: 0x0A).map { line in
            (try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]) ?? [:]
        }
    }

    /// Ends the server (`LocalScriptServer.stop`) and removes its request log.
    public func stop() {
        server.stop()
        try? FileManager.default.removeItem(atPath: requestLog)
    }

    public typealias ServerError = LocalScriptServer.ServerError
}
