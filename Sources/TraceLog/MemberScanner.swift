/// Walks the gzip members of a log file and hands over each member's whole content once the
/// member has ended and its CRC and size have checked; at the end it says how the file ended.
///
/// Lines never span members (writers close a member only at an event boundary), so a member's
/// content is a run of complete lines. Memory is the largest member's content plus one input
/// chunk: it follows the member bound and the largest event, never the size of the log.
struct MemberScanner {
    /// One gzip member as found in the file.
    struct Member {
        /// Its index in the file, from 0.
        var index: Int
        /// The byte offset of its header in the file.
        var offset: Int
        /// Its compressed length, header and trailer included (up to the end of the file for
        /// a torn member).
        var length: Int
    }

    /// How the scan ended.
    enum Ending {
        /// At the end of the last complete member.
        case complete
        /// Inside a member: the file was cut. The member's content so far was handed over with
        /// `isComplete == false`.
        case torn(member: Member)
        /// At damaged data; nothing of that member was handed over.
        case corrupt(member: Member, reason: String)
    }

    static let chunkSize = 256 * 1024

    let path: String
    /// The largest member content accepted; beyond it the scan throws `eventTooLarge`.
    var contentLimit: Int
    /// Bytes read from the file at a time.
    var readSize: Int
    /// Inflate members that are whole in the read buffer with libdeflate (zlib does the rest).
    var inflatesWholeMembers = true

    /// Where each member's content is inflated: by default one buffer, reused for every member
    /// (valid until `body` returns); with this set, a buffer of its own per member, taken from
    /// it before the member is inflated and left to it once `body` has it (a read ahead keeps
    /// several). It may wait, which bounds how far a scan runs ahead.
    var takesContentBuffer: (() -> ByteBuffer)?

    /// The largest content buffer the last scan needed.
    var peakBufferBytes = 0
    /// The members the last scan inflated whole (libdeflate).
    var wholeMemberCount = 0

    init(path: String, contentLimit: Int, readSize: Int = MemberScanner.chunkSize) {
        self.path = path
        self.contentLimit = contentLimit
        self.readSize = max(1, readSize)
    }

