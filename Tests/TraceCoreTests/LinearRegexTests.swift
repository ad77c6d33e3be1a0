import Testing
import TraceCore

@Suite("Linear-time regular expressions")
struct LinearRegexTests {
    static let patterns = [
        "^A-[0-9]+$", "abc", "a|b|c", "^(ab)+$", "colou?r", "\\d{3}-\\d{4}", "^\\w+@\\w+\\.com$", "[^aeiou]{2,}", "x{2,3}",
        "^\\s*$", "(?:foo|bar)baz", "^https://", "a.c", "[a-c-]+", "\\bcat\\b", "^(a|ab)(c|bcd)(d*)$", "^$", "(a*)*b", "€\\d+",
        "Refunded [0-9.]+ €", "[\\d.]+", "^[A-Z][a-z]*( [A-Z][a-z]*)*$", "a{0}b", "(?<year>\\d{4})-\\d\\d", "\\x41\\u00e9",
        "^ab?c", "^ab|cd", "^X-9[0-9]*$",
    ]
    static let texts = [
        "", "A-1042", "A-", "abc", "xabcx", "b", "abab", "aba", "color", "colour", "colr", "555-1234", "55-1234", "me@site.com",
        "me@site.org", "bcdfg", "ae", "xx", "xxx", "xxxx", "   ", " a ", "foobaz", "barbaz", "bazfoo", "https://x", "http://x",
        "abc", "a-c", "a cat sat", "concat", "abcd", "abbcd", "aaab", "€42", "Refunded 49.99 €", "1.5", "New York", "new York",
        "b", "2026-11", "Aé", "ac", "xcd", "X-9", "X-90", "X-", "X", "a",
    ]

    @Test("it finds exactly what Swift's own regular expressions find", arguments: patterns)
    func agreesWithSwift(_ pattern: String) throws {
        let linear = try LinearRegex(pattern)
        let swift = try Regex(pattern)
        for text in Self.texts {
            let found = try swift.firstMatch(in: text)
            #expect(linear.matches(text) == (found != nil), "/\(pattern)/ on \"\(text)\"")
            // The same leftmost start (the end may differ: this one is the longest, Swift's the first).
            #expect(linear.firstRange(in: text)?.lowerBound == found?.range.lowerBound, "/\(pattern)/ range on \"\(text)\"")
        }
    }

    @Test(
        "patterns that make a backtracking matcher run for hours answer at once",
        arguments: ["^(a+)+$", "^(a|a)*$", "(a*)*b", "^(a|aa)+$", "(x+x+)+y"])
    func catastrophic(_ pattern: String) throws {
        let regex = try LinearRegex(pattern)
        let text = String(repeating: "a", count: 5_000) + "!"
        #expect(!regex.matches(text))
        #expect(try LinearRegex("^(a+)+$").matches(String(repeating: "a", count: 5_000)))
    }

    @Test(
        "what needs backtracking or would be huge is refused with the place",
        arguments: [
            ("(a)\\1", "back-references are not supported (at position 6 of the pattern)"),
            ("a(?=b)", "lookahead is not supported (at position 4 of the pattern)"),
            ("(?<!a)b", "lookbehind is not supported (at position 3 of the pattern)"),
            ("a++", "possessive quantifiers are not supported (at position 3 of the pattern)"),
            ("(a", #"a "(" is never closed (at position 3 of the pattern)"#),
            ("a)", #"unbalanced ")" (at position 2 of the pattern)"#),
            ("*a", #"nothing to repeat before "*" (at position 1 of the pattern)"#),
            ("[a-", #"a "[" is never closed (at position 4 of the pattern)"#),
            ("[z-a]", "the range z-a is backwards (at position 5 of the pattern)"),
            ("\\q", #"unknown escape "\q" (at position 3 of the pattern)"#),
            ("(((a{1000}){1000}){1000})", "the pattern is too large (more than 10000 steps) (at position 1 of the pattern)"),
            // From outside (an MCP server's tool schema): nothing may exhaust the stack or loop for hours.
            ("a**", #"nothing to repeat before "*": the atom before it is repeated already (at position 3 of the pattern)"#),
            ("x{2}{3}", #"nothing to repeat before "{": the atom before it is repeated already (at position 5 of the pattern)"#),
            (
                String(repeating: "(", count: 101) + "a" + String(repeating: ")", count: 101),
                "groups nest deeper than 100 (at position 101 of the pattern)"
            ),
            (String(repeating: "(", count: 1_000_000) + "a", "groups nest deeper than 100 (at position 101 of the pattern)"),
            (
                "(((((a{0}){1000}){1000}){1000}){1000}){1000}",
                "the pattern is too large (its repeats expand past 100000 parts) (at position 1 of the pattern)"
            ),
        ] as [(String, String)])
    func refused(_ pattern: String, _ message: String) {
        #expect {
            _ = try LinearRegex(pattern)
        } throws: { error in
            "\(error)" == message
        }
    }
}
