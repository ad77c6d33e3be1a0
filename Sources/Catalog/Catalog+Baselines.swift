public import EvalEngine
import Foundation

extension Catalog {
    /// Baselines from the history of `branch`: for each case, what the newest `lastRuns` suite
    /// runs recorded on that branch that ran the case saw of it — its own window, so that suite
    /// runs of other cases (shards, `--filter`, an interrupted run) never push a case out of its
    /// history — passes and attempts summed (attempts that could not run left out), the stop
    /// reasons, and the newest run's trajectories (log or repeat and stop reason). The catalog
    /// keeps no tools per run, so these baselines are not compared on tools
    /// (`Baseline.knowsTools`). Cases the branch never ran have none. `suiteRuns` counts the
    /// suite runs any case's window holds.
    public func baselines(branch: String, lastRuns: Int = 10) throws(CatalogError) -> (suiteRuns: Int, baselines: [String: Baseline]) {
        try read { db -> (Int, [String: Baseline]) in
            struct Tally {
                var passes = 0
                var attempts = 0
                var stops = Set<String>()
                /// The case's window: its newest suite runs, by their place (1: the newest).
                var window: [Int: Int] = [:]
                var newest: Int?
                var newestPassed = false
                var runs: [Baseline.Trajectory] = []
            }
            var tallies: [String: Tally] = [:]
            for row in try db.rows(
                """
                SELECT case_id, suite_run_id, outcome, place FROM (
                    SELECT cr.case_id, cr.suite_run_id, cr.outcome,
                        ROW_NUMBER() OVER (PARTITION BY cr.case_id ORDER BY sr.started_at_us DESC, sr.suite_run_id DESC) AS place
                    FROM case_results cr JOIN suite_runs sr ON sr.suite_run_id = cr.suite_run_id
                    WHERE sr.git_branch = ?
                ) AS ranked WHERE place <= ?
                """, [branch, lastRuns])
            {
                let id: String = row["case_id"]
                let suiteRun: Int = row["suite_run_id"]
                let place: Int = row["place"]
                var tally = tallies[id] ?? Tally()
                tally.window[suiteRun] = place
                // The newest suite run in which the case ran (did not only error): its outcome and trajectories.
                let outcome: String = row["outcome"]
                if outcome != "error", tally.newest.map({ place < tally.window[$0, default: .max] }) ?? true {
                    tally.newest = suiteRun
                    tally.newestPassed = outcome == "pass" || outcome == "flaky_pass"
                }
                tallies[id] = tally
            }
            let windowed = Set(tallies.values.flatMap(\.window.keys))
            guard !windowed.isEmpty else { return (0, [:]) }
            let list = windowed.sorted().map(String.init).joined(separator: ",")
            for row in try db.rows(
                """
                SELECT suite_run_id, case_id, log_path, repeat_index, outcome, stop_reason FROM eval_results
                WHERE suite_run_id IN (\(list)) ORDER BY case_id, ordinal
                """)
            {
                let id: String = row["case_id"]
                let suiteRun: Int = row["suite_run_id"]
                guard var tally = tallies[id], tally.window[suiteRun] != nil else { continue }
                let outcome: String = row["outcome"]
                guard outcome != "error" else { continue }
                tally.attempts += 1
                if outcome == "pass" { tally.passes += 1 }
                let stop: String? = row["stop_reason"]
                if let stop { tally.stops.insert(stop) }
                if suiteRun == tally.newest {
                    let label = RunResult.label(log: row["log_path"], repeatIndex: row["repeat_index"])
                    tally.runs.append(Baseline.Trajectory(run: label, tools: [], stopReason: stop))
                }
                tallies[id] = tally
            }
            var baselines: [String: Baseline] = [:]
            for (id, tally) in tallies where tally.attempts > 0 {
                baselines[id] = Baseline(
                    caseId: id, passed: tally.newestPassed, counts: PassCounts(passes: tally.passes, attempts: tally.attempts),
                    runs: tally.runs, stopReasonsSeen: tally.stops.sorted())
            }
            return (windowed.count, baselines)
        }
    }
}
