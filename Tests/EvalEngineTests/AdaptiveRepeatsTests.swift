import AgentRuntime
import ConfigFile
import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

/// `--repeat auto`: attempts stop once no further one can change the verdict, so the verdict is
/// always the fixed-N one — checked over many seeded trials of scripted pass probabilities —
/// and the scripted flaky model it is measured with draws as documented.
@Suite("Adaptive repeats")
struct AdaptiveRepeatsTests {
    static let maxRepeats = 20

    /// A live case's result from pass/fail outcomes.
    static func result(_ outcomes: [Bool], minPassRate: Double = 1) -> CaseResult {
        GateTests.live("c", outcomes.map { $0 ? GateTests.Attempt.pass : .fail }, minPassRate: minPassRate)
    }

    /// The verdict the gate reads: passes the gate, regressed.
    static func verdict(_ result: CaseResult, baseline: Baseline?, policy: RegressionPolicy) -> (Bool, Bool) {
        let regressed = baseline.map { BaselineComparison.compare(result, with: $0, policy: policy).status == .regressed } ?? false
        return (result.passed, regressed)
    }

    /// One trial: `outcomes` (maxRepeats of them) run fixed and adaptively; both verdicts and
    /// the attempts the adaptive run made.
    static func trial(_ outcomes: [Bool], baseline: Baseline?, adaptive: AdaptiveRepeats, minPassRate: Double = 1) -> (
        fixed: (Bool, Bool), adaptive: (Bool, Bool), attempts: Int
    ) {
        var made = 1
        while !adaptive.isDecided(result(Array(outcomes.prefix(made)), minPassRate: minPassRate)) { made += 1 }
        let stopped = result(Array(outcomes.prefix(made)), minPassRate: minPassRate)
        let fixed = result(outcomes, minPassRate: minPassRate)
        return (
            verdict(fixed, baseline: baseline, policy: adaptive.policy), verdict(stopped, baseline: baseline, policy: adaptive.policy), made
        )
    }

    static func bernoulli(_ p: Double, _ count: Int, _ generator: inout SeededGenerator) -> [Bool] {
        (0..<count).map { _ in Double.random(in: 0..<1, using: &generator) < p }
    }

