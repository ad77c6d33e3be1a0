public import TraceCore

/// The gate: what a suite's cases add up to, and the exit status and verdict line CI gets. It is
/// counted from the report's case entries (docs/eval-results.md) — `outcome`, `baseline.status`,
/// `quarantine` — so a single report, a merged one and every rendering of either (console, JSON,
/// JUnit, Markdown, HTML, the pull-request comment) read the one decision.
public struct ReportCounts: Sendable, Hashable {
    public var cases = 0
    /// Cases the gate passes (`pass` and `flaky_pass`), quarantined ones included.
    public var passed = 0
    /// Of `passed`, the `flaky_pass` ones.
    public var flakyPassed = 0
    /// Failed cases (`fail`, `flaky_fail`) that fail the gate: not quarantined, or quarantined
    /// past the entry's `until` (those count whatever their outcome).
    public var failed = 0
    /// Cases that could not run (a harness problem), quarantined or not.
    public var errors = 0
    /// Failed or regressed cases whose quarantine holds: reported, not failing the gate.
    public var quarantined = 0
    /// Cases quarantined past their `until` date.
    public var expiredQuarantines = 0
    /// Failed cases (not quarantined) that no baseline says failed before — new to it, or no
    /// baseline was compared at all (`--allow-no-baseline`): they fail `--fail-on regression`
    /// as a regression does, since nobody decided their failure was known.
    public var unvouchedFailures = 0
    /// Regressed cases, known failures and unconfirmed falls (not quarantined), when a baseline
    /// was compared.
    public var baseline: Baseline?

    public struct Baseline: Sendable, Hashable {
        public var regressed = 0
        public var knownFailures = 0
        public var notSignificant = 0
        /// Cases with no baseline entry: compared with nothing (the failed ones among them are
        /// `unvouchedFailures`).
        public var new = 0
    }

    public init() {}

    /// Counts the case entries of a results document; `compared` when a baseline was read.
    public init(entries: [JSONValue], compared: Bool) {
        baseline = compared ? Baseline() : nil
        for entry in entries {
            cases += 1
            let outcome = entry["outcome"]?.stringValue.flatMap(CaseOutcome.init(reported:)) ?? .error
            let status = entry["baseline"]?["status"]?.stringValue.flatMap(BaselineComparison.Status.init(rawValue:))
            let expired = entry["quarantine"]?["expired"]?.boolValue == true
            let held = entry["quarantine"] != nil && !expired
            if expired { expiredQuarantines += 1 }
            if outcome == .error {
                errors += 1
                continue
            }
            if held && (!outcome.passes || status == .regressed) {
                quarantined += 1
                if outcome.passes { passed += 1 }
                continue
            }
            if outcome.passes && !expired {
                passed += 1
                if outcome == .flakyPass { flakyPassed += 1 }
            } else {
                failed += 1
                if !outcome.passes && Self.isUnvouched(status) { unvouchedFailures += 1 }
            }
            switch status {
            case .regressed?: baseline?.regressed += 1
            case .knownFailure?: baseline?.knownFailures += 1
            case .notSignificant?: baseline?.notSignificant += 1
            case .new?: baseline?.new += 1
            default: break
            }
        }
    }

    /// Whether one case entry fails the gate under `failOn` — the rule `exitStatus` counts, which
    /// the JUnit file, GitHub annotations and the pull-request comment apply case by case: a
    /// quarantine past its date always fails; a held quarantine never does; a failed case fails
    /// unless only regressions do and a baseline says it failed before (`isUnvouched`); a
    /// regressed one unless only failures do. A case that could not run is not a gate failure
    /// but a harness error (exit 2).
    public static func failsGate(_ entry: JSONValue, failOn: FailOn) -> Bool {
        let outcome = entry["outcome"]?.stringValue.flatMap(CaseOutcome.init(reported:)) ?? .error
        if outcome == .error { return false }
        let quarantine = entry["quarantine"]
        if quarantine?["expired"]?.boolValue == true { return true }
        if quarantine != nil { return false }
        let status = entry["baseline"]?["status"]?.stringValue.flatMap(BaselineComparison.Status.init(rawValue:))
        let regressed = status == .regressed
        return !outcome.passes && (failOn != .regression || isUnvouched(status)) || regressed && failOn != .failure
    }

    /// Whether a failed case's baseline status leaves its failure unvouched for: no baseline
    /// entry (`new`), or none compared (nil). A known failure, or a fall too small to tell from
    /// noise, is vouched for; a regression is counted as one.
    static func isUnvouched(_ status: BaselineComparison.Status?) -> Bool {
        switch status {
        case nil, .new?: return true
        default: return false
        }
    }

    /// The exit status CI gets: 2 when a case could not run, 1 when a case failed or regressed
    /// (as `failOn` says; a quarantine past its date fails under every setting), 0 otherwise.
    public func exitStatus(failOn: FailOn) -> Int32 {
        if errors > 0 { return 2 }
        let regressed = baseline?.regressed ?? 0
        switch failOn {
        case .regression: return regressed > 0 || unvouchedFailures > 0 || expiredQuarantines > 0 ? 1 : 0
        case .failure: return failed > 0 ? 1 : 0
        case .any: return failed > 0 || regressed > 0 ? 1 : 0
        }
    }

    /// The verdict in one line, which every report leads with: `PASS: 6 cases, …`,
    /// `FAIL: …` or `ERROR: …`, then `sentence`.
    public func verdict(failOn: FailOn) -> String {
        let word = ["PASS", "FAIL", "ERROR"][Int(exitStatus(failOn: failOn))]
        return "\(word): \(sentence)"
    }

    /// `6 cases, 5 passed (1 flaky), 1 failed[, 1 could not run][, 1 quarantined][, 0 regressed, 1 known failure]`.
    public var sentence: String {
        var parts = [
            "\(cases) case\(cases == 1 ? "" : "s")", "\(passed) passed" + (flakyPassed > 0 ? " (\(flakyPassed) flaky)" : ""),
            "\(failed) failed",
        ]
        if errors > 0 { parts.append("\(errors) could not run") }
        if quarantined > 0 { parts.append("\(quarantined) quarantined") }
        if expiredQuarantines > 0 {
            parts.append("\(expiredQuarantines) quarantine\(expiredQuarantines == 1 ? "" : "s") expired")
        }
        if let baseline {
            parts.append(
                "\(baseline.regressed) regressed, \(baseline.knownFailures) known failure\(baseline.knownFailures == 1 ? "" : "s")")
            if baseline.notSignificant > 0 { parts.append("\(baseline.notSignificant) failing without a significant drop") }
            if baseline.new > 0 {
                parts.append(
                    "\(baseline.new) new (no baseline to compare with"
                        + (unvouchedFailures > 0 ? "; \(unvouchedFailures) of them failing" : "") + ")")
            }
        }
        return parts.joined(separator: ", ")
    }

    /// The report's `verdict` member: `{"status": "pass"|"fail"|"error", "exit_status", "fail_on", "line"}`.
    public func verdictJSON(failOn: FailOn) -> JSONValue {
        var object = ObjectBuilder()
        let status = exitStatus(failOn: failOn)
        object.set("status", ["pass", "fail", "error"][Int(status)])
        object.set("exit_status", Int(status))
        object.set("fail_on", failOn.rawValue)
        object.set("line", verdict(failOn: failOn))
        return object.json
    }
}
