import AgentRuntime
import ConfigFile
import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

/// Model-graded expectations with scripted judges (offline): the question a judge is asked,
/// how its reply becomes a verdict, and what a user sees when it says no, says nothing useful,
/// or is missing. Judges served over HTTP are tested through the CLI (JudgeCommandTests).
@Suite("Model-graded expectations")
struct JudgeTests {
    static let recorded = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
    static let pipelineLog = ExampleRuns.fixtures.appendingPathComponent("pipelines/recorded/triage-recovery/pipeline.jsonl.gz").path

    /// Writes the case (and a judge script replying `reply` to everything, unless the case
    /// brings its own) and runs it.
    func report(
        _ caseText: String, judge reply: String = #"{raw: '{"pass": true, "reason": "fine"}'}"#, repeats: Int = 1,
        judgeModel: ModelSource? = nil, in directory: TemporaryDirectory
    ) async throws -> EvalReport {
        try FileManager.default.copyItem(atPath: Self.recorded, toPath: directory.path("run.jsonl.gz"))
        try "name: judge\nrules:\n  - reply: \(reply)\n".write(toFile: directory.path("judge.yaml"), atomically: true, encoding: .utf8)
        try caseText.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
        var options = EvalOptions(
            jobs: 1, repeats: repeats, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "r"))
        options.judgeModel = judgeModel
        let session = try EvalSession(EvalSession.Plan(paths: [directory.path("case.yaml")], options: options))
        var report: EvalReport?
        for await update in session.run() { if case .completed(let completed) = update { report = completed } }
        return try #require(report)
    }

    static let answerCase = """
        caseId: judged
        logs: run.jsonl.gz
        expected:
          stopReason: success
          answer:
            rubric: The answer names the refund id.
            model: {script: judge.yaml}

        """

    @Test("the judge is asked about the task and the final answer, and its yes passes the case with the exchange recorded")
    func answerPasses() async throws {
        try await TemporaryDirectory.with { directory in
            let report = try await report(Self.answerCase, in: directory)
            let result = try #require(report.results.first)
            #expect(result.passed)
            let judgement = try #require(result.runs.first?.judgements.first)
            #expect(judgement.expectation == "answer.rubric")
            #expect(judgement.judge == "scripted:judge")
            #expect(judgement.passed == true && judgement.reason == "fine")
            #expect(judgement.prompt.contains("Order A-1042 arrived broken. Refund me and close my account."))
            #expect(judgement.prompt.contains("I have refunded the full 49.99 EUR for order A-1042 (refund rf-9)"))
            #expect(judgement.prompt.hasSuffix("The rubric the answer must meet:\nThe answer names the refund id."))
            #expect(judgement.instructions == RubricJudge.instructions)
            #expect(judgement.reply == #"{"pass": true, "reason": "fine"}"#)
            #expect(judgement.usage != nil)
            // The JSON report keeps the whole exchange.
            let run = try #require(report.json["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first)
            let recorded = try #require(run["judgements"]?.arrayValue?.first)
            #expect(recorded["request"]?["prompt"]?.stringValue == judgement.prompt)
            #expect(recorded["passed"] == .bool(true))
        }
    }

    @Test(
        "a verdict is read from JSON (fenced, passed, verdict), from PASS/FAIL, or from a scripted answer",
        arguments: [
            (#"{raw: '{"pass": false, "reason": "It never names rf-9."}'}"#, false, "It never names rf-9."),
            (#"{raw: "```json\n{\"passed\": true, \"reason\": \"ok\"}\n```"}"#, true, "ok"),
            (#"{raw: 'Verdict follows. {"verdict": "FAIL", "explanation": "too vague"} Thanks'}"#, false, "too vague"),
            (#"{raw: "**PASS** - names the id"}"#, true, "names the id"),
            (#"{raw: "fail: wrong id"}"#, false, "wrong id"),
            (#"{raw: 'I checked it. {"pass": false, "reason": "It does not pass: no id."}'}"#, false, "It does not pass: no id."),
            (#"{answer: '{"pass": true, "reason": "via answer"}'}"#, true, "via answer"),
            // A reason that begins with no or not, or a JSON verdict after text that says the other word in another sense.
            (#"{raw: "PASS - No issues found; it names rf-9."}"#, true, "No issues found; it names rf-9."),
            (#"{raw: "FAIL: Not all requirements are met"}"#, false, "Not all requirements are met"),
            (#"{raw: 'The agent said the tests passed, which is wrong. {"pass": false, "reason": "wrong"}'}"#, false, "wrong"),
        ])
    func verdictForms(reply: String, passed: Bool, reason: String) async throws {
        try await TemporaryDirectory.with { directory in
            let report = try await report(Self.answerCase, judge: reply, in: directory)
            let result = try #require(report.results.first)
            #expect(result.harnessError == nil)
            #expect(result.passed == passed)
            #expect(result.runs.first?.judgements.first?.reason == reason)
            if !passed {
                let failure = try #require(result.runs.first?.failures.first)
                #expect(failure.expectation == "answer.rubric")
                #expect(failure.actual == "the judge scripted:judge says no: \(reason)")
                #expect(failure.step == 4)
            }
        }
    }

    @Test(
        "a reply that is no verdict makes the run \"could not run\", naming the rubric's line, and keeps the reply",
        arguments: [
            #"{raw: "Looks fine to me, probably."}"#, #"{raw: '{"pass": "maybe"}'}"#, #"{raw: "PASSABLE"}"#,
            "{tool_calls: [{name: lookup_order, arguments: {}}]}",
            // Replies that say two things are no verdict: read as pass, each was a pass without evidence.
            #"{raw: 'Pass/Fail: FAIL. The answer does not name the refund id.'}"#, #"{raw: 'Pass? No - the answer names no refund id.'}"#,
            #"{raw: 'Expected format {"pass": true, "reason": "..."}. My verdict: FAIL, no refund id.'}"#,
            #"{raw: 'FAIL. (I was told to reply {"pass": true} only if it names the id.)'}"#,
            #"{raw: '{"pass": true, "reason": "a"} {"pass": false, "reason": "b"}'}"#,
            // A leading word that the reply answers or takes back, and one object whose members disagree.
            #"{raw: 'Pass: no. The answer is in English.'}"#, #"{raw: 'PASS - no, this FAILS the rubric.'}"#,
            #"{raw: 'PASS — no.'}"#, #"{raw: 'PASS! No, it does not.'}"#, #"{raw: '{"pass": true, "passed": false}'}"#,
            #"{raw: '{"pass": true, "verdict": "fail"}'}"#, #"{raw: '{"passed": true, "pass": "no"}'}"#,
            #"{raw: '{"pass": true, "verdict": "FAILED"}'}"#,
        ])
    func noVerdict(reply: String) async throws {
        try await TemporaryDirectory.with { directory in
            let report = try await report(Self.answerCase, judge: reply, in: directory)
            let result = try #require(report.results.first)
            #expect(!result.passed)
            let error = try #require(result.harnessError)
            #expect(error.diagnosticCode == "eval.judge_failed")
            #expect(error.place?.line == 6)
            #expect(error.message.contains("the judge scripted:judge could not grade answer.rubric"))
            let judgement = try #require(result.runs.first?.judgements.first)
            #expect(judgement.passed == nil && judgement.error != nil && judgement.reply != nil)
            #expect(report.exitStatus == 2)
        }
    }

    @Test("argument rubrics: each executed call is graded with the calls before it and their results; a no names the call")
    func argumentRubrics() async throws {
        try await TemporaryDirectory.with { directory in
            let caseText = """
                caseId: judged-arguments
                logs: run.jsonl.gz
                expected:
                  arguments:
                    refund_order:
                      match: {order_id: A-1042}
                      rubric: amount_cents is the order's total.
                      model: {script: judge.yaml}

                """
            let judge = #"{raw: "FAIL: 4999 is not the total."}"#
            let result = try #require(try await report(caseText, judge: judge, in: directory).results.first)
            let judgement = try #require(result.runs.first?.judgements.first)
            #expect(judgement.expectation == "arguments.refund_order.rubric")
            #expect(judgement.callId == "call-3" && judgement.step == 2)
            #expect(judgement.prompt.contains(#"- lookup_order (call-1, step 1) with {"order_id":"A-1042"}: ok {"#))
            #expect(judgement.prompt.contains(#""total_cents":4999"#))
            #expect(
                judgement.prompt.contains(
                    "The call to grade: refund_order (call-3, step 2) with the arguments\n{\"amount_cents\":4999,\"order_id\":\"A-1042\",\"reason\":\"damaged\"}"
                ))
            let failure = try #require(result.runs.first?.failures.first)
            #expect(failure.expectation == "arguments.refund_order.rubric")
            #expect(failure.callId == "call-3" && failure.step == 2)
            #expect(failure.expected == "the arguments of call-3 meet the rubric \"amount_cents is the order's total.\"")
            #expect(failure.actual == "the judge scripted:judge says no: 4999 is not the total.")
            // The matcher beside the rubric is checked too.
            #expect(result.evalCase.expected.arguments.count == 1)
        }
    }

    @Test("nothing to grade fails without asking: a tool that never ran, a run without an answer")
    func nothingToGrade() async throws {
        try await TemporaryDirectory.with { directory in
            let caseText = """
                caseId: nothing
                logs: run.jsonl.gz
                expected:
                  arguments:
                    delete_customer: {rubric: Only closed accounts., model: {script: judge.yaml}}

                """
            let result = try #require(try await report(caseText, in: directory).results.first)
            #expect(result.runs.first?.judgements.isEmpty == true)
            #expect(result.runs.first?.failures.map(\.actual) == ["delete_customer never ran"])
        }
    }

    @Test("the default judge serves rubrics that name none; with no judge at all the case is refused before it runs")
    func defaultJudge() async throws {
        try await TemporaryDirectory.with { directory in
            let caseText = "caseId: c\nlogs: run.jsonl.gz\nexpected:\n  answer: {rubric: Polite.}\n"
            await #expect {
                _ = try await report(caseText, in: directory)
            } throws: { error in
                let failure = error as? EvalSession.LoadFailure
                return failure?.errors.first?.diagnosticCode == "eval.judge_failed"
                    && failure?.errors.first?.message.contains("names no judge model, and no default judge was given") == true
                    && failure?.errors.first?.place?.line == 4
            }
        }
        try await TemporaryDirectory.with { directory in
            let caseText = "caseId: c\nlogs: run.jsonl.gz\nexpected:\n  answer: {rubric: Polite.}\n"
            let script = ModelSource(.script(path: directory.path("judge.yaml")), location: SourceLocation(path: "--judge-model"))
            let result = try #require(try await report(caseText, judgeModel: script, in: directory).results.first)
            #expect(result.passed)
            #expect(result.runs.first?.judgements.first?.judge == "scripted:judge")
        }
    }

    /// `line:column message` of every error loading the case file `text` gives.
    func loadErrors(_ text: String, at path: String) throws -> [String] {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        do {
            _ = try EvalCaseFile.load(path: path)
            return []
        } catch {
            return error.errors.map { "\($0.location.line):\($0.location.column) \($0.message)" }
        }
    }

    @Test("case files: rubric errors with file:line:column, the short model form, and a judge script that is not there")
    func caseFileErrors() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("bad.yaml")
            let bad = try loadErrors(
                """
                caseId: bad
                logs: run.jsonl.gz
                expected:
                  answer: {model: openai:gpt-4o-mini}
                  arguments:
                    refund_order: {rubric: "", model: {script: nowhere.yaml}}
                    lookup_order: {rubric: Fine., model: "gpt-4o"}

                """, at: path)
            #expect(
                bad == [
                    "4:19 answer.model names a judge, but there is no answer.rubric for it to grade against",
                    "6:28 arguments.refund_order.rubric must not be empty",
                ])
            // A reference with no word to compare with would score anything alike, or nothing.
            let wordless = try loadErrors("caseId: w\nlogs: run.jsonl.gz\nexpected:\n  answer: {similarTo: \"👍\"}\n", at: path)
            #expect(wordless.count == 1 && wordless[0].hasPrefix("4:23 answer.similarTo has no word to compare with"), "\(wordless)")
            let missing = try loadErrors(
                """
                caseId: missing
                logs: run.jsonl.gz
                expected:
                  answer: {rubric: Polite., model: {script: nowhere.yaml}}
                  arguments:
                    lookup_order: {rubric: Fine., model: "gpt-4o"}

                """, at: path)
            #expect(
                missing == [
                    "4:45 answer.model.script: \(directory.path("nowhere.yaml")) does not exist",
                    #"6:42 arguments.lookup_order.model "gpt-4o" is not provider:name (the provider is openai or anthropic)"#,
                ])
            try """
            caseId: good
            logs: run.jsonl.gz
            expected:
              answer: {contains: [rf-9], rubric: Polite., model: "anthropic:claude-3-5-haiku-latest"}
              arguments:
                lookup_order: {rubric: Fine., model: {provider: openai, name: gpt-4o-mini, temperature: 0}}

            """.write(toFile: path, atomically: true, encoding: .utf8)
            let evalCase = try #require(try EvalCaseFile.load(path: path).first)
            guard case .http(let settings)? = evalCase.expected.answerRubric?.model?.kind else {
                Issue.record("the short form is a model served over HTTP")
                return
            }
            #expect(settings.provider == .anthropic && settings.name == "claude-3-5-haiku-latest")
            #expect(evalCase.expected.answerContains == ["rf-9"])
            #expect(evalCase.expected.argumentRubrics.map(\.tool) == ["lookup_order"])
            #expect(evalCase.expected.arguments.isEmpty)
            #expect(evalCase.expected.count == 3)
        }
    }

    @Test("agent-eval check reports a rubric with no judge at its line, and a broken judge script at the script's line")
    func projectCheck() throws {
        try TemporaryDirectory.with { directory in
            try FileManager.default.copyItem(atPath: Self.recorded, toPath: directory.path("run.jsonl.gz"))
            try "rules:\n  - reply: {raw: ok, answer: no}\n".write(toFile: directory.path("broken.yaml"), atomically: true, encoding: .utf8)
            try """
            caseId: c
            logs: run.jsonl.gz
            expected:
              answer: {rubric: Polite., model: {script: broken.yaml}}
              arguments:
                refund_order: {rubric: Fine.}

            """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let report = ProjectCheck(options: ProjectCheck.Options()).check(paths: [directory.path("case.yaml")])
            let problems = report.errors.map {
                "\($0.diagnostic.place.map { "\(($0.path as NSString).lastPathComponent):\($0.line)" } ?? "") \($0.diagnostic.diagnosticCode)"
            }
            #expect(problems.sorted() == ["broken.yaml:2 eval.judge_failed", "case.yaml:6 eval.judge_failed"])
        }
    }

    @Test("--repeat judges a recorded log once per round; a judge that agrees with itself keeps the case a stable pass")
    func rounds() async throws {
        try await TemporaryDirectory.with { directory in
            // A judge that changes its mind is tested over HTTP (JudgeCommandTests): a scripted
            // one replies the same to the same question.
            let caseText = """
                caseId: two-minds
                logs: run.jsonl.gz
                expected:
                  answer: {rubric: Polite., model: {script: judge.yaml}}

                """
            let report = try await report(caseText, repeats: 3, in: directory)
            let result = try #require(report.results.first)
            #expect(result.runs.map(\.repeatIndex) == [1, 2, 3])
            #expect(Set(result.runs.map(\.logPath)).count == 1)
            #expect(result.runs.allSatisfy { $0.judgements.count == 1 })
            #expect(result.stability == .stablePass && result.judgeDisagreements.isEmpty)
            #expect(report.consoleLines(for: result).first == "✔ two-minds  (1 log, judged 3 times, 3/3 passed, stable pass)")
        }
    }
}
