import ConfigFile
import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

/// `agent-eval judge calibrate`: Cohen's κ against known values, and scripted judges calibrated
/// against labelled logs offline — one that agrees with people, one that flips a coin.
@Suite("Judge calibration")
struct JudgeCalibrationTests {
    @Test("Cohen's κ and agreement on known tables; undefined when both raters give one verdict to everything")
    func kappa() {
        // (judge pass & human pass, judge pass & human fail, judge fail & human pass, both fail) → κ
        let known: [((Int, Int, Int, Int), Double)] = [
            ((20, 5, 10, 15), 0.4), ((45, 15, 25, 15), 0.130_434_782_608_695_5), ((25, 35, 5, 35), 0.259_259_259_259_259_2),
            ((10, 0, 0, 10), 1), ((0, 10, 10, 0), -1),
        ]
        for ((a, b, c, d), expected) in known {
            let matrix = AgreementMatrix(bothPass: a, judgePassHumanFail: b, judgeFailHumanPass: c, bothFail: d)
            #expect(abs((matrix.kappa ?? .nan) - expected) < 1e-12, "\(a) \(b) \(c) \(d)")
        }
        #expect(AgreementMatrix(bothPass: 20, judgePassHumanFail: 5, judgeFailHumanPass: 10, bothFail: 15).agreement == 0.7)
        #expect(AgreementMatrix(bothPass: 7).kappa == nil)
        #expect(AgreementMatrix().kappa == nil)
    }

    /// A case judged by `judge` (a script), and a labels file over the two sample logs.
    func project(in directory: TemporaryDirectory, judge: String, minKappa: Double? = nil, labels: [(String, String)]) throws -> String {
        try judge.write(toFile: directory.path("judge.yaml"), atomically: true, encoding: .utf8)
        try """
        caseId: judged
        logs: x.jsonl.gz
        \(minKappa.map { "judgeMinKappa: \($0)\n" } ?? "")expected:
          answer:
            rubric: The answer names the refund id.
            model: {script: ../judge.yaml}
        """.write(toFile: directory.path("cases/judged.yaml"), atomically: true, encoding: .utf8)
        let text =
            "cases: [cases]\nlabels:\n"
            + labels.map { log, verdict in
                "  - case: judged\n    log: \(ExampleRuns.fixtures.appendingPathComponent(log).path)\n    verdict: \(verdict)\n"
            }.joined()
        try text.write(toFile: directory.path("labels.yaml"), atomically: true, encoding: .utf8)
        return directory.path("labels.yaml")
    }

    static let namesRefund = """
        rules:
          - when: {goal_matches: "final answer:\\n[^\\n]*rf-[0-9]+"}
            reply: {raw: '{"pass": true, "reason": "names it"}'}
          - reply: {raw: '{"pass": false, "reason": "does not"}'}
        """
    static let coin = """
        rules:
          - when: {chance: 0.5}
            reply: {raw: '{"pass": true, "reason": "heads"}'}
          - reply: {raw: '{"pass": false, "reason": "tails"}'}
        """

    @Test("a judge that reads the answer agrees with people but where a person disagrees; a coin agrees with nobody, not even itself")
    func calibrate() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
            // support-refund's answer names rf-9; support-sample's does not (the third label's person thinks it is fine).
            let labelled = [
                ("runs/support-refund.jsonl.gz", "pass"), ("samples/support-sample.jsonl.gz", "fail"),
                ("samples/support-sample.jsonl.gz", "pass"),
            ]
            let labels = try JudgeLabels.load(path: try project(in: directory, judge: Self.namesRefund, minKappa: 0.3, labels: labelled))
            let options = EvalOptions(jobs: 1, outputDirectory: directory.path("runs"))
            let good = try await JudgeCalibration.run(labels, rounds: 3, options: options)
            #expect(good.overall.matrix == AgreementMatrix(bothPass: 1, judgePassHumanFail: 0, judgeFailHumanPass: 1, bothFail: 1))
            #expect(abs((good.overall.matrix.kappa ?? 0) - 0.4) < 1e-12)
            #expect(good.overall.selfConsistency == 1)
            #expect(good.judges.map(\.name) == ["scripted:judge"])
            #expect(good.cases.first?.minKappa == 0.3 && good.cases.first?.meetsMinimum == true)
            #expect(good.outcomes.map(\.rounds) == [[true, true, true], [false, false, false], [false, false, false]])

            // A minimum that cannot be measured — every label and verdict one way, κ undefined —
            // is not met: it never passes unchecked.
            let oneSided = try JudgeLabels.load(
                path: try project(in: directory, judge: Self.namesRefund, minKappa: 0.3, labels: [("runs/support-refund.jsonl.gz", "pass")])
            )
            let undefined = try await JudgeCalibration.run(oneSided, rounds: 1, options: options)
            #expect(undefined.cases.first?.matrix.kappa == nil && undefined.cases.first?.meetsMinimum == false)

            // The coin: each round draws anew (a scripted rule's chance, per run and round).
            let many = (0..<6).map { index in (index % 2 == 0 ? "runs/support-refund.jsonl.gz" : "samples/support-sample.jsonl.gz", "pass")
            }
            let coinLabels = try JudgeLabels.load(path: try project(in: directory, judge: Self.coin, minKappa: 0.5, labels: many))
            let coin = try await JudgeCalibration.run(coinLabels, rounds: 5, options: options)
            #expect(coin.overall.judged == 6)
            #expect(coin.overall.selfConsistency < 1, "\(coin.outcomes.map(\.rounds))")
            #expect(coin.cases.first?.meetsMinimum == false)
            // Drift: the coin's κ against the good judge's calibration.
            let drift = coin.drift(from: good.json, maxDrop: 0.1)
            // Every person said pass, so the coin's κ is 0 whatever it drew: 0.4 → 0 is drift.
            #expect(coin.cases.first?.matrix.kappa == 0)
            #expect(drift.contains { $0.name == "judged" && abs($0.before - 0.4) < 1e-9 && $0.now == 0 }, "\(drift)")
            #expect(coin.drift(from: good.json, maxDrop: 0.5).isEmpty)
        }
    }

    @Test("a case that asks for a minimum κ and has no label is listed as not met, never left out of the check")
    func unlabelledCaseIsNotMet() {
        let calibration = JudgeCalibration(rounds: 1, outcomes: [], minKappa: ["refund-judged": 0.6, "answer-judged": 0.4])
        #expect(calibration.cases.map(\.name) == ["answer-judged", "refund-judged"])
        #expect(calibration.cases.allSatisfy { $0.judged == 0 && !$0.meetsMinimum })
        #expect(calibration.json["cases"]?.arrayValue?.allSatisfy { $0["meets_min_kappa"] == false } == true)
    }

    @Test("a labels file's problems are reported at their lines")
    func badLabels() throws {
        try TemporaryDirectory.with { directory in
            try "labels:\n  - case: a\n    log: x.gz\n    verdict: maybe\n  - log: y.gz\n    verdict: pass\n".write(
                toFile: directory.path("l.yaml"), atomically: true, encoding: .utf8)
            do throws(ConfigErrors) {
                _ = try JudgeLabels.load(path: directory.path("l.yaml"))
                Issue.record("a bad labels file was read")
            } catch {
                let messages = error.errors.map(\.description)
                #expect(messages.contains { $0.contains("cases") }, "\(messages)")
                #expect(messages.contains { $0.contains("l.yaml:4:14") && $0.contains("pass or fail, found \"maybe\"") }, "\(messages)")
                #expect(messages.contains { $0.contains("l.yaml:5:5") && $0.contains("case") }, "\(messages)")
            }
        }
    }
}