    @Test(
        "over seeded trials the adaptive verdict is the fixed-N verdict every time, false alarms stay under alpha, and attempts are saved",
        arguments: [FailOn.regression, .any])
    func sameVerdictFewerAttempts(failOn: FailOn) {
        var generator = SeededGenerator(seed: 2026)
        var saved = 0
        var total = 0
        var falseAlarms = 0
        var nullTrials = 0
        var misses = 0
        var dropTrials = 0
        // (baseline pass probability, head pass probability, minPassRate)
        let settings: [(Double, Double, Double)] = [
            (1.0, 1.0, 1), (0.9, 0.9, 0.8), (0.7, 0.7, 0.6), (1.0, 0.4, 1), (0.9, 0.3, 0.8), (0.95, 0.0, 1), (0.5, 0.5, 0.4),
        ]
        for (base, head, minPassRate) in settings {
            for _ in 0..<300 {
                let baselineOutcomes = Self.bernoulli(base, Self.maxRepeats, &generator)
                let baseline = Baseline(Self.result(baselineOutcomes, minPassRate: minPassRate))
                let adaptive = AdaptiveRepeats(
                    maxRepeats: Self.maxRepeats, policy: RegressionPolicy(), failOn: failOn, baselines: ["c": baseline])
                let outcomes = Self.bernoulli(head, Self.maxRepeats, &generator)
                let run = Self.trial(outcomes, baseline: baseline, adaptive: adaptive, minPassRate: minPassRate)
                // What the gate reads under --fail-on: regressions only, or the outcome too.
                #expect(run.fixed.1 == run.adaptive.1, "p \(base) → \(head): \(outcomes)")
                if failOn != .regression { #expect(run.fixed.0 == run.adaptive.0, "p \(base) → \(head): \(outcomes)") }
                #expect(run.attempts <= Self.maxRepeats)
                saved += Self.maxRepeats - run.attempts
                total += Self.maxRepeats
                if base == head {
                    nullTrials += 1
                    if run.adaptive.1 { falseAlarms += 1 }
                } else if base - head >= 0.5 {
                    dropTrials += 1
                    if !run.adaptive.1 { misses += 1 }
                }
            }
        }
        // Fisher's test is conservative: false alarms at most alpha (5%) of the no-change trials.
        #expect(Double(falseAlarms) / Double(nullTrials) <= 0.05, "false alarms \(falseAlarms) of \(nullTrials)")
        // A fall of 50 points or more over 20 attempts each is found nearly always (the fixed-N test's power).
        #expect(Double(misses) / Double(dropTrials) <= 0.05, "misses \(misses) of \(dropTrials)")
        #expect(Double(saved) / Double(total) >= 0.2, "saved \(saved) of \(total) attempts")
    }

    @Test("without a baseline only the gate outcome is decided: the first failure of a case that needs every attempt ends it")
    func noBaseline() {
        let adaptive = AdaptiveRepeats(maxRepeats: 20, failOn: .any)
        #expect(adaptive.isDecided(Self.result([true, true, false])))
        #expect(!adaptive.isDecided(Self.result([true, true, true])))
        #expect(adaptive.isDecided(Self.result([Bool](repeating: true, count: 20))))
        // With minPassRate 0.5, 4 failures of 5 leave it open; 11 failures decide it.
        #expect(!adaptive.isDecided(Self.result([true, false, false, false, false], minPassRate: 0.5)))
        #expect(adaptive.isDecided(Self.result([Bool](repeating: false, count: 11), minPassRate: 0.5)))
        // A harness error ends the case at once.
        #expect(adaptive.isDecided(GateTests.live("c", [.pass, .error])))
    }

    @Test("a scripted rule's chance draws the same for one run and anew for each run, at the rate asked")
    func chanceDraws() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("m.yaml")
            try "rules:\n  - when: {chance: 0.3}\n    reply: {answer: yes}\n  - reply: {answer: no}\n".write(
                toFile: path, atomically: true, encoding: .utf8)
            let script = try ScriptedModel.load(path: path)
            var yes = 0
            let runs = 4000
            for index in 0..<runs {
                var request = ModelRequest(
                    instructions: "", packet: ContextBuilt(goal: "g", stateSummary: "", tokenEstimate: 1), tools: [], observations: [],
                    feedback: nil, decisionIndex: 0, step: 1)
                request.runId = "run-\(index)"
                let first = try await script.reply(to: request).raw
                #expect(first == (try await script.reply(to: request).raw), "one run draws the same every time")
                if first.contains("yes") { yes += 1 }
            }
            // Binomial(4000, 0.3): mean 1200, sd 29; 5 sd either side.
            #expect(abs(yes - 1200) < 145, "\(yes) of \(runs)")
            try "rules:\n  - when: {chance: 1.5}\n    reply: {answer: yes}\n".write(toFile: path, atomically: true, encoding: .utf8)
            #expect(throws: ConfigError.self) { try ScriptedModel.load(path: path) }
        }
    }

    @Test("the flaky fixture agent run adaptively makes a prefix of the fixed run's attempts and reaches its verdict")
    func endToEnd() async throws {
        try await TemporaryDirectory.with { directory in
            try ExampleRuns.flakyCase().write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            // Run ids r-1, r-2, … in order (one job): the same attempts draw the same in both runs.
            func environment() -> RuntimeEnvironment { RuntimeEnvironment.deterministic(runId: "").sequentialRunIds(prefix: "r") }
            func run(adaptive: Bool, out: String) async throws -> EvalReport {
                var options = EvalOptions(
                    jobs: 1, repeats: Self.maxRepeats, outputDirectory: directory.path(out), environment: environment())
                if adaptive { options.adaptive = AdaptiveRepeats(maxRepeats: Self.maxRepeats) }
                let session = try EvalSession(EvalSession.Plan(paths: [directory.path("case.yaml")], options: options))
                return await session.runToReport { _ in }
            }
            let fixed = try await run(adaptive: false, out: "fixed")
            let adaptive = try await run(adaptive: true, out: "adaptive")
            let all = try #require(fixed.results.first)
            let stopped = try #require(adaptive.results.first)
            #expect(all.runs.count == Self.maxRepeats)
            #expect(all.counts.passes > 0 && all.counts.passes < Self.maxRepeats, "the fixture is flaky: \(all.counts.fraction)")
            #expect(stopped.runs.count < Self.maxRepeats)
            #expect(stopped.runs.map(\.passed) == Array(all.runs.map(\.passed).prefix(stopped.runs.count)))
            #expect(stopped.passed == all.passed)
            let savings = try #require(adaptive.adaptive)
            #expect(savings.attemptsRun == stopped.runs.count)
            #expect(savings.attemptsSaved == Self.maxRepeats - stopped.runs.count)
            #expect(adaptive.json["adaptive"]?["attempts_saved"]?.intValue == savings.attemptsSaved)
        }
    }
}
