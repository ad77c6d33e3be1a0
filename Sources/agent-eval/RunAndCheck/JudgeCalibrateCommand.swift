import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

struct JudgeCalibrateCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "calibrate",
        abstract: "Judge labelled logs and report how the judge agrees with people (Cohen's κ) and with itself.",
        discussion: """
            The labels file names where the cases are and, per label, a case with model-graded expectations, a log and \
            a person's verdict (pass or fail) on those expectations (docs/eval-cases.md, "Calibrating judges"). Each log is \
            judged --repeat times by its case's judges (the case's other expectations are not the question); the \
            majority of the rounds is the judge's verdict. The report gives, overall, per judge and per case: the \
            confusion matrix against the people, the agreement, Cohen's κ, and self-consistency (the share of labels \
            the judge gave the same verdict in every round).

            A case may require a minimum κ of its judge (judgeMinKappa: 0.6 in the case file); --baseline FILE (a \
            calibration's --json-out) reports a judge or case whose κ fell by more than --max-kappa-drop as drifted.

            Exit codes: 0 every case meets its minimum κ and nothing drifted; 1 a case's κ is below its minimum or \
            cannot be measured (labels or verdicts all one way), or a \
            judge drifted; 2 the labels file, a case or a log cannot be used, or a judge could not answer; 64 usage.

            Examples:
              agent-eval judge calibrate evals/judge-labels.yaml --repeat 3
              agent-eval judge calibrate labels.yaml --json-out calibration.json --baseline last-calibration.json
            """)

    @Argument(help: "The labels file.")
    var labels: String

    @Option(name: .customLong("repeat"), help: "Judge each log this many times (self-consistency).")
    var rounds = 3

    @OptionGroup(title: "Model")
    var models: ModelArguments

    @OptionGroup(title: "Judge")
    var judge: JudgeArguments

    @Option(help: ArgumentHelp("A previous calibration (--json-out) to compare κ with.", valueName: "file"))
    var baseline: String?

    @Option(help: "A κ lower than the baseline's by more than this is drift.")
    var maxKappaDrop = 0.1

    @Option(help: ArgumentHelp("Write the calibration as JSON to this file.", valueName: "file"))
    var jsonOut: String?

    @Flag(help: "Print the calibration as JSON.")
    var json = false

    @Option(help: "Judge questions asked at the same time (default: the number of cores).")
    var jobs: Int?

    func validate() throws {
        if rounds < 1 || rounds > 100 { throw ValidationError("--repeat must be between 1 and 100") }
        if !(maxKappaDrop >= 0 && maxKappaDrop <= 2) { throw ValidationError("--max-kappa-drop must be between 0 and 2") }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let file: JudgeLabels
        do {
            file = try JudgeLabels.load(path: labels)
        } catch {
            for problem in error.errors { diagnose(problem) }
            throw Exit.unusable
        }
        var previous: JSONValue?
        if let baseline {
            do {
                previous = try ResultsMerge.read(baseline)
            } catch {
                throw diagnose(error)
            }
            guard previous?["schema"]?.stringValue == "agent-eval/judge-calibration" else {
                throw diagnose(
                    CommandError(
                        "bad_baseline", "\(baseline) is not a judge calibration (no \"schema\": \"agent-eval/judge-calibration\")",
                        hint: "keep a calibration with `agent-eval judge calibrate LABELS --json-out FILE`"))
            }
        }
        var options = EvalOptions(jobs: jobs, outputDirectory: FileManager.default.temporaryDirectory.path)
        let calibration: JudgeCalibration
        do {
            options.models = try models.options()
            options.judgeModel = try judge.source()
            calibration = try await JudgeCalibration.run(file, rounds: rounds, options: options)
        } catch {
            throw diagnose(error)
        }
        // A round in which the judge gave no verdict on a label (a log that cannot be read, a
        // judge that does not answer or says nothing it can be held to) makes every figure
        // doubtful — a consistency over the rounds that answered is no consistency: say why,
        // and nothing else.
        let failedRounds = calibration.outcomes.filter { $0.rounds.count < calibration.rounds }
        for outcome in failedRounds {
            let missing = calibration.rounds - outcome.rounds.count
            let which = outcome.rounds.isEmpty ? "no verdict" : "no verdict in \(missing) of \(calibration.rounds) rounds"
            diagnose(
                CommandError(
                    "judge_failed",
                    "\(outcome.label.location): \(which) on \(outcome.label.log): " + (outcome.errors.first ?? "the judge was not asked"),
                    hint: "fix the label's log or the case's judge, then calibrate again"))
        }
        if !failedRounds.isEmpty { throw Exit.unusable }
        let drift = previous.map { calibration.drift(from: $0, maxDrop: maxKappaDrop) } ?? []
        let below = calibration.cases.filter { !$0.meetsMinimum }
        if let jsonOut {
            do {
                try ReportFile.write(JSONWriter.encodePretty(calibration.json), to: jsonOut)
            } catch {
                throw diagnose(error)
            }
        }
        if json {
            printJSON(calibration.json)
        } else {
            printText(calibration, drift: drift)
        }
        throw ExitCode(below.isEmpty && drift.isEmpty ? 0 : 1)
    }

    /// The figures as text: per judge with its confusion matrix, per case against its minimum,
    /// the labels the judge disagreed with or was unsure of, and what drifted.
    func printText(_ calibration: JudgeCalibration, drift: [(String, Double, Double)]) {
        say("judge calibration: \(counted(calibration.outcomes.count, "label")), \(counted(calibration.rounds, "round")) each")
        for figures in calibration.judges + [calibration.overall] where calibration.judges.count > 1 || figures.name != "all" {
            say(Self.line(figures, what: figures.name == "all" ? "all judges" : "judge \(figures.name)"))
            let m = figures.matrix
            say("                 human pass  human fail")
            say("    judge pass   " + Self.pad(m.bothPass) + "  " + Self.pad(m.judgePassHumanFail))
            say("    judge fail   " + Self.pad(m.judgeFailHumanPass) + "  " + Self.pad(m.bothFail))
        }
        for figures in calibration.cases {
            var line = Self.line(figures, what: "case \(figures.name)")
            if let minimum = figures.minKappa {
                if figures.judged == 0 {
                    line =
                        "case \(figures.name): ✘ min κ \(Self.number(minimum)) NOT CHECKED: the labels file has no label for it; "
                        + "label some of its logs (passing and failing) to measure it"
                } else if figures.matrix.kappa == nil {
                    line +=
                        "  ✘ min κ \(Self.number(minimum)) NOT CHECKED: κ is undefined; label both passing and failing logs to measure it"
                } else {
                    line += figures.meetsMinimum ? "  ✔ min κ \(Self.number(minimum))" : "  ✘ BELOW its min κ \(Self.number(minimum))"
                }
            }
            say(line)
        }
        for outcome in calibration.outcomes {
            guard let verdict = outcome.verdict, verdict != outcome.label.passes || !outcome.isConsistent else { continue }
            let rounds = outcome.rounds.map { $0 ? "pass" : "fail" }.joined(separator: ", ")
            say(
                "  \(verdict != outcome.label.passes ? "disagrees" : "unsure   "): \(outcome.label.location) case \(outcome.label.caseId), "
                    + "\(outcome.label.log): person \(outcome.label.passes ? "pass" : "fail"), judge \(rounds)")
        }
        for (name, before, now) in drift {
            say("DRIFTED: \(name): κ \(Self.number(before)) → \(Self.number(now)) (more than \(Self.number(maxKappaDrop)) lower)")
        }
    }

    static func line(_ figures: JudgeCalibration.Figures, what: String) -> String {
        "\(what): κ \(figures.matrix.kappa.map(number) ?? "undefined (one verdict only)"), agreement "
            + "\(Int((figures.matrix.agreement * 100).rounded()))%, self-consistency \(Int((figures.selfConsistency * 100).rounded()))% "
            + "(\(figures.consistent) of \(figures.judged) labels judged the same every round)"
    }

    /// Two decimals, without a minus sign on zero.
    static func number(_ value: Double) -> String {
        let text = String(format: "%.2f", value)
        return text == "-0.00" ? "0.00" : text
    }

    static func pad(_ value: Int) -> String { String(repeating: " ", count: max(0, 10 - String(value).count)) + String(value) }
}
