import ConfigFile
import Foundation
import TestSupport
import Testing
import TraceCore

@Suite("Config files")
struct ConfigNodeTests {
    static let text = """
        name: demo
        limits:
          max_steps: 3
          budget: "12"
        tools:
          - lookup
          - refund
        flag: yes-really
        """

    @Test("every node knows its file, line and column; mappings keep file order")
    func positions() throws {
        let root = try ConfigNode.parse(Self.text, path: "agent.yaml")
        var reader = try root.mapping("the agent")
        let limits = try reader.required("limits")
        #expect(limits.location == SourceLocation(path: "agent.yaml", line: 3, column: 3))
        guard case .mapping(let pairs) = limits.content else {
            Issue.record("limits is not a mapping")
            return
        }
        #expect(pairs.map(\.key) == ["max_steps", "budget"])
        #expect(pairs[1].keyLocation == SourceLocation(path: "agent.yaml", line: 4, column: 3))
        let tools = try reader.required("tools").strings("tools")
        #expect(tools == ["lookup", "refund"])
    }

    @Test("a file that is not UTF-8 is named with the line, column and byte where it stops being UTF-8, and how to save it")
    func notUTF8() throws {
        try TemporaryDirectory.with { directory in
            // Latin-1 "é" (0xE9) in the third line's value.
            let bytes = Array("caseId: a\nlogs: runs/*.jsonl.gz\ninput: caf".utf8) + [0xE9] + Array("\n".utf8)
            try Data(bytes).write(to: URL(fileURLWithPath: directory.path("bad.yaml")))
            #expect {
                _ = try ConfigNode.load(path: directory.path("bad.yaml"))
            } throws: { error in
                guard let error = error as? ConfigError else { return false }
                return error.message == "the file is not UTF-8 text: byte 42 (0xE9) begins no UTF-8 character"
                    && error.location == SourceLocation(path: directory.path("bad.yaml"), line: 3, column: 11)
                    && error.hint?.contains("save the file as UTF-8") == true
            }
            // A byte-order mark is no part of the text.
            try Data([0xEF, 0xBB, 0xBF] + Array("caseId: marked\n".utf8)).write(to: URL(fileURLWithPath: directory.path("marked.yaml")))
            var fields = try ConfigNode.load(path: directory.path("marked.yaml")).mapping("the case")
            #expect(try fields.required("caseId").string("caseId") == "marked")
        }
    }

    @Test("values are read with their types, and a wrong type says what was expected and where")
    func types() throws {
        var limits = try ConfigNode.parse(Self.text, path: "agent.yaml").mapping("the agent")
        var inner = try limits.required("limits").mapping("limits")
        #expect(try inner.required("max_steps").int("limits.max_steps", in: 1...10) == 3)
        // Quoted, so a string whatever it looks like.
        #expect(throws: ConfigError.self) { _ = try inner.required("budget").int("limits.budget") }
        do {
            _ = try inner.required("budget").int("limits.budget")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.description == "agent.yaml:4:11: limits.budget must be a whole number, found a string")
        }
        do {
            _ = try inner.required("max_steps").int("limits.max_steps", in: 5...10)
        } catch {
            #expect(error.message == "limits.max_steps must be between 5 and 10, found 3")
        }
    }

    @Test("an unknown key is an error at that key, with the closest known key as a hint")
    func unknownKeys() throws {
        var reader = try ConfigNode.parse("name: x\nlimts: {}\n", path: "a.yaml").mapping("the agent")
        _ = try reader.required("name")
        _ = reader.optional("limits")
        #expect {
            try reader.finish()
        } throws: { error in
            guard let error = error as? ConfigError else { return false }
            return error.code == .unknownKey && error.location.line == 2 && error.hint == "did you mean \"limits\"?"
        }
        #expect(ConfigNode.suggestion(for: "max_step", among: ["max_steps", "timeout_ms"]) == "max_steps")
        #expect(ConfigNode.suggestion(for: "colour", among: ["max_steps"]) == nil)
    }

    @Test(
        "syntax errors and duplicate keys name the line; an empty file is an empty mapping",
        arguments: [
            ("name: [x\n", ConfigError.Code.syntax, 2),
            ("a: 1\nb: 2\na: 3\n", .duplicateKey, 3),
            ("x:\n  - 1\n  y: 2\n", .syntax, 3),
        ])
    func badFiles(text: String, code: ConfigError.Code, line: Int) {
        #expect {
            _ = try ConfigNode.parse(text, path: "bad.yaml")
        } throws: { error in
            guard let error = error as? ConfigError else { return false }
            return error.code == code && error.location.path == "bad.yaml" && error.location.line == line
        }
    }

    @Test("an empty document is an empty mapping; a missing file is unreadable with a hint")
    func emptyAndMissing() throws {
        #expect(try ConfigNode.parse("", path: "e.yaml").content == .mapping([]))
        #expect {
            _ = try ConfigNode.load(path: "/nonexistent/agent.yaml")
        } throws: { error in
            (error as? ConfigError)?.code == .unreadable && (error as? ConfigError)?.message.contains(": it does not exist") == true
        }
        // A folder given as the file says so.
        #expect {
            _ = try ConfigNode.load(path: "/tmp")
        } throws: { error in
            (error as? ConfigError)?.code == .unreadable
                && (error as? ConfigError)?.message == "cannot read /tmp: it is a folder, not a file"
        }
    }

    @Test("plain scalars resolve to JSON types; quoted ones stay strings")
    func json() throws {
        let node = try ConfigNode.parse("a: 1\nb: \"1\"\nc: true\nd: ~\ne: 2.5\nf: [x, 'y']\n", path: "j.yaml")
        #expect(node.json == ["a": 1, "b": "1", "c": true, "d": nil, "e": 2.5, "f": ["x", "y"]])
    }

    @Test(
        "globs: * any run, ? one character, everything else itself",
        arguments: [
            ("delete_*", "delete_customer", true), ("delete_*", "undelete", false), ("*_order", "refund_order", true),
            ("a?c", "abc", true), ("a?c", "ac", false), ("*", "", true), ("a.c", "abc", false),
            ("*.jsonl.gz", "run-0001.jsonl.gz", true), ("*.jsonl.gz", "run.jsonl.gz.tmp", false), ("*a*b", "xaxxab", true),
            // One character that is not one byte: `?` takes it whole, in the pattern or the name.
            ("caf?", "café", true), ("caf?", "cafe\u{301}", true), ("a?b", "a\r\nb", true), ("a??b", "a\r\nb", false),
            ("é*", "éclair", true), ("e*", "éclair", false),
        ])
    func globs(pattern: String, text: String, matches: Bool) {
        #expect(Glob(pattern).matches(text) == matches)
        #expect(Glob(pattern).isLiteral == !(pattern.contains("*") || pattern.contains("?")))
    }

    @Test("a path glob lists what is there; with skipsFolders, all but folders and links to one (a pipe too, to fail as itself)")
    func globPaths() throws {
        try TemporaryDirectory.with { directory in
            let runs = directory.path("runs")
            try FileManager.default.createDirectory(atPath: runs + "/folder.jsonl.gz", withIntermediateDirectories: true)
            FileManager.default.createFile(atPath: runs + "/a.jsonl.gz", contents: Data([1]))
            try FileManager.default.createSymbolicLink(atPath: runs + "/b.jsonl.gz", withDestinationPath: "a.jsonl.gz")
            try FileManager.default.createSymbolicLink(atPath: runs + "/c.jsonl.gz", withDestinationPath: "folder.jsonl.gz")
            try FileManager.default.createSymbolicLink(atPath: runs + "/d.jsonl.gz", withDestinationPath: "nothing")
            #expect(mkfifo(runs + "/e.jsonl.gz", 0o600) == 0)
            let pattern = runs + "/*.jsonl.gz"
            #expect(Glob.paths(matching: pattern, skipsFolders: true) == ["a", "b", "e"].map { runs + "/\($0).jsonl.gz" })
            #expect(
                Glob.paths(matching: pattern)
                    == ["a", "b", "c", "e", "folder"].map { runs + "/\($0).jsonl.gz" })
        }
    }

    @Test("reading is bounded: anchors and aliases (an alias bomb too) are refused at once, so are nesting and size past the limits")
    func bounded() throws {
        var lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for level in 1...9 {
            lines.append("a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]")
        }
        #expect {
            _ = try ConfigNode.parse(lines.joined(separator: "\n"), path: "bomb.yaml")
        } throws: { error in
            (error as? ConfigError)?.message.hasPrefix("YAML anchors and aliases") == true && (error as? ConfigError)?.location.line == 1
        }
        #expect {
            _ = try ConfigNode.parse("a: &x {b: 1}\nc: *x\n", path: "a.yaml")
        } throws: { ($0 as? ConfigError)?.location == SourceLocation(path: "a.yaml", line: 1, column: 4) }
        // An alias of a chain of 200,000 anchored lists used as a mapping key: Yams hashed it
        // recursively while building the tree, before the anchors could be refused (a stack
        // overflow). So many anchors are refused before Yams reads the text, at the first past the limit.
        var chain = ["a0: &a0 [x]"]
        for level in 1..<200_000 { chain.append("a\(level): &a\(level) [*a\(level - 1)]") }
        chain += ["? *a199999", ": 1"]
        #expect {
            _ = try ConfigNode.parse(chain.joined(separator: "\n"), path: "chain.yaml")
        } throws: { error in
            (error as? ConfigError)?.message
                == "the file holds more than 256 YAML anchors (&name); anchors and aliases are not supported here"
                && (error as? ConfigError)?.location.line == 257
        }
        // Prose with ampersands is not anchors: "R&D", "a & b", "&" before a space.
        _ = try ConfigNode.parse("text: |\n" + String(repeating: "  R&D a & b &\n", count: 300), path: "prose.yaml")
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect {
            _ = try ConfigNode.parse("a: " + deep, path: "deep.yaml")
        } throws: { ($0 as? ConfigError)?.message == "the file nests deeper than 128 levels" }
        try TemporaryDirectory.with { directory in
            let big = directory.path("big.yaml")
            try Data(repeating: 0x20, count: ConfigNode.maximumFileBytes + 1).write(to: URL(fileURLWithPath: big))
            #expect {
                _ = try ConfigNode.load(path: big)
            } throws: {
                ($0 as? ConfigError)?.message.hasSuffix("config files are limited to \(ConfigNode.maximumFileBytes) bytes") == true
            }
        }
    }
}
