import CZlib

/// Zip archives made byte by byte, for tests of the archive reader with entries no archiver
/// would write: a zstd entry of 1 GiB in 33 KB (a decompression bomb), an entry that inflates
/// to more than its header says. Entries are stored or zstd (method 93); a zstd entry is one
/// frame of raw blocks (a prefix) and RLE blocks (one byte repeated), which any zstd decoder
/// reads (`zstd -t` passes) at 4 bytes per 128 KiB of repeats.
///
/// ```swift
/// var zip = ZipBuilder()
/// zip.addStored("header.json", Array(#"{"eval": {}}"#.utf8))
/// zip.addZstd("samples/1_epoch_1.json", prefix: Array("{}".utf8), repeating: 0x20, count: 1 << 30)
/// try Data(zip.bytes).write(to: url)
/// ```
public struct ZipBuilder: Sendable {
    private var body: [UInt8] = []
    private var central: [UInt8] = []
    private var count = 0

    public init() {}

    /// The archive: the entries, the central directory and its end record.
    public var bytes: [UInt8] {
        var end: [UInt8] = []
        Self.append32(0x0605_4B50, to: &end)
        Self.append16(0, to: &end)
        Self.append16(0, to: &end)
        Self.append16(count, to: &end)
        Self.append16(count, to: &end)
        Self.append32(UInt32(central.count), to: &end)
        Self.append32(UInt32(body.count), to: &end)
        Self.append16(0, to: &end)
        return body + central + end
    }

    /// An entry stored as it is.
    public mutating func addStored(_ name: String, _ content: [UInt8]) {
        add(name, method: 0, data: content, size: content.count, crc: Self.crc32(content))
    }

    /// A zstd entry holding `prefix` then `count` copies of `byte`. `declaredSize` is the size
    /// the zip headers give (the true one when nil); the frame itself declares the true size.
    public mutating func addZstd(_ name: String, prefix: [UInt8], repeating byte: UInt8, count: Int, declaredSize: Int? = nil) {
        let size = prefix.count + count
        add(
            name, method: 93, data: Self.zstdFrame(prefix: prefix, repeating: byte, count: count), size: declaredSize ?? size,
            crc: Self.crc32(prefix: prefix, repeating: byte, count: count))
    }

    /// An entry of `method` whose compressed bytes are `data`, declaring `size` and `crc`.
    public mutating func add(_ name: String, method: Int, data: [UInt8], size: Int, crc: UInt32) {
        let offset = body.count
        let nameBytes = Array(name.utf8)
        Self.append32(0x0403_4B50, to: &body)
        for field in [63, 0, method, 0, 0] { Self.append16(field, to: &body) }
        Self.append32(crc, to: &body)
        Self.append32(UInt32(data.count), to: &body)
        Self.append32(UInt32(truncatingIfNeeded: size), to: &body)
        Self.append16(nameBytes.count, to: &body)
        Self.append16(0, to: &body)
        body += nameBytes + data
        Self.append32(0x0201_4B50, to: &central)
        for field in [63, 63, 0, method, 0, 0] { Self.append16(field, to: &central) }
        Self.append32(crc, to: &central)
        Self.append32(UInt32(data.count), to: &central)
        Self.append32(UInt32(truncatingIfNeeded: size), to: &central)
        for field in [nameBytes.count, 0, 0, 0, 0] { Self.append16(field, to: &central) }
        Self.append32(0, to: &central)
        Self.append32(UInt32(offset), to: &central)
        central += nameBytes
        count += 1
    }

    /// One zstd frame (RFC 8878) of `prefix` as raw blocks then `count` copies of `byte` as RLE
    /// blocks; its header declares the content size and a 1 MiB window.
    public static func zstdFrame(prefix: [UInt8], repeating byte: UInt8, count: Int) -> [UInt8] {
        let blockLimit = 128 << 10
        var frame: [UInt8] = []
        append32(0xFD2F_B528, to: &frame)
        frame.append(0b1100_0000)  // 8-byte content size, not single-segment
        frame.append((20 - 10) << 3)  // window 2^20
        for shift in stride(from: 0, to: 64, by: 8) { frame.append(UInt8(truncatingIfNeeded: (prefix.count + count) >> shift)) }
        func blockHeader(size: Int, type: Int, isLast: Bool) {
            let value = size << 3 | type << 1 | (isLast ? 1 : 0)
            frame += [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value >> 16)]
        }
        var start = 0
        while start < prefix.count {
            let end = min(prefix.count, start + blockLimit)
            blockHeader(size: end - start, type: 0, isLast: end == prefix.count && count == 0)
            frame += prefix[start..<end]
            start = end
        }
        var remaining = count
        while remaining > 0 {
            let size = min(remaining, blockLimit)
            remaining -= size
            blockHeader(size: size, type: 1, isLast: remaining == 0)
            frame.append(byte)
        }
        if prefix.isEmpty && count == 0 { blockHeader(size: 0, type: 0, isLast: true) }
        return frame
    }

    /// The CRC-32 of `prefix` then `count` copies of `byte`, without making them.
    public static func crc32(prefix: [UInt8] = [], repeating byte: UInt8 = 0, count: Int = 0) -> UInt32 {
        var crc = prefix.withUnsafeBufferPointer { CZlib.crc32(0, $0.baseAddress, uInt($0.count)) }
        let chunk = [UInt8](repeating: byte, count: min(count, 1 << 20))
        var remaining = count
        while remaining > 0 {
            let size = min(remaining, chunk.count)
            crc = chunk.withUnsafeBufferPointer { CZlib.crc32(crc, $0.baseAddress, uInt(size)) }
            remaining -= size
        }
        return UInt32(crc)
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 { crc32(prefix: bytes) }

    static func append16(_ value: Int, to bytes: inout [UInt8]) {
        bytes += [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
    }

    static func append32(_ value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }
}