    /// Scans from `offset` (a member start) to the end of the file.
    ///
    /// `body` gets each member, its decompressed content, and whether the member is complete
    /// (false only for a torn last member).
    mutating func scan(
        from offset: Int = 0, firstIndex: Int = 0,
        _ body: (Member, UnsafeRawBufferPointer, _ isComplete: Bool) throws -> Void
    ) throws -> Ending {
        let file = try FileDescriptor.openForReading(path)
        if offset > 0 { try file.seek(to: offset) }
        let resources = try ScanResources.take(readSize: readSize)
        defer { resources.giveBack() }
        let inflater = resources.inflater
        let wholeMembers = inflatesWholeMembers ? resources.wholeMembers : nil
        let input = resources.input
        var content = resources.content
        // Whether `body` has the current content buffer: the next member needs another one
        // when they come from `takesContentBuffer`.
        var handedOver = true
        defer { peakBufferBytes = max(peakBufferBytes, content.peakCapacity + readSize) }
        /// The empty buffer the next member's content goes into. (As memory follows the
        /// current member, not the largest one read, a buffer a huge member grew shrinks back.)
        func startContent() {
            if let takesContentBuffer, handedOver {
                content = takesContentBuffer()
                handedOver = false
            }
            content.reset(keepingCapacity: 512 * 1024)
        }

        var chunkStart = offset  // file offset of input[0]
        var chunkCount = 0
        var reachedEnd = false
        var member = Member(index: firstIndex, offset: offset, length: 0)
        var inMember = false

        /// Moves the unread input to the front of the buffer and fills the rest from the file,
        /// so that a member starting near the end of the buffer can be inflated whole.
        func refill() throws {
            let available = inflater.availableInput
            let consumed = chunkCount - available
            input.copyMemory(from: input + consumed, byteCount: available)
            chunkStart += consumed
            chunkCount = available
            while chunkCount < readSize {
                let got = try file.read(into: input + chunkCount, count: readSize - chunkCount)
                if got == 0 {
                    reachedEnd = true
                    break
                }
                chunkCount += got
            }
            inflater.setInput(input, count: chunkCount)
        }

        while true {
            if inflater.availableInput == 0 {
                chunkStart += chunkCount
                chunkCount = try file.read(into: input, count: readSize)
                if chunkCount == 0 { break }
                inflater.setInput(input, count: chunkCount)
            }
            if !inMember, let wholeMembers {
                if inflater.availableInput < readSize / 2 && !reachedEnd { try refill() }
                let position = chunkCount - inflater.availableInput
                let available = UnsafeRawBufferPointer(start: input + position, count: inflater.availableInput)
                startContent()
                if MemberScanner.headerProblem(input + position, count: available.count) == nil,
                    let length = wholeMembers.inflate(available, into: content, limit: contentLimit)
                {
                    member.offset = chunkStart + position
                    member.length = length
                    wholeMemberCount += 1
                    handedOver = true
                    try body(member, content.bytes, true)
                    inflater.setInput(input + position + length, count: available.count - length)
                    member.index += 1
                    continue
                }
            }
            if !inMember {
                inMember = true
                member.offset = chunkStart + chunkCount - inflater.availableInput
                startContent()
                let position = chunkCount - inflater.availableInput
                if position + 4 <= chunkCount {
                    if let problem = MemberScanner.headerProblem(input + position, count: 4) {
                        return .corrupt(member: member, reason: problem)
                    }
                } else {
                    // The header straddles two reads, or the file ends inside it: look at its
                    // first bytes directly.
                    var header: (UInt32, UInt32) = (0, 0)
                    let problem = try withUnsafeMutableBytes(of: &header) { bytes -> String? in
                        guard let base = bytes.baseAddress else { return nil }
                        let got = try file.read(into: base, count: 4, at: member.offset)
                        if got == 4 { return MemberScanner.headerProblem(base, count: 4) }
                        // A header cut short by a tear is a prefix of `1f 8b 08`; anything else
                        // after the last member is stray bytes, not a member.
                        let start = [UInt8](UnsafeRawBufferPointer(start: base, count: got))
                        return [0x1F, 0x8B, 0x08].starts(with: start)
                            ? nil : "\(got) byte\(got == 1 ? "" : "s") where a member should start, not a gzip member header"
                    }
                    if let problem { return .corrupt(member: member, reason: problem) }
                }
            }
            let (status, overLimit) = inflater.inflate(into: content, limit: contentLimit)
            let consumedTo = chunkStart + chunkCount - inflater.availableInput
            member.length = consumedTo - member.offset
            if overLimit {
                throw LogError(
                    .eventTooLarge,
                    "gzip member \(member.index) holds more than \(LogReadLimit.describe(contentLimit)) of events; the read limit stops here",
                    path: path, memberOffset: member.offset, hint: LogReadLimit.hint(limit: contentLimit))
            }
            switch status {
            case .needsInput:
                continue
            case .memberEnded:
                handedOver = true
                try body(member, content.bytes, true)
                inflater.reset()
                inMember = false
                member.index += 1
            case .corrupt(let reason):
                return .corrupt(member: member, reason: reason)
            }
        }
        // An empty file was cut before its first member's header was written.
        if !inMember && offset == 0 && chunkStart == 0 { inMember = true }
        guard inMember else { return .complete }
        // A damaged length field can make a member in the middle swallow the rest of the
        // file, which looks like a tear. A complete member further on proves it is not one.
        var candidate = member.offset + 1
        while let next = try nextMemberOffset(after: candidate) {
            if try isCompleteMember(at: next) {
                return .corrupt(
                    member: member,
                    reason: "the member's data runs on over a complete member at byte \(next), so it is damaged, not cut off")
            }
            candidate = next + 1
        }
        handedOver = true
        try body(member, content.bytes, false)
        return .torn(member: member)
    }

