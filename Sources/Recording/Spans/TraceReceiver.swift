import Foundation
public import Interop
public import NIOCore
public import NIOHTTP1
import Synchronization
import TraceCore
import TraceLog

/// Where a receiver's spans go: `agent-eval collect`'s per-trace store, or the run `agent-eval
/// record` is writing.
public protocol SpanSink: Sendable {
    /// Keeps the request's spans before it returns, since the exporter is told they are kept
    /// once it does — `collect` fsynced on disk, `record` in its log, flushed as the log's steps
    /// are — and answers how many it kept.
    func keep(_ received: ReceivedTraces) async throws -> Int
}

extension TraceCollector: SpanSink {
    /// Appends and fsyncs off the cooperative pool (`CollectorWork`).
    public func keep(_ received: ReceivedTraces) async throws -> Int {
        try await CollectorWork.run { try self.accept(received) }
    }
}

/// The collector's disk work (appends and fsyncs, writing logs), off the cooperative pool on a
/// few threads of its own (TraceLog's `JobThreads`), reused from request to request.
public enum CollectorWork {
    // A trace is read back and imported here: a request nested as deep as a reader allows (512
    // levels; the parser and the importer recurse per level) overflowed 512 KiB in a debug build.
    private static let threads = JobThreads(
        count: max(2, ProcessInfo.processInfo.activeProcessorCount), name: "agent-eval collect", stackSize: 4 << 20)

    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await threads.run(body)
    }

    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await threads.run(body)
    }
}

/// An OTLP/HTTP receiver listening on its own (`agent-eval collect`).
public final class TraceServer: Sendable {
    private let server: LocalHTTPServer
    public let receiver: TraceReceiver
    public var port: Int { server.port }

    /// Starts listening on `host:port` (port 0: a free one); a `RecordingError` that says why
    /// it cannot.
    public init(host: String, port: Int, receiver: TraceReceiver) async throws {
        self.receiver = receiver
        do {
            server = try await LocalHTTPServer(host: host, port: port, handler: receiver)
        } catch let error as IOError {
            let reason = String(cString: strerror(error.errnoCode))
            let hint =
                switch error.errnoCode {
                case EADDRINUSE:
                    "another program listens on port \(port) (another collector?): choose another with --listen, or :0 for a free one"
                case EADDRNOTAVAIL: "\(host) is not an address of this machine: listen on 127.0.0.1, or an address `ip addr` lists"
                case EACCES: "ports below 1024 need privileges: choose a higher port"
                default: "choose another address with --listen"
                }
            throw RecordingError(.gatewayFailed, "cannot listen on \(host):\(port): \(reason)", hint: hint)
        } catch {
            throw RecordingError(.gatewayFailed, "cannot listen on \(host):\(port): \(error)", hint: "choose another address with --listen")
        }
    }

    public func stop() async {
        await server.stop()
    }
}

/// An OTLP/HTTP traces receiver (`POST /v1/traces`), as the OpenTelemetry SDKs' exporters
/// speak it: protobuf (`application/x-protobuf`) or JSON (`application/json`) bodies, gzip or
/// not; the answer is an `ExportTraceServiceResponse` in the request's encoding, or a `Status`
/// naming what was wrong (docs/interop.md, "Collecting traces live").
///
/// - 400: a body that does not decode, or is no `ExportTraceServiceRequest`;
/// - 404 / 405: another path, another method;
/// - 413: a body (or what its gzip inflates to) larger than `maxRequestBytes`, or spans of a
///   trace that holds `collect --max-trace` bytes already;
/// - 415: another content type or encoding;
/// - 503: the spans could not be kept (the disk) — the exporter retries.
public final class TraceReceiver: HTTPRequestHandling {
    public struct Counts: Sendable, Hashable {
        public var requests = 0
        public var spans = 0
        /// Requests refused (4xx, 5xx).
        public var refused = 0
        /// Spans left out for want of a trace or span id.
        public var unidentified = 0
    }

    let sink: any SpanSink
    let maxRequestBytes: Int

