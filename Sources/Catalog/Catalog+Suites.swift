import Foundation
public import TraceCore

/// Where a suite run came from, beside its report.
public struct SuiteRunInfo: Sendable, Hashable {
    public var startedAtUs: Int
    public var gitCommit: String?
    public var gitBranch: String?
    /// The command line that ran it.
    public var commandLine: String
    /// `run` for `agent-eval run`, `merge` for `results merge`.
    public var origin: String
    /// `i/n` for one shard of a suite.
    public var shard: String?
    /// Where it ran: the CI's name for the runner, else the host's name.
    public var runner: String?
    /// The CI's link to the job that ran it (or its id, where the CI gives no link).
    public var ciJob: String?
    /// For a merged suite run, `sha256:` of the reports merged (`results merge`): the same
    /// reports are one suite run, however often they are merged into the catalog.
    public var inputsDigest: String?

    public init(
        startedAtUs: Int, gitCommit: String? = nil, gitBranch: String? = nil, commandLine: String, origin: String = "run",
        shard: String? = nil, runner: String? = nil, ciJob: String? = nil
    ) {
        self.startedAtUs = startedAtUs
        self.gitCommit = gitCommit
        self.gitBranch = gitBranch
        // Every reader of a team's catalog sees it: a URL's password (`--catalog
        // postgres://user:PASSWORD@…`) is never stored.
        self.commandLine = commandLine.split(separator: " ", omittingEmptySubsequences: false).map {
            PostgresTarget.redacted(String($0))
        }.joined(separator: " ")
        self.origin = origin
        self.shard = shard
        self.runner = runner
        self.ciJob = ciJob
    }
}

/// One suite run's outcome for one case.
public struct CaseHistoryEntry: Sendable, Hashable {
    public var suiteRunId: Int
    public var startedAtUs: Int
    public var gitCommit: String?
    public var gitBranch: String?
    /// Where the suite run ran (`SuiteRunInfo`); nil for one recorded before schema version 10.
    public var runner: String?
    public var ciJob: String?
    /// `sha256:<hex>` of the case's file as the suite run found it; nil when it could not be
    /// read, and for suite runs recorded before the catalog kept it (schema version 7).
    public var fileDigest: String?
    /// `pass`, `fail`, `error` (the report's outcome).
    public var outcome: String
    public var runs: Int
    public var passedRuns: Int
    public var passRate: Double
    public var stability: String

    /// Whether `other` checked the same case definition on the same code: the same case file
    /// digest and the same commit (an unknown one equals an unknown one: nothing tells them apart).
    public func isSameSeries(as other: CaseHistoryEntry) -> Bool {
        fileDigest == other.fileDigest && gitCommit == other.gitCommit
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("suite_run", suiteRunId)
        object.set("started_at_us", startedAtUs)
        object.set("git_commit", gitCommit)
        object.set("git_branch", gitBranch)
        object.set("runner", runner)
        object.set("ci_job", ciJob)
        object.set("file_digest", fileDigest)
        object.set("outcome", outcome)
        object.set("runs", runs)
        object.set("passed_runs", passedRuns)
        object.set("pass_rate", passRate)
        object.set("stability", stability)
        return object.json
    }
}

/// How a case fared over its recent suite runs.
///
/// Flakiness is mixed outcomes of the same case definition on the same code. The suite runs
/// are cut into series where the case file's digest or the commit changes, and a case is flaky
/// when one series holds a pass and a result that is not, or when one suite run's repeats
/// disagreed. A case that passed and then failed after its file was edited, or on a new commit,
/// changed: `lastChange` says where.
public struct CaseStability: Sendable, Hashable {
    public var caseId: String
    /// Newest first.
    public var entries: [CaseHistoryEntry]

    /// Suite runs whose gate passed the case (`pass` or `flaky_pass`).
    public var passedCount: Int { entries.count { $0.outcome == "pass" || $0.outcome == "flaky_pass" } }

