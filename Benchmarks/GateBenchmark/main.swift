// The gate benchmark: how many attempts and model calls `run --repeat auto --max-repeats N`
// saves against `--repeat N`, and that it reaches the same verdicts, on real runs: the bundled
// live cases (EvalCases/: the support and research agents, the two pipelines; scripted models,
// so they pass every time) and the flaky fixture agent (Fixtures/agents/flaky) at several pass
// probabilities, some of which fall between the baseline and the head run.
//
//   swift run -c release gate-benchmark [--max-repeats 20] [--trials 5] [--dir PATH]
//
// Each trial: a baseline from N fixed attempts of every case (the flaky cases at their baseline
// probability), then the head run twice — N fixed attempts and adaptive — with the flaky cases at
// their head probability, under --fail-on regression and --fail-on any. Prints per setting the
// attempts and model calls (decisions) of both, the share saved, and verdict disagreements
// (there must be none); medians over the trials. See docs/performance.md.
import AgentRuntime
import EvalEngine
import Foundation
import TestSupport
import TraceCore

struct Settings {
    var maxRepeats = 20
    var trials = 5
    var directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-gate-bench").path
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        let value = arguments.next() ?? ""
        switch argument {
        case "--max-repeats": settings.maxRepeats = max(2, Int(value) ?? settings.maxRepeats)
        case "--trials": settings.trials = max(1, Int(value) ?? settings.trials)
        case "--dir": settings.directory = value
        default:
            FileHandle.standardError.write(Data("usage: gate-benchmark [--max-repeats N] [--trials N] [--dir PATH]\n".utf8))
            exit(argument == "--help" ? 0 : 64)
        }
    }
    return settings
}

/// A flaky case: the fixture agent answering well with probability `base` when the baseline is
/// taken and `head` in the run gated, and the share of attempts it must pass.
struct FlakyCase {
    var id: String
    var base: Double
    var head: Double
    var minPassRate: Double
}

let flakyCases = [
    FlakyCase(id: "steady-90", base: 0.9, head: 0.9, minPassRate: 0.8),
    FlakyCase(id: "steady-70", base: 0.7, head: 0.7, minPassRate: 0.6),
    FlakyCase(id: "steady-50", base: 0.5, head: 0.5, minPassRate: 0.4),
    FlakyCase(id: "falls-90-40", base: 0.9, head: 0.4, minPassRate: 0.8),
    FlakyCase(id: "falls-95-10", base: 0.95, head: 0.1, minPassRate: 0.8),
    FlakyCase(id: "rises-40-90", base: 0.4, head: 0.9, minPassRate: 0.8),
]

let settings = parseSettings()
let root = ExampleRuns.fixtures.deletingLastPathComponent().path
let flakyAgent = ExampleRuns.fixtures.appendingPathComponent("agents/flaky").path
let bundled = [
    "EvalCases/support/refund-live.yaml", "EvalCases/research/budget-live.yaml", "EvalCases/pipelines/release-notes-live.yaml",
    "EvalCases/pipelines/triage-live.yaml",
].map { root + "/" + $0 }

/// Writes the flaky cases, each with its own agent whose script answers well with `probability(case)`.
func writeFlakyCases(in directory: String, probability: (FlakyCase) -> Double) throws {
    let script = try String(contentsOfFile: flakyAgent + "/flaky.model.yaml", encoding: .utf8)
    let agent = try String(contentsOfFile: flakyAgent + "/agent.yaml", encoding: .utf8)
    for flaky in flakyCases {
        let folder = "\(directory)/\(flaky.id)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try agent.write(toFile: folder + "/agent.yaml", atomically: true, encoding: .utf8)
        try script.replacingOccurrences(of: "chance: 0.7", with: "chance: \(probability(flaky))").write(
            toFile: folder + "/flaky.model.yaml", atomically: true, encoding: .utf8)
        try """
        caseId: \(flaky.id)
        agent: agent.yaml
        input: Where is my refund for A-1042?
        minPassRate: \(flaky.minPassRate)
        expected: {toolsCalled: [lookup_order], answer: {contains: rf-9}}
        """.write(toFile: folder + "/case.yaml", atomically: true, encoding: .utf8)
    }
}

