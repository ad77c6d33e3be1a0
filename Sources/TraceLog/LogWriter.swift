import CZlib
public import TraceCore

/// Appends events to a log: gzip-compressed JSONL, one event per line, hash-linked.
///
/// The writer assigns each event its sequence number and `prev` hash: in a version 3 log (the
/// default) the first line of each gzip member carries the hash of the member before and no
/// other line carries one; in a version 1 log every line carries the hash of the line before
/// (docs/log-format.md §3). It closes a gzip member once the member holds `Options.memberBound`
/// bytes of JSONL (at an event boundary), at `run_stopped` (which, in a version 3 log, begins a
/// member of its own, so that the chain covers every event before it), and on `close()`. It
/// flushes per its `Durability`, and always at durability points. Opening an existing log seals
/// a torn tail first and continues the chain, in the log's own version, in a new member.
///
/// ```swift
/// try LogWriter.withWriter(creating: "run.jsonl.gz", runId: "r1") { log in
///     try log.append(.runStarted(started), step: 0, timeUs: clock.now)
/// }
/// ```
public final class LogWriter {
    /// How the writer writes.
    public struct Options: Sendable, Hashable {
        /// Bytes of JSONL after which the current member is closed (at the next event's end).
        public var memberBound = 256 * 1024
        public var durability = Durability.standard
        /// zlib's level, 1 to 9. 4 is the default: on realistic runs its files are within 10% of
        /// `gzip -6` and it writes about 1.3x as fast as 6 (docs/performance.md).
        public var compressionLevel: Int32 = 4
        /// Signs the chain at every member close and after every stop (docs/log-format.md,
        /// "Signed logs"); nil writes an unsigned log.
        public var signer: LogSigner?
        /// Replaces secrets in every event before it is written: `Redactor.standard` unless
        /// the writer is given another. nil writes events as they are, for faithful copies of
        /// an existing log only (`log upgrade`).
        public var redactor: Redactor? = Redactor.standard
        /// Writes a context packet as what changed since the previous one (a version 2 line,
        /// docs/log-format.md), so a long run's log grows with its length, not its square.
        /// Off, every packet is written whole, as version 1 readers read it.
        public var writesContextDeltas = true
        /// The most bytes of events a member may hold for the readers of this log: the readers'
        /// default limit (`LogReadLimit.defaultMemberBytes`, 64 MiB), not a limit this process
        /// raised, so that every reader reads what agent-eval writes without being told to. The
        /// writer never writes an event that could make a member hold more (`maximumLineBytes`):
        /// it refuses it, unwritten.
        public var readerMemberLimit = LogReadLimit.defaultMemberBytes
        /// The version a new log is written in: 3, whose hash chain links gzip members (about a
        /// fifth smaller), or 1, whose every line links to the line before, for readers of
        /// agent-eval 0.3 and older (with delta packets as version 2 lines, `writesContextDeltas`).
        /// A log opened to append to keeps its own version.
        public var formatVersion = Event.memberChainVersion

        public init(
            memberBound: Int = 256 * 1024, durability: Durability = .standard, compressionLevel: Int32 = 4, signer: LogSigner? = nil,
            redactor: Redactor? = Redactor.standard, writesContextDeltas: Bool = true,
            readerMemberLimit: Int = LogReadLimit.defaultMemberBytes,
            formatVersion: Int = Event.memberChainVersion
        ) {
            self.memberBound = memberBound
            self.durability = durability
            self.compressionLevel = compressionLevel
            self.signer = signer
            self.redactor = redactor
            self.writesContextDeltas = writesContextDeltas
            self.readerMemberLimit = readerMemberLimit
            self.formatVersion = formatVersion
        }

        /// The longest event line (newline included) the writer writes. A member holds less
        /// than `memberBound` bytes when an event starts (it is closed at the first event end
        /// past it), then the event, then at most a signature: so a line of this size or
        /// less keeps every member within `readerMemberLimit`, and every reader with that
        /// limit reads every log this writer writes.
        public var maximumLineBytes: Int { readerMemberLimit - memberBound - LogWriter.signatureReserve }
    }