    /// How many of the newest suite runs passed in a row (every attempt: `pass`, not
    /// `flaky_pass`): a quarantined case with a long enough streak is ready to release.
    public var passingStreak: Int { entries.prefix { $0.outcome == "pass" }.count }

    /// The entries cut into runs of consecutive suite runs of the same case file and commit,
    /// newest first, each newest first.
    public var series: [[CaseHistoryEntry]] {
        var series: [[CaseHistoryEntry]] = []
        for entry in entries {
            if let last = series.last?.last, entry.isSameSeries(as: last) {
                series[series.count - 1].append(entry)
            } else {
                series.append([entry])
            }
        }
        return series
    }

    /// A series with a pass and a result that is not one, or a suite run flaky within itself.
    public var isFlaky: Bool {
        entries.contains { $0.stability == "flaky" }
            || series.contains { runs in runs.contains { $0.outcome == "pass" } && runs.contains { $0.outcome != "pass" } }
    }

    /// Where the case last went from passing to not passing or back, when its file or the
    /// commit changed there (`failing since suite run #12, where its case file changed`); nil
    /// for a flaky case and for one whose newest series agrees with the one before.
    public var lastChange: String? {
        let series = series
        guard !isFlaky, series.count > 1, let first = series[0].last, let before = series[1].first,
            (first.outcome == "pass") != (before.outcome == "pass")
        else { return nil }
        var what: [String] = []
        if first.fileDigest != before.fileDigest { what.append("its case file changed") }
        if first.gitCommit != before.gitCommit { what.append("the commit changed") }
        return "\(first.outcome == "pass" ? "passing" : "failing") since suite run #\(first.suiteRunId), where "
            + what.joined(separator: " and ")
    }

    /// `passed 7 of its last 10 suite runs`.
    public var sentence: String {
        "passed \(passedCount) of its last \(entries.count) suite run\(entries.count == 1 ? "" : "s")"
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("case_id", caseId)
        object.set("flaky", isFlaky)
        object.set("last_change", lastChange)
        object.set("passed", passedCount)
        object.set("suite_runs", entries.count)
        object.set("history", JSONValue.array(entries.map(\.json)))
        return object.json
    }
}

/// The digests of case files, each file read once: what a suite run records as the definition
/// of its cases (`case_results.file_digest`), so that `history` tells an edited case from a
/// flaky one. The whole file counts, as for the check cache's key: any edit starts a new series.
struct CaseFileDigests {
    private var known: [String: String?] = [:]

    /// `sha256:<hex>` of the file's bytes as they are now; nil when there is no file or it
    /// cannot be read.
    mutating func digest(of path: String?) -> String? {
        guard let path, !path.isEmpty else { return nil }
        if let digest = known[path] { return digest }
        let digest = FileManager.default.contents(atPath: path).map { ContentHash.sha256($0) }
        known[path] = digest
        return digest
    }
}

/// A suite run's rows as the catalog stores them: the suite, one row per case, one per checked
/// log or live repeat. Made from a report's JSON (docs/eval-results.md: a merged or imported
/// results file) or, without building that JSON, from the report itself (`agent-eval run`);
/// a test shows both give the same rows.
struct SuiteRows {
    struct Case {
        var caseId: String
        var file: String?
        /// `sha256:<hex>` of `file` as it is when the rows are made (`CaseFileDigests`).
        var fileDigest: String?
        var isLive: Bool
        var outcome: String
        var passRate: Double
        var passHatK: Double?
        var stability: String
        var baselineStatus: String?
        var error: String?
        var runs: [Run]
    }

    struct Run {
        var log = ""
        var repeatIndex = 0
        var outcome = "error"
        var stopReason: String?
        var steps: Int?
        var tokens: Int?
        var error: String?
        /// JSON lists as stored.
        var failures = "[]"
        var judgements = "[]"
    }

    var durationMs: Int
    var cases: Int
    var passed: Int
    var failed: Int
    var errors: Int
    var k: Int
    var caseRows: [Case]

    /// A JSON list as stored; an empty one without the writer.
    static func encodedList(_ value: JSONValue) -> String {
        if case .array(let items) = value, items.isEmpty { return "[]" }
        return JSONWriter.encodeString(value)
    }
}

