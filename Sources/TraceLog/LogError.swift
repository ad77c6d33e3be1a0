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
        /// The file has no bytes: no gzip member and no event. Not a write cut off: there is
        /// nothing to seal.
        case empty
        /// No event can be read: the file was cut before its first event was complete, or its
        /// members hold none. A log with no event holds no run, and sealing cannot give it one.
        case noEvent = "no_event"
        /// A gzip member fails its CRC, its size check or its deflate data.
        case corruptMember = "corrupt_member"
        /// The file ends inside a gzip member: a write was cut off.
        case tornTail = "torn_tail"
        /// A member does not end at the end of an event.
        case splitEvent = "split_event"
        /// A line is not valid JSON or not a valid event.
        case invalidEvent = "invalid_event"
        /// The writer refused an event a reader would reject (a first event that is no start,
        /// a step that goes back, a malformed hash or measure, a line too deep): nothing of it
        /// was written, and the log is as it was.
        case refusedEvent = "refused_event"
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
        /// A `.seal` side file beside the log is not a seal of it as it is now (another log's, a
        /// stale one, not a side file at all): a warning, as readers ignore it; an error only
        /// when a torn log is to be sealed, which would replace the side file.
        case straySeal = "stray_seal"
        /// A key file is not a key of the kind needed.
        case invalidKey = "invalid_key"
        /// Signed-log verification failed: a signature does not check, is missing, or does not
        /// cover the log's end.
        case badSignature = "bad_signature"
        /// A recorded state digest is not the digest of the state the events before it fold to
        /// (`log upgrade` refuses to rewrite such a log).
        case digestMismatch = "digest_mismatch"
        /// `log upgrade` was given a log of the version it writes already.
        case alreadyUpgraded = "already_upgraded"
        /// An event holds `data` members this build does not know (a newer writer's): `log
        /// upgrade`, which writes each event from what it decodes, would drop them.
        case unknownMembers = "unknown_members"
        /// The events are intact, but the run they fold to holds anomalies — events that do not
        /// fit together, such as a second stop or a result for a call never proposed
        /// (docs/log-format.md, A.2): a warning of `log verify`; a case over the log could not run.
        case anomalousRun = "anomalous_run"
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

extension LogError {
    /// The error for a file of 0 bytes, which every reader of a log from its start throws: it
    /// holds no gzip member, so it is neither a log nor a torn one.
    static func empty(_ path: String) -> LogError {
        LogError(
            .empty, "the file is empty (0 bytes): it holds no gzip member and no event", path: path,
            hint: "a log holds at least its run_started event: this file was created but never written, or was truncated")
    }

    /// The error for a log from which no event could be read, for the tools that need a run
    /// (replay, the eval runner): `tear` says where it was cut, nil for whole members that hold
    /// no line. No repair is suggested: sealing keeps the complete events, and there are none.
    ///
    /// ```swift
    /// let (events, summary) = try LogReader(path: path).readAll()
    /// if events.isEmpty { throw LogError.noEvent(in: path, tear: summary.tear) }
    /// ```
    public static func noEvent(in path: String, tear: LogTear?) -> LogError {
        guard let tear else {
            return LogError(
                .noEvent, "the log holds no event: its gzip members are whole but hold no line, and a log starts with run_started",
                path: path, memberOffset: 0, sequence: 0, hint: "the writer closed the log before it recorded anything: it holds no run")
        }
        return LogError(
            .noEvent,
            "no event could be read: the file (\(tear.fileSize) bytes) ends inside the gzip member at byte \(tear.memberOffset), "
                + "before its first event was complete",
            path: path, memberOffset: tear.memberOffset, sequence: 0,
            hint: "the run was cut off before it recorded anything: the file holds no run to read, and sealing it would not make one")
    }
}
