import ArgumentParser
import ConfigFile
import Foundation

/// The `agent-eval` command: parses options, calls one library function, prints, exits.
@main
struct AgentEval: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent-eval",
        abstract: "Record, replay and evaluate LLM agent runs from their event logs.",
        discussion: """
            `agent-eval run EvalCases/` checks trajectories — tools called and not called, order, arguments, \
            verdicts, stop reason — against recorded logs and live runs, and gates CI on regressions. \
            `agent-eval exec` runs an agent through the controlled runtime and records everything it saw and did \
            as an append-only, gzip-compressed JSONL event log (docs/log-format.md); `agent-eval record -- COMMAND` \
            records an agent written with any framework through a model gateway (docs/record.md), and `agent-eval mcp-proxy` \
            gates and records its MCP tool calls (docs/mcp.md). `agent-eval replay` rebuilds a \
            run from its log and steps through it; `agent-eval rerun` re-drives the current runtime with a log; \
            `agent-eval diff` compares two runs; `agent-eval log` prints, \
            verifies and repairs logs. `agent-eval index` adds logs to the SQLite catalog, where `runs`, `history`, \
            `stats` and `sql` find runs, a case's history and numbers (docs/catalog.md). `agent-eval results merge` \
            joins the reports of CI shards.

            Start with `agent-eval init` (a working project) and `agent-eval check` (every file checked without \
            running anything). Reference pages: agent-eval help cases | agent-files | log-format | models | ci.

            Exit codes: 0 passed (success, intact, identical), 1 failed (a case failed or regressed, a run did not \
            succeed, a log is damaged, runs diverge), 2 could not run (bad input), 64 usage error, 130 (143) \
            interrupted by Ctrl-C (SIGTERM): every command stops at once, except that exec, run, record and \
            pipeline first record the stop of what runs and close its logs, and collect, for which a signal is \
            the way to stop, writes every open trace's log and exits 0.

            With --json (--jsonl), standard output holds the command's JSON document (JSON Lines for exec, collect, \
            index and log cat) or, when the command fails before it has printed anything (a missing file, a usage error, a signal), \
            an error document: {"error": {"code", "message", "location"?, "hint"?, "cause"?}, "errors": [every \
            error reported, in order], "exit_code", "schema": "agent-eval/error", "version": 1}. The errors are on \
            standard error too.
            """,
        version: "0.4.0 (commit \(buildCommit))",
        // Grouped in the help by the job they do, in the order a new user meets them.
        groupedSubcommands: [
            CommandGroup(
                name: "Run and check",
                subcommands: [RunCommand.self, CheckCommand.self, ExecCommand.self, PipelineCommand.self, JudgeCommand.self]),
            CommandGroup(
                name: "Record and gate",
                subcommands: [
                    RecordCommand.self, MCPProxyCommand.self, ApproveCommand.self, DenyCommand.self, AuditCommand.self, CollectCommand.self,
                    ResultsCommand.self, QuarantineCommand.self,
                ]),
            CommandGroup(
                name: "Look at runs",
                subcommands: [
                    ReplayCommand.self, ViewCommand.self, ServeCommand.self, DiffCommand.self, ForkCommand.self, RerunCommand.self,
                    LogCommand.self,
                ]
            ),
            CommandGroup(
                name: "Catalog",
                subcommands: [
                    IndexCommand.self, RunsCommand.self, HistoryCommand.self, StatsCommand.self, SQLCommand.self, CatalogCommand.self,
                ]),
            CommandGroup(name: "Import and export", subcommands: [ImportCommand.self, ExportCommand.self, CaseCommand.self]),
            CommandGroup(name: "Project", subcommands: [InitCommand.self]),
        ]
    )

    /// `agent-eval help <topic>` prints a reference page; everything else is parsed as usual
    /// (`agent-eval help run` is the command's help).
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        // Before the signals are handled: a signal that ends the process reads it.
        StandardOutput.noteCommandLine(arguments)
        Interruption.install()
        if arguments.count == 2, arguments[0] == "help", let page = HelpTopic(rawValue: arguments[1]) {
            do {
                FileHandleStream(descriptor: 1).write(try page.text())
                return
            } catch {
                Foundation.exit(diagnose(error).rawValue)
            }
        }
        if arguments.count == 2, arguments[0] == "help",
            !configuration.subcommands.contains(where: { $0.configuration.commandName == arguments[1] })
        {
            diagnose(
                CommandError(
                    "unknown_topic", "no help topic or command \"\(arguments[1])\"",
                    hint: "topics: \(HelpTopic.allCases.map(\.rawValue).joined(separator: ", ")); commands: agent-eval --help"))
            Foundation.exit(Exit.usage.rawValue)
        }
        if let usage = usageProblem(in: arguments) {
            diagnose(usage)
            printErrorDocument(arguments, exitCode: Exit.usage.rawValue, thrown: Exit.usage, message: usage.message)
            Foundation.exit(Exit.usage.rawValue)
        }
        // ArgumentParser's `main`, with one addition: a command given --json that fails before it
        // has printed anything prints an error document on standard output.
        do {
            var command = try await asyncParseAsRoot(arguments)
            try LogReadLimits.apply(to: command)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            printErrorDocument(arguments, exitCode: exitCode(for: error).rawValue, thrown: error, message: message(for: error))
            exit(withError: error)
        }
    }

    /// The error document (`StandardOutput.claimErrorDocument`) when `arguments` ask for JSON and the
    /// command printed nothing; the error itself is on standard error as always.
    static func printErrorDocument(_ arguments: [String], exitCode: Int32, thrown: any Error, message: @autoclosure () -> String) {
        guard StandardOutput.asksForJSON(arguments),
            let document = StandardOutput.claimErrorDocument(exitCode: exitCode, thrown: thrown, message: message())
        else { return }
        StandardOutput.printErrorDocument(document)
    }

    /// What the argument parser would report badly: a misspelt command (it says only "unexpected
    /// argument") and a negative number after an option (it reads `-1` as an option, and says
    /// the value is missing), and the old `--json FILE` spelling (`--json` prints; it would
    /// take the file for an input).
    static func usageProblem(in arguments: [String]) -> CommandError? {
        // What follows `--` is another program's command line (`record -- python3 agent.py …`).
        let arguments = Array(arguments.prefix { $0 != "--" })
        let commands = configuration.subcommands.compactMap { $0.configuration.commandName } + ["help"]
        if let first = arguments.first, !first.hasPrefix("-"), !commands.contains(first) {
            let suggestion = ConfigNode.suggestion(for: first, among: commands)
            return CommandError(
                "unknown_command", "agent-eval has no command \"\(first)\"",
                hint: suggestion.map { "did you mean \"agent-eval \($0)\"? (agent-eval --help lists the commands)" }
                    ?? "agent-eval --help lists the commands")
        }
        for (option, value) in zip(arguments, arguments.dropFirst())
        where option.hasPrefix("--") && !option.contains("=") && value.hasPrefix("-") && Int(value) != nil {
            return CommandError(
                "negative_number", "\(option) \(value): a negative number is not accepted here",
                hint: "steps, counts and limits start at 0 or 1")
        }
        for (option, value) in zip(arguments, arguments.dropFirst()) where option == "--json" && Self.looksLikeJSONOutput(value) {
            return CommandError(
                "json_takes_no_file", "--json \(value): --json prints JSON on standard output and takes no file",
                hint: value == "-" ? "leave out the -: agent-eval … --json" : "write the file with --json-out \(value)")
        }
        return nil
    }

    /// A word after `--json` that was meant as its file: `-`, or a `.json` path that is not an
    /// input already there (an input is read, so it exists).
    static func looksLikeJSONOutput(_ word: String) -> Bool {
        if word == "-" { return true }
        return word.hasSuffix(".json") && !FileManager.default.fileExists(atPath: word)
    }
}

/// The reference pages `agent-eval help <topic>` prints (Templates/help): the short form of
/// the docs/ pages they name.
enum HelpTopic: String, CaseIterable {
    case cases
    case agentFiles = "agent-files"
    case logFormat = "log-format"
    case models
    case ci

    func text() throws -> String {
        try String(contentsOfFile: try BundledFiles.templates() + "/help/\(rawValue).txt", encoding: .utf8)
    }
}
