import AgentRuntime
import Foundation
import Synchronization
import TraceLog

/// The MCP client's side of `agent-eval mcp-proxy`: one JSON-RPC message a line on two
/// descriptors (the proxy's stdin and stdout). A thread of its own reads (the same line reader
/// as a server's stdout, `JSONLinesProcess.readLines`); writes go through one writer thread, one
/// whole line at a time, so answers that the proxy's tasks send at once never interleave.
final class ClientChannel: Sendable {
    /// The client's lines, as they came; ends at the input's end (the client closed it or
    /// exited), or when a line passes `lineLimit`.
    let lines: AsyncStream<[UInt8]>
    private let output: Int32
    private let writer = JobThreads(name: "agent-eval mcp-proxy client writer", stackSize: 128 * 1024)
    /// Set when a write failed: the client stopped reading. Later writes are dropped.
    private let writeFailure = Mutex<String?>(nil)
    /// How the input ended, once it has.
    private let inputEnd = Mutex<JSONLinesProcess.LinesEnd?>(nil)

    init(input: Int32, output: Int32, lineLimit: Int = JSONLinesProcess.lineLimit) {
        self.output = output
        let (lines, continuation) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .unbounded)
        self.lines = lines
        JobThreads.once(name: "agent-eval mcp-proxy client reader", stackSize: 256 * 1024) { [self] in
            let how = JSONLinesProcess.readLines(from: input, limit: lineLimit) { line in
                continuation.yield(line)
                return true
            }
            inputEnd.withLock { $0 = how }
            continuation.finish()
        }
    }

    deinit { writer.finish() }

    /// Whether the client's input ended on a line longer than the limit.
    var endedOnLongLine: Bool { inputEnd.withLock { $0 == .tooLong } }

    /// Why writing to the client failed, if it did.
    var failure: String? { writeFailure.withLock { $0 } }

    /// Writes one message and a newline. A client that no longer reads loses the message (its
    /// end is seen on the input side); nothing here waits for it forever but the write itself.
    func send(_ message: [UInt8]) async {
        let bytes = message + [0x0A]
        let fd = output
        await writer.run { [self] in
            if writeFailure.withLock({ $0 }) == nil, let failure = JSONLinesProcess.writeAll(bytes, to: fd) {
                writeFailure.withLock { $0 = failure }
            }
        }
    }
}
