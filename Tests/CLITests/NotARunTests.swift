import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// A log that holds no run, is not whole, does not check out, or is a pipeline's is never
/// reported as a clean result: not by diff, audit, index or log cat.
@Suite("Logs that are not a whole run are never green")
struct NotARunTests {
    static let conformance = ExampleRuns.fixtures.appendingPathComponent("conformance")
    static let pipelineRun = ExampleRuns.fixtures.appendingPathComponent("pipelines/recorded/triage-recovery")

    /// A gzip file with one whole member and no line, made by the real gzip.
    static func eventless(in directory: TemporaryDirectory) async throws -> String {
        let plain = directory.path("empty.jsonl")
        try Data().write(to: URL(fileURLWithPath: plain))
        #expect(try await Subprocess.run(gzipPath, ["-n", plain]).status == 0)
        return plain + ".gz"
    }

    /// A whole log, chained as the writer chains it (docs/log-format.md §3.1), of `members`'
    /// lines as given: each member's first line but the first carries `prev`, the SHA-256 of the
    /// member before; each member is compressed by the real gzip. For what the writer refuses to
    /// write (a hostile log from elsewhere), the lines are edited text.
    static func chainedLog(_ members: [[String]]) async throws -> [UInt8] {
        let texts = ChainedLog.memberTexts(members.map { $0.map { Array($0.utf8) } }) { line, previous in
            var line = String(decoding: line, as: UTF8.self)
            if let range = line.range(of: #""prev":"[0-9a-f]{64}""#, options: .regularExpression) {
                line.replaceSubrange(range, with: "\"prev\":\"\(previous)\"")
            }
            return Array(line.utf8)
        }
        var file: [UInt8] = []
        for text in texts {
            let gzip = try await Subprocess.run(gzipPath, ["-n", "-c"], input: text)
            #expect(gzip.status == 0)
            file += gzip.stdout
        }
        return file
    }

