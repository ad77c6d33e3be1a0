import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import TraceCore
import TraceLog

/// `agent-eval case from-log`: a case that pins a run's trajectory.
struct CaseFromLogCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "from-log",
        abstract: "Draft a case that pins a run's trajectory: tools, order, arguments, stop reason.",
        discussion: """
            The case is a starting point to edit: it names the log, the tools called (and the offered ones never \
            called), the stop reason and limit, and the executed calls as a sequence in --mode with their \
            arguments in --arguments mode. A run that did not finish (a torn log, or one that ends before \
            run_stopped) gets allowUnfinished: true, and neither a stop reason nor tools never called. Argument keys whose values change between runs — ids, timestamps, \
            nonces, values that look like UUIDs or ISO times — are listed in ignoreKeys. Works on imported runs \
            too: a reference trajectory in OpenAI messages becomes a case in two commands:

              agent-eval import messages reference.json --out ref/
              agent-eval case from-log ref/reference.jsonl.gz --output EvalCases/reference.yaml

            Exit codes: 0 written; 2 the log cannot be read; 64 usage error.
            """
    )

    @Argument(help: "The log of the run to pin.")
    var log: String

    @Option(help: "The sequence mode: strict, unordered, superset, subset or in_order.")
    var mode: SequenceExpectation.Mode = .strict

    @Option(help: "How arguments are pinned: exact, superset (at least these keys), subset, or ignore.")
    var arguments: ArgumentMatcher.Mode = .exact

    @Option(
        name: .customLong("ignore-key"),
        help: ArgumentHelp("An argument key to ignore (dotted path, * per segment); repeatable.", valueName: "key"))
    var ignoreKeys: [String] = []

    @Option(help: "The case id (default: the log's file name).")
    var caseId: String?

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("Write the case to this file (refuses to overwrite one); default: standard output.", valueName: "file"))
    var output: String?

    /// The older spelling of --output (`--out` names a directory everywhere else).
    @Option(name: .customLong("out"), help: .hidden)
    var outSpelling: String?

    /// The file to write: --output, or its older spelling.
    var out: String? { output ?? outSpelling }

    @OptionGroup var limits: LogReadLimits

    func run() throws {
        let facts: LogFacts
        do {
            facts = try LogFacts.read(log)
        } catch {
            throw diagnose(error)
        }
        // A log cut before its first event holds no run to draft a case from.
        if facts.state.eventCount == 0 { throw diagnose(LogError.noEvent(in: log, tear: facts.tear)) }
        // A record `run` would refuse to grade (an edited log, events that contradict each other)
        // is no ground for a case either: what the draft pinned could not be trusted. Calls that
        // only reuse an id are drafted, with a warning: the case must allow them to run.
        if let distrust = facts.distrust(log: log, allowsReusedCallIds: true) {
            throw diagnose(
                EvalError(
                    distrust.code, distrust.message + "; no case is drafted from it", location: distrust.location, hint: distrust.hint))
        }
        if facts.distrust(log: log) != nil {
            printError(
                "warning: \(log) reuses call ids (an imported run): the case runs only with allowReusedCallIds: true, "
                    + "which says so on every report; add it if you accept it")
        }
        if facts.state.stop == nil {
            printError(
                "warning: \(log) does not end with run_stopped (the run did not finish): the case sets allowUnfinished: true "
                    + "and pins no stop reason and no tool it never called")
        }
        let reference = out.map { relativePath(log, from: ($0 as NSString).deletingLastPathComponent) } ?? log
        let text = CaseDraft(mode: mode, argumentMode: arguments, ignoredKeys: ignoreKeys, caseId: caseId).yaml(
            for: facts.state, logReference: reference)
        guard let out else {
            printOutput(text, terminator: "")
            return
        }
        if FileManager.default.fileExists(atPath: out) {
            throw diagnose(EvalError(.writeFailed, "\(out) exists already", hint: "choose another --output, or remove it first"))
        }
        do { try ReportFile.write(text, to: out) } catch { throw diagnose(error) }
        say(
            "wrote \(out): \(counted(facts.state.executedCalls.count, "call")) in \(mode.rawValue) order; check it with: agent-eval run \(ShellWords.quoted(out))"
        )
    }
}
