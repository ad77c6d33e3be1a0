import AgentRuntime
import ConfigFile
import EvalEngine
import Foundation
import TraceCore
import TraceLog

/// A seeded mutation fuzzer for the readers of untrusted input: logs, JSON, case files, agent
/// files. Each input is a corpus file mutated a few times (bit flips, byte edits, cut, splice,
/// duplicated runs, syntax tokens); the reader must return or throw one of the project's
/// diagnostics — never crash, hang, or throw something a person cannot read.
///
/// The test suite runs a few hundred inputs per target with fixed seeds; `swift run -c release
/// fuzz --seconds 3600` runs for as long as asked (Fuzz/main.swift).
public struct Fuzzer {
    public var generator: SeededGenerator

    public init(seed: UInt64) {
        generator = SeededGenerator(seed: seed)
    }

    static let tokens: [[UInt8]] = [
        "{", "}", "[", "]", "\"", ":", ",", "\\", "\n", "\r\n", "\t", "&a ", "*a", "- ", "? ", "!!binary ", "%YAML 1.1\n", "---\n",
        "null", "true", "-0", "1e999", "99999999999999999999", "\u{0}", "\u{1B}[2J", "é", "\u{FEFF}", "\"\\ud800\"", "<<: *a",
    ].map { Array($0.utf8) }

    mutating func below(_ bound: Int) -> Int { bound <= 0 ? 0 : Int(generator.next() % UInt64(bound)) }

    /// One to four mutations of `input`.
    public mutating func mutate(_ input: [UInt8], splicingWith other: [UInt8]) -> [UInt8] {
        var bytes = input
        for _ in 0...below(4) {
            let position = below(bytes.count + 1)
            switch below(8) {
            case 0 where !bytes.isEmpty: bytes[min(position, bytes.count - 1)] ^= UInt8(1 << below(8))
            case 1 where !bytes.isEmpty: bytes[min(position, bytes.count - 1)] = UInt8(truncatingIfNeeded: generator.next())
            case 2: bytes.insert(contentsOf: Self.tokens[below(Self.tokens.count)], at: position)
            case 3 where !bytes.isEmpty: bytes.removeSubrange(position..<min(bytes.count, position + 1 + below(64)))
            case 4: bytes = Array(bytes.prefix(position))
            case 5 where !bytes.isEmpty:
                let start = below(bytes.count)
                let run = bytes[start..<min(bytes.count, start + 1 + below(256))]
                bytes.insert(contentsOf: run, at: position)
            case 6 where !other.isEmpty:
                let start = below(other.count)
                bytes = Array(bytes.prefix(position)) + other[start...]
            default: bytes.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
            }
        }
        return bytes
    }

    /// What one input did to the reader.
    public enum Finding: Sendable, CustomStringConvertible {
        /// It threw something that is not one of the project's diagnostics.
        case undiagnosedError(input: [UInt8], error: String)

        public var description: String {
            switch self {
            case .undiagnosedError(let input, let error):
                "an error that is not a diagnostic (\(error)) for the input (base64) \(Data(input).base64EncodedString())"
            }
        }
    }

    /// Runs `read` on `count` mutated inputs of `corpus`; returns what it found.
    public mutating func run(corpus: [[UInt8]], count: Int, read: ([UInt8]) throws -> Void) -> [Finding] {
        var findings: [Finding] = []
        guard !corpus.isEmpty else { return findings }
        for _ in 0..<count {
            let input = mutate(corpus[below(corpus.count)], splicingWith: corpus[below(corpus.count)])
            do {
                try read(input)
            } catch let error as any Diagnostic {
                _ = error.lines()  // rendering must not trap either
            } catch {
                findings.append(.undiagnosedError(input: input, error: "\(type(of: error)): \(error)"))
            }
        }
        return findings
    }
}

/// The readers the fuzzer aims at, each with its corpus (files of this repository) and the
/// call that reads one input.
public enum FuzzTarget: String, CaseIterable, Sendable, CustomStringConvertible {
    case log, json, caseFile = "case-file", agentFile = "agent-file"
    /// A `<log>.seal` side file beside the torn fixture log: only a seal made for that log may
    /// ever be applied; anything else is stray.
    case sealSideFile = "seal-side-file"

    public var description: String { rawValue }

    static var repository: URL { ExampleRuns.fixtures.deletingLastPathComponent() }