    /// From the next event on, also redacts `secrets` (`Redactor.adding`): values learned while
    /// the log is written, such as the header values of a recorded model request. A writer that
    /// copies events as they are (no redactor) stays so.
    public func redact(also secrets: [String], rule: String) {
        guard let redactor = options.redactor else { return }
        options.redactor = redactor.adding(secrets, rule: rule)
        // What was judged clean is judged again against the secrets learned.
        judgedContents.removeAll()
    }

    /// Room left in a member for the signature event a signing writer adds after an event.
    static let signatureReserve = 64 * 1024

    public let path: String
    public let runId: String
    public private(set) var options: Options
    /// The sequence number the next event gets.
    public private(set) var nextSequence: Int
    /// The chain's head: the hash of the last line written, the next event's `prev` (version 1),
    /// or of the last member closed, the next member's first `prev` (version 3).
    public private(set) var lastHash: String
    /// Whether the log's chain links members (version 3) rather than lines (version 1).
    public let linksMembers: Bool
    /// Bytes handed to the file so far (the file's size once flushed).
    public private(set) var bytesWritten: Int
    /// Bytes of JSONL written so far, newlines included.
    public private(set) var jsonlBytes = 0
    /// Sync flushes and fsyncs done, for measuring a policy's cost.
    public private(set) var flushCount = 0
    public private(set) var syncCount = 0

    private let file: FileDescriptor
    /// The log's write lock, held as long as the writer lives (see `FileDescriptor.lockForWriting`).
    private var lock: FileDescriptor?
    private let deflater: Deflater
    private var memberInput = 0
    private var eventsSinceFlush = 0
    /// A durability point was appended with `defersDurability` and is not flushed yet.
    private var hasDeferredDurability = false
    private var isClosed = false
    private var lineWriter = JSONWriter(capacity: 4096)
    /// Stored contents whose bytes the redactor changed: the hash a caller made of the bytes it
    /// gave, and the hash of the bytes kept. Callers name content by the kept hash
    /// (`keptContent`); a later event that names the first in a member typed as a content's hash
    /// is written naming the second (`EventPayload.renamingContentHashes`), so no reference
    /// dangles. Text and stored bodies are never rewritten.
    private var contentRenames: [String: String] = [:]
    /// The contents `keptContent` judged, as the log keeps them: searched once, however often a
    /// caller and the writer ask.
    private var judgedContents: Set<String> = []
    /// The current member's lines, newlines included (version 3): hashed when it closes.
    private var memberText: [UInt8] = []

    private init(
        path: String, runId: String, options: Options, file: FileDescriptor, nextSequence: Int, lastHash: String, size: Int,
        linksMembers: Bool
    ) throws {
        self.path = path
        self.runId = runId
        self.options = options
        self.linksMembers = linksMembers
        self.file = file
        self.nextSequence = nextSequence
        self.lastHash = lastHash
        bytesWritten = size
        deflater = try Deflater(level: options.compressionLevel)
    }

    /// Creates a new log, and the directories leading to it; fails with `alreadyExists` if
    /// there is a file at `path`.
    public static func create(at path: String, runId: String, options: Options = Options()) throws -> LogWriter {
        guard options.formatVersion == 1 || options.formatVersion == Event.memberChainVersion else {
            throw LogError(
                .invalidEvent, "cannot write a log of version \(options.formatVersion): this agent-eval writes versions 1 and 3",
                path: path)
        }
        try FileDescriptor.createParentDirectories(of: path)
        let file = try FileDescriptor.openForAppending(path, create: true)
        do {
            let lock = try FileDescriptor.lockForWriting(path)
            // With fsync on, the new file's directory entry must be durable too.
            if options.durability.sync != .never { try FileDescriptor.syncDirectory(of: path) }
            let writer = try LogWriter(
                path: path, runId: runId, options: options, file: file, nextSequence: 0, lastHash: ContentHash.genesis,
                size: 0, linksMembers: options.formatVersion == Event.memberChainVersion)
            writer.lock = lock
            return writer
        } catch {
            // The file was made here and holds nothing: it goes with the failure.
            FileDescriptor.remove(path)
            throw error
        }
    }

