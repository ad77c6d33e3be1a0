public import TraceCore

/// The one error type of the log module: what failed, in which file, where, and what to do.
///
/// `memberOffset` is the byte offset in the file of the gzip member concerned; `sequence` is
/// the event's sequence number when one applies. `message` is a full sentence; `hint` says
/// what to do, when there is something to do.
public struct LogError: Diagnostic, Hashable {
    /// Stable identifiers of what went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The file does not exist or cannot be opened.
        case unreadable
        /// The file is not gzip at all.
        case notGzip = "not_gzip"
        /// A gzip member fails its CRC, its size check or its deflate data.
        case corruptMember = "corrupt_member"
        /// The file ends inside a gzip member: a write was cut off.
        case tornTail = "torn_tail"
        /// A member does not end at the end of an event.
        case splitEvent = "split_event"
        /// A line is not valid JSON or not a valid event.
        case invalidEvent = "invalid_event"
        /// An event's envelope version is one this code does not read.
        case unsupportedVersion = "unsupported_version"
        /// Sequence numbers skip (an event is missing).
        case sequenceGap = "sequence_gap"
        /// A sequence number repeats (an event is duplicated).
        case sequenceRepeat = "sequence_repeat"
        /// An event's `prev` does not hash-match the event before it (an event was edited).
        case brokenChain = "broken_chain"
        /// An event names another run than the first event.
        case runMismatch = "run_mismatch"
        /// An event is larger than the reader's limit.
        case eventTooLarge = "event_too_large"
        /// Writing, flushing or syncing the file failed.
        case writeFailed = "write_failed"
        /// The log to create exists already.
        case alreadyExists = "already_exists"
        /// Repair refuses: the damage is not a torn tail.
        case notRepairable = "not_repairable"
        /// Another process holds the log's write lock.
        case locked
        /// A seal of the log was interrupted: its `.seal` side file holds events the log lacks.
        case pendingSeal = "pending_seal"
        /// A key file is not a key of the kind needed.
        case invalidKey = "invalid_key"
        /// Signed-log verification failed: a signature does not check, is missing, or does not
        /// cover the log's end.
        case badSignature = "bad_signature"
    }

    public var code: Code
    public var message: String
    public var path: String
    public var memberOffset: Int?
    public var sequence: Int?
    public var hint: String?

    public init(
        _ code: Code, _ message: String, path: String, memberOffset: Int? = nil, sequence: Int? = nil,
        hint: String? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.memberOffset = memberOffset
        self.sequence = sequence
        self.hint = hint
    }

    public var diagnosticCode: String { "log." + code.rawValue }

    /// Where: the path plus member offset and sequence when known.
    public var place: SourceLocation? { SourceLocation(path: path, memberOffset: memberOffset, sequence: sequence) }
}