extension SuiteRows {
    /// The rows of a results document (docs/eval-results.md).
    init(json report: JSONValue) throws(CatalogError) {
        guard case .array(let cases)? = report["cases"], case .object? = report["summary"] else {
            throw CatalogError(.badResults, "the report has no summary and cases (is it an agent-eval results file?)")
        }
        let summary = report["summary"]
        durationMs = summary?["duration_ms"]?.intValue ?? 0
        self.cases = summary?["cases"]?.intValue ?? cases.count
        passed = summary?["passed"]?.intValue ?? 0
        failed = summary?["failed"]?.intValue ?? 0
        errors = summary?["errors"]?.intValue ?? 0
        k = report["k"]?.intValue ?? 1
        caseRows = []
        var digests = CaseFileDigests()
        for entry in cases {
            guard let caseId = entry["case_id"]?.stringValue else { continue }
            var runs: [Run] = []
            if case .array(let list)? = entry["runs"] {
                runs.reserveCapacity(list.count)
                for run in list {
                    // One pass over the run's members (a suite can hold thousands of runs).
                    var row = Run()
                    if case .object(let members) = run {
                        for member in members {
                            switch member.key {
                            case "log": row.log = member.value.stringValue ?? ""
                            case "repeat": row.repeatIndex = member.value.intValue ?? 0
                            case "outcome": row.outcome = member.value.stringValue ?? "error"
                            case "stop_reason": row.stopReason = member.value.stringValue
                            case "steps": row.steps = member.value.intValue
                            case "tokens": row.tokens = member.value.intValue
                            case "error": row.error = member.value.stringValue
                            case "failures": row.failures = Self.encodedList(member.value)
                            case "judgements": row.judgements = Self.encodedList(member.value)
                            default: break
                            }
                        }
                    }
                    runs.append(row)
                }
            }
            let file = entry["file"]?.stringValue
            caseRows.append(
                Case(
                    caseId: caseId, file: file, fileDigest: digests.digest(of: file), isLive: entry["source"]?.stringValue == "live",
                    outcome: entry["outcome"]?.stringValue ?? "error", passRate: entry["pass_rate"]?.doubleValue ?? 0,
                    passHatK: entry["pass_hat_k"]?.doubleValue, stability: entry["stability"]?.stringValue ?? "stable_fail",
                    baselineStatus: entry["baseline"]?["status"]?.stringValue, error: entry["error"]?.stringValue, runs: runs))
        }
    }
}

extension Catalog {
    /// Records a suite run from its report (the JSON of docs/eval-results.md): one row for the
    /// suite, one per case, one per checked log or live repeat. Returns the suite run's id.
    @discardableResult
    public func recordSuite(report: JSONValue, info: SuiteRunInfo) throws(CatalogError) -> Int {
        try recordSuiteOnce(report: report, info: info).id
    }

    /// `recordSuite`, saying whether a suite run was recorded now: with `info.inputsDigest`, the
    /// suite run already recorded from the same inputs is the answer (`isNew` false), and
    /// nothing is written.
    public func recordSuiteOnce(report: JSONValue, info: SuiteRunInfo) throws(CatalogError) -> (id: Int, isNew: Bool) {
        try insert(SuiteRows(json: report), info: info)
    }

