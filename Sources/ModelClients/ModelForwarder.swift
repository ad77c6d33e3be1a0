public import AgentRuntime
import Foundation
import TraceCore
import TraceLog

/// Sends a request an agent made to its model on to the upstream (or a cassette), hands every
/// part of the answer back as it arrives, and reads the reply on the way (`ReplyReader`): the
/// recording gateway's one call into this module.
///
/// A streamed answer ends at its protocol's end marker (`ReplyReader.isComplete`): the exchange
/// is complete there, and what the upstream or the agent's connection does after it is not
/// waited for.
///
/// The attempt is held to `limits` as a model client's is (`RequestPolicy`): the whole attempt,
/// the streamed body included, ends at `limits.timeoutMs`; an answer past `limits.maxReplyBytes`
/// is cut there (the agent gets what came before it). No text this returns shows the credentials
/// the request carried.
public struct ModelForwarder: Sendable {
    public var limits: RequestLimits
    let transport: any ModelTransport
    let clock: any Clock<Duration>

    public init(transport: any ModelTransport, limits: RequestLimits, clock: any Clock<Duration> = LiveClock()) {
        self.transport = transport
        self.limits = limits
        self.clock = clock
    }

    /// How one forwarded request went.
    public struct Outcome: Sendable {
        /// The reply as read (its status 0 when no answer came).
        public var reply: ReplyReader.Reply
        /// Why the attempt did not end with the whole answer: a connection error, the time
        /// limit, a cassette miss; nil when the answer came whole (whatever its status).
        public var failure: String?
        /// The cassette has no recording of the request and may not record one (`--record none`).
        public var isNotRecorded: Bool
        /// From sending to the first content of the reply (text or a tool call), in µs, as the
        /// model clients measure the time to first token; nil when none came.
        public var firstContentUs: Int?
    }

    /// The header values never to show: the value of every header a request carries except
    /// those that describe the request or the SDK (`describingHeaders`, `x-stainless-*`) or name
    /// one request (`…-id`, `idempotency-key`: new on every request, never a credential), and the
    /// token of an `Authorization` value besides the whole. API keys and bearer tokens, and as
    /// well `Cookie`, `OpenAI-Organization`, `OpenAI-Project` and an agent's custom headers: an
    /// upstream may echo any of them, and they reach no log, cassette or message. A value that
    /// would stand for JSON (`true`, a number) or is shorter than 8 characters is a word, not a
    /// credential: replacing it everywhere would change the log's JSON and its text.
    public static func secrets(in headers: [HTTPHeader]) -> [String] {
        var secrets: [String] = []
        for header in headers {
            let name = header.name.lowercased()
            guard !describingHeaders.contains(name), !name.hasPrefix("x-stainless-"), !name.hasSuffix("-id") else { continue }
            let isCredential = credentialHeaders.contains(name)
            for value in [header.value] + (isCredential ? bearerToken(header.value) : []) {
                let isWord = value.count < 8 || ["true", "false", "null"].contains(value) || Double(value) != nil
                if isCredential ? value.count >= 4 : !isWord { secrets.append(value) }
            }
        }
        return secrets
    }

    /// The secrets a request carries: its headers' (`secrets(in:)`) and its URL's query's
    /// (`secrets(inURL:)`).
    public static func secrets(of request: TransportRequest) -> [String] {
        secrets(in: request.headers) + secrets(inURL: request.url)
    }

