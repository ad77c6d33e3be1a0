public import Catalog
public import EvalEngine
import Foundation
public import Interop
public import ModelClients
public import TraceCore
import TraceLog
public import Viewer

/// `agent-eval run` end to end, as a library: the session over the case files, the baseline
/// (a directory, or the catalog's history on a branch), each case reported as it finishes (and
/// its traces sent), the suite run recorded in the catalog with its history (flaky cases, what is
/// ready to leave quarantine), the report files and the baseline written. The command only
/// parses its options into a `Request`, prints what this yields, and maps the exit status.
///
/// Three calls, because a signal may cut the middle one short and the last must still run:
/// ```swift
/// let suite = try await SuiteRun(request, catalog: catalog, exporter: nil, shelf: shelf) { print($0) }
/// let report = await suite.runCases { finished in print(finished.consoleLines) }
/// let outcome = await suite.finish(report, interruptedBy: nil, notice: { print($0) }, warning: { print($0) })
/// ```
public struct SuiteRun: Sendable {
    /// What to run and what to write, as `run`'s options give them.
    public struct Request: Sendable {
        public var paths: [String]
        public var filters: [String] = []
        /// `i/n`, already checked.
        public var shard: String?
        public var options: EvalOptions
        /// `--baseline DIR`.
        public var baseline: String?
        public var allowsNoBaseline = false
        public var updatesBaseline = false
        public var replacesBaseline = false
        /// `--baseline-branch`: compare with the catalog's newest `baselineRuns` suite runs there.
        public var baselineBranch: String?
        public var baselineRuns = 10
        public var k: Int?
        public var failOn: FailOn = .any
        public var regression = RegressionPolicy()
        public var quarantineFile: String?
        /// `--history`: flag cases whose recorded history is flaky.
        public var flakyHistory = false
        /// The cassette mode (`--record`) and `--cassette`: recording needs a cassette somewhere.
        public var recordMode: Cassette.Mode = .none
        public var cassette: String?
        /// The command line, recorded with the suite run.
        public var commandLine: [String] = CommandLine.arguments
        /// The report files to write (`--json-out`, `--junit`, `--markdown`, `--html`).
        public var jsonOut: String?
        public var junit: String?
        public var markdown: String?
        public var html: String?
        /// The viewer's assets, for `html`.
        public var viewerAssets: ViewerAssets?

        public init(paths: [String], options: EvalOptions) {
            self.paths = paths
            self.options = options
        }

        /// The baseline directory given that does not exist, when the run is to compare with it
        /// (nothing is run then).
        public var missingBaselineDirectory: String? {
            guard !updatesBaseline, let baseline, !FileManager.default.fileExists(atPath: baseline) else { return nil }
            return baseline
        }
    }

    /// Everything `finish` did, for the command to print.
    public struct Outcome: Sendable {
        public var report: EvalReport
        /// What the catalog's history says of the suite (empty without a catalog).
        public var history: SuiteHistory
        /// The traces sent (`--otlp-endpoint`).
        public var exported: LiveExportSummary?
        /// The report page written: its path and how many runs it embeds.
        public var page: (path: String, embedded: Int)?
        /// The baseline written: its directory and what was written and left.
        public var baselineWritten: (directory: String, update: Baseline.Update)?
        /// Why `--update-baseline` wrote nothing (the run was interrupted, or regressed).
        public var baselineRefusal: EvalSession.BaselineRefusal?
        /// The report file or baseline that could not be written: the writing stopped there
        /// (what came before it was written; the command prints the summary, then this).
        public var writeFailure: EvalError?

        /// The report's JSON document with what the history and the export add.
        public var json: JSONValue {
            let object = history.adding(to: report.json)
            return exported?.added(to: object) ?? object
        }
    }

    public let session: EvalSession
    private let request: Request
    private let catalog: Catalog?
    private let exporter: LiveTraceExporter?
    private let shelf: CassetteShelf
    /// The suite run's commit and branch, from `git`, which runs beside the suite.
    private let pendingInfo: Task<SuiteRunInfo, Never>?

