import ConfigFile
import Foundation
import Synchronization
public import TraceCore

/// What fails a suite run: a regression against the baseline, a failed case, or either.
public enum FailOn: String, Sendable, CaseIterable {
    case regression, failure, any
}

/// The main job, `agent-eval run`, from case files to an exit status: loads and checks every
/// case file, filters and shards, reads the baseline, runs the cases, compares each with its
/// baseline as it finishes, and builds the report that knows the exit status. The CLI only
/// prints what it yields.
///
/// ```swift
/// let session = try EvalSession(EvalSession.Plan(paths: ["EvalCases"], options: EvalOptions()))
/// for await update in session.run() {
///     if case .completed(let report) = update { print(report.summaryLine) }
/// }
/// ```
public struct EvalSession: Sendable {
    /// What to run and how.
    public struct Plan: Sendable {
        /// Case directories and case files.
        public var paths: [String]
        /// Only cases whose id or a tag matches one of these globs (all when empty).
        public var filters: [String]
        /// Only shard `index` of `count` (1-based).
        public var shard: Shard?
        /// The baseline directory; nil for none.
        public var baselineDirectory: String?
        /// Add this run to the baseline instead of comparing with it.
        public var updatesBaseline: Bool
        /// With `updatesBaseline`: start each case's entry over from this run.
        public var replacesBaseline = false
        /// k of pass@k and pass^k (default: the number of repeats).
        public var k: Int?
        public var failOn: FailOn
        public var options: EvalOptions
        /// How a fall of a pass rate is told from noise.
        public var regression = RegressionPolicy()
        /// Baselines made elsewhere (the catalog's history on a branch), by case id, in place of
        /// a baseline directory.
        public var baselines: [String: Baseline]?
        /// Whether `failOn: .regression` may run without a baseline (every case then `new`);
        /// without it, such a run could not compare anything and is refused.
        public var allowsNoBaseline = false
        /// The project's quarantine file (`.agent-eval/quarantine.yaml` in the project root when
        /// nil); a missing file quarantines nothing.
        public var quarantineFile: String?

        public init(
            paths: [String], filters: [String] = [], shard: Shard? = nil, baselineDirectory: String? = nil, updatesBaseline: Bool = false,
            k: Int? = nil, failOn: FailOn = .any, options: EvalOptions
        ) {
            self.paths = paths
            self.filters = filters
            self.shard = shard
            self.baselineDirectory = baselineDirectory
            self.updatesBaseline = updatesBaseline
            self.k = k
            self.failOn = failOn
            self.options = options
        }
    }

    /// Shard `index` of `count`, 1-based. An unsharded run is shard 1/1 (`whole`).
    public struct Shard: Sendable, Hashable, CustomStringConvertible, JSONEncodable {
        public var index: Int
        public var count: Int

        /// Shard `index` of `count` with 1 ≤ index ≤ count, or nil.
        public init?(index: Int, count: Int) {
            guard count >= 1, (1...count).contains(index) else { return nil }
            (self.index, self.count) = (index, count)
        }

        /// `i/n` with 1 ≤ i ≤ n, or nil.
        public init?(_ text: String) {
            let parts = text.split(separator: "/")
            guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else { return nil }
            self.init(index: index, count: count)
        }

        /// Reads a report's `shard` member, `{"count": n, "index": i}`; nil when it is not one.
        public init?(json: JSONValue) {
            guard let index = json["index"]?.intValue, let count = json["count"]?.intValue else { return nil }
            self.init(index: index, count: count)
        }

        private init(whole: Void) { (index, count) = (1, 1) }

        /// Shard 1/1: the whole suite, what an unsharded run's report records.
        public static let whole = Shard(whole: ())

        public var description: String { "\(index)/\(count)" }

        /// `{"count": n, "index": i}`, the report's `shard` member (docs/eval-results.md).
        public var json: JSONValue {
            var object = ObjectBuilder()
            object.set("count", count)
            object.set("index", index)
            return object.json
        }
    }