    /// Whether a whole gzip member, CRC checked, starts at `offset`.
    private func isCompleteMember(at offset: Int) throws -> Bool {
        let file = try FileDescriptor.openForReading(path)
        try file.seek(to: offset)
        let inflater = try Inflater()
        let input = UnsafeMutableRawPointer.allocate(byteCount: MemberScanner.chunkSize, alignment: 16)
        defer { input.deallocate() }
        let content = ByteBuffer(capacity: 64 * 1024)
        while true {
            if inflater.availableInput == 0 {
                let count = try file.read(into: input, count: MemberScanner.chunkSize)
                if count == 0 { return false }
                inflater.setInput(input, count: count)
            }
            // Only whether it ends matters, so the content is thrown away as it comes.
            content.count = 0
            let (status, _) = inflater.inflate(into: content, limit: contentLimit)
            switch status {
            case .needsInput: continue
            case .memberEnded: return true
            case .corrupt: return false
            }
        }
    }

    /// Version 1 members carry no extra field, name or comment (FLG bits 2, 3, 4). A flipped
    /// bit that sets one would make a reader skip over later events as "header", so such a
    /// header is damage. Checked before zlib sees the member.
    static func headerProblem(_ header: UnsafeMutableRawPointer, count: Int) -> String? {
        guard count >= 4 else { return "a member header cut short" }
        let bytes = header.assumingMemoryBound(to: UInt8.self)
        guard bytes[0] == 0x1F, bytes[1] == 0x8B else { return "incorrect header check" }
        if bytes[3] & 0x1C != 0 {
            return
                "header flags 0x\(String(bytes[3], radix: 16)) ask for an extra field, a name or a comment, which log members never carry "
                + "(a file compressed by another tool: gzip FILE keeps the file's name)"
        }
        return nil
    }

    /// The offset of the next member header at or after `offset`, by its fixed first bytes
    /// (`1f 8b 08`), or nil. Used to read on past a corrupt member.
    func nextMemberOffset(after offset: Int) throws -> Int? {
        let file = try FileDescriptor.openForReading(path)
        try file.seek(to: offset)
        let size = MemberScanner.chunkSize
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size + 2, alignment: 16)
        defer { buffer.deallocate() }
        var position = offset
        var carried = 0
        while true {
            let got = try file.read(into: buffer + carried, count: size)
            if got == 0 { return nil }
            let bytes = UnsafeRawBufferPointer(start: buffer, count: carried + got)
            var index = 0
            while index + 3 <= bytes.count {
                if bytes[index] == 0x1F && bytes[index + 1] == 0x8B && bytes[index + 2] == 0x08 {
                    return position - carried + index
                }
                index += 1
            }
            // Keep the last two bytes: a magic number may straddle two reads.
            let keep = min(2, bytes.count)
            buffer.copyMemory(from: buffer + (bytes.count - keep), byteCount: keep)
            position += got
            carried = keep
        }
    }
}

/// What a scan reads and inflates with: the read buffer, the default content buffer and the
/// inflaters. A thread keeps one set between scans (`ThreadSlot`): a suite run reads thousands
/// of small logs per thread, and making them per log (two large buffers, zlib's and
/// libdeflate's state) cost up to 1% of reading each one; glibc reused the buffers' memory, so
/// it was mostly the inflaters' set-up. A thread that has scanned holds about 800 KiB this way
/// (a content buffer a huge member grew is shrunk back first).
final class ScanResources {
    let readSize: Int
    let input: UnsafeMutableRawPointer
    let content: ByteBuffer
    let inflater: Inflater
    let wholeMembers: MemberInflater?

    private static let slot = ThreadSlot<ScanResources>()

    private init(readSize: Int) throws {
        self.readSize = readSize
        inflater = try Inflater()
        wholeMembers = MemberInflater()
        input = UnsafeMutableRawPointer.allocate(byteCount: readSize, alignment: 16)
        content = ByteBuffer(capacity: 512 * 1024)
    }

    deinit { input.deallocate() }

    /// This thread's set, ready for a new scan, when it has one of this read size; else a new one.
    static func take(readSize: Int) throws -> ScanResources {
        if let kept = slot.take(), kept.readSize == readSize {
            kept.inflater.reset()
            kept.inflater.setInput(kept.input, count: 0)
            kept.content.reset(keepingCapacity: 512 * 1024)
            kept.content.resetPeak()
            return kept
        }
        return try ScanResources(readSize: readSize)
    }

    /// Keeps the set for this thread's next scan.
    func giveBack() {
        content.reset(keepingCapacity: 512 * 1024)
        ScanResources.slot.put(self)
    }
}
