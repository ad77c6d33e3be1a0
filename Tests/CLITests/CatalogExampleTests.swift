import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@Suite("The catalog's documented examples")
struct CatalogExampleTests {
    /// The runs each documented `agent-eval runs …` example must list from the catalog that
    /// `fixtureCatalog` makes, by log name. A new example needs its answer here.
    static let answers: [String: Set<String>] = [
        "runs --tool refund_order --approval none": ["unapproved"],
        "runs --stop budget_exhausted --since 7d": ["research"],
        "runs --stop budget_exhausted --since 7d --json": ["research"],
        "runs --tool lookup_order --not-tool refund_order --json": ["refused"],
    ]

    /// The lines of `text` that are an `agent-eval runs …` command (after `swift run`, if
    /// there), without `agent-eval` and a trailing comment.
    static func examples(in text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            var command = line.drop { $0 == " " }
            if command.hasPrefix("swift run ") { command = command.dropFirst("swift run ".count) }
            guard command.hasPrefix("agent-eval runs ") else { return nil }
            return String(command.dropFirst("agent-eval ".count).prefix { $0 != "#" }).trimmingCharacters(in: .whitespaces)
        }
    }

    /// A catalog of runs the runtime writes now, through `agent-eval exec`: the support agent
    /// with its refund approved (its lookups ran with no human, as reads do), the same with
    /// the refund refused, the support agent under a policy that lets refunds run unapproved,
    /// and the research agent running out of budget; beside them, the research sample recorded
    /// with a clock in 2020, which `--since 7d` leaves out.
    static func fixtureCatalog(in sandbox: CLISandbox, environment: [String: String]) async throws {
        let root = sandbox.directory.url
        func exec(_ arguments: [String]) async throws {
            let result = try await agentEval(["exec"] + arguments, in: root, environment: environment)
            #expect([0, 1].contains(result.status), "\(arguments): \(result.stderr)")
        }
        let support = "Fixtures/agents/support/agent.yaml"
        let goal = "Order A-1042 arrived broken. Refund me and close my account."
        for (name, answer) in [("approved", "--approve"), ("refused", "--deny")] {
            try await exec(["--agent", support, "--input", goal, "--log", "runs/\(name).jsonl.gz"])
            try await exec([support, "--resume", "runs/\(name).jsonl.gz", answer, "call-3", "--approver", "agent:maria"])
        }
        let unapproved = try ExampleRuns.writeUnapprovedRefundAgent(into: sandbox.directory.path("unapproved-agent"))
        try await exec(["--agent", unapproved, "--input", goal, "--log", "runs/unapproved.jsonl.gz"])
        try await exec(["--agent", "Fixtures/agents/research/agent.yaml", "--input", "zstd?", "--log", "runs/research.jsonl.gz"])

        try FileManager.default.createDirectory(atPath: sandbox.directory.path("old"), withIntermediateDirectories: true)
        let writer = try LogWriter.create(at: sandbox.directory.path("old/research-2020.jsonl.gz"), runId: "run-research-2020")
        let old = try SampleRun.recordResearchRun(into: writer, clock: SteppingClock(startUs: 1_600_000_000_000_000))
        try writer.close()
        #expect(old.stop?.reason == .budgetExhausted)
        #expect(try await agentEval(["index", "old"], in: root, environment: environment).status == 0)
    }

    @Test("every runs example in the README, docs/catalog.md and runs --help lists what it says it lists")
    func runsExamples() async throws {
        try await CLISandbox.with { sandbox in
            let environment = ["AGENT_EVAL_CATALOG": sandbox.directory.path("catalog.sqlite"), "NO_COLOR": "1"]
            try await Self.fixtureCatalog(in: sandbox, environment: environment)
            let help = try await agentEval(["runs", "--help"], in: sandbox.directory.url, environment: environment)
            var examples: [String] = []
            for source in ["README.md", "docs/catalog.md"] {
                let found = Self.examples(in: try String(contentsOf: repositoryRoot.appendingPathComponent(source), encoding: .utf8))
                #expect(!found.isEmpty, "\(source) has no runs example")
                examples += found
            }
            let fromHelp = Self.examples(in: help.stdoutText)
            #expect(!fromHelp.isEmpty, "runs --help has no example")
            examples += fromHelp
            #expect(examples.contains("runs --tool refund_order --approval none"))

            let logName = try Regex(#"(?:runs|old)/([A-Za-z0-9-]+)\.jsonl\.gz"#)
            for example in Set(examples).sorted() {
                let answer = try #require(Self.answers[example], "no answer for the documented example `\(example)`: add it to answers")
                let result = try await agentEval(
                    example.split(separator: " ").map(String.init), in: sandbox.directory.url, environment: environment)
                #expect(result.status == 0, "\(example): \(result.stderr)")
                let listed = Set(result.stdoutText.matches(of: logName).map { String($0.output[1].substring ?? "") })
                #expect(listed == answer, "`\(example)` listed:\n\(result.stdoutText)")
                if example.hasSuffix("--json") {
                    #expect(result.stdoutText.hasPrefix("["), "\(example)")
                } else {
                    #expect(result.stdoutText.hasPrefix("STARTED (UTC)"), "\(example)")
                }
            }
        }
    }
}