    /// Writes a suite run's rows in one transaction and returns the suite run's id (or the one
    /// recorded before from the same inputs, when `info` names them).
    func insert(_ suite: SuiteRows, info: SuiteRunInfo) throws(CatalogError) -> (id: Int, isNew: Bool) {
        try write { db in
            if let digest = info.inputsDigest,
                let known = try db.value(
                    "SELECT MIN(suite_run_id) FROM suite_runs WHERE inputs_digest = ?", [digest], as: Int.self)
            {
                return (known, false)
            }
            let suiteRunId = Int64(
                try db.value(
                    """
                    INSERT INTO suite_runs (started_at_us, duration_ms, git_commit, git_branch, command_line, origin, shard, cases,
                        passed, failed, errors, k, runner, ci_job, inputs_digest)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    RETURNING suite_run_id
                    """,
                    [
                        info.startedAtUs, suite.durationMs, info.gitCommit, info.gitBranch, info.commandLine, info.origin, info.shard,
                        suite.cases, suite.passed, suite.failed, suite.errors, suite.k, info.runner, info.ciJob, info.inputsDigest,
                    ], as: Int.self) ?? 0)
            // A case or run a report names twice is kept once, as its last entry says.
            let caseStatement = """
                INSERT INTO case_results (suite_run_id, case_id, file, source, outcome, runs, passed_runs, pass_rate,
                    pass_hat_k, stability, baseline_status, error, file_digest)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (suite_run_id, case_id) DO UPDATE SET file = excluded.file, source = excluded.source,
                    outcome = excluded.outcome, runs = excluded.runs, passed_runs = excluded.passed_runs, pass_rate = excluded.pass_rate,
                    pass_hat_k = excluded.pass_hat_k, stability = excluded.stability, baseline_status = excluded.baseline_status,
                    error = excluded.error, file_digest = excluded.file_digest
                """
            let runStatement = """
                INSERT INTO eval_results (suite_run_id, case_id, ordinal, log_path, live, repeat_index, outcome,
                    stop_reason, steps, tokens, error, failures, judgements)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (suite_run_id, case_id, ordinal) DO UPDATE SET log_path = excluded.log_path, live = excluded.live,
                    repeat_index = excluded.repeat_index, outcome = excluded.outcome, stop_reason = excluded.stop_reason,
                    steps = excluded.steps, tokens = excluded.tokens, error = excluded.error, failures = excluded.failures,
                    judgements = excluded.judgements
                """
            for entry in suite.caseRows {
                let source = entry.isLive ? "live" : "recorded"
                try db.execute(caseStatement) { bound in
                    bound.bind(suiteRunId)
                    bound.bind(entry.caseId)
                    bound.bind(entry.file)
                    bound.bind(source)
                    bound.bind(entry.outcome)
                    bound.bind(entry.runs.count)
                    bound.bind(entry.runs.count { $0.outcome == "pass" })
                    bound.bind(entry.passRate)
                    bound.bind(entry.passHatK)
                    bound.bind(entry.stability)
                    bound.bind(entry.baselineStatus)
                    bound.bind(entry.error)
                    bound.bind(entry.fileDigest)
                }
                for (ordinal, run) in entry.runs.enumerated() {
                    try db.execute(runStatement) { bound in
                        bound.bind(suiteRunId)
                        bound.bind(entry.caseId)
                        bound.bind(ordinal)
                        bound.bind(run.log)
                        bound.bind(entry.isLive ? 1 : 0)
                        bound.bind(run.repeatIndex)
                        bound.bind(run.outcome)
                        bound.bind(run.stopReason)
                        bound.bind(run.steps)
                        bound.bind(run.tokens)
                        bound.bind(run.error)
                        bound.bind(run.failures)
                        bound.bind(run.judgements)
                    }
                }
            }
            return (Int(suiteRunId), true)
        }
    }

    /// The statement `history` runs, with the case id and the limit to bind: it walks
    /// `suite_runs_by_start` newest first and finds the case's row of each suite run in
    /// `case_results_by_case` (a test reads PostgreSQL's plan of it over many suite runs).
    static let historyStatement = """
        SELECT suite_run_id, started_at_us, git_commit, git_branch, runner, ci_job, file_digest, outcome, runs, passed_runs,
            pass_rate, stability
        FROM case_history WHERE case_id = ? ORDER BY started_at_us DESC, suite_run_id DESC LIMIT ?
        """

    /// The store's plan for `history(caseId:limit:)`, one line per step (SQLite's `EXPLAIN QUERY
    /// PLAN`, PostgreSQL's `EXPLAIN`).
    public func plan(historyOf caseId: String, limit: Int = 20) throws(CatalogError) -> [String] {
        try read { db in try db.plan(Self.historyStatement, [caseId, limit]) }
    }

