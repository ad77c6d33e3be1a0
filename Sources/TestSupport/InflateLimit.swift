import CLibdeflate
import CZlib
import Foundation

/// The physical limit of reading a log, for the benchmarks: inflating every gzip member of a
/// file in process and throwing the output away, with nothing else done. One instance keeps
/// its buffers across files, as a reader of many logs would.
public final class InflateLimit {
    private var output = [UInt8](repeating: 0, count: 4 << 20)
    private let decompressor: OpaquePointer?

    public init() {
        decompressor = libdeflate_alloc_decompressor()
    }

    deinit { if let decompressor { libdeflate_free_decompressor(decompressor) } }

    /// zlib's streaming inflate, as the reader uses it for members it cannot take whole.
    /// Returns the bytes inflated.
    public func zlib(_ path: String) throws -> Int {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        var stream = z_stream()
        inflateInit2_(&stream, 31, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        defer { inflateEnd(&stream) }
        var produced = 0
        data.withUnsafeBytes { input in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(input.count)
            output.withUnsafeMutableBufferPointer { out in
                while stream.avail_in > 0 {
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(min(out.count, 256 * 1024))
                    let before = Int(stream.avail_out)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    produced += before - Int(stream.avail_out)
                    if status == Z_STREAM_END { inflateReset(&stream) } else if status != Z_OK { return }
                }
            }
        }
        return produced
    }

    /// libdeflate, one call per whole member: the fastest inflate available here, and what the
    /// reader uses for every intact member. Returns the bytes inflated.
    public func libdeflate(_ path: String) throws -> Int {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        guard let decompressor else { return 0 }
        var produced = 0
        data.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                guard let base = input.baseAddress else { return }
                var offset = 0
                while offset < input.count {
                    var consumed = 0
                    var written = 0
                    let status = libdeflate_gzip_decompress_ex(
                        decompressor, base + offset, input.count - offset, out.baseAddress, out.count, &consumed, &written)
                    guard status == LIBDEFLATE_SUCCESS else { return }
                    offset += consumed
                    produced += written
                }
            }
        }
        return produced
    }
}