    /// Opens an existing log to append to it: checks it, seals a torn tail in place (see
    /// `LogRepair`), and continues its sequence and hash chain in a new member.
    ///
    /// Throws when the log is damaged other than at its tail, or holds no event to continue.
    public static func open(at path: String, options: Options = Options()) throws -> (LogWriter, repair: RepairReport?) {
        // A seal interrupted after its side file was synced is finished before anything else,
        // so that it can never be applied after new events were appended.
        // One writer per log: the lock is taken before anything is read, so a second process
        // resuming the same run waits for nothing and learns it at once, before it could see
        // (and act on) the same waiting calls.
        let lock = try FileDescriptor.lockForWriting(path)
        try LogRepair.finishInterruptedSeal(path: path)
        var last: RecordedEvent?
        var firstVersion = 1
        let summary = try LogReader(path: path).forEachEvent {
            if last == nil { firstVersion = $0.event.version }
            last = $0
        }
        // Sealing keeps every complete event, so the last event and its hash stay as read.
        let repair = summary.tear == nil ? nil : try LogRepair.seal(lockedPath: path)
        guard let last, let lastHash = summary.lastHash else {
            throw LogError(
                .invalidEvent, "the log holds no complete event, so there is no run to continue", path: path,
                hint: "start a new log instead")
        }
        let file = try FileDescriptor.openForAppending(path, create: false)
        let size = try file.size()
        let writer = try LogWriter(
            path: path, runId: last.event.runId, options: options, file: file, nextSequence: last.event.sequence + 1,
            lastHash: lastHash, size: size, linksMembers: firstVersion >= Event.memberChainVersion)
        writer.lastStep = last.event.step
        writer.lock = lock
        return (writer, repair)
    }

    /// The pid of the process writing the log at `path` now (the holder of its write lock, from
    /// /proc/locks on Linux); nil when none does, or where the system does not say. A log whose
    /// last member is open is being written when this names a process, and was cut off when not.
    public static func writerProcess(of path: String) -> Int? { FileDescriptor.lockHolder(of: path) }

    /// Creates a log, hands it to `body`, and closes it however `body` ends.
    public static func withWriter<T>(
        creating path: String, runId: String, options: Options = Options(), _ body: (LogWriter) throws -> T
    ) throws -> T {
        let writer = try create(at: path, runId: runId, options: options)
        do {
            let result = try body(writer)
            try writer.close()
            return result
        } catch {
            try? writer.close()
            throw error
        }
    }

    deinit {
        if !isClosed { try? close() }
    }

    /// Appends one event and returns it as written (with its sequence number and `prev`).
    ///
    /// When it returns after a durability point, the event is in the file (and on disk, if
    /// the policy fsyncs there) — unless `defersDurability`: then the caller makes it durable
    /// with the next durability point or `flushDeferred()`, before it acts on the event. (The
    /// pipeline scheduler records a checkpoint and the next task's start with one flush.)
    @discardableResult
    public func append(_ payload: EventPayload, step: Int, timeUs: Int, defersDurability: Bool = false) throws -> Event {
        // Version 3: the stop begins a member of its own, whose link covers every event before
        // it (only the stop, like the last line of a version 1 log, is left to its CRC).
        // (What the writer refuses is refused first, with the member left as it was.)
        if linksMembers && payload.isStop && memberInput > 0 {
            if let refusal = refusal(of: payload, step: step, timeUs: timeUs) { throw refusal }
            try finishMember(sync: false)
        }
        let event = try write(payload, step: step, timeUs: timeUs)
        let isDurabilityPoint = payload.isDurabilityPoint && !defersDurability
        if payload.isDurabilityPoint && defersDurability { hasDeferredDurability = true }
        let isStop = payload.isStop
        if memberInput >= options.memberBound || isStop {
            try sign(isFinal: isStop, step: step, timeUs: timeUs)
            try finishMember(sync: isDurabilityPoint && options.durability.sync != .never)
        } else if isDurabilityPoint || shouldFlushByPolicy {
            try flush(sync: options.durability.sync == .everyFlush || (isDurabilityPoint && options.durability.sync == .durabilityPoints))
        } else if deflater.output.count >= 128 * 1024 {
            try writeOut()
        }
        return event
    }