    /// A URL's userinfo secret (the password of `user:password@`, or a token given alone as
    /// `TOKEN@`), and the values of its query parameters that carry a credential — Azure's `api-key`, a
    /// gateway's `key`, `access_token`, a signature (`sig`), a function key (`code`), any name a
    /// secret's would be (`Redactor.looksSecret`: `*_token`, `*secret*`, `*_key`) — as written and
    /// percent-decoded: an upstream that echoes the URL (a 401 naming it, a proxy's error page)
    /// must not bring them into the log.
    public static func secrets(inURL url: String) -> [String] {
        var secrets: [String] = []
        // Userinfo (`user:password@`, or a token alone, `TOKEN@`): the password, or the token.
        if let scheme = url.range(of: "://") {
            let authority = url[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            if let at = authority.lastIndex(of: "@") {
                let userinfo = authority[..<at]
                let secret = userinfo.firstIndex(of: ":").map { String(userinfo[userinfo.index(after: $0)...]) } ?? String(userinfo)
                for value in Set([secret, secret.removingPercentEncoding ?? secret]) where value.count >= 4 { secrets.append(value) }
            }
        }
        guard let query = url.split(separator: "?", maxSplits: 1).dropFirst().first else { return secrets.sorted() }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { continue }
            let name = (String(parts[0]).removingPercentEncoding ?? String(parts[0])).lowercased()
            guard credentialParameters.contains(name) || Redactor.looksSecret(name) else { continue }
            let raw = String(parts[1])
            for value in Set([raw, raw.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? raw]) where value.count >= 4 {
                secrets.append(value)
            }
        }
        return secrets.sorted()
    }

    /// Query parameters that carry a credential though their names do not say so.
    static let credentialParameters: Set<String> = ["key", "api-key", "apikey", "sig", "signature", "code", "auth", "access_token"]

    /// The token of an `Authorization` value (`Bearer TOKEN`), when it has a scheme.
    private static func bearerToken(_ value: String) -> [String] {
        guard let space = value.firstIndex(of: " ") else { return [] }
        return [String(value[value.index(after: space)...])]
    }

    /// Headers that carry a credential whatever its length.
    static let credentialHeaders: Set<String> = [
        "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "openai-api-key", "cookie",
    ]

    /// Headers whose values say what the request is (its type, the SDK and API versions), not
    /// who sends it: their values are not secrets.
    static let describingHeaders: Set<String> = [
        "content-type", "content-length", "accept", "accept-encoding", "accept-language", "user-agent", "host", "connection",
        "anthropic-version", "anthropic-beta", "openai-beta", "traceparent", "tracestate", "idempotency-key", "x-app",
        "anthropic-dangerous-direct-browser-access",
    ]

    /// Forwards `request` for `api`; `pass` is given each part of the answer as it arrives.
    public func forward(_ request: TransportRequest, api: ModelAPI, pass: @escaping @Sendable (TransportPart) -> Void) async -> Outcome {
        let policy = RequestPolicy(limits: limits, secrets: Self.secrets(of: request), clock: clock)
        let started = ContinuousClock.now
        struct Reading: Sendable {
            var reader: ReplyReader
            var firstContentUs: Int?
        }
        let (reading, ending) = await policy.send(
            request, through: transport, into: Reading(reader: ReplyReader(api: api, limits: limits))
        ) { part, reading in
            pass(part)
            reading.reader.take(part)
            if reading.firstContentUs == nil, reading.reader.hasContent {
                let elapsed = ContinuousClock.now - started
                reading.firstContentUs = Int(elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000)
            }
            // The end marker: the answer is whole, and the agent may act on it now. It is the
            // exchange's end, whatever the upstream does with the rest of its body (ends it late,
            // resets the connection) and whatever the agent does with its connection.
            if reading.reader.isComplete { throw RequestPolicy.EnoughRead() }
        }
        var reply = reading.reader.finish()
        reply.problem = reply.problem.map(policy.redact)
        var outcome = Outcome(reply: reply, failure: nil, isNotRecorded: false, firstContentUs: reading.firstContentUs)
        switch ending {
        case .complete:
            break
        case .cancelled:
            outcome.failure = "the request was cancelled"
        case .timedOut:
            outcome.failure = "the request took longer than \(limits.timeoutMs) ms, the answer included"
        case .tooLarge:
            outcome.failure = "the answer is larger than \(limits.maxReplyBytes) bytes"
        case .failed(let error as ModelClientError):
            outcome.failure = policy.redact(error.message)
            outcome.isNotRecorded = error.kind == .notRecorded
        case .failed(let error):
            outcome.failure = policy.redact(HTTPTransport.describe(error, request: request))
        }
        return outcome
    }
}
