import TraceCore

extension ResultsMerge {
    /// What a merge lacks of its suite: a short reason for the merged report and the console,
    /// and the error a merge that does not allow partial results throws.
    struct Gap {
        var reason: String
        var error: EvalError
    }

    /// Which shards of which suite the reports being merged hold (docs/eval-results.md): each
    /// report's `shard` and `suite`, checked as they are added, and at the end what is missing.
    struct ShardSet {
        /// The suite of the first report that records its shard; every other must match it.
        private(set) var suite: SuiteIdentity?
        /// That first report's shard and file.
        private var first: (shard: EvalSession.Shard, path: String)?
        /// Each shard's report, by shard index.
        private var paths: [Int: String] = [:]
        /// Reports that do not record their shard, in the order given, each with why not: an
        /// older agent-eval wrote it (nil), or it is a partial merge (what that lacks).
        private var unplaced: [(path: String, partial: String?)] = []

        /// Adds one report: an error when its shard or suite is malformed, its suite or shard
        /// count differs from the reports before it, or its shard came already.
        mutating func add(_ report: JSONValue, from path: String) throws(EvalError) {
            func bad(_ message: String, hint: String) -> EvalError {
                EvalError(.badReport, message, location: SourceLocation(path: path), hint: hint)
            }
            guard let shardMember = report["shard"] else {
                unplaced.append((path, report["partial"]?.stringValue))
                return
            }
            guard let shard = EvalSession.Shard(json: shardMember) else {
                throw bad(
                    "\(path) has a \"shard\" that is not {\"index\": i, \"count\": n} with 1 ≤ i ≤ n",
                    hint: "give the reports `agent-eval run … --json-out FILE` wrote, unedited")
            }
            guard let suite = report["suite"].flatMap(SuiteIdentity.init(json:)) else {
                throw bad(
                    "\(path) says it is shard \(shard) but has no \"suite\" {\"cases\": n, \"digest\": …} to say of which suite",
                    hint: "give the reports `agent-eval run … --json-out FILE` wrote, unedited")
            }
            if let first, let known = self.suite {
                if suite != known {
                    let difference =
                        suite.caseCount == known.caseCount
                        ? "both have \(suite.caseCount) cases, but not the same ones"
                        : "\(path) has \(suite.caseCount) case\(suite.caseCount == 1 ? "" : "s"), \(first.path) \(known.caseCount)"
                    throw bad(
                        "\(path) and \(first.path) are reports of different suites (\(difference))",
                        hint: "merge the reports of one suite run: every shard runs the same case files with the same --filter")
                }
                if shard.count != first.shard.count {
                    throw bad(
                        "\(path) is shard \(Self.describe(shard)) and \(first.path) is shard \(Self.describe(first.shard)): "
                            + "the suite was split in different ways",
                        hint: "merge the reports of one suite run, every shard run with the same n in --shard i/n")
                }
            }
            if let other = paths[shard.index] {
                throw bad(
                    "shard \(shard) is given twice: \(other) and \(path)",
                    hint: "give each shard's report once (a shard job that ran twice leaves two reports: keep the one to trust)")
            }
            self.suite = self.suite ?? suite
            first = first ?? (shard, path)
            paths[shard.index] = path
        }

        /// `{"count": n, "merged": [i…], "missing": [j…]}` when a report recorded its shard.
        var json: JSONValue? {
            guard let first else { return nil }
            var object = ObjectBuilder()
            object.set("count", first.shard.count)
            object.set("merged", paths.keys.sorted())
            object.set("missing", missing)
            return object.json
        }

        /// The shard indices no report holds.
        var missing: [Int] {
            guard let first else { return [] }
            return (1...first.shard.count).filter { paths[$0] == nil }
        }

        /// What the reports, holding the cases `caseIds`, lack of their suite; nil when they
        /// hold it all: every shard, and together exactly the suite's cases.
        func gap(caseIds: [String]) -> Gap? {
            let partialHint = "or pass --allow-partial to merge them as a partial report"
            if let unplacedFirst = unplaced.first {
                let (path, partial) = unplacedFirst
                let others = unplaced.count == 1 ? "" : " (and \(unplaced.count - 1) more report\(unplaced.count == 2 ? "" : "s"))"
                let location = SourceLocation(path: path)
                if let partial {
                    return Gap(
                        reason: "\(path) is a partial merge: \(partial)",
                        error: EvalError(
                            .incompleteSuite,
                            "\(path) is a partial merge (\(partial))\(others): a merge of it cannot hold the whole suite",
                            location: location, hint: "merge every shard's own report, \(partialHint)"))
                }
                return Gap(
                    reason: "\(path) does not record its shard and suite",
                    error: EvalError(
                        .incompleteSuite,
                        "\(path)\(others) does not record which shard of which suite it holds (an agent-eval from before reports "
                            + "recorded \"shard\" and \"suite\" wrote it), so the merge cannot tell whether a shard is missing",
                        location: location, hint: "run the shards again with this agent-eval, whose reports record them, \(partialHint)"))
            }
            guard let first, let suite else { return nil }
            let missing = self.missing
            if !missing.isEmpty {
                let names = missing.map { "\($0)/\(first.shard.count)" }
                let reason = "\(missing.count == 1 ? "shard" : "shards") \(Self.list(names)) \(missing.count == 1 ? "is" : "are") missing"
                let held = paths.keys.sorted().map { "\($0)/\(first.shard.count) (\(paths[$0] ?? ""))" }
                return Gap(
                    reason: reason,
                    error: EvalError(
                        .incompleteSuite,
                        "\(reason): the reports given hold \(held.count == 1 ? "shard" : "shards") \(Self.list(held)) "
                            + "of a suite of \(suite.caseCount) case\(suite.caseCount == 1 ? "" : "s")",
                        hint: "pass every shard's report (a shard job that failed before uploading its report must run again), "
                            + partialHint))
            }
            let held = SuiteIdentity(caseIds: caseIds)
            guard held != suite else { return nil }
            let reason =
                held.caseCount < suite.caseCount
                ? "the reports hold \(held.caseCount) of the suite's \(suite.caseCount) cases"
                : held.caseCount > suite.caseCount
                    ? "the reports hold \(held.caseCount) cases, the suite \(suite.caseCount)"
                    : "the reports' cases are not the suite's \(suite.caseCount) cases"
            return Gap(
                reason: reason,
                error: EvalError(
                    .incompleteSuite,
                    "\(reason), though every shard is here: a shard's report lacks cases (its run stopped early) or was edited",
                    hint: "run again the shard whose report is short, \(partialHint)"))
        }

        static func describe(_ shard: EvalSession.Shard) -> String {
            shard.count == 1 ? "1/1 (an unsharded run)" : shard.description
        }

        /// `a`, `a and b`, `a, b and c`.
        static func list(_ items: [String]) -> String {
            items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " and " + (items.last ?? "")
        }
    }
}
