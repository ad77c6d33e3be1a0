import TestSupport
import Testing

@testable import TraceCore

@Suite("JSON values held as their canonical text")
struct JSONTextTests {
    /// Values that cover every token the canonical form writes in a special way.
    static let values: [JSONValue] = [
        .null, true, false, 0, -1, 42, .int(Int.max), .int(Int.min), 0.1, 2.0, -0.0, 1e-05, 1.5e16, 1e21,
        .double(Double.leastNonzeroMagnitude), 123_456.789,
        "", "plain", "quote \" backslash \\ slash / del \u{7F}", "lines\n\r\t\u{8}\u{C} and controls \u{1} \u{1F}",
        "é ü 中文 🎉 \u{FEFF}", [], [:], [1, "two", [3.5, nil], ["k": false]],
        ["b": 1, "a": ["nested": ["z": 1, "y": [1, 2, 3]]], "": "empty key", "é": "non-ASCII key", "a b": .null],
        ["rows": .array((0..<5).map { row in ["id": .int(row * 1_000_003), "text": .string("row \(row) says \"hi\"\n")] }), "count": 5],
    ]

    @Test("a value's canonical bytes are read back as they are, and give the value back")
    func canonicalBytesAreKept() throws {
        for value in Self.values {
            let canonical = JSONWriter.encode(value)
            let text = try canonical.withUnsafeBytes { try JSONScanner.scan($0) { try JSONText(from: &$0) } }
            #expect(text.bytes == canonical, "\(String(decoding: canonical, as: UTF8.self))")
            #expect(text == JSONText(value))
            #expect(text.value == value)
            #expect(text.string == JSONWriter.encodeString(value))
            #expect(canonical.withUnsafeBufferPointer { JSONText.isCanonical($0) }, "\(String(decoding: canonical, as: UTF8.self))")
        }
    }

