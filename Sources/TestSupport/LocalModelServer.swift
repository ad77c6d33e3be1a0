import Foundation

/// `scripts/model_server.py` on 127.0.0.1: a real HTTP server speaking OpenAI Chat
/// Completions and Anthropic Messages, started by a test and stopped when it is done
/// (closing its standard input ends it, also when the test process dies).
public final class LocalModelServer: Sendable {
    public let port: Int
    private let process: Process
    private let input: Pipe
    /// Where the server appends each request it receives, one JSON line each.
    private let requestLog: String

    /// Starts the server; throws with a clear message when python3 is missing.
    public init() throws {
        let script = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("scripts/model_server.py").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let requestLog = NSTemporaryDirectory() + "/agent-eval-model-server-\(UUID().uuidString).jsonl"
        process.environment = ProcessInfo.processInfo.environment.merging(["MODEL_SERVER_REQUESTS": requestLog]) { $1 }
        do {
            try process.run()
        } catch {
            throw ServerError(message: "cannot start python3 \(script) (python3 is needed for the local model server): \(error)")
        }
        var line: [UInt8] = []
        while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != 0x0A { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else {
            process.terminate()
            throw ServerError(message: "the local model server did not start (it printed \"\(text)\")")
        }
        self.port = port
        self.process = process
        self.input = input
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

    /// Closes the server's input, which ends it; if it is still there after 5 s (something else
    /// holds its input open), terminates it. Polls rather than `waitUntilExit`, which spins a
    /// thread of the cooperative pool on Linux.
    public func stop() {
        try? input.fileHandleForWriting.close()
        var waited = 0
        while process.isRunning && waited < 5_000 {
            usleep(10_000)
            waited += 10
        }
        if process.isRunning { process.terminate() }
        while process.isRunning { usleep(10_000) }
        try? FileManager.default.removeItem(atPath: requestLog)
    }

    deinit {
        if process.isRunning { stop() }
    }

    public struct ServerError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }
}