    /// Every problem that stops a session before anything runs (all case files are checked).
    public struct LoadFailure: Error, Sendable {
        public var errors: [DiagnosticRecord]
        /// Whether the problems are in the case files (as opposed to the selection or baseline).
        public var inCaseFiles: Bool
    }

    /// One case finished: its position in `cases`, its result, and how it compares with its
    /// baseline (nil when no baseline was read).
    public struct Finished: Sendable {
        public var index: Int
        public var result: CaseResult
        public var comparison: BaselineComparison?
        /// Cases finished so far, of `total`.
        public var done: Int
        public var total: Int
        /// The case's lines for a console, as the final report prints them.
        public var consoleLines: [String]
    }

    /// What `run()` yields: each case as it finishes (in completion order), then the report.
    public enum Update: Sendable {
        case finished(Finished)
        case completed(EvalReport)
    }

    public let plan: Plan
    /// The cases to run, in path order, after filtering and sharding.
    public let cases: [EvalCase]
    /// The suite the cases are a shard of: every case selected before sharding, so every shard
    /// of one suite run reports the same identity.
    public let suite: SuiteIdentity
    /// Baselines read, by case id.
    public let baselines: [String: Baseline]
    /// Whether a baseline was read (comparisons are reported only then).
    public let hasBaseline: Bool

    /// Loads everything the plan names; throws every problem found, before anything runs.
    public init(_ plan: Plan) throws(LoadFailure) {
        var plan = plan
        var (loaded, errors) = EvalSuite.load(paths: plan.paths)
        guard errors.isEmpty else { throw LoadFailure(errors: errors.map { DiagnosticRecord($0) }, inCaseFiles: true) }
        if let named = plan.quarantineFile, !FileManager.default.fileExists(atPath: named) {
            throw LoadFailure(
                errors: [
                    DiagnosticRecord(
                        EvalError(
                            .missingPath, "the quarantine file \(named) does not exist",
                            hint:
                                "write one with `agent-eval quarantine add CASE --owner O --reason R --file \(named)`, or drop --quarantine"
                        ))
                ], inCaseFiles: false)
        }
        do throws(ConfigErrors) {
            let quarantine = try QuarantineFile.load(path: plan.quarantineFile ?? QuarantineFile.defaultPath())
            errors = quarantine.apply(to: &loaded)
        } catch {
            throw LoadFailure(errors: error.errors.map { DiagnosticRecord($0) }, inCaseFiles: true)
        }
        guard errors.isEmpty else { throw LoadFailure(errors: errors.map { DiagnosticRecord($0) }, inCaseFiles: true) }
        var cases = EvalSuite.filter(loaded, by: plan.filters)
        guard !cases.isEmpty else {
            let selection = " the filter \(plan.filters.joined(separator: ", "))"
            throw LoadFailure(errors: [DiagnosticRecord(EvalError(.noCases, "no case matches\(selection)"))], inCaseFiles: false)
        }
        // A shard may be empty (fewer cases than shards): its report says 0 cases, and merging
        // the shards' reports still covers every case.
        suite = SuiteIdentity(caseIds: cases.map(\.id))
        if let shard = plan.shard { cases = EvalSuite.shard(cases, index: shard.index, count: shard.count) }
        // What `agent-eval check` checks, before anything runs: the agents, pipelines and logs
        // the cases name, and the tools and tasks they expect (the logs' own tools are checked
        // when they are read).
        let check = ProjectCheck(
            options: ProjectCheck.Options(
                models: plan.options.models, defaultAgent: plan.options.defaultAgent, readsLogs: false,
                judgeModel: plan.options.judgeModel)
        ).check(cases: cases)
        guard check.errors.isEmpty else { throw LoadFailure(errors: check.errors.map(\.diagnostic), inCaseFiles: true) }
        self.cases = cases
        var baselines: [String: Baseline] = [:]
        var hasBaseline = false
        if let given = plan.baselines {
            baselines = given
            hasBaseline = true
        } else if !(plan.updatesBaseline && plan.replacesBaseline), let directory = plan.baselineDirectory,
            FileManager.default.fileExists(atPath: directory)
        {
            // `--update-baseline` compares first, as any run does: a run that regressed is not
            // added to the baseline (`baselineRefusal`). Only `--replace-baseline` takes the run
            // as it is.
            do {
                baselines = try Baseline.read(for: cases, from: directory)
                hasBaseline = true
            } catch {
                throw LoadFailure(errors: [DiagnosticRecord(error)], inCaseFiles: false)
            }
        }
        if !hasBaseline, !plan.updatesBaseline, plan.failOn == .regression, !plan.allowsNoBaseline {
            // A regression gate with nothing to compare against would pass every case as new.
            let place = plan.baselineDirectory.map { " (\($0) does not exist)" } ?? ""
            throw LoadFailure(
                errors: [
                    DiagnosticRecord(
                        EvalError(
                            .missingBaseline, "--fail-on regression needs a baseline to compare with, and there is none\(place)",
                            hint: "write one from a run you trust with --update-baseline, give --baseline DIR, or pass "
                                + "--allow-no-baseline to count every case as new"))
                ], inCaseFiles: false)
        }
        if hasBaseline, !plan.updatesBaseline, plan.failOn == .regression, !plan.allowsNoBaseline, !cases.isEmpty,
            !cases.contains(where: { baselines[$0.id] != nil })
        {
            // A baseline that holds none of these cases (an empty folder, renamed cases, a branch
            // whose runs never ran them) is nothing to compare with either: every case would be new.
            let place = plan.baselines == nil ? plan.baselineDirectory ?? "the baseline" : "the baseline from the catalog"
            throw LoadFailure(
                errors: [
                    DiagnosticRecord(
                        EvalError(
                            .missingBaseline,
                            "--fail-on regression needs a baseline to compare with, and \(place) holds none of the "
                                + "\(cases.count == 1 ? "selected case" : "\(cases.count) selected cases")",
                            hint: "write one from a run you trust with --update-baseline, give the --baseline DIR that holds "
                                + "<case id>.json files, or pass --allow-no-baseline to count every case as new"))
                ], inCaseFiles: false)
        }
        self.baselines = baselines
        self.hasBaseline = hasBaseline
        // Adaptive repeats decide what the gate decides, against the baselines just read.
        if var adaptive = plan.options.adaptive {
            adaptive.baselines = baselines
            adaptive.policy = plan.regression
            adaptive.failOn = plan.failOn
            plan.options.adaptive = adaptive
        }
        self.plan = plan
    }