    /// The last `limit` suite runs' outcomes for `caseId`, newest first.
    public func history(caseId: String, limit: Int = 20) throws(CatalogError) -> CaseStability {
        let entries = try read { db in
            try db.rows(Self.historyStatement, [caseId, limit]).map { row in
                CaseHistoryEntry(
                    suiteRunId: row["suite_run_id"], startedAtUs: row["started_at_us"], gitCommit: row["git_commit"],
                    gitBranch: row["git_branch"], runner: row["runner"], ciJob: row["ci_job"], fileDigest: row["file_digest"],
                    outcome: row["outcome"], runs: row["runs"], passedRuns: row["passed_runs"], passRate: row["pass_rate"],
                    stability: row["stability"])
            }
        }
        return CaseStability(caseId: caseId, entries: entries)
    }

    /// Case ids the catalog has history for that match `pattern` (a glob), sorted.
    public func caseIds(matching pattern: String) throws(CatalogError) -> [String] {
        try read { db in
            try db.column(
                "SELECT DISTINCT case_id FROM case_results WHERE \(db.dialect.glob("case_id")) ORDER BY case_id",
                [db.dialect.globArgument(pattern)], as: String.self)
        }
    }
}

extension Catalog {
    /// The base of a pull request's comment: each case's newest result recorded on `branch` (by
    /// its suite run's start), as one results document with what the catalog keeps of it
    /// (docs/eval-results.md: each case's outcome, source, file, baseline status and error, and
    /// its runs' outcome, log, stop reason, steps, tokens and failures), and the suite runs they
    /// came from, newest first. Per case, as the gate's `baselines(branch:)` is: a suite run of
    /// some cases (a `--filter`, a shard) does not hide the others' results. Nil when the branch
    /// has none. The summary counts the cases chosen; `k` and the duration are the newest suite
    /// run's.
    public func latestCaseReport(branch: String) throws(CatalogError) -> (suiteRunIds: [Int], report: JSONValue)? {
        try read { db -> ([Int], JSONValue)? in
            struct Entry {
                var suiteRun: Int
                var file: String?
                var outcome: String
                var json: ObjectBuilder
            }
            var entries: [String: Entry] = [:]
            var suiteRuns: [(id: Int, place: Int)] = []
            for row in try db.rows(
                """
                SELECT case_id, suite_run_id, file, source, outcome, pass_rate, stability, baseline_status, error, suite_place FROM (
                    SELECT cr.case_id, cr.suite_run_id, cr.file, cr.source, cr.outcome, cr.pass_rate, cr.stability,
                        cr.baseline_status, cr.error,
                        ROW_NUMBER() OVER (PARTITION BY cr.case_id ORDER BY sr.started_at_us DESC, sr.suite_run_id DESC) AS place,
                        DENSE_RANK() OVER (ORDER BY sr.started_at_us DESC, sr.suite_run_id DESC) AS suite_place
                    FROM case_results cr JOIN suite_runs sr ON sr.suite_run_id = cr.suite_run_id
                    WHERE sr.git_branch = ?
                ) AS ranked WHERE place = 1
                """, [branch])
            {
                let caseId: String = row["case_id"]
                let suiteRun: Int = row["suite_run_id"]
                if !suiteRuns.contains(where: { $0.id == suiteRun }) { suiteRuns.append((suiteRun, row["suite_place"])) }
                entries[caseId] = Entry(suiteRun: suiteRun, file: row["file"], outcome: row["outcome"], json: Self.reportCase(row))
            }
            guard !entries.isEmpty else { return nil }
            suiteRuns.sort { $0.place < $1.place }
            let list = suiteRuns.map { String($0.id) }.sorted().joined(separator: ",")
            var runsByCase: [String: [JSONValue]] = [:]
            for row in try db.rows(
                """
                SELECT suite_run_id, case_id, log_path, repeat_index, outcome, stop_reason, steps, tokens, error, failures
                FROM eval_results WHERE suite_run_id IN (\(list)) ORDER BY case_id, ordinal
                """)
            {
                let caseId: String = row["case_id"]
                guard entries[caseId]?.suiteRun == row["suite_run_id"] as Int else { continue }
                runsByCase[caseId, default: []].append(Self.reportRun(row))
            }
            // The order a suite run's document has: by file (none first), then case id.
            let ordered = entries.sorted { a, b in
                if a.value.file != b.value.file {
                    guard let first = a.value.file else { return true }
                    guard let second = b.value.file else { return false }
                    return Array(first.utf8).lexicographicallyPrecedes(Array(second.utf8))
                }
                return Array(a.key.utf8).lexicographicallyPrecedes(Array(b.key.utf8))
            }
            var cases: [JSONValue] = []
            var counts = (passed: 0, failed: 0, errors: 0)
            for (caseId, entry) in ordered {
                var json = entry.json
                json.set("runs", JSONValue.array(runsByCase[caseId] ?? []))
                cases.append(json.json)
                switch entry.outcome {
                case "pass", "flaky_pass": counts.passed += 1
                case "error": counts.errors += 1
                default: counts.failed += 1
                }
            }
            let newest = try db.row("SELECT duration_ms, k FROM suite_runs WHERE suite_run_id = ?", [suiteRuns[0].id])
            var summary = ObjectBuilder()
            summary.set("cases", cases.count)
            summary.set("passed", counts.passed)
            summary.set("failed", counts.failed)
            summary.set("errors", counts.errors)
            summary.set("duration_ms", newest?["duration_ms"] as Int? ?? 0)
            var document = ObjectBuilder()
            document.set("schema", "agent-eval/results")
            document.set("version", 1)
            document.set("k", newest?["k"] as Int? ?? 1)
            document.set("summary", summary.json)
            document.set("cases", JSONValue.array(cases))
            return (suiteRuns.map(\.id), document.json)
        }
    }