    static func files(_ folder: String, ending: String) -> [[UInt8]] {
        let url = repository.appendingPathComponent(folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { $0.hasSuffix(ending) }.sorted().compactMap { try? [UInt8](Data(contentsOf: url.appendingPathComponent($0))) }
    }

    /// The seed inputs: the fixture logs, their lines, the bundled cases and agent files.
    public var corpus: [[UInt8]] {
        switch self {
        case .log: return Self.files("Fixtures/samples", ending: ".gz") + Self.files("Fixtures/runs", ending: ".gz")
        case .json:
            return Self.files("Fixtures/samples", ending: ".gz").flatMap { bytes -> [[UInt8]] in
                let path = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-seed-\(UUID().uuidString).gz").path
                defer { try? FileManager.default.removeItem(atPath: path) }
                guard (try? Data(bytes).write(to: URL(fileURLWithPath: path))) != nil,
                    let events = try? LogReader(path: path).readAll().events
                else { return [] }
                return events.map { Array($0.event.encodedLine()) }
            }
        case .sealSideFile: return Self.tornFixtureSeal.map { [$0] } ?? []
        case .caseFile: return Self.files("EvalCases/support", ending: ".yaml") + Self.files("Fixtures/eval/failing", ending: ".yaml")
        case .agentFile:
            return Self.files("Fixtures/agents/support", ending: "agent.yaml")
                + Self.files("Fixtures/agents/research", ending: "agent.yaml")
        }
    }

    /// The torn fixture log's bytes.
    static var tornFixture: [UInt8]? {
        try? [UInt8](Data(contentsOf: repository.appendingPathComponent("Fixtures/samples/research-sample-torn.jsonl.gz")))
    }

    /// The side file a seal of the torn fixture writes before it touches the log
    /// (docs/log-format.md §8), made by sealing a copy.
    static var tornFixtureSeal: [UInt8]? {
        guard let torn = tornFixture else { return nil }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-seal-\(UUID().uuidString).jsonl.gz").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        guard (try? Data(torn).write(to: URL(fileURLWithPath: path))) != nil, let report = try? LogRepair.seal(path: path),
            let sealed = try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        else { return nil }
        let (offset, member) = (report.memberOffset, Array(sealed[report.memberOffset...]))
        let header =
            "agent-eval seal v2 offset=\(offset) length=\(member.count) size=\(torn.count) "
            + "before=\(ContentHash.sha256Hex(torn[max(0, offset - 65_536)..<offset])) torn=\(ContentHash.sha256Hex(torn[offset...]))\n"
        return Array(header.utf8) + member
    }

    /// Reads one input the way the product does; throws what the product throws.
    public func read(_ input: [UInt8], in directory: String) throws {
        switch self {
        case .log:
            let path = directory + "/fuzz.jsonl.gz"
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: path + ".seal")
            try Data(input).write(to: URL(fileURLWithPath: path))
            _ = try LogVerifier.verify(path: path)
            var state = RunState()
            _ = try LogReader(path: path).forEachEvent { RunState.reduce(into: &state, $0.event) }
            _ = state.digest
            // Replay's read: delta packets made whole.
            _ = try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).forEachEvent { _ in }
            _ = try LogRepair.seal(path: path)
        case .sealSideFile:
            let path = directory + "/sealed.jsonl.gz"
            try Data(Self.tornFixture ?? []).write(to: URL(fileURLWithPath: path))
            try Data(input).write(to: URL(fileURLWithPath: path + ".seal"))
            _ = try LogVerifier.verify(path: path)
            _ = LogRepair.straySeal(of: path)
            _ = try? LogReader(path: path).readAll()
            _ = try LogRepair.seal(path: path)
            _ = try LogReader(path: path).readAll()
            try? FileManager.default.removeItem(atPath: path + ".seal")
        case .json:
            let value = try JSONParser.parse(input)
            _ = JSONWriter.encode(value)
            _ = try? Event(line: input)
        case .caseFile:
            let path = directory + "/case.yaml"
            try Data(input).write(to: URL(fileURLWithPath: path))
            do {
                _ = try EvalCaseFile.load(path: path)
            } catch {
                if let first = error.errors.first { throw first }
            }
        case .agentFile:
            for script in ["support.model.yaml", "research.model.yaml"] {
                let source = Self.repository.appendingPathComponent(
                    "Fixtures/agents/\(script.hasPrefix("support") ? "support" : "research")/\(script)")
                if !FileManager.default.fileExists(atPath: directory + "/" + script) {
                    try FileManager.default.copyItem(atPath: source.path, toPath: directory + "/" + script)
                }
            }
            let path = directory + "/agent.yaml"
            try Data(input).write(to: URL(fileURLWithPath: path))
            _ = try AgentFile.load(path: path)
        }
    }
}
