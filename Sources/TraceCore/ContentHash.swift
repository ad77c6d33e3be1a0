import CSHA256
import Crypto

/// SHA-256 in the forms the log format uses.
public enum ContentHash {
    /// Whether two secrets (a token, an approval's proof) are the same, compared in time that
    /// does not depend on where they differ.
    public static func sameSecret(_ left: String, _ right: String) -> Bool {
        let a = Array(left.utf8)
        let b = Array(right.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// `sha256:<64 lowercase hex>`, the form of content hashes and state digests.
    public static func sha256(_ bytes: some Collection<UInt8>) -> String {
        if let text = bytes.withContiguousStorageIfAvailable({ sha256(UnsafeRawBufferPointer($0)) }) { return text }
        return Array(bytes).withUnsafeBytes { sha256($0) }
    }

    /// `sha256:<64 lowercase hex>` of raw memory.
    public static func sha256(_ buffer: UnsafeRawBufferPointer) -> String {
        let prefix: StaticString = "sha256:"
        return withDigest(of: buffer) { digest in
            String(unsafeUninitializedCapacity: 7 + 64) { text in
                prefix.withUTF8Buffer { _ = text.initialize(from: $0) }
                writeHex(digest, into: UnsafeMutableBufferPointer(rebasing: text[7...]))
                return 7 + 64
            }
        }
    }

    /// 64 lowercase hex digits, the form of the `prev` hash link.
    public static func sha256Hex(_ bytes: some Collection<UInt8>) -> String {
        if let text = bytes.withContiguousStorageIfAvailable({ sha256Hex(UnsafeRawBufferPointer($0)) }) { return text }
        return Array(bytes).withUnsafeBytes { sha256Hex($0) }
    }

    /// 64 lowercase hex digits of the SHA-256 of raw memory.
    public static func sha256Hex(_ buffer: UnsafeRawBufferPointer) -> String {
        withDigest(of: buffer) { hex($0) }
    }

    /// 64 lowercase hex digits of the SHA-256 of each of two buffers: with the processor's
    /// extensions, both in about the time of one (the log's lines are hashed two at a time).
    public static func sha256HexPair(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) -> (String, String) {
        guard usesProcessorExtensions else { return (sha256Hex(first), sha256Hex(second)) }
        var digests: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &digests) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            csha256_hash_pair(
                first.baseAddress, first.count, second.baseAddress, second.count, bytes.baseAddress, bytes.baseAddress.map { $0 + 32 })
            return (hex(UnsafeBufferPointer(rebasing: bytes[..<32])), hex(UnsafeBufferPointer(rebasing: bytes[32...])))
        }
    }

    /// Whether the processor's SHA extensions hash here (x86-64 SHA-NI), else swift-crypto.
    /// Both give the same digest; the extensions save a hashing object per message, which is
    /// most of the cost of hashing a short line.
    public static let usesProcessorExtensions = csha256_is_available() != 0

    /// Calls `body` with the 32 bytes of the SHA-256 of `buffer`.
    @inline(__always)
    static func withDigest<T>(of buffer: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        if usesProcessorExtensions {
            var digest: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            return withUnsafeMutableBytes(of: &digest) { raw in
                csha256_hash(buffer.baseAddress, buffer.count, raw.bindMemory(to: UInt8.self).baseAddress)
                return body(UnsafeRawBufferPointer(raw))
            }
        }
        return SHA256.hash(data: buffer).withUnsafeBytes(body)
    }

    /// The link a first event carries: 64 zeros.
    public static let genesis = String(repeating: "0", count: 64)

    /// Whether `bytes` are `sha256:` and 64 lowercase hex digits: the form of a member typed
    /// `hash` (docs/log-format.md §4) — content hashes, state digests, config digests.
    public static func isSHA256(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count == 71, bytes.starts(with: "sha256:".utf8), let base = bytes.baseAddress else { return false }
        return isLowercaseHex(base + 7, count: 64)
    }

    /// Whether `text` is `sha256:` and 64 lowercase hex digits.
    public static func isSHA256(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { isSHA256(UnsafeRawBufferPointer($0)) }
    }

    /// Whether `text` is exactly 64 lowercase hex digits: the form of `prev` and of hashes.
    public static func isHex64(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in
            guard utf8.count == 64, let base = utf8.baseAddress else { return false }
            return isLowercaseHex(UnsafeRawPointer(base), count: 64)
        }
    }

    /// Whether the `count` bytes at `start` (a multiple of 8) are all `0`-`9` or `a`-`f`: eight
    /// at a time, with no carry between bytes (each is below 0x80 before the sums), a byte's
    /// high bit set in `atLeast(x)` when it is at least `x`.
    @inline(__always)
    static func isLowercaseHex(_ start: UnsafeRawPointer, count: Int) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var offset = 0
        while offset < count {
            let word = (start + offset).loadUnaligned(as: UInt64.self)
            guard word & highs == 0 else { return false }
            func atLeast(_ bound: UInt64) -> UInt64 { word &+ ones &* (0x80 - bound) }
            let digits = atLeast(0x30) & ~atLeast(0x3A)
            let letters = atLeast(0x61) & ~atLeast(0x67)
            guard (digits | letters) & highs == highs else { return false }
            offset += 8
        }
        return true
    }

    /// Lowercase hex of raw bytes.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
            writeHex(bytes, into: buffer)
            return bytes.count * 2
        }
    }

    /// Writes the lowercase hex of `bytes` at the start of `buffer` (twice their count).
    private static func writeHex(_ bytes: some Collection<UInt8>, into buffer: UnsafeMutableBufferPointer<UInt8>) {
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { digits in
            var position = 0
            for byte in bytes {
                buffer[position] = digits[Int(byte >> 4)]
                buffer[position + 1] = digits[Int(byte & 0x0F)]
                position += 2
            }
        }
    }

    /// The bytes of a hash written as hex, with or without its `sha256:` prefix; nil when it is
    /// not hex.
    public static func bytes(hex text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        let whole = forEachHexByte(of: text) { byte in
            bytes.append(byte)
            return true
        }
        return whole ? bytes : nil
    }

    /// The first 8 bytes of a hash written as hex (with or without its `sha256:` prefix), as a
    /// big-endian number, without making the bytes; nil when those 16 digits are not hex, or
    /// when the digits are an odd number (as `bytes(hex:)` gives nil).
    public static func leadingWord(hex text: String) -> UInt64? {
        var word: UInt64 = 0
        var count = 0
        _ = forEachHexByte(of: text) { byte in
            word = word << 8 | UInt64(byte)
            count += 1
            return count < 8
        }
        return count == 8 ? word : nil
    }

    /// Calls `body` with each byte of `text`'s hex digits (after an optional `sha256:`) until it
    /// returns false. Returns false when a digit is not hex or the count is odd.
    private static func forEachHexByte(of text: String, _ body: (UInt8) -> Bool) -> Bool {
        func nibble(_ character: UInt8) -> UInt8? {
            switch character {
            case 0x30...0x39: return character - 0x30
            case 0x61...0x66: return character - 0x61 + 10
            case 0x41...0x46: return character - 0x41 + 10
            default: return nil
            }
        }
        var text = text
        return text.withUTF8 { digits in
            var index = digits.starts(with: "sha256:".utf8) ? 7 : 0
            guard (digits.count - index) % 2 == 0 else { return false }
            while index < digits.count {
                guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return false }
                guard body(high << 4 | low) else { return true }
                index += 2
            }
            return true
        }
    }
}
