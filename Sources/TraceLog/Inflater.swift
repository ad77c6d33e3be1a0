import CZlib

/// A zlib inflate stream for gzip members, one member at a time.
final class Inflater {
    enum Status {
        /// More input is needed (or more output room).
        case needsInput
        /// The member ended and its CRC and size checked.
        case memberEnded
        /// The data is damaged; the message is zlib's.
        case corrupt(String)
    }

    private let stream: UnsafeMutablePointer<z_stream>

    /// An inflater of gzip members or, with `raw`, of bare deflate data (zip entries).
    init(raw: Bool = false) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status = inflateInit2_(stream, raw ? -15 : 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else {
            stream.deallocate()
            throw LogError(.unreadable, "zlib could not start an inflate stream (status \(status))", path: "")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    var availableInput: Int { Int(stream.pointee.avail_in) }

    func setInput(_ base: UnsafeRawPointer, count: Int) {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(count)
    }

    /// Inflates available input into `output`, growing it, until the input is used up or the
    /// member ends. `limit` bounds the output size, and the room asked for never reaches past
    /// it: a member that inflates to more (a decompression bomb) is refused when it fills the
    /// limit, without the buffer having doubled beyond it first.
    func inflate(into output: ByteBuffer, limit: Int) -> (Status, overLimit: Bool) {
        while true {
            if output.count >= limit { return (.needsInput, true) }
            output.reserve(extra: min(256 * 1024, max(64 * 1024, output.count), limit - output.count))
            stream.pointee.next_out = output.end.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(output.spare)
            let before = output.spare
            let inputBefore = stream.pointee.avail_in
            let status = CZlib.inflate(stream, Z_NO_FLUSH)
            output.count += before - Int(stream.pointee.avail_out)
            switch status {
            case Z_STREAM_END:
                return (.memberEnded, false)
            case Z_OK:
                if stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 { return (.needsInput, false) }
            case Z_BUF_ERROR:
                // No progress possible: with input left this means output room, else more input.
                if stream.pointee.avail_in == 0 { return (.needsInput, false) }
                if stream.pointee.avail_in == inputBefore && stream.pointee.avail_out > 0 {
                    return (.corrupt("inflate made no progress"), false)
                }
            case Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR:
                let message = stream.pointee.msg.map { String(cString: $0) } ?? "invalid deflate data"
                return (.corrupt(message), false)
            default:
                return (.corrupt("zlib status \(status)"), false)
            }
        }
    }

    func reset() {
        inflateReset(stream)
    }
}
