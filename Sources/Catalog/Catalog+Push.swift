import TraceLog

/// What `Catalog.push(to:)` copied.
public struct PushSummary: Sendable, Hashable {
    /// Suite runs copied, and those the target had already.
    public var suiteRuns = 0
    public var suiteRunsKnown = 0
    /// Log rows copied (new, or changed since the target's copy), and those it had as they are.
    public var logs = 0
    public var logsKnown = 0
    /// Rows of the target that held another run at the same path (another runner's, say, in
    /// the same workspace path), replaced by this catalog's: what was lost there, to be said.
    public var replacedRuns: [ReplacedRun] = []

    /// A run of the target's replaced by another at its path.
    public struct ReplacedRun: Sendable, Hashable {
        public var path: String
        public var runId: String?
        public var seenOn: String?
        public var byRunId: String?
    }

    public init() {}
}

extension Catalog {
    /// Copies this catalog's suite runs (with their case and eval results) and its log rows
    /// (with their calls) into `target`, typically a team's PostgreSQL catalog after a CI job
    /// that ran with the embedded SQLite one. Idempotent: a suite run the target holds already
    /// (the same start time, command line, runner, commit and shard) is not copied again, and a
    /// log row whose log the target knows at that path with the same identity (size,
    /// modification time, tail hash) or the same content hash is left as it is; one it knows
    /// there with another identity is replaced, and the target's record of the file
    /// (`log_files`) takes the identity it was read from. The fact cache and
    /// step tables, caches of this machine's files, stay behind. Each suite run, and each batch
    /// of logs, is one transaction in the target.
    public func push(to target: Catalog, logsPerTransaction: Int = 256) throws(CatalogError) -> PushSummary {
        var summary = PushSummary()
        let suites = try read { db in try db.rows("SELECT * FROM suite_runs ORDER BY suite_run_id") }
        for suite in suites {
            let id: Int = suite["suite_run_id"]
            let (cases, evals) = try read { db in
                (
                    try db.rows("SELECT * FROM case_results WHERE suite_run_id = ? ORDER BY case_id", [id]),
                    try db.rows("SELECT * FROM eval_results WHERE suite_run_id = ? ORDER BY case_id, ordinal", [id])
                )
            }
            let copied = try target.write { db -> Bool in
                let known =
                    try db.value(
                        """
                        SELECT COUNT(*) FROM suite_runs WHERE (started_at_us = ? AND command_line = ? AND runner IS NOT DISTINCT FROM ?
                            AND git_commit IS NOT DISTINCT FROM ? AND shard IS NOT DISTINCT FROM ?) OR inputs_digest = ?
                        """,
                        [
                            suite.value("started_at_us"), suite.value("command_line"), suite.value("runner"), suite.value("git_commit"),
                            suite.value("shard"), suite.value("inputs_digest"),
                        ], as: Int.self) ?? 0
                guard known == 0 else { return false }
                let newId = try Self.copy(suite, into: "suite_runs", in: db, replacing: ["suite_run_id": nil], returning: "suite_run_id")
                for row in cases { _ = try Self.copy(row, into: "case_results", in: db, replacing: ["suite_run_id": newId]) }
                for row in evals { _ = try Self.copy(row, into: "eval_results", in: db, replacing: ["suite_run_id": newId]) }
                return true
            }
            if copied { summary.suiteRuns += 1 } else { summary.suiteRunsKnown += 1 }
        }

        let paths = try read { db in try db.column("SELECT path FROM logs ORDER BY path", as: String.self) }
        for start in stride(from: 0, to: paths.count, by: max(1, logsPerTransaction)) {
            let batch = Array(paths[start..<min(paths.count, start + max(1, logsPerTransaction))])
            let rows = try read { db in
                try batch.map { path in
                    (
                        try db.row("SELECT * FROM logs WHERE path = ?", [path]),
                        try StoredLog.fetch(db, path: path),
                        try db.rows("SELECT c.* FROM calls c JOIN logs l USING (log_id) WHERE l.path = ? ORDER BY c.ordinal", [path])
                    )
                }
            }
            let (copied, known, replacedNow) = try target.write { db -> (Int, Int, [PushSummary.ReplacedRun]) in
                let toolSets = ToolSets()
                var copied = 0
                var known = 0
                var replaced: [PushSummary.ReplacedRun] = []
                for (log, ours, calls) in rows {
                    guard let log, let ours else { continue }
                    let path: String = log["path"]
                    // Ours as read. A row of an older generation of its file (the fact cache or
                    // `replay` found newer bytes since) says nothing the target's row does not:
                    // it is left as it is there, and copied only where the target has none,
                    // without an identity, so the target's next index reads the log.
                    let identity = ours.identity
                    let theirs = try StoredLog.fetch(db, path: path)
                    if let theirs, !ours.isCurrent {
                        known += 1
                        continue
                    }
                    if let theirs {
                        let same =
                            theirs.identity.stamp == identity.stamp && theirs.identity.tailHash == identity.tailHash
                            && identity.stamp.size >= 0 || ours.contentHash != nil && theirs.contentHash == ours.contentHash
                        if same {
                            known += 1
                            continue
                        }
                        // Another run at the path (not the same run grown or read again): what the
                        // target held of it goes, and the push says so.
                        let held = try db.row("SELECT run_id, seen_on FROM logs WHERE log_id = ?", [theirs.id])
                        let heldRun: String? = held?["run_id"]
                        let ourRun: String? = log["run_id"]
                        if heldRun != ourRun {
                            replaced.append(PushSummary.ReplacedRun(path: path, runId: heldRun, seenOn: held?["seen_on"], byRunId: ourRun))
                        }
                        try db.execute("DELETE FROM calls WHERE log_id = ?", [theirs.id])
                        try db.execute("DELETE FROM logs WHERE log_id = ?", [theirs.id])
                    }
                    guard
                        let file = try LogFileRecord.claim(
                            path: path, identity: identity, contentHash: ours.contentHash, known: theirs?.file, authoritative: true, in: db)
                    else { continue }
                    // The run's set of tools is the target's entry for the same tools (ids differ).
                    let hasSet = (log["tool_set"] as Int?) != nil
                    let executed = calls.filter { ($0["attempts"] as Int) > 0 }.map { $0["tool"] as String }
                    let toolSet = hasSet ? Int(try toolSets.id(of: executed, in: db)) : nil
                    let newId = try Self.copy(
                        log, into: "logs", in: db,
                        replacing: ["log_id": nil, "file_id": Int(file.id), "generation": file.generation, "tool_set": toolSet],
                        returning: "log_id")
                    for call in calls { _ = try Self.copy(call, into: "calls", in: db, replacing: ["log_id": newId]) }
                    copied += 1
                }
                return (copied, known, replaced)
            }
            summary.logs += copied
            summary.logsKnown += known
            summary.replacedRuns += replacedNow
        }
        return summary
    }

    /// Inserts `row` into `table` by column name, with the columns `replacing` names set to its
    /// values (left out, for the target to number, when nil); returns the `returning` column of
    /// the new row.
    private static func copy(
        _ row: SQLRow, into table: String, in db: any SQLConnection, replacing: [String: Int?], returning: String? = nil
    ) throws -> Int? {
        var names: [String] = []
        var values: [CatalogValue] = []
        for (position, name) in row.names.list.enumerated() where row.names.positions[name] == position {
            if let replaced = replacing[name] {
                guard let value = replaced else { continue }
                names.append(name)
                values.append(.integer(Int64(value)))
            } else {
                names.append(name)
                values.append(row.values[position])
            }
        }
        let sql =
            "INSERT INTO \(table) (\(names.joined(separator: ", "))) VALUES (\(names.map { _ in "?" }.joined(separator: ", ")))"
            + (returning.map { " RETURNING \($0)" } ?? "")
        var id: Int?
        try db.run(sql, bind: { binder in for value in values { binder.bind(value) } }) { result in id = result.int(0) }
        return id
    }
}
