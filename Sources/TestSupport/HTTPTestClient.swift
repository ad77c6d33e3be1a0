import AgentRuntime
import Foundation
public import TraceCore

#if canImport(Glibc)
    import Glibc
#endif

/// A plain HTTP/1.1 client over a socket to 127.0.0.1, for tests of the servers the project
/// runs (`agent-eval serve`): one request per connection, the answer read whole, or a stream of
/// server-sent events read until the test has seen enough. Blocking work runs on a thread of its
/// own (`OwnThread`).
public enum HTTPTestClient {
    /// An answer: status, headers (names lower-cased) and body.
    public struct Answer: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
        public func json() throws -> JSONValue { try JSONParser.parse(body) }
    }

    /// One server-sent event.
    public struct Event: Sendable {
        public var id: String?
        public var event: String
        public var data: String
        public func json() throws -> JSONValue { try JSONParser.parse(Array(data.utf8)) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Sends one request and reads the answer to its end (the server closes or says its length).
    public static func request(
        port: Int, _ method: String = "GET", _ target: String, headers: [String: String] = [:], body: [UInt8] = [], timeout: Double = 30
    ) async throws -> Answer {
        try await OwnThread.run(name: "http test client") {
            let socket = try connect(port: port, timeout: timeout)
            defer { close(socket) }
            try send(socket, method: method, target: target, port: port, headers: headers, body: body)
            var received: [UInt8] = []
            let deadline = Date().addingTimeInterval(timeout)
            while true {
                if var answer = try parse(received, complete: false, isHead: method == "HEAD") {
                    // A HEAD answer has no body: whatever comes after its head within a moment is
                    // one, and is returned as its body for the caller to see.
                    if method == "HEAD", let end = find(received, Array("\r\n\r\n".utf8)) {
                        var extra = Array(received[(end + 4)...])
                        while let chunk = try read(socket, until: Date().addingTimeInterval(0.3)) { extra += chunk }
                        answer.body = extra
                    }
                    return answer
                }
                guard let chunk = try read(socket, until: deadline) else { break }
                received += chunk
            }
            guard let answer = try parse(received, complete: true, isHead: method == "HEAD") else {
                throw Failure(
                    description: "the server's answer to \(method) \(target) ended early: \(String(decoding: received, as: UTF8.self))")
            }
            return answer
        }
    }

    /// Opens `target` as an event stream and reads events until `enough` says so (given every
    /// event so far), the stream ends, or `timeout` passes; returns the head's status and the events.
    public static func events(
        port: Int, _ target: String, headers: [String: String] = [:], timeout: Double = 30,
        until enough: @escaping @Sendable ([Event]) -> Bool
    ) async throws -> (status: Int, events: [Event], timedOut: Bool) {
        try await OwnThread.run(name: "http test event stream") {
            let socket = try connect(port: port, timeout: timeout)
            defer { close(socket) }
            try send(
                socket, method: "GET", target: target, port: port, headers: headers.merging(["Accept": "text/event-stream"]) { a, _ in a },
                body: [])
            var received: [UInt8] = []
            var status = 0
            var events: [Event] = []
            var decoded: [UInt8] = []
            var chunked = false
            let deadline = Date().addingTimeInterval(timeout)
            while true {
                guard let chunk = try read(socket, until: deadline) else { return (status, events, Date() >= deadline) }
                received += chunk
                if status == 0 {
                    guard let end = find(received, Array("\r\n\r\n".utf8)) else { continue }
                    let head = String(decoding: received[..<end], as: UTF8.self)
                    status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                    chunked = head.lowercased().contains("transfer-encoding: chunked")
                    received = Array(received[(end + 4)...])
                    if status != 200 { return (status, [], false) }
                }
                if chunked {
                    // Chunk sizes out, data in.
                    while let line = find(received, Array("\r\n".utf8)) {
                        guard let size = Int(String(decoding: received[..<line], as: UTF8.self), radix: 16) else {
                            throw Failure(description: "a chunk size that does not read")
                        }
                        guard received.count >= line + 2 + size + 2 else { break }
                        decoded += received[(line + 2)..<(line + 2 + size)]
                        received = Array(received[(line + 2 + size + 2)...])
                        if size == 0 { return (status, events, false) }
                    }
                } else {
                    decoded += received
                    received = []
                }
                while let end = find(decoded, Array("\n\n".utf8)) {
                    let block = String(decoding: decoded[..<end], as: UTF8.self)
                    decoded = Array(decoded[(end + 2)...])
                    var event = Event(id: nil, event: "message", data: "")
                    var hasData = false
                    for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                        if line.hasPrefix(":") { continue }
                        let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                        let value = parts.count > 1 ? String(parts[1].drop { $0 == " " }) : ""
                        switch parts[0] {
                        case "id": event.id = value
                        case "event": event.event = value
                        case "data":
                            event.data += (hasData ? "\n" : "") + value
                            hasData = true
                        default: break
                        }
                    }
                    if hasData {
                        events.append(event)
                        if enough(events) { return (status, events, false) }
                    }
                }
            }
        }
    }

    /// Sends `request` as it is (a whole request head, CRLFs and all) and reads until the server
    /// closes the connection or `timeout` passes: what came, and whether the server closed.
    public static func readToTheEnd(port: Int, request: String, timeout: Double) async throws -> (received: [UInt8], closed: Bool) {
        try await OwnThread.run(name: "http test client") {
            let socket = try connect(port: port, timeout: timeout)
            defer { close(socket) }
            let bytes = Array(request.utf8)
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { throw Failure(description: "cannot send: \(String(cString: strerror(errno)))") }
                sent += count
            }
            var received: [UInt8] = []
            let deadline = Date().addingTimeInterval(timeout)
            while deadline.timeIntervalSinceNow > 0 {
                var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 65536)
                let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return (received, true) }
                received += buffer[..<count]
            }
            return (received, false)
        }
    }

    private static func connect(port: Int, timeout: Double) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "no socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socket)
            throw Failure(description: "cannot connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        return socket
    }

    private static func send(_ socket: Int32, method: String, target: String, port: Int, headers: [String: String], body: [UInt8]) throws {
        var head = "\(method) \(target) HTTP/1.1\r\n"
        var all = ["Host": "127.0.0.1:\(port)", "Connection": "close"]
        for (name, value) in headers { all[name] = value }
        if !body.isEmpty || method == "POST" { all["Content-Length"] = String(body.count) }
        for (name, value) in all.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        let bytes = Array((head + "\r\n").utf8) + body
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw Failure(description: "cannot send: \(String(cString: strerror(errno)))") }
            sent += count
        }
    }

    /// The next bytes, or nil at the end of the stream or the deadline.
    private static func read(_ socket: Int32, until deadline: Date) throws -> [UInt8]? {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { return nil }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(min(left, 3600) * 1000))
        guard ready > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Array(buffer[..<count])
    }

    private static func find(_ bytes: [UInt8], _ needle: [UInt8], from start: Int = 0) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            var index = start
            let last = buffer.count - needle.count
            while index <= last {
                if buffer[index] == needle[0] {
                    var matched = true
                    for offset in 1..<needle.count where buffer[index + offset] != needle[offset] {
                        matched = false
                        break
                    }
                    if matched { return index }
                }
                index += 1
            }
            return nil
        }
    }

    /// The answer in `bytes`, once its head and its whole body are there (`complete`: the
    /// connection ended, so the body is what came). The answer to a HEAD request has no body,
    /// whatever length its head says.
    private static func parse(_ bytes: [UInt8], complete: Bool, isHead: Bool = false) throws -> Answer? {
        guard let end = find(bytes, Array("\r\n\r\n".utf8)) else { return nil }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        let body = Array(bytes[(end + 4)...])
        if isHead { return Answer(status: status, headers: headers, body: []) }
        if let length = headers["content-length"].flatMap(Int.init) {
            guard body.count >= length else { return nil }
            return Answer(status: status, headers: headers, body: Array(body.prefix(length)))
        }
        return complete ? Answer(status: status, headers: headers, body: body) : nil
    }
}
