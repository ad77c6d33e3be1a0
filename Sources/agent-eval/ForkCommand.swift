import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Replay
import TraceCore

/// `agent-eval fork <log> --at STEP [edits…]`: what if — a run forked at a step, with edits,
/// continued live, and compared with its parent from the fork point.
struct ForkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fork",
        abstract: "Fork a run at a step with an edit, continue it live, and see what changed.",
        discussion: """
            Rebuilds the run's state at the end of STEP from its log (the digests checked), copies the parent's \
            events up to there into a new log, records a run_forked event (the parent run, the step, the parent's \
            chain head there, the edits), and continues live with the agent file's model and tools under the \
            limits the parent recorded, with what it had used. Nothing before the fork runs again: no tool is \
            called twice. Then it prints the trajectory against the parent's from the fork point, as `diff` does.

            Edits (each checked against the parent; one that names a call or step it does not have is an error \
            and nothing is written):
              --result CALL=JSON|@FILE   the call's result replaced (text that is not JSON is a string)
              --error CALL=TEXT          the call's result replaced by a failure
              --decision STEP=JSON|@FILE the model's reply at STEP given instead of asked (a decision object, \
            parsed like any reply); forks after STEP-1
              --approve CALL, --deny CALL  a call that waited for approval decided; forks at its pause
              --input TEXT               the goal restated from the fork on
              --tool-fixture NAME=@FILE  the tool answers from a fixture (an agent file's fixture: list) from the fork on
            Without --at, the fork point comes from the edits. Approvals the parent was given after the fork \
            point are given again when the fork stops to ask for the same call (the same id, tool and arguments).

            Exit codes, as diff: 0 the fork's trajectory is the parent's; 1 it diverges; 2 the fork could not be \
            made (a torn or damaged parent, a step past its end, an edit that does not apply); 64 usage error.

            Examples:
              agent-eval fork Fixtures/runs/support-refund.jsonl.gz --agent Fixtures/agents/support/agent.yaml --at 1
              agent-eval fork run.jsonl.gz --agent agent.yaml --result call-1='{"status": "lost"}'
              agent-eval fork run.jsonl.gz --agent agent.yaml --deny call-3 --json
              agent-eval fork run.jsonl.gz --agent agent.yaml --decision 2=@reply.json --model openai:gpt-4o-mini
            """
    )

    @Argument(help: "The parent run's log (.jsonl.gz).")
    var log: String

    @Option(help: "The agent file to continue with: its model and tools run after the fork point.")
    var agent: String?

    @Option(help: ArgumentHelp("The parent's step to fork after (default: the step the edits name).", valueName: "step"))
    var at: Int?

    @Option(name: .customLong("result"), help: ArgumentHelp("Replace a call's result.", valueName: "call=json|@file"))
    var results: [String] = []

    @Option(name: .customLong("error"), help: ArgumentHelp("Replace a call's result by a failure.", valueName: "call=text"))
    var errors: [String] = []

    @Option(help: ArgumentHelp("Give the model's reply at a step.", valueName: "step=json|@file"))
    var decision: [String] = []

    @Option(help: ArgumentHelp("Grant a call that waited for approval.", valueName: "call"))
    var approve: [String] = []

    @Option(help: ArgumentHelp("Refuse a call that waited for approval.", valueName: "call"))
    var deny: [String] = []

    @Option(help: ArgumentHelp("Restate the goal from the fork on.", valueName: "text"))
    var input: [String] = []

    @Option(
        name: .customLong("tool-fixture"), help: ArgumentHelp("Have a tool answer from a fixture file.", valueName: "name=@file"))
    var toolFixtures: [String] = []

    @OptionGroup(title: "Model")
    var models: ModelArguments

    @OptionGroup(title: "New log")
    var destination: NewLogOptions

    @OptionGroup(title: "Catalog")
    var catalog: CatalogUse

    @Flag(help: "Print the documented machine-readable form (docs/replay.md, \"What if\").")
    var json = false

    func validate() throws {
        guard agent != nil else {
            throw ValidationError(
                "give the agent file to continue with: --agent AGENT.yaml (a log names its agent, not the file it came from)")
        }
        try models.requireCassetteForRecord()
        if let at, at < 0 { throw ValidationError("--at must be a step number, 0 or more") }
        let edits = try edits()
        // Only a call or a step an edit names can say where to fork.
        if at == nil, !edits.contains(where: { [.result, .error, .decision, .approve, .deny].contains($0.kind) }) {
            throw ValidationError(
                "say where to fork: --at STEP (or an edit that names a call or a step: --result, --error, --decision, --approve, --deny)")
        }
    }

    /// The edits, in a stable order: results, errors, the reply, approvals, refusals, the goal,
    /// fixtures.
    func edits() throws -> [ForkEdit] {
        var edits: [ForkEdit] = []
        for item in results {
            let (call, text) = try Self.pair(item, "--result", "CALL=JSON or CALL=@file")
            let body = try Self.value(text, "--result")
            edits.append(ForkEdit(kind: .result, callId: call, value: (try? JSONParser.parse(Array(body.utf8))) ?? .string(body)))
        }
        for item in errors {
            let (call, text) = try Self.pair(item, "--error", "CALL=TEXT")
            guard !text.isEmpty else { throw ValidationError("--error \(item): give the error's text, CALL=TEXT") }
            edits.append(ForkEdit(kind: .error, callId: call, text: text))
        }
        for decision in decision {
            let (stepText, text) = try Self.pair(decision, "--decision", "STEP=JSON or STEP=@file")
            guard let step = Int(stepText), step >= 1 else {
                throw ValidationError("--decision \(decision): STEP must be a step number, 1 or more")
            }
            // A reply read from a file ends where its text does: not with the file's last newline.
            let reply = try Self.value(text, "--decision")
            edits.append(ForkEdit(kind: .decision, step: step, text: String(reply.reversed().drop { $0.isNewline }.reversed())))
        }
        edits += approve.map { ForkEdit(kind: .approve, callId: $0) }
        edits += deny.map { ForkEdit(kind: .deny, callId: $0) }
        edits += input.map { ForkEdit(kind: .input, text: $0) }
        for item in toolFixtures {
            let (tool, file) = try Self.pair(item, "--tool-fixture", "NAME=@file")
            guard file.hasPrefix("@") else { throw ValidationError("--tool-fixture \(item): give the fixture file as NAME=@file") }
            edits.append(ForkEdit(kind: .toolFixture, tool: tool, value: .string(String(file.dropFirst()))))
        }
        return edits
    }

    static func pair(_ item: String, _ flag: String, _ form: String) throws -> (String, String) {
        guard let equals = item.firstIndex(of: "="), equals != item.startIndex else {
            throw ValidationError("\(flag) \(item): expected \(form)")
        }
        return (String(item[..<equals]), String(item[item.index(after: equals)...]))
    }

    /// `text`, or the contents of the file `@path` names.
    static func value(_ text: String, _ flag: String) throws -> String {
        guard text.hasPrefix("@") else { return text }
        let path = String(text.dropFirst())
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("\(flag): cannot read \(path)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    func run() async throws {
        let report: Fork.Report
        let interrupted: Int32?
        do {
            var edits = try edits()
            // A fixture file is read (and checked, naming its line) here; the log keeps its responses.
            for index in edits.indices where edits[index].kind == .toolFixture {
                let tool = edits[index].tool ?? ""
                let file = edits[index].value?.stringValue ?? ""
                edits[index].value = try AgentFile.loadFixture(path: file, tool: tool).json
            }
            let agent = try AgentFile.load(path: self.agent ?? "", models: try models.options(), servers: MCPServers())
            let request = Fork.Request(parent: log, at: at, edits: edits)
            let (runId, path) = destination.destination(agent: "\(agent.name)-fork")
            let sink = catalog.indexingSink()
            (report, interrupted) = try await withInterruption { () async throws -> Fork.Report in
                try await Fork.run(request, agent: agent, output: path, runId: runId, finishedLogs: sink)
            }
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(report.json)
        } else {
            var output = OutputBuffer()
            for line in lines(report) { output.append(line) }
            output.flush()
        }
        if let interrupted { throw ExitCode(128 + interrupted) }
        throw report.diff.isSame ? Exit.success : Exit.failure
    }

    func lines(_ report: Fork.Report) -> [String] {
        let forked = report.forked
        var lines = [
            "forked \(report.outcome.runId) from \(forked.parentRunId) after its step \(forked.step) "
                + "(\(report.copiedEvents) events copied, nothing run again)"
        ]
        for edit in forked.edits { lines.append("  edit: \(edit.summary)") }
        lines += ExecCommand.describe(report.outcome, agentPath: agent ?? "")
        lines.append("")
        lines += DiffCommand.lines(report.diff, left: report.parent, right: report.log, from: forked.step)
        return lines
    }
}
