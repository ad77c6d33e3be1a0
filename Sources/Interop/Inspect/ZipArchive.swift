import CZstd
import TraceCore
import TraceLog

/// A zip archive read whole: its entries by name, each decompressed on demand: stored and
/// deflated entries (zlib; what Python's `zipfile` writes) and zstd entries (libzstd; what
/// Inspect AI writes in its `.eval` archives). Checks sizes and CRCs, so a damaged archive is an
/// error, not garbage; and inflates no more than its `budget` allows, so a decompression bomb is
/// an error too, found before it is inflated.
public struct ZipArchive: Sendable {
    public struct Entry: Sendable {
        public var name: String
        var method: Int
        var crc: UInt32
        var compressedSize: Int
        public var size: Int
        var localHeaderOffset: Int
    }

    public let path: String
    private let bytes: [UInt8]
    public private(set) var entries: [Entry] = []
    /// What the entries read from this archive may inflate to.
    public let budget: ArchiveBudget
    /// The bytes inflated so far, counted against `budget`.
    public private(set) var inflatedBytes = 0

    public init(path: String, bytes: [UInt8], budget: ArchiveBudget = .standard) throws(ImportError) {
        self.path = path
        self.bytes = bytes
        self.budget = budget
        guard bytes.count >= 22 else { throw damaged("it is \(bytes.count) bytes long, too short for a zip archive") }
        // The end-of-central-directory record: in the last 64 KiB + 22 bytes (after the comment).
        let lowest = max(0, bytes.count - 65_557)
        guard let end = stride(from: bytes.count - 22, through: lowest, by: -1).first(where: { u32($0) == 0x0605_4B50 }) else {
            throw damaged("it has no end-of-central-directory record: it is not a zip archive, or it was cut short")
        }
        let count = u16(end + 10)
        var offset = Int(u32(end + 16))
        if count == 0xFFFF || offset == 0xFFFF_FFFF { throw damaged("it is a ZIP64 archive, which agent-eval does not read") }
        for index in 0..<count {
            guard offset + 46 <= bytes.count, u32(offset) == 0x0201_4B50 else {
                throw damaged("central directory entry \(index + 1) of \(count) is missing or damaged (at byte \(offset))")
            }
            let nameLength = u16(offset + 28)
            let extraLength = u16(offset + 30)
            let commentLength = u16(offset + 32)
            guard offset + 46 + nameLength <= bytes.count else { throw damaged("central directory entry \(index + 1) is cut") }
            let name = String(decoding: bytes[(offset + 46)..<(offset + 46 + nameLength)], as: UTF8.self)
            entries.append(
                Entry(
                    name: name, method: u16(offset + 10), crc: u32(offset + 16), compressedSize: Int(u32(offset + 20)),
                    size: Int(u32(offset + 24)), localHeaderOffset: Int(u32(offset + 42))))
            offset += 46 + nameLength + extraLength + commentLength
        }
    }

    public func entry(_ name: String) -> Entry? { entries.first { $0.name == name } }

    /// Checks that `entries` fit the budget together, before any of them is inflated: an
    /// archive over it is refused whole, with the entry that crosses the limit named.
    public func admit(_ entries: [Entry]) throws(ImportError) {
        var used = inflatedBytes
        for entry in entries {
            try budget.admit(entry, after: used, archive: path)
            used += entry.size
        }
    }

