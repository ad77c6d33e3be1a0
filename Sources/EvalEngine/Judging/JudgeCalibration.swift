public import ConfigFile
import Foundation
public import TraceCore

/// Two raters' pass/fail verdicts on the same items, and Cohen's κ of their agreement.
public struct AgreementMatrix: Sendable, Hashable {
    /// Counts by (judge, human): both pass, judge pass and human fail, judge fail and human pass, both fail.
    public var bothPass = 0
    public var judgePassHumanFail = 0
    public var judgeFailHumanPass = 0
    public var bothFail = 0

    public init(bothPass: Int = 0, judgePassHumanFail: Int = 0, judgeFailHumanPass: Int = 0, bothFail: Int = 0) {
        self.bothPass = bothPass
        self.judgePassHumanFail = judgePassHumanFail
        self.judgeFailHumanPass = judgeFailHumanPass
        self.bothFail = bothFail
    }

    public mutating func add(judge: Bool, human: Bool) {
        switch (judge, human) {
        case (true, true): bothPass += 1
        case (true, false): judgePassHumanFail += 1
        case (false, true): judgeFailHumanPass += 1
        case (false, false): bothFail += 1
        }
    }

    public var count: Int { bothPass + judgePassHumanFail + judgeFailHumanPass + bothFail }

    /// The share of items both gave the same verdict.
    public var agreement: Double { count == 0 ? 0 : Double(bothPass + bothFail) / Double(count) }

    /// Cohen's κ = (p_o − p_e) / (1 − p_e), p_e from each rater's pass rate; nil when it is
    /// undefined (no items, or both raters gave one verdict to everything: p_e = 1).
    public var kappa: Double? {
        let n = Double(count)
        guard n > 0 else { return nil }
        let judgePass = Double(bothPass + judgePassHumanFail) / n
        let humanPass = Double(bothPass + judgeFailHumanPass) / n
        let expected = judgePass * humanPass + (1 - judgePass) * (1 - humanPass)
        guard expected < 1 - 1e-12 else { return nil }
        return (agreement - expected) / (1 - expected)
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("judge_pass_human_pass", bothPass)
        object.set("judge_pass_human_fail", judgePassHumanFail)
        object.set("judge_fail_human_pass", judgeFailHumanPass)
        object.set("judge_fail_human_fail", bothFail)
        return object.json
    }
}

/// A labels file for `agent-eval judge calibrate` (docs/eval-cases.md, "Calibrating judges"):
///
/// ```yaml
/// cases: [../EvalCases]          # where the labelled cases are, relative to this file
/// labels:
///   - case: support-refund-answer-judged
///     log: ../Fixtures/runs/support-refund.jsonl.gz
///     verdict: pass              # what a person says of the judged expectations on this log
/// ```
public struct JudgeLabels: Sendable {
    public struct Label: Sendable {
        public var caseId: String
        public var log: String
        /// The person's verdict: the case's model-graded expectations hold on the log.
        public var passes: Bool
        public var location: SourceLocation
    }

    public var path: String
    public var casePaths: [String]
    public var labels: [Label]

    /// Reads the file; every problem, each at its line.
    public static func load(path: String) throws(ConfigErrors) -> JudgeLabels {
        let root = try ConfigNode.loadReportingAll(path: path)
        let directory = (path as NSString).deletingLastPathComponent
        var errors = ConfigErrors([])
        var labels: [Label] = []
        var casePaths: [String] = []
        if var fields = errors.collect({ () throws(ConfigError) in try root.mapping("the labels file") }) {
            if let casesNode = errors.collect({ () throws(ConfigError) in
                try fields.required("cases", hint: "say where the labelled cases are: cases: [evals/]")
            }) {
                casePaths =
                    errors.collect { () throws(ConfigError) in try casesNode.strings("cases") }?.map {
                        ConfigPath.resolve($0, from: directory)
                    } ?? []
                for path in casePaths where !FileManager.default.fileExists(atPath: path) {
                    errors.errors.append(
                        ConfigError(
                            .invalidValue, "cases: \(path) does not exist", at: casesNode.location,
                            hint: "paths are relative to the labels file"))
                }
            }
            let items =
                errors.collect { () throws(ConfigError) in
                    try fields.required("labels", hint: "labels: [{case, log, verdict: pass|fail}]").list("labels")
                } ?? []
            for (index, item) in items.enumerated() {
                errors.collect { () throws(ConfigError) in
                    var entry = try item.mapping("labels[\(index)]")
                    let caseId = try entry.required("case").nonEmptyString("labels[\(index)].case")
                    let log = try entry.required("log").nonEmptyString("labels[\(index)].log")
                    let verdictNode = try entry.required("verdict", hint: "the person's verdict: pass or fail")
                    let verdict = try verdictNode.string("labels[\(index)].verdict")
                    guard verdict == "pass" || verdict == "fail" else {
                        throw ConfigError(
                            .invalidValue, "labels[\(index)].verdict must be pass or fail, found \"\(verdict)\"", at: verdictNode.location)
                    }
                    _ = entry.optional("note")
                    try entry.finish()
                    labels.append(
                        Label(
                            caseId: caseId, log: ConfigPath.resolve(log, from: directory), passes: verdict == "pass",
                            location: item.location))
                }
            }
            if items.isEmpty && errors.errors.isEmpty {
                errors.errors.append(ConfigError(.invalidValue, "the labels file has no labels", at: root.location))
            }
            errors.errors.append(contentsOf: fields.unknownKeys(in: "the labels file"))
        }
        guard errors.errors.isEmpty else { throw errors }
        return JudgeLabels(path: path, casePaths: casePaths, labels: labels)
    }
}

