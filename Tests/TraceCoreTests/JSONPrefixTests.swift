import TestSupport
import Testing

@testable import TraceCore

@Suite("The start of a JSON object text")
struct JSONPrefixTests {
    func problem(_ text: [UInt8]) -> Int? { text.withUnsafeBytes { JSONPrefix.problem($0)?.offset } }

    @Test("every prefix of an object, cut inside a string, an escape, a number, a literal or a character, is a start")
    func everyPrefixIsAStart() {
        let objects: [JSONValue] = [
            [:], ["a": []], ["v": 1, "n": -2.5e3, "z": 0, "f": 0.25, "big": 1e21, "t": true, "no": false, "nil": .null],
            ["text": "quote \" backslash \\ tab \t control \u{1} é 中文 🎉", "list": [1, [2, [3, ["k": "v"]]], "x"], "": ""],
        ]
        for object in objects {
            for text in [JSONWriter.encode(object), Array(#"{ "a" : [ 1 , -0.5E-7 , { } ] , "b" : null }"#.utf8)] {
                for cut in 0...text.count {
                    #expect(problem(Array(text.prefix(cut))) == nil, "\(String(decoding: text.prefix(cut), as: UTF8.self))")
                }
            }
        }
    }

    @Test("the first byte no JSON object text has there is named: garbage after the end, a stray bracket, bad UTF-8")
    func theFirstWrongByteIsNamed() {
        let cases: [(String, [UInt8], Int)] = [
            ("bytes after the object's end", Array(#"{"a":1}x"#.utf8), 7),
            ("a name without its colon", Array(#"{"a"1"#.utf8), 4),
            ("a literal misspelt", Array(#"{"a":tru3"#.utf8), 8),
            ("a control byte in a string", Array(#"{"a":""#.utf8) + [0x01], 6),
            ("a number with a leading zero", Array(#"{"a":01"#.utf8), 6),
            ("a point without digits", Array(#"{"a":1.}"#.utf8), 7),
            ("a bracket closing a brace", Array("{]".utf8), 1),
            ("a brace closing a bracket", Array(#"{"a":[1}"#.utf8), 7),
            ("a byte that goes on no character", Array(#"{"a":""#.utf8) + [0xE2, 0x28], 7),
            ("an overlong form", Array(#"{"a":""#.utf8) + [0xC0, 0x80], 6),
            ("not an object", Array("[1]".utf8), 0),
            ("a bad escape", Array(#"{"a":"\x"#.utf8), 7),
            ("a non-ASCII byte outside a string", Array(#"{"a":"#.utf8) + [0xC3, 0xA9], 5),
            ("a non-ASCII byte where an escape goes on", Array(#"{"a":"\"#.utf8) + [0xC3, 0xA9], 7),
            ("a surrogate's start cut at the end", Array(#"{"a":""#.utf8) + [0xED, 0xA0], 7),
        ]
        for (what, text, offset) in cases {
            #expect(problem(text) == offset, "\(what)")
        }
        // A character cut short at the very end is a start.
        #expect(problem(Array(#"{"a":""#.utf8) + [0xE2, 0x82]) == nil)
    }

    @Test("over random edits of objects, a text the parser takes is a start, and what is no start the parser refuses")
    func agreesWithTheParser() {
        var generator = SeededGenerator(seed: 51)
        let text = JSONWriter.encode(["a": [1, -2.5, true, .null, ["b": "é\"\\"]], "c": "x", "d": 1e-7] as JSONValue)
        let alphabet = Array(#"{}[]:,"\-+.eE0123456789tfnulrsa x"#.utf8) + [0x01, 0xC3, 0xA9, 0xFF]
        for _ in 0..<20_000 {
            var edited = text
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<edited.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: edited[at] = alphabet.randomElement(using: &generator)!
                case 1: edited.insert(alphabet.randomElement(using: &generator)!, at: at)
                default: if edited.count > 1 { edited.remove(at: at) }
                }
            }
            let parsed = try? JSONParser.parse(edited)
            if parsed?.objectValue != nil {
                #expect(problem(edited) == nil, "\(String(decoding: edited, as: UTF8.self))")
            }
            if problem(edited) != nil {
                #expect(parsed == nil, "\(String(decoding: edited, as: UTF8.self))")
            }
        }
    }
}
