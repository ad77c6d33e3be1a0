import AgentRuntime
public import EvalEngine
import Foundation
public import TraceCore
import TraceLog

extension SuiteRunInfo {
    /// The info of a suite run starting now in the current directory: the git commit and
    /// branch from the CI's variables (GitHub Actions, GitLab CI) or from `git`, when there is
    /// a repository; the runner and the CI job from the CI's variables (`where`).
    public static func current(
        commandLine: [String], shard: String? = nil, startedAtUs: Int = Catalog.nowUs(), environment: [String: String]? = nil
    ) async -> SuiteRunInfo {
        let environment = environment ?? ProcessInfo.processInfo.environment
        var commit = environment["GITHUB_SHA"] ?? environment["CI_COMMIT_SHA"]
        var branch = environment["GITHUB_HEAD_REF"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["GITHUB_REF_NAME"]
        branch = branch ?? environment["CI_COMMIT_REF_NAME"]
        if commit == nil || branch == nil {
            // One `git` for both: the commit, then the branch (`HEAD` when detached).
            let lines = await git(["rev-parse", "HEAD", "--abbrev-ref", "HEAD"])
            if lines.count == 2 {
                commit = commit ?? lines[0]
                branch = branch ?? lines[1]
            }
        }
        let (runner, job) = place(in: environment)
        return SuiteRunInfo(
            startedAtUs: startedAtUs, gitCommit: commit, gitBranch: branch == "HEAD" ? nil : branch,
            commandLine: storedCommandLine(commandLine), origin: "run", shard: shard, runner: runner, ciJob: job)
    }

    /// The command line as the catalog keeps it, which every reader of a team's catalog sees:
    /// each argument redacted whole, before the arguments are joined — a URL's password
    /// (`--catalog postgres://user:PASSWORD@…`, one with a space in it too) and every secret the
    /// log writers redact (`Redactor.standard`: the environment's secret values, key patterns).
    static func storedCommandLine(_ arguments: [String]) -> String {
        arguments.map { Redactor.standard.redactText(PostgresTarget.redacted($0)) }.joined(separator: " ")
    }

    /// Where a suite run runs, from the variables CI services set (docs/catalog.md): the runner's
    /// name (`RUNNER_NAME`, `CI_RUNNER_DESCRIPTION`, `BUILDKITE_AGENT_NAME`, `NODE_NAME`), else the
    /// host's; the link to the job (GitHub Actions' run URL and job, `CI_JOB_URL`,
    /// `BUILDKITE_BUILD_URL`, `CIRCLE_BUILD_URL`, Jenkins' `BUILD_URL`), nil outside a CI.
    static func place(in environment: [String: String]) -> (runner: String?, job: String?) {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let runner =
            value("RUNNER_NAME") ?? value("CI_RUNNER_DESCRIPTION") ?? value("BUILDKITE_AGENT_NAME") ?? value("NODE_NAME")
            ?? Self.hostName()
        var job: String?
        if let server = value("GITHUB_SERVER_URL"), let repository = value("GITHUB_REPOSITORY"), let run = value("GITHUB_RUN_ID") {
            job =
                "\(server)/\(repository)/actions/runs/\(run)" + (value("GITHUB_RUN_ATTEMPT").map { "/attempts/\($0)" } ?? "")
                + (value("GITHUB_JOB").map { " (job \($0))" } ?? "")
        } else {
            job = value("CI_JOB_URL") ?? value("BUILDKITE_BUILD_URL") ?? value("CIRCLE_BUILD_URL") ?? value("BUILD_URL")
        }
        return (runner, job)
    }

    /// This machine's host name, when it has one.
    static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// The lines `git arguments` prints, or none (no git, no repository, or a git that did not
    /// answer within 10 s: a lock or a credential prompt must not hold up a suite run). Started
    /// like every program agent-eval runs (`ChildProcess`), on a thread of its own.
    private static func git(_ arguments: [String]) async -> [String] {
        let child = ChildProcess(command: ["git"] + arguments, timeoutMs: 10_000, outputLimit: 64 << 10)
        guard let result = try? await child.run(), result.exitStatus == 0 else { return [] }
        return String(decoding: result.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

extension Catalog {
    /// Records a finished suite run — its report, and an index of the run logs its live cases
    /// wrote (`CaseResult.writtenRunLogs`) — and returns the suite run's id.
    @discardableResult
    public func record(_ report: EvalReport, info: SuiteRunInfo) throws(CatalogError) -> Int {
        let id = try insert(SuiteRows(report), info: info).id
        // The run logs only: a live pipeline's child run logs, not its pipeline log (not a run).
        // Indexed already when the session was given the catalog's `IndexingSink`: then each is
        // only checked against its fingerprint here.
        for log in report.results.flatMap(\.writtenRunLogs) where FileManager.default.fileExists(atPath: log) {
            _ = try index(log: log)
        }
        return id
    }

    /// Records a finished suite run (`record(_:info:)`) and reads what its history says now:
    /// the cases flaky in history (when `flakyHistory`, `run --history`), and the quarantined
    /// cases that passed their last `QuarantineEntry.releaseStreak` suite runs, this one included.
    /// Throws only when the suite run could not be recorded; a history that could not be read
    /// afterwards is what was read, with the error in `problems`.
    public func recordSuite(_ report: EvalReport, info: SuiteRunInfo, flakyHistory: Bool) throws(CatalogError) -> SuiteHistory {
        try record(report, info: info)
        var history = SuiteHistory(flaky: flakyHistory ? [] : nil)
        do throws(CatalogError) {
            if flakyHistory { history.flaky = try flakyCases(in: report) }
            for result in report.results where result.evalCase.quarantine != nil {
                let streak = try self.history(caseId: result.id, limit: QuarantineEntry.releaseStreak).passingStreak
                if streak >= QuarantineEntry.releaseStreak { history.readyToRelease.append(.init(caseId: result.id, streak: streak)) }
            }
        } catch {
            history.problems.append(error)
        }
        return history
    }

    /// The cases of `report` whose last `last` suite runs (this one included, once recorded)
    /// disagree: flaky in history even when this run passed. In report order.
    public func flakyCases(in report: EvalReport, last: Int = 10) throws(CatalogError) -> [CaseStability] {
        var flaky: [CaseStability] = []
        for result in report.results {
            let history = try history(caseId: result.id, limit: last)
            if history.isFlaky { flaky.append(history) }
        }
        return flaky
    }
}

/// What a suite run's recorded history says of its cases, right after it was recorded
/// (`Catalog.recordSuite`): `agent-eval run` prints it and adds it to its JSON report.
public struct SuiteHistory: Sendable, Equatable {
    /// A quarantined case that can be released: it passed its last `streak` suite runs.
    public struct Release: Sendable, Equatable {
        public var caseId: String
        public var streak: Int
    }

    /// The cases flaky in history, in report order; nil when not asked for (`run --history`).
    public var flaky: [CaseStability]?
    /// The quarantined cases ready to be released, in report order.
    public var readyToRelease: [Release] = []
    /// Why the history could not be read whole (the suite run was recorded).
    public var problems: [CatalogError] = []

    public init(flaky: [CaseStability]? = nil, readyToRelease: [Release] = []) {
        self.flaky = flaky
        self.readyToRelease = readyToRelease
    }

    /// The report's JSON with the history's members: `flaky_in_history` (when asked for: a list,
    /// empty when no case is flaky) and `ready_to_release` (case ids, when there are any).
    public func adding(to report: JSONValue) -> JSONValue {
        guard case .object(var members) = report else { return report }
        if let flaky { members["flaky_in_history"] = .array(flaky.map(\.json)) }
        if !readyToRelease.isEmpty { members["ready_to_release"] = .array(readyToRelease.map { .string($0.caseId) }) }
        return .object(members)
    }

    /// The lines `run` prints for it, before the summary.
    public var lines: [String] {
        (flaky ?? []).map { "FLAKY in history: \($0.caseId) \($0.sentence)" }
            + readyToRelease.map {
                "READY TO RELEASE: \($0.caseId) passed its last \($0.streak) suite runs (agent-eval quarantine release \($0.caseId))"
            }
    }
}

extension SuiteRows {
    /// The rows of a finished suite run, read from the report itself: what `recordSuite(report:)`
    /// gets from the report's JSON, without building that document (a suite over a thousand
    /// cached logs spent as long building it as checking the logs).
    init(_ report: EvalReport) {
        let counts = report.counts
        var digests = CaseFileDigests()
        self.init(
            durationMs: Int((report.durationSeconds * 1000).rounded()), cases: counts.cases, passed: counts.passed,
            failed: counts.failed, errors: counts.errors, k: report.k,
            caseRows: report.results.map { result in
                Case(
                    caseId: result.id, file: result.evalCase.location.path,
                    fileDigest: digests.digest(of: result.evalCase.location.path), isLive: result.evalCase.isLive,
                    outcome: EvalReport.outcome(result), passRate: result.passRate,
                    passHatK: result.counts.attempts >= report.k ? result.passHatK(report.k) : nil, stability: result.stability.rawValue,
                    baselineStatus: report.comparisons[result.id]?.status.rawValue, error: result.error?.description,
                    runs: result.runs.map { run in
                        Run(
                            log: run.logPath, repeatIndex: run.repeatIndex, outcome: EvalReport.outcome(run),
                            stopReason: run.summary.stopReason?.rawValue, steps: run.summary.steps, tokens: run.summary.tokens,
                            error: run.error?.description,
                            failures: SuiteRows.encodedList(.array(EvalReport.failureEntries(run))),
                            judgements: SuiteRows.encodedList(.array(run.judgements.map(\.json))))
                    })
            })
    }
}
