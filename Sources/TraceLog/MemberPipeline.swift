import CZlib
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One member as a scan hands it over: the member, its content, whether it is complete, and —
/// when a helper thread read it — the hashes the chain needs: the SHA-256 (hex) of each of its
/// complete lines, in order, for a log whose lines link (version 1), or of its complete lines
/// together for one whose members link (version 3).
struct ScannedMember {
    var member: MemberScanner.Member
    var content: UnsafeRawBufferPointer
    var isComplete: Bool
    var lineHashes: [String]?
    var memberHash: String? = nil

    /// The SHA-256 (hex) of the member's complete lines, newlines included: the link a version 3
    /// log's next member carries.
    func linkHash() -> String { memberHash ?? Self.linkHash(of: content) }

    static func linkHash(of content: UnsafeRawBufferPointer) -> String {
        var end = content.count
        while end > 0 && content[end - 1] != 0x0A { end -= 1 }
        return ContentHash.sha256Hex(UnsafeRawBufferPointer(rebasing: content[..<end]))
    }

    /// Whether the content is a version 3 log's, by its first line as a writer writes it.
    static func linksMembers(_ content: UnsafeRawBufferPointer) -> Bool {
        content.starts(with: "{\"v\":3,".utf8)
    }
}

extension MemberScanner {
    /// Whether a read of the file at `path` from `offset` to its end covers `threshold` bytes
    /// or more, and so is read ahead on a helper thread (`Int.max`: never).
    static func readsAhead(_ path: String, from offset: Int = 0, threshold: Int) -> Bool {
        threshold < Int.max && (FileDescriptor.fileSize(path) ?? 0) - offset >= threshold
    }

    /// `scan`, with the reading, inflating and line hashing on a helper thread when
    /// `aheadOnAThread` is set: the caller's thread decodes and checks one member while the helper
    /// inflates and hashes the next ones (a few members ahead at most, so memory stays a few
    /// members' content). `body` runs on the caller's thread either way, in member order, and
    /// sees the same members, content and ending; a throw from `body` stops the helper.
    mutating func scan(
        from offset: Int, firstIndex: Int, aheadOnAThread: Bool, _ body: (ScannedMember) throws -> Void
    ) throws -> Ending {
        guard aheadOnAThread else {
            return try scan(from: offset, firstIndex: firstIndex) { member, content, isComplete in
                try body(ScannedMember(member: member, content: content, isComplete: isComplete, lineHashes: nil))
            }
        }
        let pipeline = MemberPipeline(scanner: self, offset: offset, firstIndex: firstIndex)
        defer { pipeline.stop() }
        let ending = try pipeline.run(body)
        peakBufferBytes = pipeline.scannerPeakBufferBytes
        wholeMemberCount = pipeline.scannerWholeMemberCount
        return ending
    }
}

/// The helper thread of a read ahead, and the bounded queue between it and the caller.
///
/// Unchecked Sendable: the queue and its bookkeeping are guarded by `mutex`; the scanner and
/// the buffer being filled belong to the helper thread, and the caller reads them only after
/// joining it (the fields below say which is which).
final class MemberPipeline: @unchecked Sendable {
    /// Members read ahead at most: enough that neither side waits on the other for long.
    static let depth = 3
    /// Content bytes read ahead at most: a huge member is not read ahead of, so memory stays
    /// what one thread needs for it.
    static let aheadBytes = 8 << 20

    private struct Item {
        var member: MemberScanner.Member
        var content: ByteBuffer
        var isComplete: Bool
        var lineHashes: [String]?
        var memberHash: String?
    }

    private struct Stopped: Error {}

    private var scanner: MemberScanner
    private let offset: Int
    private let firstIndex: Int
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let changed: UnsafeMutablePointer<pthread_cond_t>
    /// The helper thread while the read runs (its one item of work is the whole read).
    private var helper: WorkerThreads<MemberPipeline>?
    // Guarded by `mutex`:
    private var queue: [Item] = []
    /// Buffers the caller is done with, for the helper to fill again.
    private var spare: [ByteBuffer] = []
    private var ending: Result<MemberScanner.Ending, any Error>?
    private var isStopping = false
    /// Content bytes handed over and not yet done with.
    private var queuedBytes = 0
    /// Every content buffer made (the helper's own, read after it is joined).
    private var buffers: [ByteBuffer] = []
    /// The buffer the member being scanned goes into (the helper's own).
    private var filling: ByteBuffer?
    // Set by the helper before it ends (read after it is joined):
    private(set) var scannerPeakBufferBytes = 0
    private(set) var scannerWholeMemberCount = 0