    /// Runs the cases; yields each as it finishes, then the report.
    public func run() -> AsyncStream<Update> {
        AsyncStream { yield in
            .completed(await self.runToReport { yield(.finished($0)) })
        }
    }

    /// Runs the cases, calling `finished` for each as it finishes (in completion order);
    /// returns the report. Cancelling the calling task stops live runs at their next step, each
    /// with its stop recorded and its log closed, and still returns the report of what ran.
    public func runToReport(_ finished: @Sendable (Finished) -> Void) async -> EvalReport {
        let clock = ContinuousClock()
        let started = clock.now
        let comparisons = ComparisonStore()
        let (baselines, hasBaseline, policy, failOn) = (self.baselines, self.hasBaseline, plan.regression, plan.failOn)
        let results = await EvalRunner(options: plan.options).run(cases) { index, result, done, total in
            let comparison = hasBaseline ? BaselineComparison.compare(result, with: baselines[result.id], policy: policy) : nil
            if let comparison { comparisons.set(comparison, for: result.id) }
            let lines = EvalReport.consoleLines(for: result, comparison: comparison, hasBaseline: hasBaseline, failOn: failOn)
            finished(Finished(index: index, result: result, comparison: comparison, done: done, total: total, consoleLines: lines))
        }
        let elapsed = started.duration(to: clock.now)
        var report = EvalReport(
            results: results, comparisons: comparisons.all, hasBaseline: hasBaseline,
            k: plan.k ?? (plan.options.adaptive == nil ? plan.options.repeats : 1),
            durationSeconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, failOn: plan.failOn,
            suite: suite, shard: plan.shard ?? .whole)
        report.adaptive = plan.options.adaptive?.savings(results)
        return report
    }

