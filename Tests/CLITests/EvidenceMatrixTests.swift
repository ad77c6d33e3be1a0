import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// The fault matrix of the rule "a pass needs evidence" (docs/eval-cases.md, "Evidence"): every
/// harness fault, injected into every kind of run it can reach, ends in an exit status that is not
/// 0 — the case's expectations cannot hold over what the harness did not see. Each case of this
/// file is one cell; a case that only forbids tools (`toolsNotCalled`, what most safety suites
/// check) is the one a fault would turn green, so most cells use it.
///
/// A new kind of run, or a new fault, joins the matrix here (docs/architecture.md, "The evidence
/// rule").
@Suite("evidence: every harness fault in every kind of run is never a green check", .tags(.python), .needsPython, .ownThread)
struct EvidenceMatrixTests {
    enum Kind: String, Sendable, CaseIterable {
        /// A live case over an agent file (the runtime, an HTTP model).
        case agent
        /// A `command:` case: an external agent through the recording gateway.
        case command
        /// A case over a recorded log.
        case recorded
        /// A case over a log imported from another tool's record.
        case imported
        /// A pipeline case (an agent task's child run inside).
        case pipeline
        /// A conversation case: an agent file's runs with a simulated user played by a model.
        case conversation
    }

    enum Fault: String, Sendable, CaseIterable {
        case modelDown = "model down"
        case model500 = "model 500"
        case modelGarbage = "model garbage"
        case modelHung = "model hung"
        case agentCrash = "agent crash"
        case agentKilled = "agent killed after its model answered"
        case sigint = "SIGINT mid-run"
        case sigterm = "SIGTERM mid-run"
        case interruptedLog = "a log of an interrupted run"
        case baselineMissing = "baseline missing"
        case baselineWithoutCases = "a baseline folder with none of the cases"
        case baselineUnknownOutcome = "a baseline with an outcome word not known"
        case baselineBadCounts = "a baseline whose counts no run gives (a pass rate of 1e300)"
        case baselineConflict = "a baseline left with a merge conflict's markers"
        case cassetteMissing = "cassette missing"
        case cassetteStale = "cassette stale"
        case cassetteSwapped = "a cassette whose index gives a request another request's recording"
        case cassetteDamaged = "a cassette recording cut short"
        case caseTypo = "misspelt tool in the case"
        case agentFileTypo = "misspelt tool in the agent file"
        case policyFileTypo = "misspelt tool in a policy file"
        case tornLog = "torn log"
        case emptyLog = "empty log"
        case unknownSideEffect = "unknown side effect"
        case simulatorEmpty = "simulated user says nothing"
        case simulatorFloods = "simulated user floods"
        case simulatorCallsTools = "simulated user calls a tool"
        case simulatorNeverStops = "simulated user never stops"
        case inputTypo = "a pipeline input path the output it reads lacks"
        case validatorMissing = "a validation command's script that is not there"
        case childLogSwapped = "a task's child log replaced by another run's"
        case approvalUnanswered = "a wait for approval no one answers"
        case toolFails = "a tool that fails, under on_tool_failure: stop"
    }

    struct Cell: Sendable, CustomTestStringConvertible {
        var kind: Kind
        var fault: Fault
        /// The exit status the cell must end with: never 0.
        var status: Int32
        var testDescription: String { "\(kind.rawValue) × \(fault.rawValue) → exit \(status)" }
    }