    @Test(
        "any other form of a value is read as its canonical bytes",
        arguments: [
            (#"{ "b" : 1 , "a":[1.50, 1e3, -0, "\/\u0041", 1E-5] }"#, #"{"a":[1.5,1000.0,0,"/A",1e-05],"b":1}"#),
            (#"{"b":1,"a":2}"#, #"{"a":2,"b":1}"#),
            (#"["\u000a\u001F\u0008", "\uD83C\uDF89"]"#, #"["\n\u001f\b","🎉"]"#),
            (#"{"k\u0065y":1,"a":0.0}"#, #"{"a":0.0,"key":1}"#),
            (#"[10000000000000000000, 1234567890123456789, -9223372036854775808]"#, #"[1e+19,1234567890123456789,-9223372036854775808]"#),
            ("[1,\n2]", "[1,2]"),
        ])
    func otherFormsAreMadeCanonical(input: String, canonical: String) throws {
        let text = try Array(input.utf8).withUnsafeBytes { try JSONScanner.scan($0) { try JSONText(from: &$0) } }
        #expect(String(decoding: text.bytes, as: UTF8.self) == canonical)
        #expect(!Array(input.utf8).withUnsafeBufferPointer { JSONText.isCanonical($0) })
    }

    @Test("what the parser refuses, reading a text refuses too", arguments: [#"{"a":1,"a":2}"#, "[1,]", #""\x""#, "01", "{\"a\"}", "[1"])
    func invalidJSONIsRefused(input: String) {
        #expect(throws: TraceCoreError.self) {
            _ = try Array(input.utf8).withUnsafeBytes { try JSONScanner.scan($0) { try JSONText(from: &$0) } }
        }
    }

    @Test("random values: the canonical form is kept, a spaced-out form is made canonical")
    func randomValues() throws {
        var generator = SeededGenerator(seed: 20_261_124)
        for _ in 0..<300 {
            let value = Self.randomValue(depth: 0, &generator)
            let canonical = JSONWriter.encode(value)
            let kept = try canonical.withUnsafeBytes { try JSONScanner.scan($0) { try JSONText(from: &$0) } }
            #expect(kept.bytes == canonical)
            // (No key here needs an escape, so the scan keeps the bytes instead of rewriting them.)
            #expect(canonical.withUnsafeBufferPointer { JSONText.isCanonical($0) })
            let spaced = Array(JSONWriter.encodePretty(value).utf8)
            let made = try spaced.withUnsafeBytes { try JSONScanner.scan($0) { try JSONText(from: &$0) } }
            #expect(made.bytes == canonical)
            #expect(made.value == value)
        }
    }

    @Test("one pass tells canonical text as the separate check does, and refuses what skipping refuses")
    func onePassCanonicalCheck() {
        var verdicts = (canonical: 0, not: 0, refused: 0)
        for (_, bytes, _) in Self.randomTexts(seed: 2_026_112_4, count: 3000, prettyEvery: 3) {
            let text = String(decoding: bytes, as: UTF8.self)
            func check(_ onePass: Bool) -> Result<Bool, TraceCoreError> {
                Result {
                    try bytes.withUnsafeBytes { buffer in
                        try JSONScanner.scan(buffer) { scanner in
                            let start = scanner.cursor.index
                            if onePass {
                                var isCanonical = true
                                try scanner.skipValue(isCanonical: &isCanonical)
                                return isCanonical
                            }
                            try scanner.skipValue()
                            return JSONText.isCanonical(
                                UnsafeBufferPointer(start: scanner.cursor.base + start, count: scanner.cursor.index - start))
                        }
                    }
                }.mapError { $0 as? TraceCoreError ?? TraceCoreError(.invalidJSON, "\($0)") }
            }
            switch (check(false), check(true)) {
            case (.success(let separately), .success(let together)):
                // The one pass may only be more careful: a member name that is not plain ASCII
                // is written again rather than kept (the same bytes either way).
                #expect(separately == together || (separately && Self.hasNameOutsidePlainASCII(text)), "\(text)")
                if together { verdicts.canonical += 1 } else { verdicts.not += 1 }
            case (.failure(let separately), .failure(let together)):
                #expect(separately.message == together.message, "\(text)")
                verdicts.refused += 1
            case (let separately, let together):
                Issue.record("\(text): separately \(separately), in one pass \(together)")
            }
        }
        #expect(verdicts.canonical > 500 && verdicts.not > 100 && verdicts.refused > 500, "\(verdicts)")
    }

    @Test("the one-pass step over canonical text agrees with the general reader: what it takes is valid and canonical, to the same end")
    func canonicalStepAgrees() {
        var taken = (whole: 0, eligible: 0, mutated: 0)
        for (round, (value, bytes, isMutated)) in Self.randomTexts(seed: 2_026_120_1, count: 4000, prettyEvery: 5).enumerated() {
            let text = String(decoding: bytes, as: UTF8.self)
            // As a member's value, as in a line: the step starts after the name and ends before the `}`.
            let line = Array(#"{"output":"#.utf8) + bytes + Array("}".utf8)
            let (general, generalEnd) = Self.step(line, onePass: false)
            let (onePass, onePassEnd) = Self.step(line, onePass: true)
            if case .success(true) = onePass {
                #expect(general == .success(true), "\(text): taken in one pass, but the general reader gives \(general)")
                #expect(onePassEnd == generalEnd, "\(text)")
                taken.whole += 1
                if isMutated { taken.mutated += 1 }
            } else {
                #expect(onePass == .success(false), "\(text)")
                #expect(onePassEnd == 10, "\(text): the cursor moved")
                // Canonical text of short integers, plain names and no deep nesting is always taken.
                #expect(!(Self.isShortAndPlain(value) && !isMutated && round % 5 != 0), "\(text): not taken in one pass")
            }
            if Self.isShortAndPlain(value) && !isMutated && round % 5 != 0 { taken.eligible += 1 }
        }
        #expect(taken.whole > 800 && taken.eligible > 500 && taken.mutated > 20, "\(taken)")

        // Each thing the one pass leaves to the general reader, and a few it takes.
        let cases: [(String, Bool)] = [
            (#"{"a":1,"b":[true,false,null],"c":"x\n\"y\u0001"}"#, true), (#"{"b":1,"a":2}"#, false), (#"{"a":1,"a":2}"#, false),
            (#"{"a" :1}"#, false), ("[01]", false), ("[-0]", false), ("[0,-1,-0.5]", false), ("[1.0]", false), ("[1e2]", false),
            ("[123456789012345]", true), ("[1234567890123456]", false), (#""\u0041""#, false), (#""\/""#, false),
            (#""\u000a""#, false), ("{\"e\u{301}\":1,\"é\":2}", false), (#"{"\u0061":1}"#, false), ("[tru]", false), ("[nul]", false),
            ("[1,]", false), (#"{"a":1,}"#, false), ("[1 ]", false), ("{}", true), ("[[],{}]", true), ("\"é\u{7F}\"", true),
        ]
        for (text, isTaken) in cases {
            let line = Array(#"{"output":"#.utf8) + Array(text.utf8) + Array("}".utf8)
            let (general, generalEnd) = Self.step(line, onePass: false)
            let (onePass, onePassEnd) = Self.step(line, onePass: true)
            #expect(onePass == .success(isTaken), "\(text)")
            #expect(onePassEnd == (isTaken ? generalEnd : 10), "\(text)")
            if isTaken { #expect(general == .success(true), "\(text)") }
        }

        // Deeper than the one pass goes, or than the reader allows: the general reader decides.
        for levels in [31, 32, 33, JSONParser.maximumDepth + 5] {
            let deep = Array((String(repeating: "[", count: levels) + "1" + String(repeating: "]", count: levels)).utf8)
            let (general, _) = Self.step(deep, onePass: false)
            let (onePass, _) = Self.step(deep, onePass: true)
            #expect(onePass == (levels <= 32 ? .success(true) : .success(false)), "\(levels) levels")
            #expect((try? general.get()) == (levels <= JSONParser.maximumDepth ? true : nil), "\(levels) levels")
        }
    }

    @Test("a value read as deep as the reader allows is taken, one level deeper is refused, an empty one too")
    func canonicalAtTheDepthLimit() {
        /// Reads `inner` as a `JSONText` inside `levels` objects: `{"a":{"a":…inner…}}`.
        func read(_ inner: String, inside levels: Int) -> Result<[UInt8], TraceCoreError> {
            func descend(_ scanner: inout JSONScanner, _ levels: Int) throws -> [UInt8] {
                if levels == 0 { return try JSONText(from: &scanner).bytes }
                var bytes: [UInt8] = []
                try scanner.readObject { scanner, _ in bytes = try descend(&scanner, levels - 1) }
                return bytes
            }
            let text = String(repeating: #"{"a":"#, count: levels) + inner + String(repeating: "}", count: levels)
            return Result {
                try Array(text.utf8).withUnsafeBytes { buffer in try JSONScanner.scan(buffer) { try descend(&$0, levels) } }
            }.mapError { $0 as? TraceCoreError ?? TraceCoreError(.invalidJSON, "\($0)") }
        }
        let limit = JSONParser.maximumDepth
        for inner in ["{}", "[]", "[1]", #"{"b":2}"#] {
            #expect(read(inner, inside: limit - 1) == .success(Array(inner.utf8)), "\(inner)")
            guard case .failure(let error) = read(inner, inside: limit) else {
                Issue.record("\(inner) at depth \(limit + 1) was read")
                continue
            }
            #expect(error.message.contains("nesting deeper than \(limit)"), "\(error.message)")
        }
        #expect(read("1", inside: limit) == .success(Array("1".utf8)))
    }

    /// Steps over the value at byte 10 of `line` (after `{"output":`) in one pass
    /// (`skipCanonical`: whether it was taken) or the general way (`skipValue(isCanonical:)`:
    /// whether it is canonical, or its error); and where the cursor stopped.
    static func step(_ line: [UInt8], onePass: Bool) -> (Result<Bool, TraceCoreError>, Int) {
        var end = -1
        let result = Result<Bool, any Error> {
            try line.withUnsafeBufferPointer { buffer in
                guard let base = buffer.baseAddress else { throw TraceCoreError(.invalidJSON, "the text is empty") }
                var scanner = JSONScanner(cursor: JSONParser.Cursor(base: base, end: buffer.count))
                if line.starts(with: Array(#"{"output":"#.utf8)) { scanner.cursor.index = 10 }
                defer { end = scanner.cursor.index }
                if onePass { return scanner.skipCanonical() }
                var isCanonical = true
                try scanner.skipValue(isCanonical: &isCanonical)
                return isCanonical
            }
        }
        return (result.mapError { $0 as? TraceCoreError ?? TraceCoreError(.invalidJSON, "\($0)") }, end)
    }

    /// Whether `value`'s canonical text is one the one pass takes: integers of at most 15
    /// digits, ASCII names with nothing to escape, nesting of at most 32.
    static func isShortAndPlain(_ value: JSONValue, depth: Int = 0) -> Bool {
        switch value {
        case .double: return false
        case .int(let number): return number.magnitude < 1_000_000_000_000_000
        case .array(let elements): return depth < 32 && elements.allSatisfy { isShortAndPlain($0, depth: depth + 1) }
        case .object(let object):
            return depth < 32
                && object.members.allSatisfy { member in
                    !member.key.utf8.contains { $0 < 0x20 || $0 >= 0x80 || $0 == 0x22 || $0 == 0x5C }
                        && isShortAndPlain(member.value, depth: depth + 1)
                }
        default: return true
        }
    }

    /// `count` random values and their text: canonical, spaced out in every `prettyEvery`th, and
    /// in every other one a byte changed to one that matters to the grammar or to the canonical
    /// form (`isMutated`).
    static func randomTexts(seed: UInt64, count: Int, prettyEvery: Int) -> [(value: JSONValue, bytes: [UInt8], isMutated: Bool)] {
        var generator = SeededGenerator(seed: seed)
        let choices: [UInt8] = [
            0x20, 0x0A, 0x22, 0x5C, 0x2C, 0x3A, 0x7B, 0x7D, 0x5B, 0x5D, 0x30, 0x2D, 0x65, 0x2E, 0x01, 0xC3, 0x61, 0x74, 0x6E,
        ]
        return (0..<count).map { round in
            let value = randomValue(depth: 0, &generator)
            var bytes = round % prettyEvery == 0 ? Array(JSONWriter.encodePretty(value).utf8) : JSONWriter.encode(value)
            let isMutated = round % 2 == 1 && !bytes.isEmpty
            if isMutated {
                bytes[Int(generator.next() % UInt64(bytes.count))] = choices[Int(generator.next() % UInt64(choices.count))]
            }
            return (value, bytes, isMutated)
        }
    }

    /// Whether a member name in `text` (valid JSON) has a byte outside printable ASCII or one
    /// the canonical form escapes.
    static func hasNameOutsidePlainASCII(_ text: String) -> Bool {
        func check(_ value: JSONValue) -> Bool {
            switch value {
            case .array(let elements): return elements.contains(where: check)
            case .object(let object):
                return object.members.contains { member in
                    member.key.utf8.contains { $0 < 0x20 || $0 >= 0x80 || $0 == 0x22 || $0 == 0x5C } || check(member.value)
                }
            default: return false
            }
        }
        return (try? JSONParser.parse(Array(text.utf8))).map(check) ?? false
    }

    @Test("a value nested deeper than the parser reads is given back all the same")
    func deepValue() {
        var value: JSONValue = "bottom"
        for _ in 0..<(JSONParser.maximumDepth + 50) { value = ["down": value] }
        let text = JSONText(value)
        #expect(text.value == value)
        #expect(text == JSONText(value))
        #expect(text.bytes.count > 2 * JSONParser.maximumDepth)
    }

    @Test("a tool result read from its line keeps its output as the canonical text the line holds")
    func toolResultOutput() throws {
        let output: JSONValue = ["rows": [["id": 7, "text": "a \"quoted\" line\n"]], "score": 0.25]
        let result = ToolCompleted(callId: "c1", tool: "search", attempt: 1, status: .ok, output: output, durationUs: 5)
        let line = JSONWriter.encode(result)
        let read = try line.withUnsafeBytes { try JSONScanner.scan($0) { try ToolCompleted(from: &$0) } }
        #expect(read == result)
        #expect(read.output == output)
        #expect(read.outputText?.bytes == JSONWriter.encode(output))
        #expect(JSONWriter.encode(read) == line)
        var changed = read
        changed.output = ["rows": []]
        #expect(changed != read)
        #expect(changed.outputText?.bytes == Array(#"{"rows":[]}"#.utf8))
    }

    static func randomValue(depth: Int, _ generator: inout SeededGenerator) -> JSONValue {
        let pick = Int(generator.next() % (depth >= 4 ? 6 : 8))
        switch pick {
        case 0: return .null
        case 1: return .bool(generator.next() % 2 == 0)
        case 2: return .int(Int(truncatingIfNeeded: generator.next()) >> Int(generator.next() % 64))
        case 3:
            let double = Double(bitPattern: generator.next())
            return double.isFinite ? .double(double) : .double(Double(generator.next() % 1000) / 8)
        case 4, 5:
            let alphabet: [String] = ["a", "Z", " ", "\"", "\\", "/", "\n", "\u{1}", "\u{7F}", "é", "中", "🎉", "\t", "0"]
            return .string((0..<Int(generator.next() % 12)).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }.joined())
        case 6: return .array((0..<Int(generator.next() % 4)).map { _ in randomValue(depth: depth + 1, &generator) })
        default:
            let keys = ["id", "name", "a", "b", "é", "", "Z", "a b", "\u{7F}"]
            return .object(
                JSONObject(
                    (0..<Int(generator.next() % 4)).map { _ in
                        (keys[Int(generator.next() % UInt64(keys.count))], randomValue(depth: depth + 1, &generator))
                    }))
        }
    }
}