    /// Why the baseline the plan asks to update must stay as it is after `report`, if it must.
    public enum BaselineRefusal: Sendable, Equatable {
        /// The run was interrupted: runs cut off by a signal say nothing of the agent, and summed
        /// into the baseline they would make a regression a known failure.
        case interrupted
        /// These cases regressed against the baseline: added to it, each regression would be
        /// the baseline's from then on (a failure known, a new tool seen), blessed without
        /// anyone deciding so. `--replace-baseline` is that decision.
        case regressed([String])
        /// Under `--fail-on regression`, these new cases fail (not quarantined): written, each
        /// would be a known failure from then on, though no run of it ever passed and nobody
        /// decided so. Writing a baseline without `--fail-on regression` (a person's first one),
        /// or `--replace-baseline`, is that decision; quarantine is the way to land it failing.
        case newFailing([String])

        /// What the console says.
        public var sentence: String {
            switch self {
            case .interrupted: "baseline not written: the run was interrupted, and a baseline is only written from a whole run"
            case .regressed(let cases):
                "baseline not written: \(cases.count == 1 ? "a case" : "\(cases.count) cases") regressed against it ("
                    + cases.prefix(5).joined(separator: ", ") + (cases.count > 5 ? ", …" : "")
                    + "); fix the regression, or accept this run as the baseline with --replace-baseline "
                    + "(or delete a case's file to start that case over)"
            case .newFailing(let cases):
                "baseline not written: \(cases.count == 1 ? "a new case fails" : "\(cases.count) new cases fail") ("
                    + cases.prefix(5).joined(separator: ", ") + (cases.count > 5 ? ", …" : "")
                    + "), and a baseline written now would make each a known failure no run of it ever passed; fix it, "
                    + "quarantine it (docs/eval-cases.md, \"Quarantine\"), or record it as a known failure on purpose with "
                    + "--update-baseline without --fail-on regression"
            }
        }
    }

    /// Why `writeBaselineIfAsked` writes nothing for `report` when the plan asks for a baseline.
    public func baselineRefusal(for report: EvalReport) -> BaselineRefusal? {
        guard plan.updatesBaseline else { return nil }
        if report.interruptedBy != nil { return .interrupted }
        guard !plan.replacesBaseline else { return nil }
        let regressed = report.results.map(\.id).filter { report.comparisons[$0]?.status == .regressed }
        if !regressed.isEmpty { return .regressed(regressed) }
        guard plan.failOn == .regression else { return nil }
        // New to the baseline, or no baseline at all (the first one a CI recipe writes).
        let newFailing = report.results.filter { result in
            ReportCounts.isUnvouched(report.comparisons[result.id]?.status) && result.outcome != .error && !result.outcome.passes
                && result.evalCase.quarantine.map { $0.isExpiredNow } ?? true
        }.map(\.id)
        return newFailing.isEmpty ? nil : .newFailing(newFailing)
    }

    /// Adds `report` to the baseline when the plan asks for it (`Baseline.write`) and nothing
    /// refuses it (`baselineRefusal`); the directory and what was written.
    public func writeBaselineIfAsked(from report: EvalReport) throws(EvalError) -> (directory: String, update: Baseline.Update)? {
        guard plan.updatesBaseline, baselineRefusal(for: report) == nil, let directory = plan.baselineDirectory else { return nil }
        return (directory, try Baseline.write(report.results, to: directory, replacing: plan.replacesBaseline))
    }
}

/// Comparisons made as cases finish, on the runner's tasks.
private final class ComparisonStore: Sendable {
    private let comparisons = Mutex<[String: BaselineComparison]>([:])

    func set(_ comparison: BaselineComparison, for id: String) { comparisons.withLock { $0[id] = comparison } }
    var all: [String: BaselineComparison] { comparisons.withLock { $0 } }
}
