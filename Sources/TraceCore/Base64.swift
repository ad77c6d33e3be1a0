/// Standard base64 (RFC 4648 section 4, with padding), for content bodies that are not UTF-8.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, symbol) in alphabet.enumerated() { table[Int(symbol)] = UInt8(value) }
        return table
    }()

    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { output.append(alphabet[Int(chunk >> UInt32(shift) & 0x3F)]) }
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            let chunk = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            output.append(alphabet[Int(chunk >> 18 & 0x3F)])
            output.append(alphabet[Int(chunk >> 12 & 0x3F)])
            output.append(rest == 2 ? alphabet[Int(chunk >> 6 & 0x3F)] : UInt8(ascii: "="))
            output.append(UInt8(ascii: "="))
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes, or nil for text that is not padded standard base64.
    public static func decode(_ text: String) -> [UInt8]? {
        let symbols = Array(text.utf8)
        guard symbols.count % 4 == 0 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(symbols.count / 4 * 3)
        var index = 0
        while index < symbols.count {
            let padding = (symbols[index + 3] == UInt8(ascii: "=") ? 1 : 0) + (symbols[index + 2] == UInt8(ascii: "=") ? 1 : 0)
            guard padding == 0 || index + 4 == symbols.count else { return nil }
            var chunk: UInt32 = 0
            for offset in 0..<(4 - padding) {
                let value = values[Int(symbols[index + offset])]
                guard value != 0xFF else { return nil }
                chunk |= UInt32(value) << UInt32(18 - 6 * offset)
            }
            output.append(UInt8(chunk >> 16 & 0xFF))
            if padding < 2 { output.append(UInt8(chunk >> 8 & 0xFF)) }
            if padding < 1 { output.append(UInt8(chunk & 0xFF)) }
            index += 4
        }
        return output
    }
}
