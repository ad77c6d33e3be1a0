import CZlib

/// A zlib deflate stream that writes gzip members with the header version 1 requires:
/// no name, no mtime, OS 255, and a header CRC (FHCRC) so that a flipped header bit is caught.
final class Deflater {
    private let stream: UnsafeMutablePointer<z_stream>
    private let header: UnsafeMutablePointer<gz_header>
    /// Compressed bytes waiting to be written.
    let output: ByteBuffer

    init(level: Int32) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        header = .allocate(capacity: 1)
        header.initialize(to: gz_header())
        output = ByteBuffer(capacity: 256 * 1024)
        // windowBits 15 + 16: a gzip wrapper. deflateInit2 is a macro; call the function it names.
        let status = deflateInit2_(
            stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else {
            stream.deallocate()
            header.deallocate()
            throw LogError(.writeFailed, "zlib could not start a deflate stream (status \(status))", path: "")
        }
        setHeader()
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
        header.deallocate()
    }

    private func setHeader() {
        header.pointee = gz_header()
        header.pointee.os = 255
        header.pointee.hcrc = 1
        deflateSetHeader(stream, header)
    }

    /// Compresses `input` (possibly empty) with the given flush mode into `output`.
    func deflate(_ input: UnsafeRawBufferPointer, flush: Int32) {
        stream.pointee.next_in = UnsafeMutablePointer(
            mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        while true {
            output.reserve(extra: 64 * 1024)
            stream.pointee.next_out = output.end.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(output.spare)
            let before = output.spare
            let status = CZlib.deflate(stream, flush)
            output.count += before - Int(stream.pointee.avail_out)
            // Done when all input is taken and zlib did not fill the output (nothing pending).
            if status == Z_STREAM_END { return }
            precondition(status == Z_OK || status == Z_BUF_ERROR, "deflate failed with status \(status)")
            if stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 { return }
        }
    }

    /// Starts the next member after `Z_FINISH`.
    func reset() {
        deflateReset(stream)
        setHeader()
    }
}

/// Compresses bytes into one complete gzip member of the version 1 shape.
func gzipMember(_ bytes: UnsafeRawBufferPointer, level: Int32 = 6) throws -> [UInt8] {
    let deflater = try Deflater(level: level)
    deflater.deflate(bytes, flush: Z_FINISH)
    return Array(deflater.output.bytes)
}
