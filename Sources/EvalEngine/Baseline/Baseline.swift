import Foundation
public import TraceCore

/// What a case did when the baseline was taken: reviewable, one small pretty-printed JSON file
/// per case (`<dir>/<caseId>.json`), with keys and lists in a stable order so that a changed
/// baseline shows up as a small diff in review.
///
/// A run adds to a live case's baseline and never removes from it (`adding(_:)`): the attempts
/// and passes are summed, so each entry says the sample size behind it, and the tools, tasks and
/// stop reasons seen are the union of every run's. A recorded case's logs are checked the same
/// way every time, so its entry is replaced. A case that could not run is never written.
public struct Baseline: Sendable, Hashable {
    public var caseId: String
    /// Whether the gate passed the case (pass or flaky_pass) over the baseline's attempts.
    public var passed: Bool
    /// The outcome word written (`pass`, `flaky_pass`, `flaky_fail`, `fail`).
    public var outcome: String
    /// Passes out of the attempts behind the entry (every run that added to it).
    public var counts: PassCounts
    public var passRate: Double { counts.rate }
    public var runCount: Int { counts.attempts }
    /// More than half of the baseline's attempts passed, over more than one: a case that passes,
    /// flaky or not, whatever the outcome word its summed attempts made under the case's
    /// `minPassRate` (`BaselineComparison`: one failing attempt of it now is a regression).
    public var mostlyPassed: Bool { counts.attempts > 1 && counts.passes * 2 > counts.attempts }
    /// Every stop reason (or pipeline status) any attempt ended with, sorted.
    public var stopReasonsSeen: [String]
    /// Whether the baseline knows the tools, attempts and tasks its runs had (a baseline file
    /// does; one made from the catalog's history keeps outcomes and stop reasons only, and is not
    /// compared on tools).
    public var knowsTools = true
    /// Read from a file written before baselines kept their passes (and when cases that could
    /// not run were written as failures): the next update replaces it rather than adding to it.
    var predatesSampleSizes = false
    /// Per run (log file name or `repeat N`): executed tools in order, and the stop reason.
    public var runs: [Trajectory]
    /// Every tool executed in any run, sorted.
    public var toolsSeen: [String]
    /// Every tool proposed but not run in any run, sorted.
    public var toolsAttempted: [String]
    /// Every pipeline task that ran in any run, sorted (empty for agent runs).
    public var tasksSeen: [String]

    public struct Trajectory: Sendable, Hashable {
        public var run: String
        public var tools: [String]
        /// The stop reason of a run, or the status of a pipeline.
        public var stopReason: String?
        /// The tasks a pipeline ran, in plan order.
        public var tasks: [String] = []

        public init(run: String, tools: [String], stopReason: String?, tasks: [String] = []) {
            self.run = run
            self.tools = tools
            self.stopReason = stopReason
            self.tasks = tasks
        }
    }

    /// A baseline from history that kept no tools (the catalog's): outcomes, samples and stop reasons.
    public init(caseId: String, passed: Bool, counts: PassCounts, runs: [Trajectory], stopReasonsSeen: [String]) {
        self.caseId = caseId
        self.passed = passed
        outcome = passed ? "pass" : "fail"
        self.counts = counts
        self.runs = runs
        self.stopReasonsSeen = stopReasonsSeen
        toolsSeen = []
        toolsAttempted = []
        tasksSeen = []
        knowsTools = false
    }

    public init(_ result: CaseResult) {
        caseId = result.id
        passed = result.passed
        outcome = result.outcome.rawValue
        counts = result.counts
        stopReasonsSeen = Array(Set(result.runs.compactMap(\.summary.stopName))).sorted()
        runs = result.runs.map {
            Trajectory(run: $0.label, tools: $0.summary.tools, stopReason: $0.summary.stopName, tasks: $0.summary.tasks)
        }
        toolsSeen = Array(Set(result.runs.flatMap(\.summary.tools))).sorted()
        toolsAttempted = Array(Set(result.runs.flatMap(\.summary.attempted))).sorted()
        tasksSeen = Array(Set(result.runs.flatMap(\.summary.tasks))).sorted()
    }