    /// The bytes of an entry, inflated and checked, and counted against the budget.
    public mutating func contents(of entry: Entry) throws(ImportError) -> [UInt8] {
        let header = entry.localHeaderOffset
        guard header + 30 <= bytes.count, u32(header) == 0x0403_4B50 else {
            throw damaged("the local header of \(entry.name) is missing (at byte \(header))")
        }
        let start = header + 30 + u16(header + 26) + u16(header + 28)
        guard start + entry.compressedSize <= bytes.count else { throw damaged("\(entry.name) is cut short") }
        try budget.admit(entry, after: inflatedBytes, archive: path)
        // Inflating stops one byte past the declared size (admitted above), whatever the
        // compressed data says it holds: an entry that would bring more is damaged.
        let data = bytes[start..<(start + entry.compressedSize)]
        let content: [UInt8]
        switch entry.method {
        case 0: content = Array(data)
        case 8:
            do {
                content = try GzipData.inflateRaw(Array(data), limit: entry.size + 1, path: "\(path):\(entry.name)")
            } catch {
                throw damaged("\(entry.name) does not inflate: \(error)")
            }
        case 93:
            do {
                content = try Self.zstdDecompress(data, size: entry.size)
            } catch {
                throw damaged("\(entry.name) does not decompress (zstd): \(error.message)")
            }
        default:
            throw damaged(
                "\(entry.name) uses compression method \(entry.method); agent-eval reads stored (0), deflated (8) and zstd (93) entries")
        }
        guard content.count == entry.size else {
            throw damaged("\(entry.name) inflates to \(content.count) bytes, not the \(entry.size) its header says")
        }
        guard GzipData.crc32(content) == entry.crc else { throw damaged("\(entry.name) fails its CRC check: the archive is damaged") }
        inflatedBytes += content.count
        return content
    }

    struct ZstdFailure: Error {
        var message: String
    }

    /// The largest window a zstd frame may ask for (128 MiB, libzstd's own default), set here
    /// so that a libzstd built with another default does not change what is refused.
    static let zstdWindowLogMax: Int32 = 27

    /// Decompresses the zstd frames of `data` (one or more, as a stream) into a buffer of the
    /// declared `size`, refusing input that holds more than that or that ends inside a frame.
    /// Memory is `size` (which the budget admitted) plus the decoder's window; the size a frame
    /// declares is never allocated.
    static func zstdDecompress(_ data: ArraySlice<UInt8>, size: Int) throws(ZstdFailure) -> [UInt8] {
        guard let context = ZSTD_createDCtx() else { throw ZstdFailure(message: "zstd could not allocate a decoder") }
        defer { ZSTD_freeDCtx(context) }
        _ = ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, zstdWindowLogMax)
        var failure: String?
        let output = [UInt8](unsafeUninitializedCapacity: size) { buffer, written in
            failure = data.withUnsafeBytes { source in
                var input = ZSTD_inBuffer(src: source.baseAddress, size: source.count, pos: 0)
                var out = ZSTD_outBuffer(dst: UnsafeMutableRawPointer(buffer.baseAddress), size: size, pos: 0)
                defer { written = out.pos }
                // Once the declared size is reached, the decoder gets a byte of spare room: a
                // byte there is one more than declared. With room it always makes progress.
                var spare: UInt8 = 0
                while true {
                    let isFull = out.pos == out.size
                    let result: Int? =
                        isFull
                        ? withUnsafeMutableBytes(of: &spare) { room in
                            var probe = ZSTD_outBuffer(dst: room.baseAddress, size: 1, pos: 0)
                            let result = ZSTD_decompressStream(context, &probe, &input)
                            return probe.pos > 0 ? nil : result
                        }
                        : ZSTD_decompressStream(context, &out, &input)
                    guard let result else { return "it decompresses to more than the \(size) bytes its header says" }
                    if ZSTD_isError(result) != 0 { return String(cString: ZSTD_getErrorName(result)) }
                    guard input.pos == input.size else { continue }
                    // 0: a frame ended and is flushed; with no input left, the data ends here.
                    if result == 0 { return nil }
                    // Room left and no input left: the data ends inside a frame.
                    if isFull || out.pos < out.size { return "the data ends inside a zstd frame (cut short)" }
                }
            }
        }
        if let failure { throw ZstdFailure(message: failure) }
        return output
    }

    private func damaged(_ why: String) -> ImportError {
        ImportError(.badArchive, "\(path) cannot be read as a zip archive: \(why)", location: SourceLocation(path: path))
    }

    private func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
    private func u32(_ at: Int) -> UInt32 {
        UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
    }
}
