import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import TraceCore
import TraceLog

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
            {input} is where the input goes, after --). A multi-turn eval case becomes a conversation case \
            (docs/conversations.md): a scripted user says each invocation's text in its turn. A conversation_scenario \
            eval case becomes a conversation case whose user --user-model plays: the starting prompt its opening, the \
            conversation plan its task, ADK's persona who it is (left out without --user-model). A command holds a \
            conversation by reading the user's turns on its standard input, one line each ({input} is dropped).

            Exit codes: 0 every eval case written; 1 some were left out (each is named); 2 the file cannot be \
            read, or a case file exists already (--force replaces it); 64 usage error.

            Examples:
              agent-eval case from-evalset shop.evalset.json --out EvalCases/adk -- python3 agent.py {input}
              agent-eval case from-evalset shop.test.json --agent agents/shop.yaml --match in_order --out EvalCases/adk
              agent-eval case from-evalset shop.evalset.json --agent agents/shop.yaml --user-model openai:gpt-4.1-mini --out EvalCases/adk
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

    @Option(
        help: ArgumentHelp(
            "The model that plays the user of conversation_scenario cases (provider:name, as an agent file's model: takes it).",
            valueName: "model"))
    var userModel: String?

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
            case .success(let evalCase) where EvalSetConversion.problem(evalCase, runner: runner, userModel: userModel, path: file) != nil:
                leftOut += 1
                if let problem = EvalSetConversion.problem(evalCase, runner: runner, userModel: userModel, path: file) { warn(problem) }
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
                    responseThreshold: responseMin, caseId: id, userModel: userModel)
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