    public func maxRequestBytes(for head: HTTPRequestHead) -> Int { maxRequestBytes }
    private let counts = Mutex(Counts())

    public init(sink: any SpanSink, maxRequestBytes: Int) {
        self.sink = sink
        self.maxRequestBytes = maxRequestBytes
    }

    /// What has come so far.
    public var received: Counts { counts.withLock { $0 } }

    /// Whether `path` is the traces endpoint.
    static func serves(_ path: String) -> Bool {
        path.prefix { $0 != "?" } == "/v1/traces"
    }

    private enum Encoding { case protobuf, json }

    public func handle(_ head: HTTPRequestHead, body: [UInt8], _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>)
        async throws -> Bool
    {
        let type = head.headers.first(name: "content-type")?.split(separator: ";").first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        let encoding: Encoding = type == "application/json" ? .json : .protobuf
        func refuse(_ status: Int, _ message: String) async throws -> Bool {
            counts.withLock { $0.refused += 1 }
            return try await Self.answer(status: status, message: message, encoding: encoding, to: head, outbound)
        }
        guard Self.serves(head.uri) else {
            return try await refuse(404, "agent-eval takes OpenTelemetry traces at POST /v1/traces (OTLP/HTTP); \(head.uri) is not it")
        }
        guard head.method == .POST else {
            return try await refuse(405, "the traces endpoint takes POST, not \(head.method.rawValue)")
        }
        guard type == "application/x-protobuf" || type == "application/json" else {
            return try await refuse(
                415,
                "the content type \(type.map { "\"\($0)\"" } ?? "(none)") is not OTLP/HTTP's: send application/x-protobuf or "
                    + "application/json (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf or http/json; gRPC is not taken)")
        }
        var bytes = body
        switch head.headers.first(name: "content-encoding")?.lowercased() {
        case nil, "", "identity": break
        case "gzip":
            do {
                bytes = try GzipData.decompress(body, limit: maxRequestBytes, path: "the request body")
            } catch let error as LogError where error.code == .eventTooLarge {
                return try await refuse(
                    413, "the gzip body inflates to more than \(maxRequestBytes) bytes, more than this receiver takes (--max-body)")
            } catch {
                return try await refuse(400, "the gzip body does not inflate: \((error as? LogError)?.message ?? "\(error)")")
            }
        case let other?:
            return try await refuse(415, "the content encoding \"\(other)\" is not taken: send gzip or none")
        }
        let request: JSONValue
        switch encoding {
        case .protobuf:
            do throws(OTLPProtobuf.DecodeError) {
                request = try OTLPProtobuf.traceRequest(bytes)
            } catch {
                return try await refuse(400, "the protobuf body is not an OTLP ExportTraceServiceRequest: \(error)")
            }
        case .json:
            do {
                request = try JSONParser.parse(bytes)
            } catch {
                return try await refuse(400, "the JSON body does not parse: \((error as? TraceCoreError)?.message ?? "\(error)")")
            }
        }
        let received: ReceivedTraces
        do throws(ImportError) {
            received = try ReceivedTraces(request: request)
        } catch {
            return try await refuse(400, error.message)
        }
        let kept: Int
        do {
            kept = try await sink.keep(received)
        } catch let tooLarge as TraceCollector.TraceTooLarge {
            return try await refuse(413, tooLarge.message)
        } catch {
            return try await refuse(
                503, "agent-eval could not keep the spans: \((error as? any Diagnostic)?.message ?? "\(error)"); send them again")
        }
        counts.withLock { counts in
            counts.requests += 1
            counts.spans += kept
            counts.unidentified += received.unidentified
        }
        // ExportTraceServiceResponse: empty, or a partial success naming the spans left out.
        let capped = max(0, received.spanCount - kept)
        let rejected = received.unidentified + capped
        var reasons: [String] = []
        if received.unidentified > 0 {
            reasons.append(
                "\(counted(received.unidentified, "span")) left out: no span id, or no trace id of 16 bytes (32 hex digits, or base64)")
        }
        if capped > 0 {
            reasons.append("\(counted(capped, "span")) refused: their trace holds as much as --max-trace keeps")
        }
        let message = reasons.joined(separator: "; ")
        switch encoding {
        case .protobuf:
            var body: [UInt8] = []
            if rejected > 0 {
                var partial = ProtobufWriter()
                partial.varint(field: 1, UInt64(rejected))
                partial.string(field: 2, message)
                body.append(contentsOf: ProtobufWriter.message(field: 1, partial.bytes))
            }
            return try await LocalHTTPServer.answer(status: 200, contentType: "application/x-protobuf", body: body, to: head, outbound)
        case .json:
            let value: JSONValue =
                rejected == 0 ? [:] : ["partialSuccess": ["rejectedSpans": .string(String(rejected)), "errorMessage": .string(message)]]
            return try await LocalHTTPServer.answer(
                status: 200, contentType: "application/json", body: JSONWriter.encode(value), to: head, outbound)
        }
    }

    /// Two of the largest bodies at once: a body is inflated and parsed in memory (a few times
    /// its size), so requests that come together are bounded together, not each alone.
    public var maxHeldBytes: Int { maxRequestBytes > Int.max / 2 ? Int.max - 1 : maxRequestBytes * 2 }

    /// 503 with `Retry-After`: the OTLP exporters send the request again after it.
    public func answerBusy(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
        -> Bool
    {
        try await refuseUnread(
            503,
            "the receiver holds \(maxHeldBytes) bytes of other requests' bodies, all it takes at once: send this again in a moment",
            head, outbound, headers: [("retry-after", "1")])
    }

    public func answerTooLarge(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
        -> Bool
    {
        try await refuseUnread(
            413,
            "the body is larger than \(maxRequestBytes) bytes, more than this receiver takes (--max-body); "
                + "export smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)", head, outbound)
    }

    /// Refuses a request whose body the server did not keep: counted refused, and answered in
    /// the encoding its content type names.
    private func refuseUnread(
        _ status: Int, _ message: String, _ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>,
        headers: [(String, String)] = []
    ) async throws -> Bool {
        counts.withLock { $0.refused += 1 }
        let type = head.headers.first(name: "content-type")?.lowercased() ?? ""
        return try await Self.answer(
            status: status, message: message, encoding: type.hasPrefix("application/json") ? .json : .protobuf, to: head, outbound,
            headers: headers)
    }

    /// A `google.rpc.Status` (code, message) in the request's encoding, as OTLP/HTTP answers a failure.
    private static func answer(
        status: Int, message: String, encoding: Encoding, to head: HTTPRequestHead,
        _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, headers: [(String, String)] = []
    ) async throws -> Bool {
        // gRPC's codes: INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED, RESOURCE_EXHAUSTED, UNAVAILABLE.
        let code: UInt64 =
            switch status {
            case 404: 5
            case 405, 415: 12
            case 413: 8
            case 503: 14
            default: 3
            }
        switch encoding {
        case .protobuf:
            var writer = ProtobufWriter()
            writer.varint(field: 1, code)
            writer.string(field: 2, message)
            return try await LocalHTTPServer.answer(
                status: status, contentType: "application/x-protobuf", body: writer.bytes, to: head, outbound, headers: headers)
        case .json:
            return try await LocalHTTPServer.answer(
                status: status, contentType: "application/json",
                body: JSONWriter.encode(["code": .int(Int(code)), "message": .string(message)]), to: head, outbound, headers: headers)
        }
    }
}

/// The little protobuf the receiver writes: varint and length-delimited fields.
struct ProtobufWriter {
    var bytes: [UInt8] = []

    mutating func varint(field: Int, _ value: UInt64) {
        Self.append(varint: UInt64(field << 3), to: &bytes)
        Self.append(varint: value, to: &bytes)
    }

    mutating func string(field: Int, _ text: String) {
        bytes += Self.message(field: field, Array(text.utf8))
    }

    static func message(field: Int, _ content: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        append(varint: UInt64(field << 3 | 2), to: &bytes)
        append(varint: UInt64(content.count), to: &bytes)
        return bytes + content
    }

    static func append(varint value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
}
