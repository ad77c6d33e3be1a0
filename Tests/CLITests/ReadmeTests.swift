import Foundation
import TestSupport
import Testing

/// The README's examples are what the binary does: every `$ swift run agent-eval …` block whose
/// output is deterministic is run in a sandbox and compared with what the README shows.
@Suite("README examples")
struct ReadmeTests {
    /// One `$ command` and the lines the README shows after it.
    struct Example: CustomStringConvertible {
        var line: Int
        var command: String
        var shown: [String]
        var description: String { "README.md:\(line): \(command)" }
    }

    static func examples() throws -> [Example] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        var examples: [Example] = []
        var inBlock = false
        // Whether the last example is still collecting output: until its block ends.
        var collecting = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("```") {
                inBlock.toggle()
                collecting = false
                continue
            }
            guard inBlock else { continue }
            if line.hasPrefix("$ ") {
                examples.append(Example(line: index + 1, command: String(line.dropFirst(2)), shown: []))
                collecting = true
            } else if collecting {
                examples[examples.count - 1].shown.append(String(line))
            }
        }
        // Blank lines separate examples inside one block; they are not output.
        return examples.map { example in
            var example = example
            while example.shown.last == "" { example.shown.removeLast() }
            return example
        }
    }

    /// Splits a shell line into words (double and single quotes; no expansion).
    static func words(_ command: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for character in command {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
            } else if character == " " {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }

    /// Whether `actual` is what the README shows: line for line, where a line that is only `…`
    /// stands for any number of lines, and a line ending in `…` for any line it begins.
    static func matches(_ shown: ArraySlice<String>, _ actual: ArraySlice<String>) -> Bool {
        guard let first = shown.first else { return actual.isEmpty }
        if first.trimmingCharacters(in: .whitespaces) == "…" {
            return (actual.startIndex...actual.endIndex).contains { matches(shown.dropFirst(), actual[$0...]) }
        }
        guard let line = actual.first, line == first || (first.hasSuffix("…") && line.hasPrefix(first.dropLast())) else { return false }
        return matches(shown.dropFirst(), actual.dropFirst())
    }

    @Test("every deterministic example in the README prints what the README shows")
    func examplesMatch() async throws {
        let examples = try Self.examples()
        try await CLISandbox.with { sandbox in
            var checked = 0
            var lastRunId: String?
            for example in examples {
                var words = Self.words(example.command)
                // Pipes into other programs are the README's business, not the binary's.
                guard !words.contains("|") else { continue }
                words = words.map { $0.replacingOccurrences(of: "/tmp/", with: sandbox.directory.url.path + "/") }
                if words.first == "cp", words.count == 3 {
                    try? FileManager.default.removeItem(atPath: words[2])
                    try FileManager.default.copyItem(atPath: sandbox.directory.path(words[1]), toPath: words[2])
                    continue
                }
                guard words.starts(with: ["swift", "run", "agent-eval"]) else {
                    Issue.record("\(example): not a command this test knows how to run")
                    continue
                }
                // A command that names an earlier run's log uses the run id that run really got.
                if let lastRunId {
                    words = words.map {
                        $0.replacingOccurrences(of: #"run-\d{8}-\d{6}-[0-9a-f]{8}"#, with: lastRunId, options: .regularExpression)
                    }
                }
                let result = try await sandbox.run(Array(words.dropFirst(3)))
                let output = result.stdoutText + result.stderr
                if let range = output.range(of: #"run-\d{8}-\d{6}-[0-9a-f]{8}"#, options: .regularExpression) {
                    lastRunId = String(output[range])
                }
                let actual = sandbox.normalized(output).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                let shown = example.shown.map(sandbox.normalized)
                #expect(
                    Self.matches(shown[...], (actual.last == "" ? actual.dropLast() : actual[...])),
                    "\(example)\nREADME shows:\n\(shown.joined(separator: "\n"))\nthe binary printed:\n\(actual.joined(separator: "\n"))")
                checked += 1
            }
            #expect(checked >= 10, "only \(checked) README examples were checked")
        }
    }
}
