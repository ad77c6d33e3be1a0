/// The limits one outgoing HTTP request is held to, whoever sends it: a model's request, a
/// judge's, an OTLP export (docs/models.md, "Limits"). This type holds the numbers, so an agent
/// file's `model:` settings and a command's flags can carry them; the `ModelClients` module
/// enforces them, in one place, for every request it sends.
///
/// Every limit bounds what a peer can make the client do, whatever it sends: a stream that
/// keeps sending is cut at `timeoutMs`, however often it sends; a reply that keeps growing is
/// cut at `maxReplyBytes`; a line that never ends is cut at `maxLineBytes`.
public struct RequestLimits: Sendable, Hashable {
    /// One attempt, from sending the request to the last byte of the reply, streaming included.
    public var timeoutMs: Int
    /// Connecting.
    public var connectTimeoutMs: Int
    /// The longest silence between two chunks of a reply.
    public var idleTimeoutMs: Int
    /// The most bytes of one reply's body, streamed or whole; an error body counts too.
    public var maxReplyBytes: Int
    /// The longest line of a streamed reply, and the longest event (its data lines joined).
    public var maxLineBytes: Int

    public static let defaultTimeoutMs = 120_000
    public static let defaultConnectTimeoutMs = 10_000
    public static let defaultIdleTimeoutMs = 60_000
    /// 16 MiB: a reply is recorded raw and parsed in one event, which the log caps at 64 MiB less
    /// 320 KiB (`LogReadLimit`), so a default reply always fits.
    public static let defaultMaxReplyBytes = 16 << 20
    public static let defaultMaxLineBytes = 8 << 20
    /// The range an agent file or a flag may set a byte limit in: at least 1 KiB, at most
    /// 512 MiB (a reply is held in memory, and recorded in one log line).
    public static let byteLimitRange = 1024...(512 << 20)

    public init(
        timeoutMs: Int = defaultTimeoutMs, connectTimeoutMs: Int = defaultConnectTimeoutMs, idleTimeoutMs: Int = defaultIdleTimeoutMs,
        maxReplyBytes: Int = defaultMaxReplyBytes, maxLineBytes: Int = defaultMaxLineBytes
    ) {
        self.timeoutMs = timeoutMs
        self.connectTimeoutMs = connectTimeoutMs
        self.idleTimeoutMs = idleTimeoutMs
        self.maxReplyBytes = maxReplyBytes
        self.maxLineBytes = maxLineBytes
    }
}