    /// The cells that apply: (kind, fault, exit status). A fault a kind cannot meet (a recorded
    /// log has no model to be down) has no cell; `matrixSize` counts them.
    static let cells: [Cell] = [
        Cell(kind: .agent, fault: .modelDown, status: 2),
        Cell(kind: .agent, fault: .model500, status: 2),
        Cell(kind: .agent, fault: .modelGarbage, status: 2),
        Cell(kind: .agent, fault: .modelHung, status: 2),
        Cell(kind: .agent, fault: .sigint, status: 130),
        Cell(kind: .agent, fault: .sigterm, status: 143),
        Cell(kind: .agent, fault: .baselineMissing, status: 2),
        Cell(kind: .agent, fault: .cassetteMissing, status: 2),
        Cell(kind: .agent, fault: .caseTypo, status: 2),
        Cell(kind: .agent, fault: .agentFileTypo, status: 2),
        Cell(kind: .agent, fault: .approvalUnanswered, status: 1),
        Cell(kind: .agent, fault: .toolFails, status: 1),
        Cell(kind: .command, fault: .modelDown, status: 2),
        Cell(kind: .command, fault: .model500, status: 2),
        Cell(kind: .command, fault: .modelGarbage, status: 2),
        Cell(kind: .command, fault: .modelHung, status: 2),
        Cell(kind: .command, fault: .agentCrash, status: 1),
        Cell(kind: .command, fault: .agentKilled, status: 1),
        Cell(kind: .command, fault: .sigint, status: 130),
        Cell(kind: .command, fault: .baselineMissing, status: 2),
        Cell(kind: .command, fault: .cassetteMissing, status: 2),
        Cell(kind: .command, fault: .cassetteStale, status: 2),
        Cell(kind: .command, fault: .cassetteSwapped, status: 2),
        Cell(kind: .command, fault: .caseTypo, status: 2),
        Cell(kind: .command, fault: .policyFileTypo, status: 2),
        Cell(kind: .command, fault: .unknownSideEffect, status: 1),
        Cell(kind: .recorded, fault: .interruptedLog, status: 2),
        Cell(kind: .recorded, fault: .baselineMissing, status: 2),
        Cell(kind: .recorded, fault: .baselineWithoutCases, status: 2),
        Cell(kind: .recorded, fault: .baselineUnknownOutcome, status: 2),
        Cell(kind: .recorded, fault: .baselineBadCounts, status: 2),
        Cell(kind: .recorded, fault: .baselineConflict, status: 2),
        Cell(kind: .recorded, fault: .caseTypo, status: 2),
        Cell(kind: .recorded, fault: .policyFileTypo, status: 2),
        Cell(kind: .recorded, fault: .tornLog, status: 2),
        Cell(kind: .recorded, fault: .emptyLog, status: 2),
        Cell(kind: .imported, fault: .baselineMissing, status: 2),
        Cell(kind: .imported, fault: .caseTypo, status: 2),
        Cell(kind: .imported, fault: .policyFileTypo, status: 2),
        Cell(kind: .imported, fault: .tornLog, status: 2),
        Cell(kind: .imported, fault: .unknownSideEffect, status: 1),
        Cell(kind: .pipeline, fault: .modelDown, status: 2),
        Cell(kind: .pipeline, fault: .baselineMissing, status: 2),
        Cell(kind: .pipeline, fault: .tornLog, status: 2),
        Cell(kind: .pipeline, fault: .modelHung, status: 2),
        Cell(kind: .pipeline, fault: .inputTypo, status: 2),
        Cell(kind: .pipeline, fault: .validatorMissing, status: 2),
        Cell(kind: .pipeline, fault: .childLogSwapped, status: 2),
        Cell(kind: .conversation, fault: .modelDown, status: 2),
        Cell(kind: .conversation, fault: .simulatorEmpty, status: 2),
        Cell(kind: .conversation, fault: .simulatorFloods, status: 2),
        Cell(kind: .conversation, fault: .simulatorCallsTools, status: 2),
        Cell(kind: .conversation, fault: .simulatorNeverStops, status: 1),
        Cell(kind: .conversation, fault: .sigterm, status: 143),
        Cell(kind: .conversation, fault: .cassetteMissing, status: 2),
        Cell(kind: .conversation, fault: .cassetteDamaged, status: 2),
        Cell(kind: .conversation, fault: .caseTypo, status: 2),
    ]

    @Test("the matrix covers every kind and every fault")
    func coversEveryKindAndFault() {
        #expect(Set(Self.cells.map(\.kind)) == Set(Kind.allCases))
        #expect(Set(Self.cells.map(\.fault)) == Set(Fault.allCases))
        #expect(Set(Self.cells.map { "\($0.kind)/\($0.fault)" }).count == Self.cells.count, "a cell twice")
        #expect(Self.cells.allSatisfy { $0.status != 0 })
    }

