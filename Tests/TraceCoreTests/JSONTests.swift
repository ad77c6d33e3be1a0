import Foundation
import TestSupport
import Testing

@testable import TraceCore

@Suite("JSON parsing and canonical writing")
struct JSONTests {
    @Test(
        "valid JSON parses to the expected value",
        arguments: [
            ("null", JSONValue.null),
            (" true ", .bool(true)),
            ("-0", .int(0)),
            ("9223372036854775807", .int(Int.max)),
            ("-9223372036854775808", .int(Int.min)),
            ("9223372036854775808", .double(9223372036854775808.0)),
            ("1.5e3", .double(1500)),
            ("\"a\\u00e9\\ud83d\\ude80\\n\\\"\"", .string("aé🚀\n\"")),
            // Escapes between long plain runs (copied whole), as in a model's raw reply.
            (
                "\"{\\\"tool\\\":\\\"lookup_order\\\",\\\"why\\\":\\\"the customer asked\\\"}\\\\é\"",
                .string("{\"tool\":\"lookup_order\",\"why\":\"the customer asked\"}\\é")
            ),
            ("[1,[2,{}],[]]", .array([1, [2, .object(JSONObject())], []])),
            ("{\"b\":1,\"a\":{\"d\":[],\"c\":null}}", JSONValue.object(JSONObject([("a", ["c": nil, "d": []]), ("b", 1)]))),
        ])
    func parsesValid(text: String, expected: JSONValue) throws {
        #expect(try JSONParser.parse(Array(text.utf8)) == expected)
    }