    /// This baseline with `result` added: a live case's counts summed and what it saw united
    /// (its trajectories are the latest run's); a recorded case's replaced.
    public func adding(_ result: CaseResult) -> Baseline {
        var next = Baseline(result)
        guard result.attemptsAreRepeats, !predatesSampleSizes else { return next }
        next.counts = PassCounts(passes: counts.passes + next.counts.passes, attempts: counts.attempts + next.counts.attempts)
        let outcome = CaseResult.outcome(of: next.counts, minPassRate: result.evalCase.minPassRate, repeats: true)
        next.outcome = outcome.rawValue
        next.passed = outcome.passes
        next.toolsSeen = Array(Set(toolsSeen + next.toolsSeen)).sorted()
        next.toolsAttempted = Array(Set(toolsAttempted + next.toolsAttempted)).sorted()
        next.tasksSeen = Array(Set(tasksSeen + next.tasksSeen)).sorted()
        next.stopReasonsSeen = Array(Set(stopReasonsSeen + next.stopReasonsSeen)).sorted()
        return next
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("case_id", caseId)
        object.set("outcome", outcome)
        object.set("pass_rate", passRate)
        object.set("passes", counts.passes)
        object.set("runs", runCount)
        object.set("stop_reasons_seen", JSONValue.array(stopReasonsSeen.map { .string($0) }))
        object.set(
            "trajectories",
            JSONValue.array(
                runs.map { run in
                    var entry = ObjectBuilder()
                    entry.set("run", run.run)
                    entry.set("tools", JSONValue.array(run.tools.map { .string($0) }))
                    entry.set("stop_reason", run.stopReason)
                    if !run.tasks.isEmpty { entry.set("tasks", JSONValue.array(run.tasks.map { .string($0) })) }
                    return entry.json
                }))
        object.set("tools_seen", JSONValue.array(toolsSeen.map { .string($0) }))
        object.set("tools_attempted", JSONValue.array(toolsAttempted.map { .string($0) }))
        if !tasksSeen.isEmpty { object.set("tasks_seen", JSONValue.array(tasksSeen.map { .string($0) })) }
        object.set("version", 1)
        return object.json
    }