    init(scanner: MemberScanner, offset: Int, firstIndex: Int) {
        self.scanner = scanner
        self.offset = offset
        self.firstIndex = firstIndex
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        changed = .allocate(capacity: 1)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        changed.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Starts the helper and hands each member it reads to `body`, in order; returns how the
    /// scan ended, or throws what the scan or `body` threw.
    func run(_ body: (ScannedMember) throws -> Void) throws -> MemberScanner.Ending {
        start()
        while true {
            pthread_mutex_lock(mutex)
            while queue.isEmpty && ending == nil { pthread_cond_wait(changed, mutex) }
            guard !queue.isEmpty else {
                let result = ending
                pthread_mutex_unlock(mutex)
                stop()
                // `ending` is set whenever the queue is empty here.
                return try result?.get() ?? .complete
            }
            let item = queue.removeFirst()
            pthread_mutex_unlock(mutex)
            try body(
                ScannedMember(
                    member: item.member, content: item.content.bytes, isComplete: item.isComplete, lineHashes: item.lineHashes,
                    memberHash: item.memberHash))
            pthread_mutex_lock(mutex)
            queuedBytes -= item.content.count
            spare.append(item.content)
            pthread_cond_broadcast(changed)
            pthread_mutex_unlock(mutex)
        }
    }

    /// Stops the helper (it stops at its next member) and waits for it to end.
    func stop() {
        guard let helper else { return }
        pthread_mutex_lock(mutex)
        isStopping = true
        pthread_cond_broadcast(changed)
        pthread_mutex_unlock(mutex)
        helper.finish()
        helper.waitUntilEnded()
        self.helper = nil
    }

    private func start() {
        let helper = WorkerThreads<MemberPipeline>(name: "agent-eval log read-ahead", stackSize: 1 << 20) { $0.readAhead() }
        helper.submit(self)
        self.helper = helper
    }

    /// The buffer the next member goes into: once the caller has room for it (fewer than
    /// `depth` members and `aheadBytes` bytes ahead), one it is done with or a new one.
    private func nextBuffer() -> ByteBuffer {
        pthread_mutex_lock(mutex)
        while !queue.isEmpty && (queue.count >= MemberPipeline.depth || queuedBytes >= MemberPipeline.aheadBytes) && !isStopping {
            pthread_cond_wait(changed, mutex)
        }
        let reused = spare.popLast()
        pthread_mutex_unlock(mutex)
        if let reused { return reused }
        let made = ByteBuffer(capacity: 512 * 1024)
        buffers.append(made)
        return made
    }

    /// The helper: scans into buffers of its own, hashes each member's lines, and queues it.
    private func readAhead() {
        scanner.takesContentBuffer = { [unowned self] in
            let buffer = nextBuffer()
            filling = buffer
            return buffer
        }
        let result = Result<MemberScanner.Ending, any Error> {
            try scanner.scan(from: offset, firstIndex: firstIndex) { member, content, isComplete in
                // The content is in the buffer handed out for it — but for the torn content of an
                // empty file, which no member was started for: that gets a buffer of its own.
                let buffer: ByteBuffer
                if let filling, filling.bytes.baseAddress == content.baseAddress {
                    buffer = filling
                } else {
                    buffer = nextBuffer()
                    buffer.reset(keepingCapacity: 512 * 1024)
                    buffer.append(content)
                }
                filling = nil
                // A version 3 log links members: one hash of the member, no line's.
                var hashes: [String]?
                var memberHash: String?
                if ScannedMember.linksMembers(content) {
                    memberHash = ScannedMember.linkHash(of: content)
                } else {
                    var lines: [String] = []
                    lines.reserveCapacity(content.count / 256)
                    var hasher = LineHasher(content: content)
                    _ = LineSplitter.forEachLine(in: content) { lines.append(hasher.hash(of: $0)) }
                    hashes = lines
                }
                pthread_mutex_lock(mutex)
                let stopping = isStopping
                if !stopping {
                    queue.append(Item(member: member, content: buffer, isComplete: isComplete, lineHashes: hashes, memberHash: memberHash))
                    queuedBytes += buffer.count
                    pthread_cond_broadcast(changed)
                }
                pthread_mutex_unlock(mutex)
                if stopping { throw Stopped() }
            }
        }
        scanner.takesContentBuffer = nil
        pthread_mutex_lock(mutex)
        // What the buffers held at most, with the scanner's input chunk.
        scannerPeakBufferBytes = buffers.reduce(0) { $0 + $1.peakCapacity } + scanner.readSize
        scannerWholeMemberCount = scanner.wholeMemberCount
        ending = result
        pthread_cond_broadcast(changed)
        pthread_mutex_unlock(mutex)
    }
}