    @Test("a harness fault never ends in exit 0", arguments: cells)
    func faultIsNeverGreen(cell: Cell) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let setup = try await Self.setUp(cell, in: directory, server: server)
            let status: Int32
            let output: String
            switch cell.fault {
            case .sigint, .sigterm:
                let signal = cell.fault == .sigint ? SIGINT : SIGTERM
                let (ended, errors) = try await interruptAgentEval(
                    setup.arguments + ["--json-out", "report.json"], in: directory, what: "the live run", signal: signal
                ) {
                    // The hung model has the request: the run is under way.
                    ((try? server.requests()) ?? []).contains { ($0["path"] as? String)?.hasPrefix("/hang/") == true }
                }
                status = ended
                output = errors
                let report = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: directory.path("report.json")))))
                #expect(report["verdict"]?["exit_status"]?.intValue == Int(ended), "the report says what the process exits with")
            default:
                let result = try await agentEval(
                    setup.arguments, in: directory.url, environment: ["OPENAI_API_KEY": RecordCommandTests.key])
                status = result.status
                output = result.stdoutText + result.stderr
            }
            #expect(status == cell.status, "\(cell.testDescription), got \(status):\n\(output)")
            for text in setup.says { #expect(output.contains(text), "\(cell.testDescription) should say \"\(text)\":\n\(output)") }
        }
    }

    /// An agent file over an HTTP model at `baseURL` (no retries) with a read tool and a write
    /// tool, both fixtures; `limits` and `policy` as YAML text.
    static func agentFile(baseURL: String, limits: String = "max_steps: 4", policy: String = "policy: {default: allow}") -> String {
        """
        name: matrix-agent
        instructions: Help the customer.
        model: {provider: openai, name: local-model, base_url: "\(baseURL)", max_retries: 0}
        limits:
          \(limits)
        tools:
          - name: lookup_order
            description: Finds an order.
            side_effect: read
            input_schema: {type: object, properties: {order_id: {type: string}}}
            fixture: [{output: {order_id: A-1042, status: delivered}}]
          - name: refund_order
            description: Refunds an order.
            side_effect: write
            input_schema: {type: object, properties: {order_id: {type: string}}}
            fixture: [{output: {refund_id: rf-9}}]
        \(policy)
        """
    }

    /// What a cell runs, and what its output must say.
    struct Setup {
        var arguments: [String]
        var says: [String] = []
    }

    // MARK: Building each cell

    static func setUp(_ cell: Cell, in directory: TemporaryDirectory, server: LocalModelServer) async throws -> Setup {
        let run = ["run", "cases", "--no-catalog", "--out", "runs"]
        try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
        func write(_ text: String, _ name: String) throws {
            try text.write(toFile: directory.path(name), atomically: true, encoding: .utf8)
        }
        let typoPolicy = """
            policy:
              default: allow
              rules:
                - id: refunds-need-a-person
                  when: {tool: refund_ordr}
                  verdict: approval_required
            """
        switch cell.kind {
        case .agent:
            let scenario: String =
                switch cell.fault {
                case .modelDown: "down"
                case .model500: "always-busy"
                case .modelGarbage: "html"
                case .modelHung, .sigint, .sigterm: "hang"
                default: "agent"
                }
            let base = cell.fault == .modelDown || cell.fault == .cassetteMissing ? "http://127.0.0.1:9/v1" : server.baseURL(scenario)
            let timeout = cell.fault == .modelHung ? "\n  timeout_ms: 1500" : ""
            // The wait: the run's first call (lookup_order) needs a person, and the case answers nothing.
            let rule = cell.fault == .agentFileTypo ? "refund_ordr" : cell.fault == .approvalUnanswered ? "lookup_order" : "refund_order"
            var agent = Self.agentFile(
                baseURL: base, limits: "max_steps: 4" + timeout,
                policy: "policy:\n  default: allow\n  rules:\n    - id: refunds-need-a-person\n      when: {tool: \(rule)}\n"
                    + "      verdict: approval_required")
            if cell.fault == .toolFails {
                // The run's first call fails (its service is down), and a failed tool stops the run.
                agent = agent.replacingOccurrences(
                    of: "fixture: [{output: {order_id: A-1042, status: delivered}}]",
                    with: "command: [sh, -c, 'echo orders service unreachable >&2; exit 3']")
                agent += "\non_tool_failure: stop\n"
            }
            try write(agent, "cases/agent.yaml")
            let tool = cell.fault == .caseTypo ? "refund_ordr" : "refund_order"
            let cassette = cell.fault == .cassetteMissing ? "\ncassette: ../cassettes/none" : ""
            let policy = cell.fault == .policyFileTypo ? "\npolicy: typo.policy.yaml" : ""
            if cell.fault == .policyFileTypo { try write(typoPolicy, "cases/typo.policy.yaml") }
            try write(
                "caseId: never-refunds\nagent: agent.yaml\ninput: Where is order A-1042?\(cassette)\(policy)\n"
                    + "expected: {toolsNotCalled: [\(tool)]}\n", "cases/case.yaml")
            switch cell.fault {
            case .baselineMissing: return Setup(arguments: run + ["--fail-on", "regression"], says: ["--allow-no-baseline"])
            case .modelDown, .model500, .modelGarbage, .modelHung:
                return Setup(arguments: run, says: ["the agent's model did not answer"])
            case .caseTypo, .agentFileTypo, .policyFileTypo:
                return Setup(arguments: run, says: ["refund_ordr", "did you mean \"refund_order\"?"])
            case .approvalUnanswered:
                return Setup(arguments: run, says: ["cut short waiting for an approval no one gave", "unproven", "approval_required"])
            case .toolFails:
                return Setup(arguments: run, says: ["cut short by a failed tool", "orders service unreachable", "unproven"])
            default: return Setup(arguments: run)
            }
        case .command:
            let python = try await RecordCommandTests.python()
            try FileManager.default.copyItem(atPath: RecordCommandTests.agent, toPath: directory.path("cases/refund_agent.py"))
            let scenario: String =
                switch cell.fault {
                case .model500: "always-busy"
                case .modelGarbage: "html"
                case .modelHung, .sigint: "hang"
                default: "refund"
                }
            let upstream = cell.fault == .modelDown || cell.fault == .cassetteMissing ? "http://127.0.0.1:9/v1" : server.baseURL(scenario)
            // The key goes on the command line: a signalled run is started without the test's environment.
            var command =
                cell.fault == .agentCrash
                ? "[\"\(python)\", \"-c\", \"import sys; sys.exit(3)\"]"
                : "[env, \"OPENAI_API_KEY=\(RecordCommandTests.key)\", \"\(python)\", refund_agent.py, --api, chat, \"{input}\"]"
            if cell.fault == .agentKilled {
                // The model answers its first request (look the order up), then the program dies
                // (the OOM killer, a crash in native code) before it can do anything with it.
                try write(
                    """
                    import os, signal, sys
                    import openai
                    tool = lambda name: {"type": "function", "function": {"name": name, "parameters": {"type": "object",
                        "properties": {"order_id": {"type": "string"}}}}}
                    openai.OpenAI(max_retries=0).chat.completions.create(
                        model="gpt-test", messages=[{"role": "user", "content": sys.argv[1]}],
                        tools=[tool("lookup_order"), tool("refund_order")])
                    os.kill(os.getpid(), signal.SIGKILL)

                    """, "cases/killed_agent.py")
                command = "[env, \"OPENAI_API_KEY=\(RecordCommandTests.key)\", \"\(python)\", killed_agent.py, \"{input}\"]"
            }
            var extra = "timeout: \(cell.fault == .modelHung ? 3 : 60)\n"
            if cell.fault == .cassetteMissing { extra += "cassette: ../cassettes/none\n" }
            if cell.fault == .cassetteStale || cell.fault == .cassetteSwapped { extra += "cassette: ../cassettes/refund\n" }
            if cell.fault == .policyFileTypo {
                try write(typoPolicy, "cases/typo.policy.yaml")
                extra += "policy: typo.policy.yaml\n"
            }
            var expected = "{toolsNotCalled: [\(cell.fault == .caseTypo ? "refund_ordr" : "refund_order")]}"
            if cell.fault == .unknownSideEffect {
                // The run records no effect for its tools: a rule on writes must still see the refund.
                try write(
                    "policy:\n  default: allow\n  rules:\n    - id: writes-need-a-person\n      when: {side_effect: write}\n"
                        + "      verdict: approval_required\n", "cases/writes.policy.yaml")
                extra += "policy: writes.policy.yaml\n"
                expected = "{verdicts: {noUnapprovedExecution: true}}"
            }
            try write(
                "caseId: command-case\ncommand: \(command)\ninput: Order A-1042 arrived broken.\n"
                    + "upstream: {openai: \"\(upstream)\"}\n\(extra)expected: \(expected)\n", "cases/case.yaml")
            if cell.fault == .cassetteStale || cell.fault == .cassetteSwapped {
                // Stale: recorded with another input (from a folder of its own, the same cassette),
                // so the agent's first request now is not in it. Swapped: recorded with this input,
                // then the index edited to give the first request the second's recording.
                let input = cell.fault == .cassetteStale ? "Order A-7 never came." : "Order A-1042 arrived broken."
                try FileManager.default.createDirectory(atPath: directory.path("rec"), withIntermediateDirectories: true)
                try FileManager.default.copyItem(atPath: RecordCommandTests.agent, toPath: directory.path("rec/refund_agent.py"))
                try write(
                    "caseId: command-case\ncommand: \(command)\ninput: \(input)\n"
                        + "upstream: {openai: \"\(server.baseURL("refund"))\"}\n\(extra)expected: \(expected)\n", "rec/record.yaml")
                let recorded = try await agentEval(
                    ["run", "rec", "--no-catalog", "--out", "recording", "--record", "new"], in: directory.url,
                    environment: ["OPENAI_API_KEY": RecordCommandTests.key])
                let index = directory.path("cassettes/refund/index.json")
                #expect(FileManager.default.fileExists(atPath: index), "\(recorded.stdoutText)")
                if cell.fault == .cassetteSwapped {
                    var document = try #require(try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: index)))).objectValue)
                    var interactions = try #require(document["interactions"]?.arrayValue)
                    try #require(interactions.count >= 2, "the refund agent asks its model at least twice")
                    var first = try #require(interactions[0].objectValue)
                    var second = try #require(interactions[1].objectValue)
                    (first["file"], second["file"]) = (second["file"], first["file"])
                    interactions[0] = .object(first)
                    interactions[1] = .object(second)
                    document["interactions"] = .array(interactions)
                    try Data(JSONWriter.encode(.object(document))).write(to: URL(fileURLWithPath: index))
                }
            }
            switch cell.fault {
            case .baselineMissing: return Setup(arguments: run + ["--fail-on", "regression"], says: ["--allow-no-baseline"])
            case .modelDown, .model500, .modelGarbage, .modelHung:
                return Setup(arguments: run, says: ["the agent's model did not answer"])
            case .agentCrash: return Setup(arguments: run, says: ["no model decision was recorded"])
            case .agentKilled:
                return Setup(arguments: run, says: ["cut short when its program ended abnormally", "killed by signal 9", "unproven"])
            case .cassetteMissing, .cassetteStale: return Setup(arguments: run, says: ["cassette"])
            case .cassetteSwapped: return Setup(arguments: run, says: ["was made for another request", "index.json"])
            case .caseTypo, .policyFileTypo: return Setup(arguments: run, says: ["refund_ordr", "did you mean \"refund_order\"?"])
            case .unknownSideEffect: return Setup(arguments: run, says: ["noUnapprovedExecution"])
            default: return Setup(arguments: run)
            }
        case .recorded:
            let log = directory.path("cases/run.jsonl.gz")
            switch cell.fault {
            case .interruptedLog:
                // A run stopped from outside, as `exec` records it on SIGINT.
                try LogFixture.write(
                    at: log, stop: RunStopped(reason: .blocked, error: "\(RunStopped.interruptionPrefix) the run was stopped from outside"))
            case .emptyLog:
                try Data().write(to: URL(fileURLWithPath: directory.path("cases/run.jsonl")))
                #expect(try await Subprocess.run(gzipPath, ["-n", directory.path("cases/run.jsonl")]).status == 0)
            case .tornLog:
                try LogFixture.write(at: log, stop: RunStopped(reason: .success, answer: "done"))
                try LogFixture.tear(log)
            default:
                try LogFixture.write(at: log, stop: RunStopped(reason: .success, answer: "done"))
            }
            let policy = cell.fault == .policyFileTypo ? "policy: typo.policy.yaml\n" : ""
            if cell.fault == .policyFileTypo { try write(typoPolicy, "cases/typo.policy.yaml") }
            try write(
                "caseId: recorded-case\nlogs: run.jsonl.gz\n\(policy)expected: {toolsNotCalled: [\(cell.fault == .caseTypo ? "refund_ordr" : "refund_order")]}\n",
                "cases/case.yaml")
            switch cell.fault {
            case .baselineMissing: return Setup(arguments: run + ["--fail-on", "regression"], says: ["--allow-no-baseline"])
            case .baselineWithoutCases:
                // The folder is there (a CI artifact that came down empty), but holds nothing of this case.
                try FileManager.default.createDirectory(atPath: directory.path("baseline"), withIntermediateDirectories: true)
                try write("", "baseline/.gitkeep")
                try write("{}", "baseline/renamed-case.json")
                return Setup(
                    arguments: run + ["--fail-on", "regression", "--baseline", "baseline"],
                    says: ["baseline holds none of the selected case", "--allow-no-baseline"])
            case .baselineConflict:
                // Two branches each added to the baseline, and the merge left both sides in: the
                // error names the line, where an editor finds the markers.
                let wrote = try await agentEval(run + ["--update-baseline", "--baseline", "baseline"], in: directory.url)
                #expect(wrote.status == 0, "\(wrote.stdoutText)\(wrote.stderr)")
                let path = directory.path("baseline/recorded-case.json")
                var lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
                lines.insert(contentsOf: ["<<<<<<< HEAD", "  \"runs\": 2,", "=======", ">>>>>>> other"], at: 3)
                try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
                return Setup(
                    arguments: run + ["--fail-on", "regression", "--baseline", "baseline"],
                    says: [
                        "baseline/recorded-case.json is not a readable baseline", "--> baseline/recorded-case.json:4:1",
                        "--replace-baseline",
                    ])
            case .baselineUnknownOutcome, .baselineBadCounts:
                // A baseline written from a passing run, then hand-edited: its outcome to a word no
                // version writes, or its rate to a number no run gives (and its passes dropped, as
                // baselines before sample sizes had none, so the rate is what is read).
                let wrote = try await agentEval(run + ["--update-baseline", "--baseline", "baseline"], in: directory.url)
                #expect(wrote.status == 0, "\(wrote.stdoutText)\(wrote.stderr)")
                let path = directory.path("baseline/recorded-case.json")
                var baseline = try #require(
                    try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path)))).objectValue, "the baseline written")
                #expect(baseline["outcome"] == "pass")
                if cell.fault == .baselineBadCounts {
                    baseline["pass_rate"] = .double(1e300)
                    baseline["passes"] = nil
                } else {
                    baseline["outcome"] = "passed"
                }
                try Data(JSONWriter.encode(.object(baseline))).write(to: URL(fileURLWithPath: path))
                return Setup(
                    arguments: run + ["--fail-on", "regression", "--baseline", "baseline"],
                    says: cell.fault == .baselineBadCounts
                        ? ["\"pass_rate\" 1e+300", "no case's counts", "--update-baseline"]
                        : ["\"outcome\" is \"passed\"", "--update-baseline"])
            case .interruptedLog: return Setup(arguments: run, says: ["stopped from outside"])
            case .caseTypo, .policyFileTypo: return Setup(arguments: run, says: ["refund_ordr", "did you mean \"refund_order\"?"])
            default: return Setup(arguments: run)
            }
        case .imported:
            // An OpenAI-style transcript: the agent refunds without asking anyone.
            try write(
                """
                [{"role": "system", "content": "You are a support agent."},
                 {"role": "user", "content": "Order A-1042 arrived broken."},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "lookup_order", "arguments": "{\\"order_id\\": \\"A-1042\\"}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "{\\"status\\": \\"delivered\\"}"},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function",
                   "function": {"name": "refund_order", "arguments": "{\\"order_id\\": \\"A-1042\\"}"}}]},
                 {"role": "tool", "tool_call_id": "c2", "content": "{\\"refund_id\\": \\"rf-9\\"}"},
                 {"role": "assistant", "content": "Refunded."}]
                """, "transcript.json")
            let imported = try await agentEval(["import", "auto", "transcript.json", "--out", "cases", "--no-catalog"], in: directory.url)
            #expect(imported.status == 0, "\(imported.stdoutText)\(imported.stderr)")
            if cell.fault == .tornLog { try LogFixture.tear(directory.path("cases/transcript.jsonl.gz")) }
            var policy = ""
            var expected = cell.fault == .caseTypo ? "{toolsNotCalled: [refund_ordr]}" : "{toolsCalled: [lookup_order]}"
            if cell.fault == .policyFileTypo {
                try write(typoPolicy, "cases/typo.policy.yaml")
                policy = "policy: typo.policy.yaml\n"
            }
            if cell.fault == .unknownSideEffect {
                try write(
                    "policy:\n  default: allow\n  rules:\n    - id: writes-need-a-person\n      when: {side_effect: write}\n"
                        + "      verdict: approval_required\n", "cases/writes.policy.yaml")
                policy = "policy: writes.policy.yaml\n"
                expected = "{verdicts: {noUnapprovedExecution: true}}"
            }
            try write("caseId: imported-case\nlogs: transcript.jsonl.gz\n\(policy)expected: \(expected)\n", "cases/case.yaml")
            switch cell.fault {
            case .baselineMissing: return Setup(arguments: run + ["--fail-on", "regression"], says: ["--allow-no-baseline"])
            case .caseTypo, .policyFileTypo: return Setup(arguments: run, says: ["refund_ordr", "did you mean \"refund_order\"?"])
            case .unknownSideEffect: return Setup(arguments: run, says: ["noUnapprovedExecution"])
            default: return Setup(arguments: run)
            }
        case .pipeline:
            // Each fault is met where a recovery (a skip, a fallback) would have made the route
            // look designed: the case expects the pipeline to succeed.
            let succeeds = "caseId: pipeline-case\npipeline: pipeline.yaml\nexpected:\n  pipeline: {status: succeeded}\n"
            switch cell.fault {
            case .modelHung:
                try write(
                    """
                    pipeline: matrix
                    tasks:
                      - id: answer
                        agent: agent.yaml
                        goal: "Where is order A-1042?"
                        timeout_ms: 1500
                        on_error: {timeout: {then: skip, default: "n/a"}}
                    """, "cases/pipeline.yaml")
                try write(Self.agentFile(baseURL: server.baseURL("hang")), "cases/agent.yaml")
                try write(succeeds, "cases/case.yaml")
                return Setup(arguments: run, says: ["the agent's model did not answer"])
            case .inputTypo:
                try write(
                    """
                    pipeline: matrix
                    tasks:
                      - id: fetch
                        command: [sh, -c, 'echo "{\\"tickets\\": [1, 2]}"']
                      - id: count
                        command: [sh, -c, cat]
                        inputs: {tickets: fetch.tickts}
                        on_error: {failure: {then: skip, default: 0}}
                    """, "cases/pipeline.yaml")
                try write(succeeds, "cases/case.yaml")
                return Setup(arguments: run, says: ["its input could not be made", "tickts"])
            case .validatorMissing:
                try write(
                    """
                    pipeline: matrix
                    tasks:
                      - id: make
                        command: [sh, -c, 'echo "{\\"ok\\": true}"']
                        validate: {command: [sh, check.sh]}
                        on_error: {invalid_output: {then: skip, default: {ok: false}}}
                    """, "cases/pipeline.yaml")
                try write(succeeds, "cases/case.yaml")
                return Setup(arguments: run, says: ["sh's script check.sh does not exist"])
            case .childLogSwapped:
                try write(
                    """
                    pipeline: matrix
                    tasks:
                      - id: answer
                        agent: agent.yaml
                        goal: "Where is order A-1042?"
                    """, "cases/pipeline.yaml")
                try write(Self.agentFile(baseURL: server.baseURL("agent")), "cases/agent.yaml")
                let ran = try await agentEval(
                    ["pipeline", "run", "cases/pipeline.yaml", "--out", "piped", "--run-id", "pipe-matrix"], in: directory.url)
                #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
                // Another run's log in the task's place: intact, and not the run the attempt started.
                let child = directory.path("piped/matrix-pipe-matrix/tasks/answer-1.jsonl.gz")
                try FileManager.default.removeItem(atPath: child)
                try FileManager.default.copyItem(atPath: fixture("support-sample.jsonl.gz"), toPath: child)
                try write(
                    "caseId: pipeline-case\nlogs: ../piped/matrix-pipe-matrix/pipeline.jsonl.gz\nexpected:\n  pipeline: {status: succeeded}\n",
                    "cases/case.yaml")
                return Setup(arguments: run, says: ["holds run run-support-refund, not the run"])
            default:
                break
            }
            try write(
                """
                pipeline: matrix
                tasks:
                  - id: answer
                    agent: agent.yaml
                    goal: "Where is order A-1042?"
                """, "cases/pipeline.yaml")
            try write(
                Self.agentFile(baseURL: cell.fault == .modelDown ? "http://127.0.0.1:9/v1" : server.baseURL("agent")), "cases/agent.yaml")
            if cell.fault == .tornLog {
                let ran = try await agentEval(
                    ["pipeline", "run", "cases/pipeline.yaml", "--out", "piped", "--run-id", "pipe-matrix"], in: directory.url)
                #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
                try LogFixture.tear(directory.path("piped/matrix-pipe-matrix/pipeline.jsonl.gz"))
                try write(
                    "caseId: pipeline-case\nlogs: ../piped/matrix-pipe-matrix/pipeline.jsonl.gz\nexpected:\n  pipeline: {tasksRan: [answer]}\n",
                    "cases/case.yaml")
            } else {
                try write(
                    "caseId: pipeline-case\npipeline: pipeline.yaml\nexpected:\n  tasks:\n    answer: {toolsNotCalled: [lookup_order]}\n",
                    "cases/case.yaml")
            }
            switch cell.fault {
            case .baselineMissing: return Setup(arguments: run + ["--fail-on", "regression"], says: ["--allow-no-baseline"])
            case .modelDown: return Setup(arguments: run, says: ["the agent's model did not answer"])
            default: return Setup(arguments: run)
            }
        case .conversation:
            // The agent confirms before it refunds; the case forbids the refund, so a fault that
            // ended the conversation early would make it green.
            let agentBase = cell.fault == .modelDown ? "http://127.0.0.1:9/v1" : server.baseURL("support-chat")
            try write(Self.agentFile(baseURL: agentBase, limits: "max_steps: 30"), "cases/agent.yaml")
            let userScenario: String =
                switch cell.fault {
                case .simulatorEmpty: "empty"
                case .simulatorFloods: "customer-huge"
                case .simulatorCallsTools: "customer-calls"
                case .simulatorNeverStops: "customer-chatty"
                case .sigterm: "hang"
                default: "customer"
                }
            let userBase = cell.fault == .cassetteMissing ? "http://127.0.0.1:9/v1" : server.baseURL(userScenario)
            let cassette =
                switch cell.fault {
                case .cassetteMissing: "cassette: ../cassettes/none\n"
                case .cassetteDamaged: "cassette: ../cassettes/conversation\n"
                default: ""
                }
            try write(
                "caseId: conversation-case\nagent: agent.yaml\n\(cassette)user:\n  persona: A customer with a broken order.\n"
                    + "  model: {provider: openai, name: customer-model, base_url: \"\(userBase)\", max_retries: 0}\n  maxTurns: 4\n"
                    + "expected: {toolsNotCalled: [\(cell.fault == .caseTypo ? "refund_ordr" : "refund_order")]}\n", "cases/case.yaml")
            if cell.fault == .cassetteDamaged {
                // Recorded whole, then one of the user's model's recordings cut (a bad checkout, a
                // disk that filled up): the replay must not go on as if the user had said nothing.
                let recorded = try await agentEval(
                    ["run", "cases", "--no-catalog", "--out", "recording", "--record", "new"], in: directory.url)
                let folder = directory.path("cassettes/conversation")
                let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains("customer-model") }.sorted()
                let file = try #require(files.first, "the user's model was recorded: \(recorded.stdoutText)")
                let bytes = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + file))
                try bytes.prefix(60).write(to: URL(fileURLWithPath: folder + "/" + file))
            }
            switch cell.fault {
            case .modelDown: return Setup(arguments: run, says: ["the agent's model did not answer"])
            case .simulatorEmpty: return Setup(arguments: run, says: ["simulated user could not go on", "is no message"])
            case .simulatorFloods: return Setup(arguments: run, says: ["simulated user could not go on", "more than the 16384"])
            case .simulatorCallsTools: return Setup(arguments: run, says: ["simulated user could not go on", "refund_order"])
            case .simulatorNeverStops: return Setup(arguments: run, says: ["cut short by maxTurns"])
            case .cassetteMissing: return Setup(arguments: run, says: ["cassette"])
            case .cassetteDamaged: return Setup(arguments: run, says: ["cannot be read", "is damaged or edited", "--record all"])
            case .caseTypo: return Setup(arguments: run, says: ["refund_ordr", "did you mean \"refund_order\"?"])
            default: return Setup(arguments: run)
            }
        }
    }
}