    /// Suite run `id` as a results document (what the catalog keeps of it, as
    /// `latestCaseReport` says); nil when there is none.
    public func suiteReport(id: Int) throws(CatalogError) -> JSONValue? {
        try read { db -> JSONValue? in
            let statement = "SELECT suite_run_id, duration_ms, cases, passed, failed, errors, k FROM suite_runs WHERE suite_run_id = ?"
            guard let suite = try db.row(statement, [id]) else { return nil }
            var runsByCase: [String: [JSONValue]] = [:]
            for row in try db.rows(
                """
                SELECT case_id, log_path, repeat_index, outcome, stop_reason, steps, tokens, error, failures FROM eval_results
                WHERE suite_run_id = ? ORDER BY case_id, ordinal
                """, [id])
            {
                runsByCase[row["case_id"], default: []].append(Self.reportRun(row))
            }
            var cases: [JSONValue] = []
            for row in try db.rows(
                """
                SELECT case_id, file, source, outcome, pass_rate, stability, baseline_status, error FROM case_results
                WHERE suite_run_id = ? ORDER BY \(db.dialect.nullsFirst("file")), case_id
                """, [id])
            {
                var entry = Self.reportCase(row)
                entry.set("runs", JSONValue.array(runsByCase[row["case_id"]] ?? []))
                cases.append(entry.json)
            }
            var summary = ObjectBuilder()
            for key in ["cases", "passed", "failed", "errors", "duration_ms"] { summary.set(key, suite[key] as Int) }
            var document = ObjectBuilder()
            document.set("schema", "agent-eval/results")
            document.set("version", 1)
            document.set("k", suite["k"] as Int)
            document.set("suite_run_id", id)
            document.set("summary", summary.json)
            document.set("cases", JSONValue.array(cases))
            return document.json
        }
    }