    /// Signature events the writer added since the last call, for a caller that folds every
    /// event it writes (`RunRecorder`).
    public func takeSignatureEvents() -> [Event] {
        defer { signatureEvents.removeAll() }
        return signatureEvents
    }

    private var signatureEvents: [Event] = []

    /// With a signer: a `log_signed` event covering the chain up to the last event.
    private func sign(isFinal: Bool, step: Int, timeUs: Int) throws {
        guard let signer = options.signer, nextSequence > 0 else { return }
        // Version 3: the member's lines so far, which begin with the link to the member before.
        let head = linksMembers ? ContentHash.sha256Hex(memberText) : lastHash
        let payload = try signer.payload(runId: runId, sequence: nextSequence - 1, head: head, isFinal: isFinal)
        signatureEvents.append(try write(payload, step: step, timeUs: timeUs))
    }

    /// Why the writer refuses to write `payload` at `step` before encoding it, or nil: a closed
    /// writer, and what the reader would reject (docs/log-format.md §2, §4).
    private func refusal(of payload: EventPayload, step: Int, timeUs: Int) -> LogError? {
        guard !isClosed else {
            return LogError(.writeFailed, "the log writer is closed; no more events can be appended", path: path)
        }
        if nextSequence == 0, !payload.isStart {
            return LogError(
                .refusedEvent, "the first event of a log must be run_started (or pipeline_started), not \(payload.kind)", path: path,
                sequence: 0)
        }
        if let lastStep, step < lastStep {
            return LogError(
                .refusedEvent, "event seq \(nextSequence) would go back to step \(step) after step \(lastStep): steps never decrease",
                path: path, sequence: nextSequence)
        }
        if !linksMembers, payload.leastVersion >= Event.conversationVersion {
            return LogError(
                .refusedEvent,
                "event seq \(nextSequence) (\(payload.kind)) belongs to a conversation, which only a version 3 log can hold (its line is version 4)",
                path: path, sequence: nextSequence, hint: "write the log as version 3 (drop log_version: 1 or 2)")
        }
        let envelope = !JSONScanner.isMeasure(step) ? ("step", step) : !JSONScanner.isMeasure(timeUs) ? ("time_us", timeUs) : nil
        if let (fieldPath, value) = envelope ?? payload.malformedMeasure {
            return LogError(
                .refusedEvent,
                "event seq \(nextSequence) (\(payload.kind)) has \(fieldPath) \(value), which is not a whole number from 0 to "
                    + "\(JSONScanner.maximumMeasure) (2^53 − 1), so it is not written: readers refuse it",
                path: path, sequence: nextSequence,
                hint: "a time is microseconds since 1970, a duration or a token count is not negative (docs/log-format.md §2)")
        }
        if let (fieldPath, value) = payload.malformedHash {
            return LogError(
                .refusedEvent,
                "event seq \(nextSequence) (\(payload.kind)) has \(fieldPath) \(JSONWriter.encodeString(.string(String(value.prefix(80))))), "
                    + "which is not a hash (\"sha256:\" and 64 lowercase hex digits), so it is not written",
                path: path, sequence: nextSequence, hint: "make hashes with ContentHash.sha256")
        }
        return nil
    }

    /// What the writer keeps of `content`, when its redactor changes it: the content redacted
    /// before it is hashed and encoded (`Redactor.redactContent`); nil when it is kept as it is.
    /// A caller that names a content before storing it (a resumed run's prompt) names it by this
    /// one's hash.
    public func keptContent(_ content: ContentStored) -> ContentStored? {
        // Judged already (a caller that stores what this gave): not searched again.
        guard let redactor = options.redactor, !judgedContents.contains(content.hash) else { return nil }
        let redacted: [UInt8]?
        switch content.encoding {
        case .utf8: redacted = redactor.redactContent(text: content.body)
        case .base64: redacted = content.bytes.flatMap(redactor.redactContent)
        }
        guard let redacted else {
            judgedContents.insert(content.hash)
            return nil
        }
        let kept = ContentStored(bytes: redacted, mediaType: content.mediaType)
        judgedContents.insert(kept.hash)
        return kept
    }

