import CLibdeflate
import CZlib

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whole-buffer gzip for small side files that are not logs (cassette recordings): one
/// member written, one member read, through the same zlib streams as the log.
public enum GzipData {
    /// `bytes` as one gzip member (MTIME 0, so the same bytes compress to the same file), at
    /// zlib's `level` (6, gzip's own default, unless given).
    public static func compress(_ bytes: [UInt8], level: Int32 = 6) throws -> [UInt8] {
        try bytes.withUnsafeBytes { try gzipMember($0, level: level) }
    }

    /// `bytes` as one gzip member made by libdeflate at level 1: about eight times faster than
    /// `compress` here and about a tenth larger. For data written often and read rarely (the
    /// catalog's cached facts, which `compress` made a quarter of a first suite run's work).
    /// Any gzip reader reads it, `decompress` too.
    public static func compressQuickly(_ bytes: [UInt8]) throws -> [UInt8] {
        // Without memory for libdeflate's tables, zlib's smaller stream still does the job.
        guard let compressor = quickCompressor() else { return try compress(bytes) }
        let bound = libdeflate_gzip_compress_bound(compressor, bytes.count)
        var output = [UInt8](repeating: 0, count: bound)
        let size = bytes.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                libdeflate_gzip_compress(compressor, input.baseAddress, input.count, out.baseAddress, out.count)
            }
        }
        // The bound is what libdeflate promises to fit; 0 would mean it did not.
        precondition(size > 0, "libdeflate_gzip_compress overran its own bound")
        output.removeSubrange(size...)
        return output
    }

    /// Each thread's level-1 compressor, made on its first use and kept for the thread's life:
    /// one holds a few hundred KiB of tables, which a fresh one per call would fault in again.
    private static let quickCompressors = PerThread(
        make: { libdeflate_alloc_compressor(1).map { UnsafeMutableRawPointer($0) } },
        free: { compressor in compressor.map { libdeflate_free_compressor(OpaquePointer($0)) } })

    private static func quickCompressor() -> OpaquePointer? { quickCompressors.pointer.map(OpaquePointer.init) }

    /// The content of the gzip data `bytes` — its members one after another, as RFC 1952 and
    /// every gzip reader take them (a sender may write a body in several) — at most `limit`
    /// bytes of it. Throws a `LogError` naming `path` when the data is not whole gzip members
    /// (a member cut short, bytes after the last that are none).
    public static func decompress(_ bytes: [UInt8], limit: Int = 256 << 20, path: String) throws -> [UInt8] {
        try inflate(bytes, raw: false, limit: limit, path: path)
    }

    /// The content of bare deflate data (RFC 1951, as a zip entry holds it), at most `limit`
    /// bytes of it. Throws a `LogError` naming `path` when the data is damaged or cut.
    public static func inflateRaw(_ bytes: [UInt8], limit: Int, path: String) throws -> [UInt8] {
        try inflate(bytes, raw: true, limit: limit, path: path)
    }

    /// The CRC-32 of `bytes` (the checksum of gzip trailers and zip entries).
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { buffer in
            UInt32(CZlib.crc32(0, buffer.baseAddress, uInt(buffer.count)))
        }
    }

    private static func inflate(_ bytes: [UInt8], raw: Bool, limit: Int, path: String) throws -> [UInt8] {
        let inflater = try Inflater(raw: raw)
        let output = ByteBuffer(capacity: max(4096, bytes.count * 4))
        let status = bytes.withUnsafeBytes { buffer -> (Inflater.Status, overLimit: Bool) in
            guard let base = buffer.baseAddress else { return (.needsInput, false) }
            inflater.setInput(base, count: buffer.count)
            var status = inflater.inflate(into: output, limit: limit)
            // Gzip data may hold several members: each after the last, to the end of the input.
            while !raw, case .memberEnded = status.0, inflater.availableInput > 0 {
                let next = buffer.count - inflater.availableInput
                guard inflater.availableInput >= 2, buffer[next] == 0x1F, buffer[next + 1] == 0x8B else {
                    return (.corrupt("\(inflater.availableInput) bytes after the gzip member at byte \(next) are no gzip member"), false)
                }
                inflater.reset()
                status = inflater.inflate(into: output, limit: limit)
            }
            return status
        }
        switch status {
        case (.memberEnded, _) where output.count <= limit:
            return Array(output.bytes)
        case (.memberEnded, _):
            // The buffer's room may reach past the limit: the data ended there, but is too large.
            throw LogError(.eventTooLarge, "\(path) holds more than \(limit) bytes", path: path)
        case (_, true):
            throw LogError(.eventTooLarge, "\(path) holds more than \(limit) bytes", path: path)
        case (.corrupt(let message), _):
            throw LogError(.corruptMember, "\(path) is not valid \(raw ? "deflate" : "gzip") data: \(message)", path: path)
        case (.needsInput, _):
            throw LogError(
                .corruptMember, "\(path) ends before its \(raw ? "deflate stream" : "gzip member") does (the data is cut)", path: path)
        }
    }
}