    @Test(
        "invalid JSON is rejected with the byte offset and what is wrong",
        arguments: [
            ("", "the text is empty"),
            ("{\"a\":1,}", "expected a member name in double quotes, found '}'"),
            ("[1 2]", "expected ',' or ']' in array, found '2'"),
            ("{\"a\":1,\"a\":2}", "duplicate member name \"a\""),
            ("\"abc", "string opened at byte 0 is not closed"),
            ("01", "leading zero in number"),
            ("\"\\ud800\"", "lone high surrogate"),
            ("\"tab\there\"", "control character 0x9 inside a string"),
            ("\"a\\nb\tc\"", "byte 5: control character 0x9 inside a string"),
            ("\"plain run\\q\"", "byte 10: invalid escape '\\q' in string"),
            ("\"a\\n and on", "string opened at byte 0 is not closed"),
            ("\"a\\", "string opened at byte 0 is not closed"),
            ("tru", "expected 'true'"),
            ("{} x", "unexpected 'x' after the JSON value"),
            ("1e999", "out of range"),
        ])
    func rejectsInvalid(text: String, message: String) {
        #expect {
            _ = try JSONParser.parse(Array(text.utf8))
        } throws: { error in
            guard let error = error as? TraceCoreError, error.code == .invalidJSON else { return false }
            return error.message.contains(message) && error.message.hasPrefix("invalid JSON at byte ")
        }
    }

    @Test(
        "a lone surrogate escape is written as U+FFFD for a reader of another program's text; escapes of escapes and whole pairs are left")
    func loneSurrogates() throws {
        func repaired(_ text: String) -> String? {
            JSONParser.replacingLoneSurrogates(in: Array(text.utf8)).map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(repaired(#"{"t":"cut \ud83d"}"#) == #"{"t":"cut \ufffd"}"#)
        #expect(repaired(#"{"t":"\udc00 and \ud83d\u0041"}"#) == #"{"t":"\ufffd and \ufffd\u0041"}"#)
        #expect(repaired(#"{"t":"\ud83d\ude00 \u00e9"}"#) == nil, "a pair and other escapes need nothing")
        #expect(repaired(#"{"t":"\\ud83d"}"#) == nil, "an escaped backslash before text is no escape")
        #expect(repaired(#"{"t":"\ud83"}"#) == nil, "too short to be an escape: the parser says what is wrong")
        let fixed = try #require(JSONParser.replacingLoneSurrogates(in: Array(#"["\ud83d"]"#.utf8)))
        #expect(try JSONParser.parse(fixed) == ["\u{FFFD}"])
        #expect(throws: (any Error).self) { try JSONParser.parse(Array(#"["\ud83d"]"#.utf8)) }
    }

    @Test("strings and member names are equal by their code points, not by Swift's canonical equivalence, and hash alike")
    func equalityIsByCodePoints() throws {
        let composed: JSONValue = "Jos\u{E9}"
        let decomposed: JSONValue = "Jose\u{301}"
        #expect("Jos\u{E9}" == "Jose\u{301}", "Swift's own == deems them equal")
        #expect(composed != decomposed && !composed.equals(byValue: decomposed))
        #expect(Set([composed, decomposed, "Jos\u{E9}"]).count == 2)
        let keys: [JSONValue] = [["Jos\u{E9}": 1], ["Jose\u{301}": 1]]
        #expect(keys[0] != keys[1] && Set(keys).count == 2)
        // Parsed from the bytes a tool would get: two values, and each equal to itself.
        let parsed = try [#"{"a":"Jos\u00e9"}"#, #"{"a":"Jose\u0301"}"#].map { try JSONParser.parse(Array($0.utf8)) }
        #expect(parsed[0] != parsed[1] && parsed[0] == ["a": composed] && parsed[1] == ["a": decomposed])
        #expect(JSONValue.double(0) == .double(-0.0) && JSONValue.int(1) != .double(1) && JSONValue.int(1).equals(byValue: .double(1)))
    }

    @Test("short byte runs compare as memcmp does: equal or not, and in which order, at every length and every first difference")
    func shortBytes() {
        // Runs of 0 to 40 bytes (the word-sized paths, their seams and memcmp's), differing in
        // one byte at each place, by a byte above or below: each comparison against memcmp's.
        for count in 0...40 {
            let run = (0..<count).map { UInt8(truncatingIfNeeded: 0x41 + $0 * 7) }
            for place in -1..<count {
                for change in [1, -1, 0x80] {
                    var other = run
                    if place >= 0 { other[place] = UInt8(truncatingIfNeeded: Int(other[place]) + change) }
                    run.withUnsafeBytes { a in
                        other.withUnsafeBytes { b in
                            let (left, right) = (
                                a.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, b.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                            )
                            let expected = count == 0 ? 0 : memcmp(left, right, count).signum()
                            #expect(ShortBytes.equal(left, right, count: count) == (expected == 0), "\(count) bytes, \(place)")
                            #expect(ShortBytes.compare(left, right, count: count) == Int(expected), "\(count) bytes, \(place)")
                        }
                    }
                }
            }
        }
    }

    @Test("short byte runs that end where readable memory ends are compared without a byte read past them")
    func shortBytesAtAPageEnd() throws {
        // Each run is placed so that its last byte is the last of a page whose next page cannot
        // be read: a load past the run would stop the test with a fault.
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        func guarded() throws -> UnsafeMutableRawPointer {
            let memory = try #require(mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
            try #require(memory != UnsafeMutableRawPointer(bitPattern: -1))
            try #require(mprotect(memory + page, page, PROT_NONE) == 0)
            return memory
        }
        let (first, second) = (try guarded(), try guarded())
        defer {
            munmap(first, 2 * page)
            munmap(second, 2 * page)
        }
        for count in 0...24 {
            let (a, b) = (first + page - count, second + page - count)
            for offset in 0..<count {
                a.storeBytes(of: UInt8(truncatingIfNeeded: 0x30 + offset), toByteOffset: offset, as: UInt8.self)
                b.storeBytes(of: UInt8(truncatingIfNeeded: 0x30 + offset), toByteOffset: offset, as: UInt8.self)
            }
            #expect(ShortBytes.equal(a, b, count: count), "\(count) bytes")
            #expect(ShortBytes.compare(a, b, count: count) == 0, "\(count) bytes")
            if count > 0 {
                b.storeBytes(of: 0xFF, toByteOffset: count - 1, as: UInt8.self)
                #expect(!ShortBytes.equal(a, b, count: count), "\(count) bytes")
                #expect(ShortBytes.compare(a, b, count: count) == -1, "\(count) bytes")
            }
        }
    }

    @Test("the scanner reads objects of many members and still finds a duplicate name among them")
    func scannerManyMembers() throws {
        for count in [15, 16, 17, 40] {
            let members = (0..<count).map { "\"key\($0)\":\($0)" }.joined(separator: ",")
            let bytes = Array("{\(members)}".utf8)
            let names = try bytes.withUnsafeBytes { buffer in
                try JSONScanner.scan(buffer) { scanner in
                    var names: [String] = []
                    try scanner.readObject { scanner, key in
                        names.append(key.string)
                        try scanner.skipValue()
                    }
                    return names
                }
            }
            #expect(names.count == count)
            // Each name again at the end, plain and written with an escape: in the inline slots or
            // past them, the repeat is found.
            for repeated in 0..<count {
                for written in ["key\(repeated)", "\\u006bey\(repeated)"] {
                    let duplicated = Array("{\(members),\"\(written)\":0}".utf8)
                    #expect(throws: TraceCoreError.self, "\(count) names, \(written) again") {
                        try duplicated.withUnsafeBytes { buffer in
                            try JSONScanner.scan(buffer) { scanner in try scanner.readObject { scanner, _ in try scanner.skipValue() } }
                        }
                    }
                }
            }
        }
    }

    @Test("a duplicate name is found in names in order, out of order, as prefixes and escaped, wherever it falls")
    func duplicateNamesInAnyOrder() throws {
        var generator = SeededGenerator(seed: 76)
        let pool = ["a", "ab", "abc", "b", "ba", "c", "key", "key1", "z"]
        var duplicates = 0
        for _ in 0..<4_000 {
            let count = 1 + Int(generator.next() % 20)
            var names = (0..<count).map { _ in pool[Int(generator.next() % UInt64(pool.count))] }
            // Half of them in the canonical order, as a writer writes them (and so often no repeat).
            if generator.next() % 2 == 0 { names = Array(Set(names)).sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) } }
            if generator.next() % 4 == 0, let last = names.last { names.append(last) }
            let isDuplicated = Set(names).count != names.count
            duplicates += isDuplicated ? 1 : 0
            // Some names written with an escape (`\u0061` for `a`): the same name.
            let written = names.map { name in
                generator.next() % 5 == 0 ? "\\u00" + String(name.utf8.first!, radix: 16) + name.dropFirst() : name
            }
            let text = Array(("{" + written.map { "\"\($0)\":0" }.joined(separator: ",") + "}").utf8)
            let accepted =
                (try? text.withUnsafeBytes { buffer in
                    try JSONScanner.scan(buffer) { scanner in try scanner.readObject { scanner, _ in try scanner.skipValue() } }
                }) != nil
            #expect(accepted == !isDuplicated, "\(written)")
            #expect(((try? JSONParser.parse(text)) != nil) == !isDuplicated, "\(written)")
        }
        #expect(duplicates > 500)
    }

    @Test("a parsed tree keeps no spare capacity: a long run's state holds every call's arguments")
    func parsedTreesAreTrimmed() throws {
        let text = #"{"query":"refund status","limit":3,"tags":["a","b","c"],"filter":{"since":"2026-01-01"}}"#
        guard case .object(let object) = try JSONParser.parse(Array(text.utf8)) else {
            Issue.record("not an object")
            return
        }
        // The parse reserves room for 8 members; what it keeps is sized to what it read (the
        // allocator rounds a request up by less than one element of these sizes).
        #expect(object.members.capacity == object.members.count)
        guard case .array(let tags)? = object["tags"], case .object(let filter)? = object["filter"] else {
            Issue.record("members missing")
            return
        }
        #expect(tags.capacity == tags.count)
        #expect(filter.members.capacity == filter.members.count)
    }

    @Test("invalid UTF-8 inside a string is rejected, not replaced")
    func rejectsInvalidUTF8() {
        #expect {
            _ = try JSONParser.parse([0x22, 0x61, 0xC3, 0x28, 0x22])
        } throws: { ($0 as? TraceCoreError)?.code == .invalidUTF8 }
    }

    @Test("a string with escapes reads back exactly at every position of every escape; bytes that are not UTF-8 around one are rejected")
    func readsEscapesAtEveryPosition() throws {
        // Each escape as written and what it stands for.
        let escapes: [(String, String)] = [
            (#"\""#, "\""), (#"\\"#, "\\"), (#"\/"#, "/"), (#"\b"#, "\u{8}"), (#"\f"#, "\u{C}"), (#"\n"#, "\n"),
            (#"\r"#, "\r"), (#"\t"#, "\t"), (#"\u0041"#, "A"), (#"\u00e9"#, "é"), (#"\u20AC"#, "€"),
            (#"\ud83d\ude80"#, "🚀"), (#"\u0000"#, "\u{0}"),
        ]
        let fillers = ["", "a", "abcdefghijklmnopq", "é", "ü🚀x"]
        var checked = 0
        for filler in fillers {
            for (escaped, meant) in escapes {
                for position in 0...filler.count {
                    let cut = filler.index(filler.startIndex, offsetBy: position)
                    let (head, tail) = (String(filler[..<cut]), String(filler[cut...]))
                    // One escape, then two in a row, then the escape at both ends.
                    let cases: [(String, String)] = [
                        (head + escaped + tail, head + meant + tail),
                        (head + escaped + escaped + tail, head + meant + meant + tail),
                        (escaped + filler + escaped, meant + filler + meant),
                    ]
                    for (text, expected) in cases {
                        let parsed = try JSONParser.parse(Array("\"\(text)\"".utf8))
                        #expect(parsed == .string(expected), "\(text)")
                        let inArray = Array("[\"\(text)\",1]".utf8)
                        let read = try inArray.withUnsafeBytes { bytes in
                            try JSONScanner.scan(bytes) { try $0.readArray { try JSONValue(from: &$0) } }
                        }
                        #expect(read == [.string(expected), .int(1)], "\(text)")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked > 400)
        // A sequence cut by an escape, a stray continuation after one, a bad lead before one.
        for bytes: [UInt8] in [
            [0x22, 0xC3, 0x5C, 0x6E, 0xA9, 0x22], [0x22, 0x5C, 0x6E, 0xA9, 0x22], [0x22, 0xFF, 0x5C, 0x74, 0x22],
            [0x22, 0x61, 0x5C, 0x22, 0xE2, 0x82, 0x22],
        ] {
            #expect(throws: TraceCoreError.self, "\(bytes)") { try JSONParser.parse(bytes) }
            #expect {
                _ = try JSONParser.parse(bytes)
            } throws: { ($0 as? TraceCoreError)?.code == .invalidUTF8 }
        }
        // Left open, with an escape: said to be open; a bad escape: said to be bad.
        #expect {
            _ = try JSONParser.parse(Array(#""ab\"cd"#.utf8))
        } throws: { ($0 as? TraceCoreError)?.message.contains("not closed") == true }
        #expect {
            _ = try JSONParser.parse(Array(#""ab\qcd""#.utf8))
        } throws: { ($0 as? TraceCoreError)?.message.contains("invalid escape '\\q'") == true }
        #expect {
            _ = try JSONParser.parse(Array("\"ab\\n\u{1}\"".utf8))
        } throws: { ($0 as? TraceCoreError)?.message.contains("control character") == true }
        // A backslash as the last byte, an escape cut short, a lone surrogate after a run.
        for text in [#""ab\"#, #""ab\u00"#, #""abcdefghij\ud800xyz""#, #""abcdefghij\udc00""#] {
            #expect(throws: TraceCoreError.self, "\(text)") { try JSONParser.parse(Array(text.utf8)) }
        }
        // Strings whose escapes stand for far fewer bytes (a short one, CJK as `ensure_ascii` writes it).
        #expect(try JSONParser.parse(Array(#""\u0061\u0062\u0063""#.utf8)) == .string("abc"))
        #expect(try JSONParser.parse(Array(#""\u4f60\u597d\u4f60\u597d\u4f60\u597d""#.utf8)) == .string("你好你好你好"))
    }

    @Test("a string's end, escape, control character or byte beyond ASCII is found at every offset of the eight read at once")
    func stringBytesAtEveryOffset() throws {
        // One byte of interest at each offset of strings up to three words long, after and
        // before plain bytes that fill the rest of the word: the closing quote found too early
        // or too late, or a byte beyond ASCII before the quote not seen, would show here.
        for length in 0...24 {
            for position in 0..<max(length, 1) {
                let head = String(repeating: "a", count: min(position, length))
                let tail = String(repeating: "z", count: max(length - position - 1, 0))
                let padding = "]" + String(repeating: " ", count: 9)  // so that the words read go past the string
                let cases: [(text: [UInt8], expected: String?, message: String?)] = [
                    (Array("\"\(head)é\(tail)\"".utf8), head + "é" + tail, nil),
                    (Array("\"\(head)\\n\(tail)\"".utf8), head + "\n" + tail, nil),
                    (Array("\"\(head)\"".utf8) + Array("ü,\"x".utf8), nil, "expected ',' or ']' in array, found byte 0xc3"),
                    (Array("\"\(head)".utf8) + [0xFF] + Array("\(tail)\"".utf8), nil, "invalid UTF-8"),
                    (Array("\"\(head)".utf8) + [0x01] + Array("\(tail)\"".utf8), nil, "control character 0x1"),
                ]
                for (text, expected, message) in cases {
                    let inArray = Array("[".utf8) + text + Array(padding.utf8)
                    let name = String(decoding: text, as: UTF8.self)
                    let parsed = Result { try JSONParser.parse(inArray) }
                    let skipped = Result {
                        try inArray.withUnsafeBytes { bytes in
                            try JSONScanner.scan(bytes) { try $0.forEachElement { s, _ in try s.skipValue() } }
                        }
                    }
                    // The same text as a member name.
                    let asName = Array("{".utf8) + text + Array(":1}".utf8) + Array(String(repeating: " ", count: 9).utf8)
                    let named = Result {
                        try asName.withUnsafeBytes { bytes in
                            try JSONScanner.scan(bytes) { scanner -> String in
                                var found = ""
                                try scanner.readObject { s, key in
                                    found = key.string
                                    try s.skipValue()
                                }
                                return found
                            }
                        }
                    }
                    if let expected {
                        #expect(try parsed.get() == .array([.string(expected)]), "\(name)")
                        #expect(throws: Never.self, "\(name)") { try skipped.get() }
                        #expect(try named.get() == expected, "\(name)")
                    } else if let message {
                        for (way, result) in [("parse", parsed.map { _ in () }), ("skip", skipped.map { _ in () })] {
                            #expect("\(name) (\(way))") {
                                try result.get()
                            } throws: { ($0 as? TraceCoreError)?.message.contains(message) == true }
                        }
                        // As a name, the early end is said after the name: "expected ':' after…".
                        let nameMessage = message.hasPrefix("expected") ? "\"\(head)\", found byte 0xc3" : message
                        #expect("\(name) as a name") {
                            try named.get()
                        } throws: { ($0 as? TraceCoreError)?.message.contains(nameMessage) == true }
                    }
                }
            }
        }
    }

    @Test("the UTF-8 check accepts exactly what Swift's validating decoder accepts")
    func utf8CheckAgreesWithSwift() {
        var generator = SeededGenerator(seed: 11)
        // Lead bytes and continuations at every boundary the rules turn on.
        let interesting: [UInt8] = [
            0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF,
            0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
        ]
        var checked = 0
        for _ in 0..<50_000 {
            let count = Int(generator.next() % 7)
            let bytes = (0..<count).map { _ in interesting[Int(generator.next() % UInt64(interesting.count))] }
            let swift = String(validating: bytes, as: UTF8.self) != nil
            let ours = bytes.withUnsafeBufferPointer { JSONParser.isValidUTF8($0) }
            #expect(ours == swift, "\(bytes.map { String($0, radix: 16) })")
            checked += swift ? 1 : 0
        }
        #expect(checked > 1_000, "enough valid texts among the generated ones")
    }

    @Test("skipping a value accepts and rejects exactly the texts parsing accepts and rejects")
    func skipAgreesWithParse() throws {
        var generator = SeededGenerator(seed: 5)
        let seeds = [
            #"{"a":[1,2.5,-3e2,true,false,null],"b":{"c":"x\u00e9\n","d":[]},"e":"ünï","f":{}}"#,
            #"[{"id":"obs-1","summary":"a \"quoted\" \ud83d\ude00 word"},{"id":"b","x":[[[]]]}]"#,
            #""\u0041\/\b\f\r\t plain""#,
        ]
        let alphabet =
            Array(#"{}[]",:\ u0123456789abcdefnulltrue-+.eE"#.utf8) + [0x01, 0x1F, 0x80, 0xC3, 0xA9, 0xE2, 0xED, 0xA0, 0xF0, 0xFF]
        var rejected = 0
        for round in 0..<20_000 {
            var bytes = Array(seeds[round % seeds.count].utf8)
            for _ in 0..<(1 + Int(generator.next() % 3)) where !bytes.isEmpty {
                let at = Int(generator.next() % UInt64(bytes.count))
                let byte = alphabet[Int(generator.next() % UInt64(alphabet.count))]
                switch generator.next() % 3 {
                case 0: bytes[at] = byte
                case 1: bytes.insert(byte, at: at)
                default: bytes.remove(at: at)
                }
            }
            let parsed = (try? JSONParser.parse(bytes)) != nil
            let skipped = bytes.withUnsafeBytes { text in (try? JSONScanner.scan(text) { try $0.skipValue() }) != nil }
            #expect(parsed == skipped, "\(String(decoding: bytes, as: UTF8.self))")
            rejected += parsed ? 0 : 1
        }
        #expect(rejected > 5_000 && rejected < 19_000, "both outcomes are exercised: \(rejected) rejected")
        // Duplicate names are found inside skipped values too, wherever they are nested.
        let duplicate = Array(#"{"a":{"b":1,"c":[{"d":1,"d":2}]}}"#.utf8)
        #expect(throws: TraceCoreError.self) { try duplicate.withUnsafeBytes { text in try JSONScanner.scan(text) { try $0.skipValue() } } }
    }

    @Test("canonical writing: sorted keys by bytes, minimal escapes, shortest doubles")
    func canonicalForm() {
        let value: JSONValue = ["é": 1, "b": [0.1, 1e21, -2.5, 3], "a\u{1}": "x\"\\\n\u{7F}ü", "B": true]
        #expect(JSONWriter.encodeString(value) == "{\"B\":true,\"a\\u0001\":\"x\\\"\\\\\\n\u{7F}ü\",\"b\":[0.1,1e+21,-2.5,3],\"é\":1}")
    }

    @Test("strings are escaped exactly where JSON requires, whatever their position in the string")
    func escapesAtEveryPosition() throws {
        /// One byte at a time: the definition the writer's eight-at-a-time scan must match.
        func reference(_ text: String) -> [UInt8] {
            var out: [UInt8] = [0x22]
            for byte in text.utf8 {
                switch byte {
                case 0x22: out += Array(#"\""#.utf8)
                case 0x5C: out += Array(#"\\"#.utf8)
                case 0x0A: out += Array(#"\n"#.utf8)
                case 0x0D: out += Array(#"\r"#.utf8)
                case 0x09: out += Array(#"\t"#.utf8)
                case 0x08: out += Array(#"\b"#.utf8)
                case 0x0C: out += Array(#"\f"#.utf8)
                case ..<0x20: out += Array("\\u00".utf8) + Array(String(byte, radix: 16).leftPadded(to: 2).utf8)
                default: out.append(byte)
                }
            }
            return out + [0x22]
        }
        let specials = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) } + ["\"", "\\"]
        // Short ones too: strings of one to fifteen bytes are tested in words that overlap.
        let fillers =
            ["abcdefghijklmnopqrstuvwxyz", "ééééééééé", "🚀🚀🚀🚀🚀", "\u{7F}\u{1F}!~ "] + (0..<15).map { String("abcdefghijklmno".prefix($0)) }
        var checked = 0
        for filler in fillers {
            for special in specials {
                for position in 0...filler.count {
                    var text = filler
                    text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: position))
                    var writer = JSONWriter()
                    writer.write(text)
                    #expect(writer.bytes == reference(text), "\(Array(text.utf8))")
                    #expect(try JSONParser.parse(writer.bytes) == .string(text))
                    checked += 1
                }
            }
        }
        // Many in one string, packed or apart: each found where it is, the text between kept.
        var generator = SeededGenerator(seed: 416)
        let pieces = specials + ["a", "bc", "défg", "🚀", "0123456789abcdef", " "]
        for _ in 0..<2_000 {
            let text = (0..<Int.random(in: 1...40, using: &generator)).map { _ in pieces.randomElement(using: &generator) ?? "" }.joined()
            var writer = JSONWriter()
            writer.write(text)
            #expect(writer.bytes == reference(text), "\(Array(text.utf8))")
        }
        #expect(checked > 1000)
    }

    @Test("integers are written in decimal at every length, Int.min and Int.max included")
    func integersAtEveryLength() {
        var numbers: [Int] = [0, 9, 10, -1, -9, -10, .max, .min, .max - 1, .min + 1]
        var power = 1
        for _ in 0..<18 {
            power *= 10
            numbers += [power - 1, power, power + 1, -(power - 1), -power, -(power + 1)]
        }
        // Every power of two and its neighbours, and numbers of every size at random.
        for shift in 0..<63 { numbers += [(1 << shift) - 1, 1 << shift, (1 << shift) + 1, -(1 << shift)] }
        var generator = SeededGenerator(seed: 76)
        for _ in 0..<10_000 {
            numbers.append(Int.random(in: .min ... .max, using: &generator) >> Int.random(in: 0...63, using: &generator))
        }
        var writer = JSONWriter(capacity: 0)
        for number in numbers {
            writer.removeAll()
            writer.write(number)
            #expect(writer.bytes == Array(String(number).utf8), "\(number)")
        }
    }

    @Test("a writer is a value: a copy written to, emptied or cut leaves the original as it was, at any capacity")
    func writerCopiesAreIndependent() {
        for capacity in [0, 1, 16, 4096] {
            var writer = JSONWriter(capacity: capacity)
            #expect(writer.bytes.isEmpty && writer.count == 0)
            writer.write("first")
            let before = writer
            writer.write(12345)
            #expect(String(decoding: before.bytes, as: UTF8.self) == #""first""#)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == #""first"12345"#)
            var emptied = writer
            emptied.removeAll()
            emptied.write("x")
            #expect(String(decoding: writer.bytes, as: UTF8.self) == #""first"12345"#)
            #expect(String(decoding: emptied.bytes, as: UTF8.self) == #""x""#)
            var cut = writer
            cut.truncate(to: 3)
            cut.writeRaw("true")
            #expect(String(decoding: cut.bytes, as: UTF8.self) == #""fitrue"#)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == #""first"12345"#)
            #expect(String(decoding: before.bytes, as: UTF8.self) == #""first""#)
            // Growing well past the first capacity keeps every byte in place.
            var long = before
            var expected = Array(#""first""#.utf8)
            for index in 0..<5_000 {
                long.write(index)
                long.append(UInt8(ascii: ","))
                expected += Array("\(index),".utf8)
            }
            #expect(long.bytes == expected)
            #expect(before.bytes == Array(#""first""#.utf8))
            long.bytes = Array("[1]".utf8)
            #expect(long.withUnsafeBytes { Array($0) } == Array("[1]".utf8))
        }
    }

    @Test("the nesting check finds a value one level too deep wherever its brackets fall, and only then")
    func nestingDepthAtEveryAlignment() {
        let limit = JSONParser.maximumDepth
        for offset in 0..<9 {
            let pad = String(repeating: " ", count: offset)
            // Exactly limit + 1 opening brackets, all nested: the quick count must not miss one.
            let tooDeep =
                pad + String(repeating: "[{\"k\":", count: (limit + 1) / 2) + "[1]" + String(repeating: "}]", count: (limit + 1) / 2)
            #expect(JSONWriter.nestingDepth(of: Array(tooDeep.utf8), exceeding: limit) == limit + 1, "offset \(offset)")
            let deepest = pad + String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
            #expect(JSONWriter.nestingDepth(of: Array(deepest.utf8), exceeding: limit) == nil, "offset \(offset)")
            // Many brackets, shallow: siblings, and brackets inside strings.
            let siblings = pad + "[" + Array(repeating: "{\"a\":[1]}", count: limit).joined(separator: ",") + "]"
            #expect(JSONWriter.nestingDepth(of: Array(siblings.utf8), exceeding: limit) == nil)
            let inStrings = pad + "[\"" + String(repeating: "{[", count: limit) + "\\\"\"]"
            #expect(JSONWriter.nestingDepth(of: Array(inStrings.utf8), exceeding: limit) == nil)
        }
    }

    @Test("keys that differ only in Unicode normalisation stay distinct")
    func normalisationDistinct() throws {
        let parsed = try JSONParser.parse(Array("{\"\u{E9}\":1,\"e\u{301}\":2}".utf8))
        #expect(parsed.objectValue?.count == 2)
        #expect(JSONWriter.encodeString(parsed) == "{\"e\u{301}\":2,\"\u{E9}\":1}")
    }

    @Test("decode(encode(v)) == v for generated values")
    func roundTripProperty() throws {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<2_000 {
            let value = JSONValue.random(using: &generator, depth: 0)
            let encoded = JSONWriter.encode(value)
            let decoded = try JSONParser.parse(encoded)
            #expect(decoded == value, "\(JSONWriter.encodeString(value))")
            #expect(JSONWriter.encode(decoded) == encoded)
        }
    }

    @Test("an object read with the names its reader knows gives what the general reader gives: the same members, values and errors")
    func knownNames() {
        /// The names and value texts `body` is given, or the error: read the general way, or with `known`.
        func read(_ bytes: [UInt8], known: MemberNames?) -> Result<[String], TraceCoreError> {
            Result {
                try bytes.withUnsafeBytes { buffer in
                    try JSONScanner.scan(buffer) { scanner in
                        var seen: [String] = []
                        let body = { (scanner: inout JSONScanner, key: JSONKey) throws in
                            let start = scanner.cursor.index
                            // A member of one name fails inside its value, as a reader's type check would.
                            if key.string == "fails" { _ = try scanner.readInt() }
                            try scanner.skipValue()
                            seen.append(key.string + "=" + String(decoding: bytes[start..<scanner.cursor.index], as: UTF8.self))
                        }
                        if let known { try scanner.readObject(known: known, body) } else { try scanner.readObject(body) }
                        return seen
                    }
                }
            }.mapError { $0 as? TraceCoreError ?? TraceCoreError(.invalidJSON, "\($0)") }
        }
        let lists = [
            MemberNames(["", "Z", "a", "a b", "b", "fails", "id", "name"]), MemberNames(["id", "a", "name"]), MemberNames([]),
            MemberNames(["a", "b"]),
        ]
        var outcomes = (read: 0, refused: 0)
        for (value, bytes, _) in JSONTextTests.randomTexts(seed: 2_026_120_2, count: 12000, prettyEvery: 4) {
            guard case .object = value else { continue }
            var text = bytes
            // Now and then a member that fails in its value, or one name twice.
            if text.count > 2 && text.count % 7 == 0 { text.insert(contentsOf: Array(#""fails":"x","#.utf8), at: 1) }
            if text.count > 2 && text.count % 11 == 0 { text.insert(contentsOf: Array(#""a":1,"a":2,"#.utf8), at: 1) }
            let general = read(text, known: nil)
            for known in lists {
                let withNames = read(text, known: known)
                switch (general, withNames) {
                case (.success(let a), .success(let b)): #expect(a == b, "\(String(decoding: text, as: UTF8.self))")
                case (.failure(let a), .failure(let b)):
                    #expect(a.message == b.message && a.fieldPath == b.fieldPath, "\(String(decoding: text, as: UTF8.self))")
                default: Issue.record("\(String(decoding: text, as: UTF8.self)): \(general) against \(withNames)")
                }
            }
            if case .success = general { outcomes.read += 1 } else { outcomes.refused += 1 }
        }
        #expect(outcomes.read > 400 && outcomes.refused > 400, "\(outcomes)")
    }
}

extension JSONValue {
    static let sampleScalars: [Unicode.Scalar] = [
        "a", "Z", "0", " ", "\"", "\\", "\n", "\u{0}", "\u{1F}", "é", "ß", "日", "🚀", "\u{2028}", "\u{FEFF}", "e", "\u{301}",
    ]

    static func randomString(using generator: inout SeededGenerator) -> String {
        var text = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &generator) {
            text.append(sampleScalars.randomElement(using: &generator) ?? "a")
        }
        return String(text)
    }

    static func random(using generator: inout SeededGenerator, depth: Int) -> JSONValue {
        let choice = Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &generator)
        switch choice {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .int(Int.random(in: Int.min...Int.max, using: &generator) >> Int.random(in: 0...63, using: &generator))
        case 3:
            let double = Double(bitPattern: generator.next())
            return double.isFinite ? .double(double) : .double(0.25)
        case 4: return .string(randomString(using: &generator))
        case 5: return .array((0..<Int.random(in: 0...4, using: &generator)).map { _ in random(using: &generator, depth: depth + 1) })
        default:
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                object[randomString(using: &generator)] = random(using: &generator, depth: depth + 1)
            }
            return .object(object)
        }
    }

}

@Suite("JSON key paths and value comparisons")
struct JSONMatchingTests {
    static let value: JSONValue = ["order": ["items": [["sku": "M1", "qty": 2]]], "total": 4999]

    @Test("key paths reach into objects by name and arrays by index")
    func paths() {
        #expect(Self.value.value(atDottedPath: "order.items.0.sku") == "M1")
        #expect(Self.value.value(atPath: ["order", "items", "1"]) == nil)
        #expect(Self.value.value(atDottedPath: "total.x") == nil)
    }

    @Test("equality by value and containment")
    func comparisons() {
        #expect(JSONValue.int(1).equals(byValue: .double(1.0)))
        #expect(!JSONValue.array([1, 2]).equals(byValue: [1]))
        #expect(Self.value.contains(["order": ["items": [["sku": "M1", "qty": 2.0]]]]))
        #expect(Self.value.contains(["total": 4999.0]))
        #expect(!Self.value.contains(["order": ["items": [["sku": "M1"]]]]))
        #expect(!Self.value.contains(["missing": nil]))
    }

    @Test("the first difference of two values: its key path and both sides, absent members and elements included")
    func firstDifference() {
        let a: JSONValue = ["order": ["items": [["sku": "A"], ["sku": "B"]], "total": 5], "kind": "x"]
        #expect(a.firstDifference(from: a) == nil)
        var b: JSONValue = ["order": ["items": [["sku": "A"], ["sku": "C"]], "total": 5], "kind": "x"]
        #expect(a.firstDifference(from: b) == JSONDifference(path: "order.items[1].sku", left: "B", right: "C"))
        #expect(a.firstDifference(from: b, at: "arguments")?.path == "arguments.order.items[1].sku")
        b = ["order": ["items": [["sku": "A"]], "total": 5], "kind": "y"]
        // Names sort first by priority: "kind" before "order".
        #expect(a.firstDifference(from: b, keyPriority: ["kind"]) == JSONDifference(path: "kind", left: "x", right: "y"))
        #expect(a.firstDifference(from: b)?.path == "kind", "by name, kind < order too")
        b = ["order": ["items": [["sku": "A"]], "total": 5], "kind": "x"]
        let missing = a.firstDifference(from: b)
        #expect(missing == JSONDifference(path: "order.items[1]", left: ["sku": "B"], right: nil))
        #expect(missing?.rightOrAbsent == "(absent)")
        #expect(JSONValue.int(1).firstDifference(from: .string("1")) == JSONDifference(path: "", left: 1, right: "1"))
    }

    @Test(
        "numbers are written exactly as docs/log-format.md §2.1 says",
        arguments: [
            (JSONValue.double(2.0), "2.0"), (.double(0.0), "0.0"), (.double(-0.0), "-0.0"), (.double(1e-05), "1e-05"),
            (.double(0.00012), "0.00012"), (.double(0.1), "0.1"), (.double(9007199254740992.0), "9007199254740992.0"),
            (.double(1.5e16), "1.5e+16"), (.double(1e21), "1e+21"), (.double(.leastNonzeroMagnitude), "5e-324"), (.int(4999), "4999"),
            (.int(-3), "-3"), (.double(.nan), "null"),
        ])
    func numberEncoding(_ value: JSONValue, _ text: String) {
        #expect(JSONWriter.encodeString(value) == text)
    }

    @Test("an int field accepts an integral number written with a fraction or exponent, and nothing else")
    func integralNumbers() throws {
        func readInt(_ text: String) throws -> Int {
            try Array(text.utf8).withUnsafeBytes { bytes in try JSONScanner.scan(bytes) { try $0.readInt() } }
        }
        for (text, expected) in [("2", 2), ("2.0", 2), ("1e3", 1000), ("-4.0", -4)] {
            #expect(try readInt(text) == expected, "\(text)")
        }
        // Plain integers take a short path up to 18 digits; longer ones, and any that go on
        // with a fraction or an exponent, the full one.
        for (text, expected) in [
            ("0", 0), ("7", 7), ("0.0", 0), ("10E1", 100), ("123456789012345678", 123_456_789_012_345_678),
            ("1234567890123456789", 1_234_567_890_123_456_789), ("9223372036854775807", Int.max), ("-9223372036854775808", Int.min),
        ] {
            #expect(try readInt(text) == expected, "\(text)")
        }
        for text in ["2.5", "1e16", "\"2\"", "01", "9223372036854775808", "-", "1.", "12e"] {
            #expect(throws: TraceCoreError.self, "\(text)") { _ = try readInt(text) }
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
