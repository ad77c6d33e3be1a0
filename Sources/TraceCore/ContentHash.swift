import Crypto

/// SHA-256 in the forms the log format uses.
public enum ContentHash {
    /// `sha256:<64 lowercase hex>`, the form of content hashes and state digests.
    public static func sha256(_ bytes: some Collection<UInt8>) -> String {
        "sha256:" + sha256Hex(bytes)
    }

    /// 64 lowercase hex digits, the form of the `prev` hash link.
    public static func sha256Hex(_ bytes: some Collection<UInt8>) -> String {
        if let hex = bytes.withContiguousStorageIfAvailable({ hex(SHA256.hash(data: UnsafeRawBufferPointer($0))) }) {
            return hex
        }
        return hex(SHA256.hash(data: Array(bytes)))
    }

    /// 64 lowercase hex digits of the SHA-256 of raw memory.
    public static func sha256Hex(_ buffer: UnsafeRawBufferPointer) -> String {
        hex(SHA256.hash(data: buffer))
    }

    /// The link a first event carries: 64 zeros.
    public static let genesis = String(repeating: "0", count: 64)

    /// Whether `text` is exactly 64 lowercase hex digits: the form of `prev` and of hashes.
    public static func isHex64(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in
            guard utf8.count == 64 else { return false }
            var isHex = true
            for byte in utf8 {
                // Branch-free: a digit is 0x30-0x39, a letter 0x61-0x66.
                isHex = isHex && (byte &- 0x30 < 10 || byte &- 0x61 < 6)
            }
            return isHex
        }
    }

    private static func hex(_ digest: SHA256.Digest) -> String {
        digest.withUnsafeBytes { hex($0) }
    }

    /// Lowercase hex of raw bytes.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        let digits = JSONWriter.hexDigits
        return String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
            var position = 0
            for byte in bytes {
                buffer[position] = digits[Int(byte >> 4)]
                buffer[position + 1] = digits[Int(byte & 0x0F)]
                position += 2
            }
            return position
        }
    }

    /// The bytes of a hash written as hex, with or without its `sha256:` prefix; nil when it is
    /// not hex.
    public static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array((text.hasPrefix("sha256:") ? text.dropFirst(7) : Substring(text)).utf8)
        guard digits.count % 2 == 0 else { return nil }
        func nibble(_ character: UInt8) -> UInt8? {
            switch character {
            case 0x30...0x39: return character - 0x30
            case 0x61...0x66: return character - 0x61 + 10
            case 0x41...0x46: return character - 0x41 + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
