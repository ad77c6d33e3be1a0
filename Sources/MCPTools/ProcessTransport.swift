import AgentRuntime
import Foundation
import Logging
import MCP

/// The MCP SDK's view of a `JSONLinesProcess`: stdio framing (one message a line) over pipes we
/// own, so this module decides how the process starts, what a malformed line means, and when
/// the process is killed. (The SDK's own `StdioTransport` reads this process's stdin and
/// stdout; it cannot start a server.)
actor ProcessTransport: Transport {
    nonisolated let logger = Logger(label: "agent-eval.mcp", factory: { _ in SwiftLogNoOpLogHandler() })
    let server: JSONLinesProcess
    private var handedOut = false

    init(server: JSONLinesProcess) {
        self.server = server
    }

    func connect() async throws {}

    func disconnect() async {
        await server.stop()
    }

    func send(_ data: Data) async throws {
        try await server.send(data)
    }

    /// The server's messages. The client asks again after a stream ends; a second stream
    /// fails at once, which ends the client's read loop.
    func receive() -> AsyncThrowingStream<Data, any Error> {
        if handedOut {
            return AsyncThrowingStream { $0.finish(throwing: JSONLinesProcess.ServerClosed()) }
        }
        handedOut = true
        return server.messages
    }
}
