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

    private static func hex(_ digest: SHA256.Digest) -> String {
        let digits = JSONWriter.hexDigits
        return String(unsafeUninitializedCapacity: 64) { buffer in
            var position = 0
            for byte in digest {
                buffer[position] = digits[Int(byte >> 4)]
                buffer[position + 1] = digits[Int(byte & 0x0F)]
                position += 2
            }
            return 64
        }
    }
}
