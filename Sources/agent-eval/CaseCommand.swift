public import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import TraceCore
import TraceLog

extension SequenceExpectation.Mode: ExpressibleByArgument {}
extension ArgumentMatcher.Mode: ExpressibleByArgument {}

/// `agent-eval case`: work with case files.
struct CaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "case",
        abstract: "Work with eval case files (draft one from a run, bring over an ADK eval set).",
        subcommands: [CaseFromLogCommand.self, CaseFromEvalSetCommand.self]
    )
}

/// `agent-eval case from-log`: a case that pins a run's trajectory.
struct CaseFromLogCommand: ParsableCommand {
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
              agent-eval case from-log ref/reference.jsonl.gz --out EvalCases/reference.yaml

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

    @Option(help: ArgumentHelp("Write the case to this file (refuses to overwrite one); default: standard output.", valueName: "file"))
    var out: String?

    func run() throws {
        let facts: LogFacts
        do {
            facts = try LogFacts.read(log)
        } catch {
            throw diagnose(error)
        }
        // A log cut before its first event holds no run to draft a case from.
        if facts.state.eventCount == 0 { throw diagnose(LogError.noEvent(in: log, tear: facts.tear)) }
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
            throw diagnose(EvalError(.writeFailed, "\(out) exists already", hint: "choose another --out, or remove it first"))
        }
        do { try ReportFile.write(text, to: out) } catch { throw diagnose(error) }
        say(
            "wrote \(out): \(counted(facts.state.executedCalls.count, "call")) in \(mode.rawValue) order; check it with: agent-eval run \(ShellWords.quoted(out))"
        )
    }
}

extension EvalSetConversion.Match: ExpressibleByArgument {}

/// `agent-eval case from-evalset`: Google ADK's eval cases as case files.
struct CaseFromEvalSetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "from-evalset",
        abstract: "Write one case file per eval case of a Google ADK eval set (or ADK test file).",
        discussion: """
            Reads an EvalSet JSON file (eval_cases, each a conversation of invocations; snake_case or camelCase) \
            or ADK's older test file (a list of {query, expected_tool_use, reference}), and writes a case file \
            per single-turn eval case into --out: the user's text as input, the expected tool uses as a \
            sequence in --match mode (ADK's tool trajectory match: exact → strict, in_order, any_order → \
            superset) with each call's arguments matched exactly, and the final response as answer.similarTo \
            (word overlap, ROUGE-1, at least --response-min, as ADK's response_match_score). The cases run the \
            agent given by --agent (an agent file) or the command after -- (a command case through the recording gateway; \
            {input} is where the input goes, after --). A multi-turn eval case is reported and left out.

            Exit codes: 0 every eval case written; 1 some were left out (each is named); 2 the file cannot be \
            read, or a case file exists already (--force replaces it); 64 usage error.

            Examples:
              agent-eval case from-evalset shop.evalset.json --out EvalCases/adk -- python3 agent.py {input}
              agent-eval case from-evalset shop.test.json --agent agents/shop.yaml --match in_order --out EvalCases/adk
            """
    )

    @Argument(help: "The EvalSet JSON file (or ADK test file).")
    var file: String

    @Option(help: ArgumentHelp("The directory to write the case files to (created when missing).", valueName: "dir"))
    var out: String

    @Option(help: ArgumentHelp("The agent file the cases run (a path; written relative to --out).", valueName: "file"))
    var agent: String?

    @Argument(
        parsing: .postTerminator,
        help: ArgumentHelp("The command the cases run, after --, as you would type it; {input} is where the input goes."))
    var command: [String] = []

    @Option(help: "How tool uses are matched: exact, in_order or any_order (ADK's trajectory match types).")
    var match: EvalSetConversion.Match = .exact

    @Option(help: ArgumentHelp("The least word overlap (ROUGE-1) of the answer with the final response.", valueName: "0…1"))
    var responseMin: Double = 0.8

    @Flag(help: "Replace case files that exist already.")
    var force = false

    func validate() throws {
        guard (agent == nil) != command.isEmpty else {
            throw ValidationError(
                "give how the cases run their agent, one way: --agent FILE, or the command after -- (… -- python3 agent.py {input})")
        }
        guard (0...1).contains(responseMin) else { throw ValidationError("--response-min takes a number from 0 to 1") }
    }

    func run() throws {
        let read: (setId: String, cases: [Result<EvalSetConversion.ReadCase, EvalError>])
        do throws(EvalError) {
            read = try EvalSetConversion.read(file)
        } catch {
            throw diagnose(error)
        }
        let runner: EvalSetConversion.Runner
        if let agent {
            runner = .agent(relativePath(agent, from: out))
        } else {
            runner = .command(command)
        }
        do {
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        } catch {
            throw diagnose(EvalError(.writeFailed, "cannot create \(out): \(FileProblem.reason(of: error))", hint: "choose another --out"))
        }
        var written = 0
        var leftOut = 0
        var names = Set<String>()
        for result in read.cases {
            switch result {
            case .failure(let error):
                leftOut += 1
                warn(error)
            case .success(let evalCase):
                // Two eval ids that clean to one case id: the second gets a number, in its name and its id.
                var id = EvalSetConversion.caseId(evalCase.id)
                var number = 2
                while !names.insert(id).inserted {
                    id = EvalSetConversion.caseId(evalCase.id) + "-\(number)"
                    number += 1
                }
                let name = id + ".yaml"
                let path = (out as NSString).appendingPathComponent(name)
                if FileManager.default.fileExists(atPath: path), !force {
                    throw diagnose(
                        EvalError(.writeFailed, "\(path) exists already", hint: "pass --force to replace it, or choose another --out"))
                }
                let text = EvalSetConversion.yaml(
                    for: evalCase, setId: read.setId, source: (file as NSString).lastPathComponent, runner: runner, match: match,
                    responseThreshold: responseMin, caseId: id)
                // One file that cannot be written is left out and said; the rest are still written.
                do {
                    try ReportFile.write(text, to: path, replacesYAML: true)
                    written += 1
                } catch {
                    leftOut += 1
                    warn(error)
                }
            }
        }
        say(
            "wrote \(counted(written, "case file")) to \(out)"
                + (leftOut > 0 ? "; \(leftOut) eval case\(leftOut == 1 ? "" : "s") left out" : "")
                + "; check them with: agent-eval check \(ShellWords.quoted(out))")
        if leftOut > 0 { throw Exit.failure }
    }
}

/// `path` as seen from `directory` (both taken from the current directory when relative).
func relativePath(_ path: String, from directory: String) -> String {
    func absolute(_ p: String) -> [String] {
        ConfigPath.absolute(p.isEmpty ? "." : p).split(separator: "/").map(String.init)
    }
    let target = absolute(path)
    let base = absolute(directory)
    let common = zip(target, base).prefix { $0 == $1 }.count
    let parts = Array(repeating: "..", count: base.count - common) + target[common...]
    return parts.isEmpty ? "." : parts.joined(separator: "/")
}
