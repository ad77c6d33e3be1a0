import Foundation
public import TraceCore

/// `scripts/otlp_receiver.py` on 127.0.0.1, in the `interop` Python environment: a real OTLP/HTTP
/// traces receiver that parses every request with the official OpenTelemetry protobuf
/// definitions, started by a test and killed when it calls `stop()`.
public final class OTLPReceiver: Sendable {
    public let port: Int
    /// Where the receiver writes each request it accepted (`request-K.json`) or rejected.
    public let directory: String
    private let process: Process

    /// How a hostile collector misbehaves, for an exporter's limits.
    public enum Misbehaviour: String, Sendable {
        /// Answers 200, then sends its body a byte every half second, for as long as it is read.
        case dripsAnswer = "--drip"
        /// Answers 401 with a body echoing every header value it was sent.
        case echoesHeadersIn401 = "--echo-401"
    }

    /// Starts the receiver; with `failFirst`, the first requests are answered 503 (retry-after: 0);
    /// with `misbehaving`, every request is answered that way instead.
    public init(directory: String, failFirst: Int = 0, misbehaving: Misbehaviour? = nil) async throws {
        let portFile = (directory as NSString).appendingPathComponent("port")
        let command = try await PythonEnvironment.interop.script(
            "otlp_receiver.py", [portFile, directory, "--fail-first", "\(failFirst)"] + (misbehaving.map { [$0.rawValue] } ?? []))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        // Its output goes nowhere: a child holding the test runner's pipes would keep it waiting.
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        var port: Int?
        for _ in 0..<200 where port == nil {
            port = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) }
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let port else {
            kill(process.processIdentifier, SIGKILL)
            throw PythonEnvironment.Unavailable(description: "scripts/otlp_receiver.py did not start listening within 10 s")
        }
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// The traces endpoint, `http://127.0.0.1:<port>/v1/traces`.
    public var endpoint: String { "http://127.0.0.1:\(port)/v1/traces" }

    /// Every request it accepted, in the order received, as the receiver summarised it:
    /// `spans` (name, ids, attributes, events, status) and `headers` (x-* and authorization).
    public func receivedRequests() throws -> [JSONValue] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("request-") }
        let numbered = names.compactMap { name in Int(name.dropFirst("request-".count).dropLast(".json".count)).map { ($0, name) } }
        return try numbered.sorted { $0.0 < $1.0 }.map { _, name in
            try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: (directory as NSString).appendingPathComponent(name)))))
        }
    }

    /// The spans of every request it accepted, in the order received.
    public func receivedSpans() throws -> [[JSONValue]] {
        try receivedRequests().map { $0["spans"]?.arrayValue ?? [] }
    }

    /// What it rejected, as the parser said it (`rejected-K.txt`), in no particular order.
    public func rejections() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("rejected-") }.map {
            try String(contentsOfFile: (directory as NSString).appendingPathComponent($0), encoding: .utf8)
        }
    }

    /// Kills the receiver and waits (at most 10 s) for it to be gone.
    public func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitForEnd(within: .seconds(10))
    }
}