    /// Reads the cases and the baseline: nothing runs yet. `notice` gets lines for standard
    /// error (which baseline was found). Throws an `EvalError` (a missing baseline, no suite run
    /// on the branch, a recording without a cassette) or an `EvalSession.LoadFailure` (every
    /// problem of the case files).
    public init(
        _ request: Request, catalog: Catalog?, exporter: LiveTraceExporter?, shelf: CassetteShelf,
        notice: (String) -> Void
    ) async throws {
        if let missing = request.missingBaselineDirectory {
            throw EvalError(.missingBaseline, "the baseline directory \(missing) does not exist", hint: "write one with --update-baseline")
        }
        var options = request.options
        // The request's `finishedLogs` index each live run's logs as soon as the run closes them
        // (the command's `IndexingSink`, keeping their facts for the grading); they go to the
        // collector once the case is reported, with its outcomes (runCases).
        if let catalog { options.facts = FactCache(catalog: catalog) }
        // The suite run's commit and branch come from `git`, which runs beside the suite (on a
        // thread of its own: waiting for a child process would hold one of the suite's threads);
        // they are needed only when the results are recorded.
        let startedAtUs = Catalog.nowUs()
        let (commandLine, shard) = (request.commandLine, request.shard)
        pendingInfo =
            catalog == nil
            ? nil : Task { await SuiteRunInfo.current(commandLine: commandLine, shard: shard, startedAtUs: startedAtUs) }
        let location = BaselineLocation(paths: request.paths)
        var plan = EvalSession.Plan(
            paths: request.paths, filters: request.filters, shard: request.shard.flatMap(EvalSession.Shard.init),
            baselineDirectory: request.baseline ?? location.found ?? (request.updatesBaseline ? location.writeDefault : nil),
            updatesBaseline: request.updatesBaseline, k: request.k, failOn: request.failOn, options: options)
        plan.replacesBaseline = request.replacesBaseline
        plan.allowsNoBaseline = request.allowsNoBaseline
        let givesBaseline = request.baseline != nil || request.baselineBranch != nil
        if !givesBaseline, let found = location.found, found != location.writeDefault {
            notice("baseline: \(found) (the nearest .baseline folder above \(request.paths.first ?? "."))")
        } else if !givesBaseline, location.found == nil, !request.updatesBaseline, request.failOn == .regression,
            request.allowsNoBaseline
        {
            notice("baseline: none found (looked in \(location.searched.joined(separator: ", "))); every case is new (--allow-no-baseline)")
        }
        if let branch = request.baselineBranch {
            guard let catalog else {
                throw EvalError(.noCatalog, "--baseline-branch needs the catalog, which could not be opened")
            }
            let lastRuns = request.baselineRuns
            let (suiteRuns, baselines) = try await catalog.work { catalog throws(CatalogError) in
                try catalog.baselines(branch: branch, lastRuns: lastRuns)
            }
            guard suiteRuns > 0 else {
                throw EvalError(
                    .noBaseRun, "the catalog has no suite run on branch \(branch) to compare with",
                    hint: "run the cases on \(branch) with the catalog (the default) first, or give --baseline DIR")
            }
            plan.baselines = baselines
            notice("baseline: \(counted(suiteRuns, "suite run")) on \(branch) in the catalog (\(counted(baselines.count, "case")))")
        }
        plan.regression = request.regression
        plan.quarantineFile = request.quarantineFile
        session = try EvalSession(plan)
        if request.recordMode != .none, request.cassette == nil, !session.cases.contains(where: { $0.cassette != nil }) {
            throw EvalError(
                .recordNeedsCassette,
                "--record needs --cassette DIR, or cases that name a cassette (cassette: in the case file); nothing was run")
        }
        self.request = request
        self.catalog = catalog
        self.exporter = exporter
        self.shelf = shelf
    }

    /// Runs the cases, calling `finished` for each as it finishes (in completion order), after
    /// its traces are handed to the exporter with its outcomes. Cancelling the calling task
    /// stops live runs at their next step and still returns the report of what ran.
    public func runCases(_ finished: @escaping @Sendable (EvalSession.Finished) -> Void) async -> EvalReport {
        let exporter = self.exporter
        return await session.runToReport { done in
            // The case's traces, each with its eval outcomes as gen_ai.evaluation.result events.
            if let exporter, !done.result.writtenRunLogs.isEmpty {
                let one = EvalReport(
                    results: [done.result], comparisons: done.comparison.map { [done.result.id: $0] } ?? [:],
                    hasBaseline: done.comparison != nil)
                exporter.send(logs: done.result.writtenRunLogs, evaluations: OTLPExporter.EvaluationResult.fromReport(one.json))
            }
            finished(done)
        }
    }