    /// A case's entry in a results document made from the catalog, from its `case_results` row
    /// (`case_id, file, source, outcome, pass_rate, stability, baseline_status, error`), without
    /// its runs.
    private static func reportCase(_ row: SQLRow) -> ObjectBuilder {
        var entry = ObjectBuilder()
        entry.set("case_id", row["case_id"] as String)
        entry.set("file", row["file"] as String?)
        entry.set("source", row["source"] as String)
        entry.set("outcome", row["outcome"] as String)
        entry.set("pass_rate", row["pass_rate"] as Double)
        entry.set("stability", row["stability"] as String)
        if let status = row["baseline_status"] as String? {
            var baseline = ObjectBuilder()
            baseline.set("status", status)
            entry.set("baseline", baseline.json)
        }
        entry.set("error", row["error"] as String?)
        return entry
    }

    /// A run in a results document made from the catalog, from its `eval_results` row
    /// (`log_path, repeat_index, outcome, stop_reason, steps, tokens, error, failures`).
    private static func reportRun(_ row: SQLRow) -> JSONValue {
        var run = ObjectBuilder()
        run.set("log", row["log_path"] as String)
        let repeatIndex: Int = row["repeat_index"]
        if repeatIndex > 0 { run.set("repeat", repeatIndex) }
        run.set("outcome", row["outcome"] as String)
        run.set("stop_reason", row["stop_reason"] as String?)
        run.set("steps", row["steps"] as Int?)
        run.set("tokens", row["tokens"] as Int?)
        run.set("error", row["error"] as String?)
        run.set("failures", (try? JSONParser.parse(Array((row["failures"] as String).utf8))) ?? .array([]))
        return run.json
    }
}

/// One suite run as the catalog lists it.
public struct SuiteRunRow: Sendable, Hashable {
    public var id: Int
    public var startedAtUs: Int
    public var durationMs: Int
    public var gitCommit: String?
    public var gitBranch: String?
    public var origin: String
    public var shard: String?
    public var runner: String?
    public var ciJob: String?
    public var cases: Int
    public var passed: Int
    public var failed: Int
    public var errors: Int

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("suite_run", id)
        object.set("started_at_us", startedAtUs)
        object.set("duration_ms", durationMs)
        object.set("git_commit", gitCommit)
        object.set("git_branch", gitBranch)
        object.set("origin", origin)
        object.set("shard", shard)
        object.set("runner", runner)
        object.set("ci_job", ciJob)
        object.set("cases", cases)
        object.set("passed", passed)
        object.set("failed", failed)
        object.set("errors", errors)
        return object.json
    }
}

extension Catalog {
    /// Whether the catalog holds suite run `id`.
    public func hasSuiteRun(id: Int) throws(CatalogError) -> Bool {
        try read { db in try db.row("SELECT 1 FROM suite_runs WHERE suite_run_id = ?", [id]) != nil }
    }

    /// Suite runs newest first, `limit` of them, before suite run `before` (its id) when given;
    /// on `branch` alone when given.
    public func suiteRuns(limit: Int = 50, before: Int? = nil, branch: String? = nil) throws(CatalogError) -> [SuiteRunRow] {
        try read { db in
            var conditions: [String] = []
            var arguments: [(any SQLArgument)?] = []
            if let before {
                conditions.append(
                    "(started_at_us, suite_run_id) < (SELECT started_at_us, suite_run_id FROM suite_runs WHERE suite_run_id = ?)")
                arguments.append(before)
            }
            if let branch {
                conditions.append("git_branch = ?")
                arguments.append(branch)
            }
            arguments.append(limit)
            return try db.rows(
                """
                SELECT suite_run_id, started_at_us, duration_ms, git_commit, git_branch, origin, shard, runner, ci_job, cases, passed,
                    failed, errors
                FROM suite_runs \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                ORDER BY started_at_us DESC, suite_run_id DESC LIMIT ?
                """, arguments
            ).map { row in
                SuiteRunRow(
                    id: row["suite_run_id"], startedAtUs: row["started_at_us"], durationMs: row["duration_ms"],
                    gitCommit: row["git_commit"],
                    gitBranch: row["git_branch"], origin: row["origin"], shard: row["shard"], runner: row["runner"], ciJob: row["ci_job"],
                    cases: row["cases"], passed: row["passed"], failed: row["failed"], errors: row["errors"])
            }
        }
    }
}
