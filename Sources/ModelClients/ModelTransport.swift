public import AgentRuntime
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// One HTTP header.
public struct HTTPHeader: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// One request to a model server (or a collector, or an MCP server): a POST unless `method`
/// says otherwise.
public struct TransportRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// The timeouts the transport sets up the connection with; `RequestPolicy` holds the
    /// attempt to all of them.
    public var limits: RequestLimits

    public init(method: String = "POST", url: String, headers: [HTTPHeader], body: [UInt8], limits: RequestLimits) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.limits = limits
    }
}

/// What comes back, as it comes: the head once, then the body in chunks.
public enum TransportPart: Sendable {
    case head(status: Int, headers: [HTTPHeader])
    case chunk([UInt8])
}

/// Sends a request and hands each part of the response to `receive` as it arrives. The live
/// transport is HTTP; a cassette (`Cassette`) records or replays the same parts.
public protocol ModelTransport: Sendable {
    func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws
}

/// The transports of this module that others start from.
public enum ModelTransports {
    /// The live transport: HTTP, the body streamed as the server sends it.
    public static var live: any ModelTransport { HTTPTransport() }
}

/// The live transport, on async-http-client: the body streams as the server sends it.
struct HTTPTransport: ModelTransport {
    func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws {
        let client = SharedHTTPClients.client(
            connectTimeoutMs: request.limits.connectTimeoutMs, idleTimeoutMs: request.limits.idleTimeoutMs)
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for header in request.headers { outgoing.headers.add(name: header.name, value: header.value) }
        if !request.body.isEmpty || request.method == "POST" { outgoing.body = .bytes(ByteBuffer(bytes: request.body)) }
        // The library's deadline ends with the response head; `RequestPolicy` holds the whole
        // attempt, the body included, to the same timeout.
        let response = try await client.execute(outgoing, deadline: .now() + .milliseconds(Int64(request.limits.timeoutMs)))
        try receive([.head(status: Int(response.status.code), headers: response.headers.map { HTTPHeader(name: $0.name, value: $0.value) })]
        )
        for try await buffer in response.body {
            try receive([.chunk(Array(buffer.readableBytesView))])
        }
    }

    /// A transport failure as a sentence, without the library's type names.
    static func describe(_ error: any Error, request: TransportRequest) -> String {
        let host = URLComponents(string: request.url).map { "\($0.host ?? "?")\($0.port.map { ":\($0)" } ?? "")" } ?? request.url
        if let http = error as? HTTPClientError {
            switch http {
            case .connectTimeout: return "could not connect to \(host) within \(request.limits.connectTimeoutMs) ms"
            case .readTimeout: return "the server sent nothing for \(request.limits.idleTimeoutMs) ms (idle_timeout_ms)"
            case .deadlineExceeded: return "the attempt took longer than \(request.limits.timeoutMs) ms (timeout_ms)"
            case .remoteConnectionClosed: return "the server closed the connection before the reply was complete"
            case .invalidURL: return "the URL \(request.url) is not valid"
            default: break
            }
        }
        let text = "\(error)"
        if text.contains("connectionRefused") || text.contains("ECONNREFUSED") || text.contains("Connection refused") {
            return "could not connect to \(host) (connection refused): is the server running?"
        }
        if text.contains("UnknownHost") || text.contains("Name or service not known") || text.contains("nodename nor servname") {
            return "could not resolve \(URLComponents(string: request.url)?.host ?? host): no such host, or no network to ask"
        }
        if text.contains("ECONNRESET") || text.contains("Connection reset") {
            return "the connection to \(host) was reset before the reply was complete"
        }
        if text.contains("uncleanShutdown") || text.contains("ioOnClosedChannel") || text.contains("EOF") {
            return "the connection to \(host) closed before the reply was complete"
        }
        return "the connection to \(host) failed: \(text)"
    }
}

/// One client per timeout setting for the whole process, never shut down (like
/// `HTTPClient.shared`): runs of one `agent-eval run --jobs N` share connections.
enum SharedHTTPClients {
    // Guarded by the mutex: clients by (connect, idle) timeouts in ms.
    private static let clients = Mutex<[[Int]: HTTPClient]>([:])

    /// Concurrent HTTP/1.1 connections to one host, at most: far more than an agent or a suite's
    /// `--jobs` has requests in flight (`record --max-requests` is 100 by default), and few
    /// enough that a runaway agent cannot exhaust the machine's descriptors.
    static let connectionsPerHost = 512

    static func client(connectTimeoutMs: Int, idleTimeoutMs: Int) -> HTTPClient {
        clients.withLock { clients in
            let key = [connectTimeoutMs, idleTimeoutMs]
            if let client = clients[key] { return client }
            var configuration = HTTPClient.Configuration()
            configuration.timeout = HTTPClient.Configuration.Timeout(
                connect: .milliseconds(Int64(connectTimeoutMs)), read: .milliseconds(Int64(idleTimeoutMs)))
            configuration.decompression = .disabled
            // No redirect is followed: the library would carry every header but Authorization,
            // Cookie and Origin (an x-api-key, an MCP server's own headers) to whatever host a
            // redirect names. A 3xx is answered as it came, and the error says where it pointed.
            configuration.redirectConfiguration = .disallow
            // A refused connection fails the attempt at once: the model client's own retries
            // (with backoff, counted against max_retries) decide whether to try again, instead
            // of the pool quietly retrying until the connect timeout.
            configuration.connectionPool.retryConnectionEstablishment = false
            // As many connections to one host as requests in flight, up to `connectionsPerHost`:
            // the library's default of 8 made the 9th concurrent request of an agent recorded
            // through the gateway (or of `run --jobs 12`) wait for a connection, and fail after
            // the connect timeout while the others streamed.
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerHost
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            clients[key] = client
            return client
        }
    }
}