    /// Validates, encodes, hashes and compresses one event; the flush policy is the caller's.
    private func write(_ given: EventPayload, step: Int, timeUs: Int) throws -> Event {
        if let refusal = refusal(of: given, step: step, timeUs: timeUs) { throw refusal }
        var payload = given
        if !contentRenames.isEmpty, let renamed = payload.renamingContentHashes({ contentRenames[$0] }) { payload = renamed }
        if case .contentStored(let content) = payload, let kept = keptContent(content) {
            contentRenames[content.hash] = kept.hash
            payload = .contentStored(kept)
        }
        var event = Event(
            version: linksMembers ? Event.memberChainVersion : Event.schemaVersion, runId: runId, sequence: nextSequence, step: step,
            timeUs: timeUs, previousHash: !linksMembers || memberInput == 0 ? lastHash : nil, payload: payload)
        var wholePacket: ContextBuilt?
        if case .contextBuilt(let packet) = payload {
            guard packet.delta == nil else {
                throw LogError(
                    .refusedEvent,
                    "event seq \(nextSequence) (context_built) is a delta packet; the writer takes whole packets and writes deltas itself",
                    path: path, sequence: nextSequence, hint: "make the packet whole first (ContextPacketResolver)")
            }
            wholePacket = packet
            if let delta = contextDelta(for: packet) {
                if !linksMembers { event.version = Event.deltaVersion }
                event.payload = .contextBuilt(
                    ContextBuilt(
                        goal: packet.goal, stateSummary: packet.stateSummary, tokenEstimate: packet.tokenEstimate,
                        promptHash: packet.promptHash,
                        delta: delta))
            }
        }
        lineWriter.removeAll()
        event.encode(into: &lineWriter)
        // A stored content was searched as its own bytes above (what the line adds is its hash,
        // media type and encoding): a second search of a request of megabytes, escaped, finds
        // nothing the first did not.
        var isContentJudged = false
        if case .contentStored = payload { isContentJudged = true }
        if !isContentJudged, let redactor = options.redactor, lineWriter.withUnsafeBytes({ redactor.mayRedact(in: $0) }),
            let redacted = redactor.redact(lineWriter.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
        {
            // The event as written is the redacted one: the caller folds that, as a replay will.
            lineWriter.bytes = Array(redacted.utf8)
            do {
                event = try Event(line: lineWriter.bytes)
            } catch {
                throw LogError(
                    .refusedEvent, "event seq \(nextSequence) (\(payload.kind)) could not be redacted safely, so it is not written",
                    path: path, sequence: nextSequence)
            }
        }
        // A line past the reader's limit is refused whole, before anything of it is written:
        // the log stays readable, and the writer usable.
        if lineWriter.count + 1 > options.maximumLineBytes {
            throw LogError(
                .eventTooLarge,
                "event seq \(nextSequence) (\(payload.kind)) is \(lineWriter.count + 1) bytes as a line; a log line may hold at most "
                    + "\(options.maximumLineBytes) (readers stop at a member of \(options.readerMemberLimit) bytes), so it is not written",
                path: path, sequence: nextSequence,
                hint:
                    "keep large values out of events: a model reply within max_reply_bytes, large output as stored content of a size readers take"
            )
        }
        if let depth = lineWriter.withUnsafeBytes({ JSONWriter.nestingDepth(of: $0, exceeding: JSONParser.maximumDepth) }) {
            throw LogError(
                .refusedEvent,
                "event seq \(nextSequence) (\(payload.kind)) nests \(depth)+ levels deep; readers stop at \(JSONParser.maximumDepth), so it is not written",
                path: path, sequence: nextSequence, hint: "keep deeply nested values as stored content, or flatten them")
        }
        lastStep = step
        lastTimeUs = timeUs
        if let wholePacket {
            if case .contextBuilt(let written) = event.payload, written.delta != nil {
                packetBytes.sinceWhole += lineWriter.count
            } else {
                packetBytes = (lineWriter.count, 0)
            }
            lastPacket = (nextSequence, wholePacket)
        }
        if !linksMembers { lastHash = lineWriter.withUnsafeBytes { ContentHash.sha256Hex($0) } }
        lineWriter.append(0x0A)
        if linksMembers { lineWriter.withUnsafeBytes { memberText.append(contentsOf: $0) } }
        lineWriter.withUnsafeBytes { deflater.deflate($0, flush: Z_NO_FLUSH) }
        nextSequence += 1
        memberInput += lineWriter.count
        jsonlBytes += lineWriter.count
        eventsSinceFlush += 1
        lastEventWasSignature = { if case .unknown(LogSigner.kind, _) = payload { return true } else { return false } }()
        return event
    }

    private var lastEventWasSignature = false

    /// The last context packet written, whole: the base of the next delta.
    private var lastPacket: (sequence: Int, packet: ContextBuilt)?
    /// The line size of the last packet written whole, and the bytes of delta lines since.
    private var packetBytes = (whole: 0, sinceWhole: 0)

    /// The delta to write `packet` as, or nil to write it whole: the first packet of a writer
    /// is whole, and so is the next one once the deltas since the last whole packet add up to
    /// its size. Whole packets then take at most as many bytes as the deltas between them, so
    /// the log grows linearly, and a reader that starts at a whole packet (replay's index)
    /// reads at most about two packets' worth of deltas to rebuild any packet. A packet that
    /// shares less than half its items with the one before is written whole too: a delta would
    /// save little, and a whole packet is a version 1 line any reader reads.
    private func contextDelta(for packet: ContextBuilt) -> ContextDelta? {
        guard options.writesContextDeltas, let lastPacket, packetBytes.sinceWhole < packetBytes.whole else { return nil }
        let delta = ContextDelta(from: lastPacket.packet, at: lastPacket.sequence, to: packet)
        let items = delta.copiedItems
        return items.copied * 2 >= items.total && items.copied > 0 ? delta : nil
    }

    /// The step of the last event appended (nil before the first).
    private var lastStep: Int?
    private var lastTimeUs = 0

    private var shouldFlushByPolicy: Bool {
        switch options.durability.flush {
        case .everyEvent: return true
        case .durabilityPoints: return false
        case .batch(let count): return eventsSinceFlush >= count
        }
    }

    /// Makes a durability point appended with `defersDurability` durable, as the policy says
    /// (a flush, and an fsync if it syncs at durability points); nothing when there is none.
    public func flushDeferred() throws {
        guard hasDeferredDurability else { return }
        try flush(sync: options.durability.sync != .never)
    }

    /// Sync-flushes everything appended so far into the file; with `sync`, fsyncs it too.
    public func flush(sync: Bool = false) throws {
        hasDeferredDurability = false
        deflater.deflate(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_SYNC_FLUSH)
        flushCount += 1
        eventsSinceFlush = 0
        try writeOut()
        if sync { try syncFile() }
    }

    /// Closes the current member (if it holds anything) and the file.
    public func close() throws {
        guard !isClosed else { return }
        isClosed = true
        // The lock goes when the writer is done, whatever happens to the last member.
        defer { lock = nil }
        if memberInput > 0 {
            if !lastEventWasSignature { try sign(isFinal: false, step: lastStep ?? 0, timeUs: lastTimeUs) }
            try finishMember(sync: options.durability.sync != .never)
        }
    }

    private func finishMember(sync: Bool) throws {
        if linksMembers && memberInput > 0 {
            lastHash = ContentHash.sha256Hex(memberText)
            memberText.removeAll(keepingCapacity: true)
        }
        deflater.deflate(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH)
        try writeOut()
        deflater.reset()
        memberInput = 0
        eventsSinceFlush = 0
        flushCount += 1
        let syncsDeferred = hasDeferredDurability && options.durability.sync != .never
        hasDeferredDurability = false
        if sync || syncsDeferred { try syncFile() }
    }

    private func syncFile() throws {
        try file.sync()
        syncCount += 1
    }

    private func writeOut() throws {
        guard deflater.output.count > 0 else { return }
        try file.write(deflater.output.bytes)
        bytesWritten += deflater.output.count
        deflater.output.count = 0
    }
}