    @Test(
        "a whole, chained log whose times or counts no arithmetic can hold (Int.min, Int.max) is refused by replay, diff and run, never a crash"
    )
    func measuresOutOfRange() async throws {
        try await TemporaryDirectory.with { directory in
            let valid = Self.conformance.appendingPathComponent("valid-support-sample.jsonl.gz").path
            // Written with stand-in numbers (the writer refuses the hostile ones), then edited.
            let written = directory.path("written.jsonl.gz")
            let writer = try LogWriter.create(at: written, runId: "run-hostile")
            _ = try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 111_111)
            _ = try writer.append(
                .decisionMade(DecisionMade(raw: "", outcome: .valid(.answer("done")), usage: TokenUsage(input: 333_333, output: 444_444))),
                step: 1, timeUs: 222_222)
            _ = try writer.append(.runStopped(RunStopped(reason: .success, answer: "done")), step: 1, timeUs: 222_222)
            try writer.close()
            var members: [[String]] = []
            _ = try LogReader(path: written).forEachLine { line, recorded in
                if recorded.location.memberIndex == members.count { members.append([]) }
                members[members.count - 1].append(
                    String(decoding: line, as: UTF8.self).replacingOccurrences(of: "111111", with: "\(Int.min)")
                        .replacingOccurrences(of: "222222", with: "\(Int.max)").replacingOccurrences(of: "333333", with: "\(Int.max)")
                        .replacingOccurrences(of: "444444", with: "\(Int.max)"))
            }
            #expect(members.count == 2 && members.joined().filter { $0.contains("\(Int.max)") }.count == 2)
            let hostile = directory.path("hostile.jsonl.gz")
            try Data(try await Self.chainedLog(members)).write(to: URL(fileURLWithPath: hostile))
            let verify = try await agentEval(["log", "verify", hostile])
            #expect(verify.status != 0 && (verify.stdoutText + verify.stderr).contains("time_us"), "\(verify.stdoutText)\(verify.stderr)")
            for arguments in [["replay", hostile], ["diff", valid, hostile], ["view", hostile, "--out", directory.path("page.html")]] {
                let result = try await agentEval(arguments)
                #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
                #expect(result.stderr.contains("time_us") && result.stderr.contains("2^53"), "\(arguments): \(result.stderr)")
            }
            try "caseId: hostile\nlogs: hostile.jsonl.gz\nexpected: {maxTokens: 100}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", "case.yaml", "--no-catalog"], in: directory.url)
            #expect(run.status == 2, "\(run.stdoutText)\(run.stderr)")
        }
    }

    @Test(
        "a whole, chained log whose seq or step no count is (Int.max, below 0) is refused at its line by verify and replay, never a crash",
        arguments: [(#""seq":1,"#, #""seq":9223372036854775807,"#, "seq"), (#""step":0,"#, #""step":-9223372036854775808,"#, "step")])
    func countsOutOfRange(written: String, hostile: String, field: String) async throws {
        try await TemporaryDirectory.with { directory in
            let source = directory.path("written.jsonl.gz")
            try LogWriter.withWriter(creating: source, runId: "run-hostile") { writer in
                _ = try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
                _ = try writer.append(.decisionMade(DecisionMade(raw: "", outcome: .valid(.answer("done")))), step: 0, timeUs: 2)
                _ = try writer.append(.runStopped(RunStopped(reason: .success, answer: "done")), step: 0, timeUs: 3)
            }
            var members: [[String]] = []
            var edited = 0
            _ = try LogReader(path: source).forEachLine { line, recorded in
                if recorded.location.memberIndex == members.count { members.append([]) }
                var text = String(decoding: line, as: UTF8.self)
                if edited == 0, recorded.event.sequence == 1, let range = text.range(of: written) {
                    text.replaceSubrange(range, with: hostile)
                    edited += 1
                }
                members[members.count - 1].append(text)
            }
            #expect(edited == 1)
            let path = directory.path("hostile.jsonl.gz")
            try Data(try await Self.chainedLog(members)).write(to: URL(fileURLWithPath: path))
            for arguments in [["log", "verify", path], ["replay", path]] {
                let result = try await agentEval(arguments)
                #expect(result.status == 2 || result.status == 1, "\(arguments): \(result.status) \(result.stdoutText)\(result.stderr)")
                #expect(
                    (result.stdoutText + result.stderr).contains("\(field) must be a whole number from 0 to 9007199254740991"),
                    "\(arguments): \(result.stdoutText)\(result.stderr)")
            }
        }
    }

    /// A log of `count` steps, each one decision (`decision(step)`), then a stop with the last
    /// answer, as the recorder writes it; the state it folded.
    static func answers(at path: String, count: Int, _ decision: (Int) -> DecisionMade) throws -> RunState {
        try LogWriter.withWriter(creating: path, runId: "run-answers") { writer in
            let recorder = RunRecorder(writer: writer, timeUs: 1_000)
            try recorder.record(.runStarted(SampleRun.supportStart()))
            var last = ""
            for step in 1...count {
                let made = decision(step)
                if case .valid(.answer(let text)) = made.outcome { last = text }
                try recorder.record(.decisionMade(made))
                try recorder.endStep()
            }
            try recorder.record(.runStopped(RunStopped(reason: .success, answer: last)))
            return recorder.state
        }
    }

    @Test("token totals past the largest Int (1,030 replies of 2^53 − 1 tokens) stop there: recorded, replayed and run, never a trap")
    func tokenTotalsSaturate() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("many.jsonl.gz")
            let usage = TokenUsage(input: JSONScanner.maximumMeasure, output: JSONScanner.maximumMeasure)
            let state = try Self.answers(at: path, count: 1_030) { _ in
                DecisionMade(raw: "", outcome: .valid(.answer("more")), usage: usage)
            }
            #expect(state.usage.inputTokens == Int.max && state.usage.totalTokens == Int.max)
            let replay = try await agentEval(["replay", path, "--step", "1029"])
            #expect(replay.status == 0, "\(replay.stdoutText)\(replay.stderr)")
            #expect(
                replay.stdoutText.contains("tokens 9223372036854775807 in + 9223372036854775807 out = 9223372036854775807"),
                "\(replay.stdoutText)")
            try "caseId: many\nlogs: many.jsonl.gz\nexpected: {maxTokens: 100}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", "case.yaml", "--no-catalog"], in: directory.url)
            #expect(run.status == 1, "over the budget, not a crash: \(run.stdoutText)\(run.stderr)")
        }
    }

    @Test("a log whose arguments nest as deep as a line may (500 levels) is read by replay, index, run and view, on every thread")
    func deepestArguments() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("deep.jsonl.gz")
            var arguments: JSONValue = ["leaf": true]
            for _ in 0..<500 { arguments = .array([arguments]) }
            try LogWriter.withWriter(creating: path, runId: "run-deep") { writer in
                let recorder = RunRecorder(writer: writer, timeUs: 1_000)
                try recorder.record(.runStarted(SampleRun.supportStart()))
                let call = ToolCall(id: "call-1", name: "lookup_order", arguments: ["order": arguments])
                try recorder.record(.decisionMade(DecisionMade(raw: "", outcome: .valid(.toolCalls([call])))))
                try recorder.record(.verdictGiven(VerdictGiven(callId: "call-1", tool: "lookup_order", verdict: .allow, rule: "r")))
                try recorder.record(
                    .toolIntended(ToolIntended(callId: "call-1", tool: "lookup_order", arguments: call.arguments, attempt: 1)))
                try recorder.record(
                    .toolCompleted(
                        ToolCompleted(callId: "call-1", tool: "lookup_order", attempt: 1, status: .ok, output: arguments, durationUs: 5)))
                try recorder.endStep()
                try recorder.record(.decisionMade(DecisionMade(raw: "", outcome: .valid(.answer("done")))))
                try recorder.endStep()
                try recorder.record(.runStopped(RunStopped(reason: .success, answer: "done")))
            }
            let catalog = directory.path("catalog.sqlite")
            for arguments in [
                ["replay", path], ["replay", path, "--step", "0", "--full"], ["index", path, "--catalog", catalog],
                ["view", path, "--out", directory.path("page.html")], ["log", "verify", path],
            ] {
                let result = try await agentEval(arguments)
                #expect(result.status == 0, "\(arguments): \(result.status) \(result.stderr)")
            }
            try "caseId: deep\nlogs: deep.jsonl.gz\nexpected: {stopReason: success, toolsCalled: [lookup_order]}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", "case.yaml", "--catalog", catalog], in: directory.url)
            #expect(run.status == 0, "\(run.stdoutText)\(run.stderr)")
        }
    }

    @Test("a cost no count of micro-dollars holds (1e300 dollars, twice) is shown by replay and view, never a trap")
    func costOutOfRange() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("costly.jsonl.gz")
            _ = try Self.answers(at: path, count: 2) { step in
                DecisionMade(raw: "", outcome: .valid(.answer("done \(step)")), costUSD: 1e300)
            }
            let replay = try await agentEval(["replay", path, "--step", "1"])
            #expect(replay.status == 0, "\(replay.stdoutText)\(replay.stderr)")
            #expect(replay.stdoutText.contains("cost $9223372036854.775807"), "\(replay.stdoutText)")
            let view = try await agentEval(["view", path, "--out", directory.path("page.html")])
            #expect(view.status == 0, "\(view.stdoutText)\(view.stderr)")
        }
    }

    @Test("diff: a log whose digests and events do not check out is not the same trajectory; a pipeline log is refused")
    func diff() async throws {
        let valid = Self.conformance.appendingPathComponent("valid-support-sample.jsonl.gz").path
        let edited = Self.conformance.appendingPathComponent("intent-names-another-tool.jsonl.gz").path
        let text = try await agentEval(["diff", valid, edited])
        #expect(text.status == 1, "\(text.stdoutText)")
        #expect(
            text.stdoutText.hasPrefix("B does not check out (replay shows where):\n  the state digest recorded at seq "),
            "\(text.stdoutText)")
        #expect(text.stdoutText.contains("the same steps, but not the same trajectory: a log does not check out"))
        let json = try JSONParser.parse(try await agentEval(["diff", valid, edited, "--json"]).stdout)
        #expect(json["same"] == false && json["problems"]?["left"] == [])
        #expect((json["problems"]?["right"]?.arrayValue?.count ?? 0) >= 2, "the digest, and the intents naming another tool")
        #expect(try await agentEval(["diff", valid, valid]).status == 0)

        let pipeline = Self.pipelineRun.appendingPathComponent("pipeline.jsonl.gz").path
        let refused = try await agentEval(["diff", pipeline, valid])
        #expect(refused.status == 2 && refused.stdout.isEmpty)
        #expect(refused.stderr.contains("is a pipeline log: diff compares two runs' trajectories"), "\(refused.stderr)")
    }

    @Test("audit: a log with no event, a torn log and pipeline logs alone fail; in a folder a pipeline log is skipped with a note")
    func audit() async throws {
        try await TemporaryDirectory.with { directory in
            let policy = directory.path("allow.yaml")
            try "policy: {default: allow}\n".write(toFile: policy, atomically: true, encoding: .utf8)
            let empty = try await Self.eventless(in: directory)
            let noEvent = try await agentEval(["audit", "--policy", policy, empty])
            #expect(noEvent.status == 2 && noEvent.stderr.contains("the log holds no event"), "\(noEvent.stdoutText)\(noEvent.stderr)")

            let torn = Self.conformance.appendingPathComponent("torn-tail.jsonl.gz").path
            let tornAudit = try await agentEval(["audit", "--policy", policy, torn])
            #expect(tornAudit.status == 2)
            #expect(
                tornAudit.stdoutText.contains("4 calls, all allowed — up to a tear: the log is torn after seq 22"),
                "\(tornAudit.stdoutText)")
            #expect(tornAudit.stderr.contains("agent-eval log repair"))

            let pipeline = Self.pipelineRun.appendingPathComponent("pipeline.jsonl.gz").path
            let alone = try await agentEval(["audit", "--policy", policy, pipeline])
            #expect(alone.status == 2 && alone.stderr.contains("is a pipeline log"), "\(alone.stderr)")
            let folder = try await agentEval(["audit", "--policy", policy, Self.pipelineRun.path])
            #expect(folder.status == 0, "\(folder.stderr)")
            #expect(folder.stdoutText.contains("classify_with_agent-1.jsonl.gz: 1 call, all allowed"), "\(folder.stdoutText)")
            #expect(folder.stderr.contains("triage-recovery/pipeline.jsonl.gz: a pipeline log"), "\(folder.stderr)")

            // --json: a log that could not be read is in the array with its error, not left out.
            let edited = Self.conformance.appendingPathComponent("edited-event.jsonl.gz").path
            let good = Self.conformance.appendingPathComponent("valid-support-sample.jsonl.gz").path
            let json = try await agentEval(["audit", "--policy", policy, "--json", edited, good])
            #expect(json.status == 2)
            let entries = try #require(try JSONParser.parse(json.stdout).arrayValue)
            #expect(entries.count == 2 && entries.first?["log"]?.stringValue?.hasSuffix("edited-event.jsonl.gz") == true)
            #expect(entries.first?["error"]?["code"] == "log.broken_chain")
            #expect(entries.last?["error"] == nil && (entries.last?["calls"]?.intValue ?? 0) > 0, "\(entries.last ?? .null)")
        }
    }

    @Test("index marks a log with no event damaged, and log cat fails on it, as verify does")
    func indexAndCat() async throws {
        try await TemporaryDirectory.with { directory in
            let empty = try await Self.eventless(in: directory)
            #expect(try await agentEval(["log", "verify", empty]).status == 1)
            let cat = try await agentEval(["log", "cat", empty])
            #expect(cat.status == 2 && cat.stdout.isEmpty && cat.stderr.contains("the log holds no event"), "\(cat.stderr)")
            let index = try await agentEval(["index", empty, "--catalog", directory.path("catalog.sqlite"), "--json"])
            #expect(index.status == 0, "\(index.stderr)")
            let row = try #require(
                index.stdoutText.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }.first { $0["path"] != nil })
            #expect(row["status"] == "damaged", "\(row)")
            #expect(row["problem"]?.stringValue?.contains("the log holds no event") == true, "\(row)")
        }
    }

    @Test("an output never replaces a log or a case; an empty in-order sequence is refused; approve checks it was given a log")
    func inputsStayInputs() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("refund.jsonl.gz")
            try FileManager.default.copyItem(
                atPath: ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path, toPath: log)
            let original = try Data(contentsOf: URL(fileURLWithPath: log))
            let file = directory.path("case.yaml")
            try "caseId: ok\nlogs: refund.jsonl.gz\nexpected: {toolsCalled: [lookup_order]}\n".write(
                toFile: file, atomically: true, encoding: .utf8)
            for output in [["--json-out", file], ["--html", log], ["--junit", log]] {
                let run = try await agentEval(["run", file, "--no-catalog"] + output)
                #expect(run.status == 2 && run.stderr.contains("an output never replaces it"), "\(output): \(run.stderr)")
            }
            let view = try await agentEval(["view", log, "--out", log])
            #expect(view.status == 2 && view.stderr.contains("is a gzip file (a log?)"), "\(view.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: log)) == original)
            #expect(try String(contentsOfFile: file, encoding: .utf8).hasPrefix("caseId: ok"))

            // An in-order sequence of no calls holds in every run; strict with none expects no call.
            try "caseId: empty\nlogs: refund.jsonl.gz\nexpected: {sequence: []}\n".write(
                toFile: directory.path("empty.yaml"), atomically: true, encoding: .utf8)
            let empty = try await agentEval(["run", directory.path("empty.yaml"), "--no-catalog"])
            #expect(empty.status == 2 && empty.stderr.contains("sequence (in_order) with no calls expects nothing"), "\(empty.stderr)")
            try "caseId: none\nlogs: refund.jsonl.gz\nexpected: {sequence: {mode: strict, calls: []}}\n".write(
                toFile: directory.path("none.yaml"), atomically: true, encoding: .utf8)
            #expect(try await agentEval(["run", directory.path("none.yaml"), "--no-catalog"]).status == 1, "the run called tools")

            // A case that could not be checked counts no attempt as passed.
            try "caseId: typo\nlogs: refund.jsonl.gz\nexpected: {toolsNotCalled: [delete_customr]}\n".write(
                toFile: directory.path("typo.yaml"), atomically: true, encoding: .utf8)
            let typo = try JSONParser.parse(try await agentEval(["run", directory.path("typo.yaml"), "--no-catalog", "--json"]).stdout)
            let entry = typo["cases"]?.arrayValue?.first
            #expect(entry?["outcome"] == "error" && entry?["attempts"]?["passed"] == 0 && entry?["pass_rate"] == 0.0, "\(entry ?? .null)")

            // approve: a file that is no log, or a damaged log, is an error, not "no call waits".
            try "hello".write(toFile: directory.path("text.jsonl.gz"), atomically: true, encoding: .utf8)
            #expect(try await agentEval(["approve", directory.path("text.jsonl.gz")]).status == 2)
            let edited = Self.conformance.appendingPathComponent("edited-event.jsonl.gz").path
            #expect(try await agentEval(["approve", edited]).status == 2)
            #expect(try await agentEval(["approve", log]).status == 0)
        }
    }

    @Test("a run that stopped for approval is answered by resuming it: approve says so, and exec refuses one call approved and denied")
    func approvalOfAStoppedRun() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = ExampleRuns.agentPath("support")
            let log = directory.path("waiting.jsonl.gz")
            let exec = try await agentEval(["exec", agent, "--input", "Refund order A-1042", "--log", log])
            #expect(exec.stdoutText.contains("waiting for approval: call-3"), "\(exec.stdoutText)\(exec.stderr)")
            let approve = try await agentEval(["approve", log, "call-3"])
            #expect(approve.status == 2)
            #expect(approve.stderr.contains("this run stopped for approval: answer it by resuming it"), "\(approve.stderr)")
            #expect(approve.stderr.contains("--resume \(log) --approve call-3"), "\(approve.stderr)")
            let both = try await agentEval(["exec", agent, "--resume", log, "--approve", "call-3", "--deny", "call-3"])
            #expect(both.status == 64 && both.stderr.contains("call call-3 is both approved and denied"), "\(both.stderr)")
        }
    }

    @Test("replay --step of a step after a digest that did not match warns and exits 1; a fork with another agent is refused")
    func stepsAndForks() async throws {
        try await TemporaryDirectory.with { directory in
            let edited = Self.conformance.appendingPathComponent("edited-with-chain-recomputed.jsonl.gz").path
            let step = try await agentEval(["replay", edited, "--step", "4", "--no-catalog"])
            #expect(step.status == 1, "\(step.stdoutText)\(step.stderr)")
            #expect(step.stderr.contains("warning: the recorded state digest of steps 2, 3 does not match"), "\(step.stderr)")
            let clean = try await agentEval([
                "replay", Self.conformance.appendingPathComponent("valid-support-sample.jsonl.gz").path, "--step", "3", "--no-catalog",
            ])
            #expect(clean.status == 0 && clean.stderr.isEmpty, "\(clean.stderr)")

            let support = ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path
            let fork = try await agentEval(
                [
                    "fork", support, "--agent", ExampleRuns.agentPath("research"), "--at", "1", "--out", directory.path("forks"),
                    "--no-catalog",
                ])
            #expect(fork.status == 2, "\(fork.stdoutText)\(fork.stderr)")
            #expect(
                fork.stderr.contains("the parent run is agent \"support-agent\"'s, and the agent file given is \"research-agent\"'s"),
                "\(fork.stderr)")
            #expect((try? FileManager.default.contentsOfDirectory(atPath: directory.path("forks")))?.isEmpty ?? true, "nothing is written")
        }
    }

    @Test("rerun refuses a log that does not check out, as run and fork do: no 'identical', no clean new log from it")
    func rerun() async throws {
        let edited = Self.conformance.appendingPathComponent("intent-names-another-tool.jsonl.gz").path
        let agent = ExampleRuns.agentPath("support")
        try await TemporaryDirectory.with { directory in
            for mode in ["strict", "prefix"] {
                let result = try await agentEval(
                    ["rerun", edited, "--agent", agent, "--mode", mode, "--out", directory.path(mode)], in: directory.url)
                #expect(result.status == 2, "\(mode): \(result.stdoutText)\(result.stderr)")
                #expect(result.stderr.contains("cannot re-run") && result.stderr.contains("does not match"), "\(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: directory.path(mode)), "no new log written")
            }
        }
    }

    @Test("a FIFO or a link to /dev/zero where a log goes is refused at once, never read (it would block or never end)")
    func notARegularFile() async throws {
        try await TemporaryDirectory.with { directory in
            let fifo = directory.path("fifo.jsonl.gz")
            let zero = directory.path("zero.jsonl.gz")
            #expect(mkfifo(fifo, 0o644) == 0)
            try FileManager.default.createSymbolicLink(atPath: zero, withDestinationPath: "/dev/zero")
            for log in [fifo, zero] {
                for command in [
                    ["log", "verify", log], ["replay", log], ["log", "cat", log], ["view", log, "--out", directory.path("p.html")],
                ] {
                    let result = try await agentEval(command, in: directory.url)
                    #expect(result.status == 2, "\(command): \(result.stderr)")
                    #expect(result.stderr.contains("not a regular file"), "\(command): \(result.stderr)")
                }
            }
            try "caseId: pipes\nlogs: [fifo.jsonl.gz, zero.jsonl.gz]\nexpected: {stopReason: success}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", "case.yaml", "--no-catalog"], in: directory.url)
            #expect(run.status == 2 && run.stdoutText.contains("not a regular file"), "\(run.stdoutText)")
        }
    }
}
