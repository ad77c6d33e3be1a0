/// Whether bytes can be the start of a JSON object text: what a line a writer began and a tear
/// cut short must be (docs/log-format.md §5). The check is RFC 8259's grammar read up to the
/// last byte, where anything may stop — inside a string, an escape, a number, a literal or a
/// UTF-8 character — and nothing may follow the object's end.
public enum JSONPrefix {
    /// Why `bytes` are not the start of a JSON object text: the first byte no such text can
    /// have there, and what JSON expects there ("':' after a member name"); nil when they are
    /// one.
    public static func problem(_ bytes: UnsafeRawBufferPointer) -> (offset: Int, message: String)? {
        var reader = Reader()
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte >= 0x80, reader.state == .string(isName: true) || reader.state == .string(isName: false) {
                // A UTF-8 sequence: its length from the lead byte, its second byte's range from
                // the lead (no overlong form, no surrogate, nothing past U+10FFFF). The last
                // character may be cut.
                let (length, low, high): (Int, UInt8, UInt8)
                switch byte {
                case 0xC2...0xDF: (length, low, high) = (2, 0x80, 0xBF)
                case 0xE0: (length, low, high) = (3, 0xA0, 0xBF)
                case 0xED: (length, low, high) = (3, 0x80, 0x9F)
                case 0xE1...0xEF: (length, low, high) = (3, 0x80, 0xBF)
                case 0xF0: (length, low, high) = (4, 0x90, 0xBF)
                case 0xF4: (length, low, high) = (4, 0x80, 0x8F)
                case 0xF1...0xF3: (length, low, high) = (4, 0x80, 0xBF)
                default: return (index, "a byte that begins a UTF-8 character, not 0x\(String(byte, radix: 16))")
                }
                for offset in 1..<length where index + offset < bytes.count {
                    let next = bytes[index + offset]
                    guard (offset == 1 ? low...high : 0x80...0xBF).contains(next) else {
                        return (index + offset, "a byte that goes on the UTF-8 character begun at byte \(index)")
                    }
                }
                index += length
                continue
            }
            if let expected = reader.take(byte) { return (index, expected) }
            index += 1
        }
        return nil
    }

    /// The grammar's state after each byte.
    private struct Reader {
        enum Container { case object, array }
        enum State: Equatable {
            /// Before the text: its `{`.
            case start
            /// After `{`: a member name or `}`.
            case nameOrEnd
            /// After `,` in an object: a member name.
            case name
            /// After a member name: `:`.
            case colon
            /// After `:` or `,` in an array: a value.
            case value
            /// After `[`: a value or `]`.
            case valueOrEnd
            /// After a value: `,` or the container's end.
            case next
            /// After the object's `}`: nothing.
            case done
            /// Inside a string (a member name when `isName`), after a `\`, after `\u` and
            /// `count` hex digits.
            case string(isName: Bool)
            case escape(isName: Bool)
            case unicode(isName: Bool, count: Int)
            /// Inside a number: after `-`, a leading `0`, integer digits, `.`, fraction digits,
            /// `e`, the exponent's sign, exponent digits.
            case minus, zero, integer, point, fraction, exponent, exponentSign, exponentDigits
            /// Inside `true`, `false` or `null` (`Reader.literals[word]`), `matched` bytes of
            /// it read.
            case literal(word: Int, matched: Int)
        }

        static let literals: [[UInt8]] = [Array("true".utf8), Array("false".utf8), Array("null".utf8)]

        var state = State.start
        var open: [Container] = []

        /// Takes one byte; what JSON expects instead when it cannot come here.
        mutating func take(_ byte: UInt8) -> String? {
            if byte < 0x20, !(isWhitespace(byte) && isBetweenTokens) {
                return "no control byte (0x\(String(byte, radix: 16))) but white space between tokens"
            }
            switch state {
            case .string(let isName):
                if byte == UInt8(ascii: "\\") {
                    state = .escape(isName: isName)
                } else if byte == UInt8(ascii: "\"") {
                    state = isName ? .colon : .next
                }
                return nil
            case .escape(let isName):
                switch byte {
                case UInt8(ascii: "u"): state = .unicode(isName: isName, count: 0)
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    state = .string(isName: isName)
                default: return "an escape (one of \" \\ / b f n r t u after the backslash)"
                }
                return nil
            case .unicode(let isName, let count):
                guard isHexDigit(byte) else { return "a hex digit of a \\u escape" }
                state = count == 3 ? .string(isName: isName) : .unicode(isName: isName, count: count + 1)
                return nil
            case .literal(let word, let matched):
                let literal = Self.literals[word]
                guard byte == literal[matched] else { return "the rest of \(String(decoding: literal, as: UTF8.self))" }
                state = matched + 1 == literal.count ? .next : .literal(word: word, matched: matched + 1)
                return nil
            case .minus:
                if byte == UInt8(ascii: "0") {
                    state = .zero
                } else if isDigit(byte) {
                    state = .integer
                } else {
                    return "a digit after the minus sign"
                }
                return nil
            case .point:
                guard isDigit(byte) else { return "a digit after the decimal point" }
                state = .fraction
                return nil
            case .exponent:
                if byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") {
                    state = .exponentSign
                } else if isDigit(byte) {
                    state = .exponentDigits
                } else {
                    return "a sign or digit of the exponent"
                }
                return nil
            case .exponentSign:
                guard isDigit(byte) else { return "a digit of the exponent" }
                state = .exponentDigits
                return nil
            case .integer where isDigit(byte), .fraction where isDigit(byte), .exponentDigits where isDigit(byte):
                return nil
            case .zero where byte == UInt8(ascii: "."), .integer where byte == UInt8(ascii: "."):
                state = .point
                return nil
            case .zero where byte | 0x20 == UInt8(ascii: "e"), .integer where byte | 0x20 == UInt8(ascii: "e"),
                .fraction where byte | 0x20 == UInt8(ascii: "e"):
                state = .exponent
                return nil
            case .zero, .integer, .fraction, .exponentDigits:
                // The number ended: the byte is what follows a value.
                state = .next
                return take(byte)
            default:
                break
            }
            if isWhitespace(byte) {
                return state == .done ? "nothing after the object's end" : nil
            }
            switch state {
            case .start:
                guard byte == UInt8(ascii: "{") else { return "the '{' that begins an object" }
                open.append(.object)
                state = .nameOrEnd
            case .nameOrEnd, .name:
                if byte == UInt8(ascii: "\"") {
                    state = .string(isName: true)
                } else if byte == UInt8(ascii: "}") && state == .nameOrEnd {
                    close()
                } else {
                    return state == .nameOrEnd ? "a member name in double quotes or '}'" : "a member name in double quotes"
                }
            case .colon:
                guard byte == UInt8(ascii: ":") else { return "':' after a member name" }
                state = .value
            case .value, .valueOrEnd:
                if byte == UInt8(ascii: "]") && state == .valueOrEnd { close() } else { return beginValue(byte) }
            case .next:
                switch (byte, open.last) {
                case (UInt8(ascii: ","), .object): state = .name
                case (UInt8(ascii: ","), .array): state = .value
                case (UInt8(ascii: "}"), .object), (UInt8(ascii: "]"), .array): close()
                default: return open.last == .object ? "',' or '}' in an object" : "',' or ']' in an array"
                }
            case .done:
                return "nothing after the object's end"
            default:
                return "a byte that fits here"
            }
            return nil
        }

        private mutating func beginValue(_ byte: UInt8) -> String? {
            switch byte {
            case UInt8(ascii: "{"):
                open.append(.object)
                state = .nameOrEnd
            case UInt8(ascii: "["):
                open.append(.array)
                state = .valueOrEnd
            case UInt8(ascii: "\""): state = .string(isName: false)
            case UInt8(ascii: "-"): state = .minus
            case UInt8(ascii: "0"): state = .zero
            case UInt8(ascii: "1")...UInt8(ascii: "9"): state = .integer
            case UInt8(ascii: "t"): state = .literal(word: 0, matched: 1)
            case UInt8(ascii: "f"): state = .literal(word: 1, matched: 1)
            case UInt8(ascii: "n"): state = .literal(word: 2, matched: 1)
            default: return "a value"
            }
            return nil
        }

        private mutating func close() {
            open.removeLast()
            state = open.isEmpty ? .done : .next
        }

        /// Where white space may stand: between tokens, not inside one.
        private var isBetweenTokens: Bool {
            switch state {
            case .start, .nameOrEnd, .name, .colon, .value, .valueOrEnd, .next, .done, .zero, .integer, .fraction, .exponentDigits:
                return true
            default: return false
            }
        }

        private func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        private func isHexDigit(_ byte: UInt8) -> Bool {
            isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
        }
    }
}
