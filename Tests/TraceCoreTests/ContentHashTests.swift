import Crypto
import TestSupport
import Testing

@testable import TraceCore

@Suite("SHA-256 of lines and digests")
struct ContentHashTests {
    @Test("the FIPS 180-4 examples and the empty message hash to their published digests")
    func publishedVectors() {
        let vectors: [(String, String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
            (
                "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
            ),
            (String(repeating: "a", count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
        ]
        for (message, digest) in vectors {
            #expect(ContentHash.sha256Hex(Array(message.utf8)) == digest, "\(message.prefix(20))… (\(message.utf8.count) bytes)")
            #expect(ContentHash.sha256(Array(message.utf8)) == "sha256:" + digest)
        }
    }

    @Test(
        "a hash's form is checked byte by byte: each of the 256 byte values in each of the 64 places is accepted exactly when it is 0-9 or a-f"
    )
    func hashFormEveryByteEveryPlace() {
        let valid = "sha256:" + String(repeating: "0123456789abcdef", count: 4)
        #expect(ContentHash.isSHA256(valid))
        #expect(ContentHash.isHex64(String(valid.dropFirst(7))))
        for place in 0..<64 {
            for value in 0...255 {
                var bytes = Array(valid.utf8)
                bytes[7 + place] = UInt8(value)
                let isDigit = (0x30...0x39).contains(value) || (0x61...0x66).contains(value)
                let accepted = bytes.withUnsafeBytes { ContentHash.isSHA256($0) }
                #expect(accepted == isDigit, "byte \(value) at place \(place)")
                let hexOnly = Array(bytes[7...])
                let text = String(decoding: hexOnly, as: UTF8.self)
                // A byte that is not UTF-8 alone is replaced in the string, which is then no hex.
                #expect(ContentHash.isHex64(text) == (isDigit && text.utf8.count == 64), "byte \(value) at place \(place)")
            }
        }
        #expect(!ContentHash.isSHA256("sha256:" + String(repeating: "A", count: 64)))
        #expect(!ContentHash.isSHA256("sha256:" + String(repeating: "0", count: 63)))
        #expect(!ContentHash.isSHA256("sha255:" + String(repeating: "0", count: 64)))
    }

    @Test(
        "the processor's SHA extensions agree with swift-crypto on every length across the padding boundaries, and on random data",
        .enabled(if: ContentHash.usesProcessorExtensions, "this processor has no SHA extensions: swift-crypto hashes")
    )
    func extensionsAgreeWithSwiftCrypto() {
        var generator = SeededGenerator(seed: 180_4)
        // Every length up to five blocks covers a tail of 0-63 bytes with one or two padding
        // blocks; then random lengths up to a member's size.
        let lengths = Array(0...320) + (0..<20).map { _ in Int.random(in: 321...100_000, using: &generator) }
        for length in lengths {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = bytes.withUnsafeBytes { ContentHash.hex(Array(SHA256.hash(data: $0))) }
            #expect(ContentHash.sha256Hex(bytes) == expected, "\(length) bytes")
        }
    }

    @Test("two buffers hashed together give each one's own digest, whatever their lengths")
    func pairsAgreeWithSingles() {
        var generator = SeededGenerator(seed: 2)
        let bytes = (0..<2_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        // Lengths on both sides of the one- and two-block tails, and one side much longer.
        let lengths = [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 700, 1_300]
        bytes.withUnsafeBytes { buffer in
            for first in lengths {
                for second in lengths {
                    let a = UnsafeRawBufferPointer(rebasing: buffer[..<first])
                    let b = UnsafeRawBufferPointer(rebasing: buffer[(2_000 - second)...])
                    let (hashA, hashB) = ContentHash.sha256HexPair(a, b)
                    #expect(hashA == ContentHash.hex(Array(SHA256.hash(data: a))), "\(first) and \(second) bytes")
                    #expect(hashB == ContentHash.hex(Array(SHA256.hash(data: b))), "\(first) and \(second) bytes")
                }
            }
        }
    }

    @Test("hex is two lowercase digits a byte, high first, for every byte value, at every length and place, contiguous or not")
    func hexOfEveryByte() {
        func reference(_ bytes: [UInt8]) -> String {
            let digits = Array("0123456789abcdef")
            return bytes.map { "\(digits[Int($0 >> 4)])\(digits[Int($0 & 0x0F)])" }.joined()
        }
        let all = (0...255).map { UInt8($0) }
        #expect(ContentHash.hex(all) == reference(all))
        // Every length around the four read at once, starting at every place of a buffer.
        for start in 0..<5 {
            for count in 0..<13 {
                let bytes = Array(all[(start * 37)...].prefix(count)).map { $0 &* 29 &+ UInt8(start) }
                #expect(ContentHash.hex(bytes) == reference(bytes), "\(bytes)")
                #expect(ContentHash.hex(bytes[...]) == reference(bytes), "\(bytes)")
                #expect(ContentHash.hex(bytes.lazy.map { $0 }) == reference(bytes), "\(bytes), not in one piece")
            }
        }
    }

    @Test("a hash read back from its hex gives its bytes and its first 8 as a number; anything not hex gives nothing")
    func hexReadsBack() {
        var generator = SeededGenerator(seed: 16)
        for _ in 0..<50 {
            let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let hex = ContentHash.hex(bytes)
            let word = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            for text in [hex, "sha256:" + hex, hex.uppercased()] {
                #expect(ContentHash.bytes(hex: text) == bytes, "\(text)")
                #expect(ContentHash.leadingWord(hex: text) == word, "\(text)")
            }
        }
        #expect(ContentHash.bytes(hex: "") == [])
        #expect(ContentHash.bytes(hex: "abc") == nil)
        #expect(ContentHash.bytes(hex: "0g") == nil)
        #expect(ContentHash.bytes(hex: "sha256:zz") == nil)
        #expect(ContentHash.leadingWord(hex: "0011223344556677") == 0x0011_2233_4455_6677)
        #expect(ContentHash.leadingWord(hex: "00112233445566") == nil, "fewer than 8 bytes")
        #expect(ContentHash.leadingWord(hex: "00112233445566778") == nil, "an odd number of digits")
        #expect(ContentHash.leadingWord(hex: "001122334455667g" + String(repeating: "0", count: 48)) == nil)
    }
}