/// What `agent-eval judge calibrate` found: how the judges' verdicts on labelled logs agree
/// with the people's (Cohen's κ, a confusion matrix), and how well each judge agrees with
/// itself over `rounds` rounds.
public struct JudgeCalibration: Sendable {
    /// One label as judged.
    public struct Outcome: Sendable {
        public var label: JudgeLabels.Label
        public var judge: String
        /// The judge's verdict per round (rounds without one — the judge failed — are left out).
        public var rounds: [Bool]
        /// Why a round gave no verdict.
        public var errors: [String]

        /// The majority of the rounds (a tie is a fail); nil without a verdict.
        public var verdict: Bool? { rounds.isEmpty ? nil : rounds.filter { $0 }.count * 2 > rounds.count }
        public var isConsistent: Bool { Set(rounds).count <= 1 }
    }

    /// A group's figures: one judge, one case, or everything.
    public struct Figures: Sendable {
        public var name: String
        public var matrix = AgreementMatrix()
        public var consistent = 0
        public var judged = 0
        /// The case's `judgeMinKappa`, for a case's figures.
        public var minKappa: Double?

        public var selfConsistency: Double { judged == 0 ? 0 : Double(consistent) / Double(judged) }
        /// Whether κ reaches the minimum; a minimum that cannot be measured (κ undefined: the
        /// labels or the verdicts are all one way) is not met, so it never passes unchecked.
        public var meetsMinimum: Bool {
            guard let minKappa else { return true }
            guard let kappa = matrix.kappa else { return false }
            return kappa >= minKappa - 1e-12
        }

        public var json: JSONValue {
            var object = ObjectBuilder()
            object.set("name", name)
            object.set("labels", judged)
            object.set("kappa", matrix.kappa)
            object.set("agreement", matrix.agreement)
            object.set("self_consistency", selfConsistency)
            object.set("matrix", matrix.json)
            object.set("min_kappa", minKappa)
            if minKappa != nil { object.set("meets_min_kappa", meetsMinimum) }
            return object.json
        }
    }

    public var rounds: Int
    public var outcomes: [Outcome]
    public var overall: Figures
    public var judges: [Figures]
    public var cases: [Figures]

    /// Figures from the outcomes; `minKappa` by case id.
    public init(rounds: Int, outcomes: [Outcome], minKappa: [String: Double]) {
        self.rounds = rounds
        self.outcomes = outcomes
        func figures(_ name: String, _ selected: [Outcome]) -> Figures {
            var figures = Figures(name: name)
            for outcome in selected {
                guard let verdict = outcome.verdict else { continue }
                figures.judged += 1
                figures.matrix.add(judge: verdict, human: outcome.label.passes)
                if outcome.isConsistent { figures.consistent += 1 }
            }
            return figures
        }
        overall = figures("all", outcomes)
        judges = Array(Set(outcomes.map(\.judge))).sorted().map { judge in figures(judge, outcomes.filter { $0.judge == judge }) }
        var seen: [String] = []
        for outcome in outcomes where !seen.contains(outcome.label.caseId) { seen.append(outcome.label.caseId) }
        cases = seen.map { id in
            var case_ = figures(id, outcomes.filter { $0.label.caseId == id })
            case_.minKappa = minKappa[id]
            return case_
        }
        // A case that asks for a minimum κ and has no label is not measured at all: it is listed
        // (its κ undefined, so its minimum not met) rather than left out of the check.
        for (id, minimum) in minKappa.sorted(by: { $0.key < $1.key }) where !seen.contains(id) {
            var unlabelled = Figures(name: id)
            unlabelled.minKappa = minimum
            cases.append(unlabelled)
        }
    }