/// Run ids `<seed>-1`, `<seed>-2`, … in order: with one job, a case's fixed and adaptive runs
/// draw the same for their first attempts, so their verdicts can be compared.
func environment(seed: String) -> RuntimeEnvironment { RuntimeEnvironment.live.sequentialRunIds(prefix: seed) }

func run(
    _ paths: [String], out: String, baseline: String, update: Bool, failOn: FailOn, adaptive: Bool, seed: String? = nil
) async throws -> EvalReport {
    var options = EvalOptions(
        jobs: seed == nil ? 2 : 1, repeats: settings.maxRepeats, outputDirectory: out, environment: seed.map(environment) ?? .live)
    if adaptive { options.adaptive = AdaptiveRepeats(maxRepeats: settings.maxRepeats) }
    var plan = EvalSession.Plan(paths: paths, baselineDirectory: baseline, updatesBaseline: update, failOn: failOn, options: options)
    plan.quarantineFile = settings.directory + "/no-quarantine.yaml"
    let session: EvalSession
    do {
        session = try EvalSession(plan)
    } catch {
        FileHandle.standardError.write(Data("gate-benchmark: the suite cannot run: \(error.errors.map(\.description))\n".utf8))
        exit(2)
    }
    let report = await session.runToReport { _ in }
    if update { _ = try session.writeBaselineIfAsked(from: report) }
    return report
}

/// Attempts and model calls (each attempt's decisions; a pipeline attempt counts its tasks' runs).
func cost(_ report: EvalReport) -> (attempts: Int, calls: Int) {
    var attempts = 0
    var calls = 0
    for result in report.results {
        attempts += result.runs.count
        for run in result.runs {
            if run.summary.pipelineStatus != nil {
                calls += CaseResult.childRunLogs(ofPipelineLog: run.logPath).count
            } else {
                calls += max(1, run.summary.steps)
            }
        }
    }
    return (attempts, calls)
}