    /// After the cases: says which cassette recordings went unused, finishes the export, records
    /// the suite run and reads its history, writes the report files and the baseline. `notice`
    /// gets lines for standard error, `warning` what did not stop the command (the catalog could
    /// not record the suite run). A report file or baseline that cannot be written is
    /// `Outcome.writeFailure`.
    public func finish(
        _ report: EvalReport, interruptedBy interrupted: Int32?, notice: (String) -> Void, warning: (any Diagnostic) -> Void
    ) async -> Outcome {
        var report = report
        report.interruptedBy = interrupted
        if request.recordMode != .none, interrupted == nil, request.filters.isEmpty, request.shard == nil {
            // Every case ran: a recording none of them asked for is one the agents no longer make.
            for (directory, files) in shelf.unused() {
                notice(
                    "note: the cassette \(directory) holds \(counted(files.count, "recording")) this run did not use (stale since the "
                        + "agents changed; review and delete them, or record the cassette anew with --record all): "
                        + files.prefix(5).joined(separator: ", ") + (files.count > 5 ? ", …" : ""))
            }
        }
        let exported = await exporter?.finish()
        var history = SuiteHistory(flaky: request.flakyHistory ? [] : nil)
        if let catalog, let info = await pendingInfo?.value {
            do {
                let (recorded, flaky) = (report, request.flakyHistory)
                history = try await catalog.work { catalog throws(CatalogError) in
                    try catalog.recordSuite(recorded, info: info, flakyHistory: flaky)
                }
                for problem in history.problems { warning(problem) }
            } catch {
                warning(error)
                notice("warning: the results were not recorded in the catalog")
            }
        }
        var outcome = Outcome(report: report, history: history, exported: exported)
        do {
            try write(report, into: &outcome, interrupted: interrupted)
        } catch {
            outcome.writeFailure = error
        }
        return outcome
    }

    /// The report files, the page and the baseline, in that order. When one cannot be written (the
    /// baseline too), the report files this run already wrote are removed again: each says the
    /// verdict, and the run ends with exit 2, so none may be left saying it passed (a merge or a
    /// comment would read it).
    private func write(_ report: EvalReport, into outcome: inout Outcome, interrupted: Int32?) throws(EvalError) {
        var written: [String] = []
        do throws(EvalError) {
            try writeReports(report, into: &outcome, written: &written)
            // An interrupted run, or one that regressed, leaves the baseline as it was.
            outcome.baselineRefusal = session.baselineRefusal(for: report)
            outcome.baselineWritten = try session.writeBaselineIfAsked(from: report)
        } catch {
            for path in written where !ReportFile.isWrittenInPlace(path) { try? FileManager.default.removeItem(atPath: path) }
            outcome.page = nil
            guard !written.isEmpty else { throw error }
            throw EvalError(
                error.code, error.message + " (the report files written before it were removed: \(written.joined(separator: ", ")))",
                location: error.location, hint: error.hint)
        }
    }

    /// Writes the report files and the page, noting each path once it is written.
    private func writeReports(_ report: EvalReport, into outcome: inout Outcome, written: inout [String]) throws(EvalError) {
        if let jsonOut = request.jsonOut {
            try ReportFile.write(JSONWriter.encodePretty(report.json), to: jsonOut)
            written.append(jsonOut)
        }
        if let junit = request.junit {
            try ReportFile.write(report.junit, to: junit)
            written.append(junit)
        }
        if let markdown = request.markdown {
            try ReportFile.write(report.markdown, to: markdown)
            written.append(markdown)
        }
        if let html = request.html, let assets = request.viewerAssets {
            let view = ReportView.make(results: report.json)
            let page = HTMLPage(title: "eval report: \(report.counts.verdict(failOn: request.failOn))", data: view.document)
            let bytes: [UInt8]
            do {
                bytes = try page.render(with: assets)
            } catch {
                throw EvalError(.writeFailed, "cannot make the page \(html): \(FileProblem.reason(of: error))")
            }
            try ReportFile.write(bytes: bytes, to: html)
            written.append(html)
            outcome.page = (html, view.embedded.count)
        }
    }
}
