public import EvalEngine
import Foundation

extension Catalog {
    /// Baselines from the history of `branch`: for each case, what the newest `lastRuns` suite
    /// runs recorded on that branch saw of it — passes and attempts summed (attempts that could
    /// not run left out), the stop reasons, and the newest run's trajectories (log or repeat and
    /// stop reason). The catalog keeps no tools per run, so these baselines are not compared on
    /// tools (`Baseline.knowsTools`). Cases the branch never ran have none.
    public func baselines(branch: String, lastRuns: Int = 10) throws(CatalogError) -> (suiteRuns: Int, baselines: [String: Baseline]) {
        try read { db -> (Int, [String: Baseline]) in
            let recent = try db.column(
                "SELECT suite_run_id FROM suite_runs WHERE git_branch = ? ORDER BY started_at_us DESC, suite_run_id DESC LIMIT ?",
                [branch, lastRuns], as: Int.self)
            guard !recent.isEmpty else { return (0, [:]) }
            let list = recent.map(String.init).joined(separator: ",")
            struct Tally {
                var passes = 0
                var attempts = 0
                var stops = Set<String>()
                var newest: Int?
                var newestPassed = false
                var runs: [Baseline.Trajectory] = []
            }
            var tallies: [String: Tally] = [:]
            // Newest suite run first: a case's trajectories and outcome are its newest run's.
            let order = Dictionary(uniqueKeysWithValues: recent.enumerated().map { ($1, $0) })
            for row in try db.rows(
                """
                SELECT suite_run_id, case_id, outcome FROM case_results WHERE suite_run_id IN (\(list)) AND outcome <> 'error'
                """)
            {
                let id: String = row["case_id"]
                let suiteRun: Int = row["suite_run_id"]
                var tally = tallies[id] ?? Tally()
                if tally.newest.map({ order[suiteRun, default: .max] < order[$0, default: .max] }) ?? true {
                    tally.newest = suiteRun
                    let outcome: String = row["outcome"]
                    tally.newestPassed = outcome == "pass" || outcome == "flaky_pass"
                }
                tallies[id] = tally
            }
            for row in try db.rows(
                """
                SELECT suite_run_id, case_id, log_path, repeat_index, outcome, stop_reason FROM eval_results
                WHERE suite_run_id IN (\(list)) ORDER BY case_id, ordinal
                """)
            {
                let id: String = row["case_id"]
                guard var tally = tallies[id] else { continue }
                let outcome: String = row["outcome"]
                guard outcome != "error" else { continue }
                tally.attempts += 1
                if outcome == "pass" { tally.passes += 1 }
                let stop: String? = row["stop_reason"]
                if let stop { tally.stops.insert(stop) }
                if row["suite_run_id"] == tally.newest {
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
            return (recent.count, baselines)
        }
    }
}
