import Foundation
import NIOCore
import NIOHTTP1
import Recording
import TestTags
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A client of the project's HTTP server (the gateway, `collect`, `serve`) cannot hold a
/// connection for ever without a request under way; an answer that takes long is not cut off.
@Suite("HTTP clients that hold a connection without asking", .ownThread)
struct ClientDeadlineTests {
    /// Answers every request after `delayMs`, with its path.
    struct SlowAnswers: HTTPRequestHandling {
        var delayMs: Int
        func maxRequestBytes(for head: HTTPRequestHead) -> Int { 1 << 20 }
        func handle(_ head: HTTPRequestHead, body: [UInt8], _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>)
            async throws -> Bool
        {
            try await Task.sleep(for: .milliseconds(delayMs))
            return try await LocalHTTPServer.answer(status: 200, contentType: "text/plain", body: Array(head.uri.utf8), to: head, outbound)
        }
        func answerTooLarge(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
            -> Bool
        { false }
    }

    /// A TCP connection to 127.0.0.1:`port` that sends `text`, then reads until the server
    /// closes it or 10 s pass: what it read, and whether the server closed it.
    static func exchange(port: Int, sending text: String) -> (read: String, closed: Bool) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return ("", false) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if !text.isEmpty { _ = text.withCString { send(fd, $0, strlen($0), 0) } }
        var read: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (String(decoding: read, as: UTF8.self), true) }
            if count < 0 { return (String(decoding: read, as: UTF8.self), false) }
            read += buffer[0..<count]
        }
    }

    @Test(
        "a client that sends nothing, or half a request, is cut off at its deadline; a slow answer is written whole, then the idle deadline runs"
    )
    func deadlines() async throws {
        let server = try await LocalHTTPServer(
            handler: SlowAnswers(delayMs: 1_500), deadlines: ClientDeadlines(requestMs: 400, idleMs: 600))
        let port = server.port
        // Connected, silent: closed after the idle deadline, not held for ever.
        let silent = await Task.detached { Self.exchange(port: port, sending: "") }.value
        #expect(silent.closed && silent.read.isEmpty)
        // Half a request (its body never comes): closed after the request deadline.
        let half = await Task.detached {
            Self.exchange(port: port, sending: "POST /half HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
        }.value
        #expect(half.closed && half.read.isEmpty)
        // A whole request answered after 1.5 s (longer than both deadlines): the answer comes
        // whole, then the connection, idle, is closed.
        let slow = await Task.detached { Self.exchange(port: port, sending: "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") }.value
        #expect(slow.closed && slow.read.hasPrefix("HTTP/1.1 200 OK") && slow.read.hasSuffix("/slow"), "\(slow.read)")
        await server.stop()
    }
}