    init(json: JSONValue, path: String) throws(EvalError) {
        func field<T>(_ name: String, _ read: (JSONValue) -> T?) throws(EvalError) -> T {
            guard let value = json[name], let typed = read(value) else {
                throw EvalError(
                    .unreadableBaseline, "\(path): \"\(name)\" is missing or has the wrong type",
                    hint: "write the baseline again from a run you trust")
            }
            return typed
        }
        guard try field("version", \.intValue) == 1 else {
            throw EvalError(
                .unreadableBaseline, "\(path): baseline version is not 1", hint: "write the baseline again from a run you trust")
        }
        caseId = try field("case_id", \.stringValue)
        outcome = try field("outcome", \.stringValue)
        // An outcome word this version does not know (a hand edit, a newer writer) is no
        // evidence of how the case did: read as "failed before", a case that fails now would
        // compare as a known failure and pass the regression gate.
        guard let reported = CaseOutcome(reported: outcome) else {
            throw EvalError(
                .unreadableBaseline,
                "\(path): \"outcome\" is \"\(outcome)\", not one of \(CaseOutcome.allCases.map(\.rawValue).joined(separator: ", "))",
                hint: "write the baseline again from a run you trust (agent-eval run --update-baseline)")
        }
        passed = reported.passes
        let rate = try field("pass_rate", \.doubleValue)
        let attempts = try field("runs", \.intValue)
        let passes = json["passes"]?.intValue
        // Numbers no run gives (a hand edit, a damaged file) are no evidence either, and the
        // rate times the runs of such would not even be a number to compare.
        guard (0...1).contains(rate), JSONScanner.isMeasure(attempts),
            passes.map({ (0...attempts).contains($0) }) ?? true
        else {
            throw EvalError(
                .unreadableBaseline,
                "\(path): \"pass_rate\" \(rate), \"runs\" \(attempts)" + (passes.map { " and \"passes\" \($0)" } ?? "")
                    + " are no case's counts: the rate is from 0 to 1, the runs a count (0 to 2^53 − 1), the passes at most the runs",
                hint: "write the baseline again from a run you trust (agent-eval run --update-baseline)")
        }
        // Written before baselines kept their passes: the rate times the runs.
        counts = PassCounts(passes: passes ?? Int((rate * Double(attempts)).rounded()), attempts: attempts)
        predatesSampleSizes = json["passes"] == nil
        let strings = { (value: JSONValue) -> [String]? in value.arrayValue?.compactMap(\.stringValue) }
        runs = try field("trajectories", \.arrayValue).map { entry in
            Trajectory(
                run: entry["run"]?.stringValue ?? "", tools: entry["tools"].flatMap(strings) ?? [],
                stopReason: entry["stop_reason"]?.stringValue, tasks: entry["tasks"].flatMap(strings) ?? [])
        }
        toolsSeen = try field("tools_seen", strings)
        toolsAttempted = try field("tools_attempted", strings)
        tasksSeen = json["tasks_seen"].flatMap(strings) ?? []
        stopReasonsSeen = json["stop_reasons_seen"].flatMap(strings) ?? Array(Set(runs.compactMap(\.stopReason))).sorted()
    }

    /// What `write` did: the cases written, and those left as they were because they could not
    /// run (a harness problem never moves a baseline).
    public struct Update: Sendable {
        public var written: [String] = []
        public var skipped: [String] = []
    }

    /// Adds each result to its case's file in `directory` (`adding(_:)`; `replacing` starts each
    /// file over from this run), except results that could not run.
    @discardableResult
    public static func write(_ results: [CaseResult], to directory: String, replacing: Bool = false) throws(EvalError) -> Update {
        var update = Update()
        let existing = replacing ? [:] : try read(for: results.map(\.evalCase), from: directory)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for result in results {
                guard result.outcome != .error else {
                    update.skipped.append(result.id)
                    continue
                }
                let baseline = existing[result.id]?.adding(result) ?? Baseline(result)
                let text = JSONWriter.encodePretty(baseline.json)
                try text.write(toFile: "\(directory)/\(result.id).json", atomically: true, encoding: .utf8)
                update.written.append(result.id)
            }
        } catch {
            throw EvalError(.writeFailed, "cannot write the baseline in \(directory): \(error.localizedDescription)")
        }
        return update
    }

    /// The baseline of each case that has one in `directory`.
    public static func read(for cases: [EvalCase], from directory: String) throws(EvalError) -> [String: Baseline] {
        var baselines: [String: Baseline] = [:]
        for evalCase in cases {
            let path = "\(directory)/\(evalCase.id).json"
            guard FileManager.default.fileExists(atPath: path) else { continue }
            let value = try JSONFile.read(
                path, as: "a readable baseline", code: .unreadableBaseline,
                hint: "write the baseline again from a run you trust (agent-eval run --update-baseline --replace-baseline)")
            let baseline = try Baseline(json: value, path: path)
            // A file copied or renamed from another case's: its outcome and tools are that
            // case's, and the gate would compare with them.
            guard baseline.caseId == evalCase.id else {
                throw EvalError(
                    .unreadableBaseline, "\(path) is the baseline of case \"\(baseline.caseId)\", not of \"\(evalCase.id)\"",
                    hint: "a case's baseline is <case id>.json; write it again from a run you trust "
                        + "(agent-eval run --update-baseline --replace-baseline), or delete the file to start the case over")
            }
            baselines[evalCase.id] = baseline
        }
        return baselines
    }
}