/// What the gate reads of each case: passes the gate, regressed.
func verdicts(_ report: EvalReport) -> [String: String] {
    Dictionary(
        uniqueKeysWithValues: report.results.map { result in
            (result.id, "\(result.passed ? "pass" : "fail")/\(report.comparisons[result.id]?.status == .regressed ? "regressed" : "-")")
        })
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

try? FileManager.default.removeItem(atPath: settings.directory)
try FileManager.default.createDirectory(atPath: settings.directory, withIntermediateDirectories: true)
// No quarantine: an empty file, so the project's (if any) is not read.
try "quarantine: []\n".write(toFile: settings.directory + "/no-quarantine.yaml", atomically: true, encoding: .utf8)
defer { try? FileManager.default.removeItem(atPath: settings.directory) }

print(
    "gate benchmark: \(bundled.count) bundled live cases + \(flakyCases.count) flaky cases, --max-repeats \(settings.maxRepeats), \(settings.trials) trials"
)
for failOn in [FailOn.regression, .any] {
    var rows: [String: [(fixed: (Int, Int), adaptive: (Int, Int))]] = [:]
    var disagreements = 0
    for trial in 1...settings.trials {
        let directory = "\(settings.directory)/\(failOn.rawValue)-\(trial)"
        let cases = directory + "/cases"
        let paths = bundled + flakyCases.map { "\(cases)/\($0.id)/case.yaml" }
        try writeFlakyCases(in: cases) { $0.base }
        _ = try await run(
            paths, out: directory + "/base-runs", baseline: directory + "/baseline", update: true, failOn: failOn, adaptive: false)
        try writeFlakyCases(in: cases) { $0.head }
        // Case by case, each with the same run ids in both runs.
        var fixed = EvalReport(results: [])
        var adaptive = EvalReport(results: [])
        for (index, path) in paths.enumerated() {
            let seed = "trial\(trial)-case\(index)-\(UInt32.random(in: 0...UInt32.max))"
            let one = try await run(
                [path], out: directory + "/fixed-runs", baseline: directory + "/baseline", update: false, failOn: failOn, adaptive: false,
                seed: seed)
            let other = try await run(
                [path], out: directory + "/adaptive-runs", baseline: directory + "/baseline", update: false, failOn: failOn, adaptive: true,
                seed: seed)
            fixed.results += one.results
            fixed.comparisons.merge(one.comparisons) { a, _ in a }
            adaptive.results += other.results
            adaptive.comparisons.merge(other.comparisons) { a, _ in a }
        }
        let (fixedVerdicts, adaptiveVerdicts) = (verdicts(fixed), verdicts(adaptive))
        for (id, verdict) in fixedVerdicts {
            // Under --fail-on regression only the regression half is decided.
            let compared =
                failOn == .regression
                ? (verdict.split(separator: "/").last, adaptiveVerdicts[id]?.split(separator: "/").last)
                : (Substring(verdict), adaptiveVerdicts[id].map { Substring($0) })
            if compared.0 != compared.1 {
                FileHandle.standardError.write(
                    Data("verdicts differ: \(id): fixed \(verdict), adaptive \(adaptiveVerdicts[id] ?? "none")\n".utf8))
                disagreements += 1
            }
        }
        func group(_ result: CaseResult) -> String {
            flakyCases.first { $0.id == result.id }.map { "flaky \($0.id) (\(Int($0.base * 100))% → \(Int($0.head * 100))%)" }
                ?? "bundled (always pass)"
        }
        var byGroup: [String: (EvalReport, EvalReport)] = [:]
        for (fixedResult, adaptiveResult) in zip(fixed.results, adaptive.results) {
            let name = group(fixedResult)
            var pair = byGroup[name] ?? (EvalReport(results: []), EvalReport(results: []))
            pair.0.results.append(fixedResult)
            pair.1.results.append(adaptiveResult)
            byGroup[name] = pair
        }
        for (name, pair) in byGroup {
            let (a, b) = (cost(pair.0), cost(pair.1))
            rows[name, default: []].append(((a.attempts, a.calls), (b.attempts, b.calls)))
        }
        let (a, b) = (cost(fixed), cost(adaptive))
        rows["all", default: []].append(((a.attempts, a.calls), (b.attempts, b.calls)))
    }
    print("\n--fail-on \(failOn.rawValue)  (medians over \(settings.trials) trials)")
    print("setting                                    fixed attempts  adaptive  saved   fixed calls  adaptive  saved")
    for name in rows.keys.sorted(by: { ($0 == "all" ? "~" : $0) < ($1 == "all" ? "~" : $1) }) {
        let entries = rows[name] ?? []
        let fixedAttempts = median(entries.map { Double($0.fixed.0) })
        let adaptiveAttempts = median(entries.map { Double($0.adaptive.0) })
        let fixedCalls = median(entries.map { Double($0.fixed.1) })
        let adaptiveCalls = median(entries.map { Double($0.adaptive.1) })
        let savedAttempts = median(entries.map { 1 - Double($0.adaptive.0) / Double(max(1, $0.fixed.0)) })
        let savedCalls = median(entries.map { 1 - Double($0.adaptive.1) / Double(max(1, $0.fixed.1)) })
        print(
            name.padding(toLength: 42, withPad: " ", startingAt: 0)
                + String(
                    format: " %14.0f  %8.0f  %4.0f%%  %11.0f  %8.0f  %4.0f%%", fixedAttempts, adaptiveAttempts, savedAttempts * 100,
                    fixedCalls,
                    adaptiveCalls, savedCalls * 100))
    }
    print("verdicts the adaptive run decided differently from the fixed one (the same draws): \(disagreements)")
}
