import CLibdeflate
import CZlib

/// Inflates a whole gzip member in one call with libdeflate, about twice as fast as zlib's
/// streaming inflate. It only answers for a member that is entirely in the buffer, has the
/// header a version 1 writer gives (no optional fields but the header CRC, which libdeflate
/// skips and this checks as zlib does) and fits the output room;
/// for anything else — a member cut by the end of the buffer or of the file, damage, a huge
/// member — it answers nil and the caller inflates the member with zlib, which reports tears
/// and damage precisely.
final class MemberInflater {
    private let decompressor: OpaquePointer

    init?() {
        guard let decompressor = libdeflate_alloc_decompressor() else { return nil }
        self.decompressor = decompressor
    }

    deinit { libdeflate_free_decompressor(decompressor) }

    /// Inflates the member at the start of `input` into `output` (replacing its content), with
    /// at most `limit` bytes of output room. Returns the member's compressed length, header and
    /// trailer included, once its CRC and size have checked; nil when zlib must do it.
    func inflate(_ input: UnsafeRawBufferPointer, into output: ByteBuffer, limit: Int) -> Int? {
        guard let base = input.baseAddress, input.count >= 20, input[3] & ~0x02 == 0 else { return nil }
        if input[3] == 0x02 {
            // FHCRC: the low 16 bits of the CRC-32 of the 10 bytes before it.
            let crc = crc32(0, base.assumingMemoryBound(to: Bytef.self), 10) & 0xFFFF
            guard crc == UInt(input[10]) | UInt(input[11]) << 8 else { return nil }
        }
        output.count = 0
        output.reserve(extra: min(limit, 512 * 1024))
        var consumed = 0
        var produced = 0
        let status = libdeflate_gzip_decompress_ex(
            decompressor, base, input.count, output.base, min(output.capacity, limit), &consumed, &produced)
        guard status == LIBDEFLATE_SUCCESS else { return nil }
        output.count = produced
        return consumed
    }
}

extension MemberScanner {
    /// What the first `compressedBytes` of the gzip member at `offset` inflate to (its start,
    /// a few hundred bytes), or nil when they cannot be read or inflated: the cheapest look at
    /// the beginning of a member's first line.
    static func firstBytes(of path: String, memberAt offset: Int, compressedBytes: Int = 256) -> [UInt8]? {
        guard let file = try? FileDescriptor.openForReading(path), let inflater = try? Inflater() else { return nil }
        let output = ByteBuffer(capacity: 16 * 1024)
        let input = UnsafeMutableRawBufferPointer.allocate(byteCount: compressedBytes, alignment: 8)
        defer { input.deallocate() }
        guard let inputBase = input.baseAddress,
            let count = try? file.read(into: inputBase, count: input.count, at: offset), count > 0
        else { return nil }
        inflater.setInput(inputBase, count: count)
        let (status, _) = inflater.inflate(into: output, limit: 16 * 1024)
        if case .corrupt = status { return nil }
        return Array(output.bytes)
    }

    /// The first line (without its newline) of the gzip member at `offset` of the file at
    /// `path`, inflating no more of the member than it takes: how a read that stops inside a
    /// version 3 member checks the next member's link without inflating that member whole.
    /// Nil when no member starts there (the end of the file), or when the line cannot be had
    /// this way (damage, a member without a complete line, a line past `limit`): the caller
    /// then reads the member as any read does, which reports what is wrong.
    static func firstLine(of path: String, memberAt offset: Int, limit: Int = LogReadLimit.memberBytes) -> [UInt8]? {
        guard let file = try? FileDescriptor.openForReading(path), let inflater = try? Inflater() else { return nil }
        let output = ByteBuffer(capacity: 16 * 1024)
        let input = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 8)
        defer { input.deallocate() }
        guard let inputBase = input.baseAddress else { return nil }
        var position = offset
        var searched = 0
        while true {
            guard let count = try? file.read(into: inputBase, count: input.count, at: position), count > 0 else { return nil }
            position += count
            inflater.setInput(inputBase, count: count)
            var status = Inflater.Status.needsInput
            repeat {
                let (next, overLimit) = inflater.inflate(into: output, limit: limit)
                if overLimit { return nil }
                status = next
            } while inflater.availableInput > 0 && { if case .needsInput = status { true } else { false } }()
            // Damage seen on the way is the normal read's to report.
            if case .corrupt = status { return nil }
            if let newline = output.bytes[searched...].firstIndex(of: 0x0A) { return Array(output.bytes[..<newline]) }
            searched = output.count
            guard case .needsInput = status else { return nil }
        }
    }
}