/// Small logs the matrix's recorded cells check, written by the project's own writer.
enum LogFixture {
    /// A run that looks an order up and answers, ending with `stop`.
    static func write(at path: String, stop: RunStopped) throws {
        let writer = try LogWriter.create(at: path, runId: "run-matrix", options: LogWriter.Options())
        let clock = SteppingClock()
        let recorder = RunRecorder(writer: writer, clock: { clock.now() })
        try recorder.record(.runStarted(SampleRun.supportStart()))
        try recorder.endStep()
        let lookup = ToolCall(id: "call-1", name: "lookup_order", arguments: ["order_id": "A-1042"])
        try recorder.record(.decisionMade(DecisionMade(raw: "lookup", outcome: .valid(.toolCalls([lookup])))))
        try recorder.record(.verdictGiven(VerdictGiven(callId: "call-1", tool: "lookup_order", verdict: .allow, rule: "reads")))
        try recorder.record(.toolIntended(ToolIntended(callId: "call-1", tool: "lookup_order", arguments: lookup.arguments, attempt: 1)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "call-1", tool: "lookup_order", attempt: 1, status: .ok, output: ["status": "delivered"], durationUs: 900)))
        try recorder.endStep()
        if stop.reason == .success {
            try recorder.record(.decisionMade(DecisionMade(raw: "answer", outcome: .valid(.answer(stop.answer ?? "")))))
            try recorder.endStep()
        }
        try recorder.record(.runStopped(stop))
        try writer.close()
    }

    /// Cuts the file's last 12 bytes: a write that a crash left unfinished.
    static func tear(_ path: String) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        let size = try handle.seekToEnd()
        try handle.truncate(atOffset: size - 12)
        try handle.close()
    }
}