    /// Judges and cases whose κ fell by more than `maxDrop` since `previous` (a calibration's
    /// JSON): the judge drifted. `(name, before, now)`.
    public func drift(from previous: JSONValue, maxDrop: Double) -> [(name: String, before: Double, now: Double)] {
        var drifted: [(String, Double, Double)] = []
        for (key, groups) in [("judges", judges), ("cases", cases)] {
            for group in groups {
                guard let now = group.matrix.kappa,
                    let before = previous[key]?.arrayValue?.first(where: { $0["name"]?.stringValue == group.name })?["kappa"]?.doubleValue,
                    before - now > maxDrop + 1e-12
                else { continue }
                drifted.append((group.name, before, now))
            }
        }
        return drifted
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("schema", "agent-eval/judge-calibration")
        object.set("version", 1)
        object.set("rounds", rounds)
        object.set("overall", overall.json)
        object.set("judges", JSONValue.array(judges.map(\.json)))
        object.set("cases", JSONValue.array(cases.map(\.json)))
        object.set(
            "labels",
            JSONValue.array(
                outcomes.map { outcome in
                    var entry = ObjectBuilder()
                    entry.set("case_id", outcome.label.caseId)
                    entry.set("log", outcome.label.log)
                    entry.set("human", outcome.label.passes ? "pass" : "fail")
                    entry.set("judge", outcome.judge)
                    entry.set("verdict", outcome.verdict.map { $0 ? "pass" : "fail" })
                    entry.set("rounds", JSONValue.array(outcome.rounds.map { .string($0 ? "pass" : "fail") }))
                    if !outcome.errors.isEmpty { entry.set("errors", JSONValue.array(outcome.errors.map { .string($0) })) }
                    entry.set("file", outcome.label.location.path)
                    entry.set("line", outcome.label.location.line)
                    return entry.json
                }))
        return object.json
    }
}

extension JudgeCalibration {
    /// Judges every label's log `rounds` times with its case's model-graded expectations (the
    /// case's trajectory expectations are not the question here), through `options` (its judge
    /// model and model clients).
    public static func run(_ labels: JudgeLabels, rounds: Int, options: EvalOptions) async throws(EvalError) -> JudgeCalibration {
        let (loaded, errors) = EvalSuite.load(paths: labels.casePaths)
        if let first = errors.first { throw first }
        var byId: [String: EvalCase] = [:]
        for evalCase in loaded { byId[evalCase.id] = evalCase }
        var cases: [EvalCase] = []
        for label in labels.labels {
            guard var evalCase = byId[label.caseId] else {
                throw EvalError(
                    .badCase, "no case \(label.caseId) under \(labels.casePaths.joined(separator: ", "))", location: label.location,
                    hint: "the labels file's cases: names where the labelled cases are")
            }
            guard !evalCase.expected.allRubrics.isEmpty else {
                throw EvalError(
                    .badCase, "case \(label.caseId) has no model-graded expectation: there is no judge to calibrate",
                    location: label.location)
            }
            guard FileManager.default.fileExists(atPath: label.log) else {
                throw EvalError(.missingPath, "\(label.log) does not exist", location: label.location)
            }
            // Only the judged expectations: the trajectory's own checks are not the question.
            var expected = Expectations()
            expected.answerRubric = evalCase.expected.answerRubric
            expected.argumentRubrics = evalCase.expected.argumentRubrics
            evalCase.expected = expected
            evalCase.source = .recorded(patterns: [label.log])
            evalCase.allowsUnfinished = true
            cases.append(evalCase)
        }
        var options = options
        options.repeats = max(1, rounds)
        let results = await EvalRunner(options: options).run(cases)
        var outcomes: [Outcome] = []
        for (label, result) in zip(labels.labels, results) {
            var outcome = Outcome(label: label, judge: "", rounds: [], errors: [])
            if let error = result.error { outcome.errors.append(error.description) }
            for run in result.runs {
                let verdicts = run.judgements.compactMap(\.passed)
                if let judge = run.judgements.first?.judge { outcome.judge = judge }
                if let error = run.error {
                    outcome.errors.append(error.description)
                } else if !verdicts.isEmpty {
                    outcome.rounds.append(verdicts.allSatisfy { $0 })
                } else {
                    // Nothing was asked (a run with no final answer, one that did not finish): say why.
                    outcome.errors += run.failures.map { "\($0.expectation): \($0.actual)" } + run.notes.map(\.message)
                }
            }
            outcomes.append(outcome)
        }
        var minKappa: [String: Double] = [:]
        for evalCase in loaded { if let value = evalCase.judgeMinKappa { minKappa[evalCase.id] = value } }
        return JudgeCalibration(rounds: max(1, rounds), outcomes: outcomes, minKappa: minKappa)
    }
}
