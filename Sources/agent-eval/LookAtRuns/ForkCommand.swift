import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import ModelClients
import Recording
import Replay
import TraceCore
import TraceLog

/// `agent-eval fork <log> --at STEP [edits…]`: what if — a run forked at a step, with edits,
/// continued live, and compared with its parent from the fork point.
struct ForkCommand: AsyncParsableCommand, ReadsLogs {
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
              --turn N --say TEXT        a conversation: the user says TEXT at its turn N (2 or more; default: \
            the last) instead of what it said; the fork goes on until the agent has answered it (max_turns)
            Without --at, the fork point comes from the edits. Approvals the parent was given after the fork \
            point are given again when the fork stops to ask for the same call (the same id, tool and arguments).

            A run recorded by `agent-eval record` (any framework, through the gateway) has no agent file: give \
            the command to run again after --, and --parent-cassette, the cassette the parent was recorded with. \
            The command runs again from its start: its model requests up to the fork point are answered from \
            that cassette, each checked to be the parent's request (one that differs means the program did not \
            retrace its parent: nothing is written), and the fork's log is made at the fork point as for any \
            fork. From there its requests go to the upstream (--upstream, as record) or to --cassette, with the \
            edits applied: --result and --error replace what every later request shows the model of the call, \
            and --model names the model they ask for. Its own tools run again for the prefix (they run in its \
            process), and an edit changes what the model is shown, not what its code did with the result; \
            --decision, --approve, --deny, --input and --tool-fixture cannot reach into the program and are refused.

            Exit codes, as diff: 0 the fork's trajectory is the parent's; 1 it diverges; 2 the fork could not be \
            made (a torn or damaged parent, a step past its end, an edit that does not apply, a recorded \
            program that did not retrace its parent); 64 usage error.

            Examples:
              agent-eval fork Fixtures/runs/support-refund.jsonl.gz --agent Fixtures/agents/support/agent.yaml --at 1
              agent-eval fork run.jsonl.gz --agent agent.yaml --result call-1='{"status": "lost"}'
              agent-eval fork run.jsonl.gz --agent agent.yaml --deny call-3 --json
              agent-eval fork run.jsonl.gz --agent agent.yaml --decision 2=@reply.json --model openai:gpt-4o-mini
              agent-eval fork conversation.jsonl.gz --agent agent.yaml --turn 3 --say "no, do not refund it"
              agent-eval fork recorded.jsonl.gz --at 1 --parent-cassette cassettes/refund --model gpt-4o -- python3 agent.py
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

    @Option(help: ArgumentHelp("A conversation: what the user says at --turn instead (docs/conversations.md).", valueName: "text"))
    var say: String?

    @Option(help: ArgumentHelp("A conversation: the user turn --say replaces (default: the last).", valueName: "n"))
    var turn: Int?

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

    @OptionGroup(title: "A run recorded by agent-eval record")
    var recorded: RecordedForkOptions

    @Argument(
        parsing: .postTerminator,
        help: ArgumentHelp("For a run recorded by agent-eval record: the command to run again, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        if command.isEmpty {
            guard agent != nil else {
                throw ValidationError(
                    "give the agent file to continue with: --agent AGENT.yaml (a log names its agent, not the file it came from); "
                        + "for a run recorded by agent-eval record, give its command after -- and --parent-cassette DIR")
            }
            if recorded.parentCassette != nil || !recorded.upstreams.isEmpty || recorded.commandInput != nil {
                throw ValidationError(
                    "--parent-cassette, --upstream and --command-input are for a run recorded by agent-eval record: give its command after --"
                )
            }
        } else {
            guard agent == nil else {
                throw ValidationError("give --agent for a run of an agent file, or a command after -- for a recorded run, not both")
            }
            guard recorded.parentCassette != nil else {
                throw ValidationError(
                    "a fork of a recorded run answers its requests up to the fork point from the cassette the parent was recorded with: "
                        + "--parent-cassette DIR (record --cassette DIR --record new|all keeps one)")
            }
            guard models.baseURL == nil else {
                throw ValidationError("--base-url is for an agent file; a recorded run's fork takes --upstream provider=URL")
            }
            for edit in try edits() where edit.kind != .result && edit.kind != .error {
                throw ValidationError(
                    "\(Self.flag(edit.kind)) cannot be applied to a run recorded by agent-eval record: \(RecordedFork.whyNot(edit.kind))")
            }
            _ = try RecordCommand.upstreamValues(recorded.upstreams)
            guard recorded.timeout > 0 else { throw ValidationError("--timeout must be at least 1 second, got \(recorded.timeout)") }
        }
        try models.requireCassetteForRecord()
        if let at, at < 0 { throw ValidationError("--at must be a step number, 0 or more") }
        let edits = try edits()
        // Only a call or a step an edit names can say where to fork.
        if at == nil, !edits.contains(where: { [.result, .error, .decision, .approve, .deny, .say].contains($0.kind) }) {
            throw ValidationError(
                "say where to fork: --at STEP (or an edit that names a "
                    + (command.isEmpty
                        ? "call, a step or a user turn: --result, --error, --decision, --approve, --deny, --say)"
                        : "call: --result, --error)"))
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
        if let say {
            guard !say.isEmpty else { throw ValidationError("--say: give what the user says") }
            edits.append(ForkEdit(kind: .say, text: say))
        } else if turn != nil {
            throw ValidationError("--turn \(turn ?? 0) names the user turn --say replaces: give --say TEXT too")
        }
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

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        if !command.isEmpty { try await runRecorded() }
        let report: Fork.Report
        let interrupted: Int32?
        do {
            try refuseRecorded(log)
            var edits = try edits()
            // A fixture file is read (and checked, naming its line) here; the log keeps its responses.
            for index in edits.indices where edits[index].kind == .toolFixture {
                let tool = edits[index].tool ?? ""
                let file = edits[index].value?.stringValue ?? ""
                edits[index].value = try AgentFile.loadFixture(path: file, tool: tool).json
            }
            let shelf = CassetteShelf()
            let agent = try AgentFile.load(
                path: self.agent ?? "", models: try models.options(shelf: shelf), servers: try models.toolServers(shelf: shelf))
            let request = Fork.Request(parent: log, at: at, edits: edits, turn: turn)
            let (runId, path) = destination.destination(agent: "\(agent.name)-fork")
            let sink = await catalog.indexingSink()
            (report, interrupted) = try await withInterruption { () async throws -> Fork.Report in
                try await Fork.run(request, agent: agent, output: path, runId: runId, finishedLogs: sink)
            }
        } catch {
            throw diagnose(error)
        }
        try finish(report, lines: lines(report), interrupted: interrupted)
    }

    /// Prints the report (`--json`, or `lines`) and exits as `diff` does.
    func finish(_ report: Fork.Report, lines: @autoclosure () -> [String], interrupted: Int32?) throws -> Never {
        if json {
            printJSON(report.json)
        } else {
            var output = OutputBuffer()
            for line in lines() { output.append(line) }
            output.flush()
        }
        if let interrupted { throw ExitCode(128 + interrupted) }
        throw report.diff.isSame ? Exit.success : Exit.failure
    }

    /// A run `agent-eval record` recorded is forked by running its command again (`RecordedFork`).
    func refuseRecorded(_ log: String) throws {
        guard case .runStarted(let started)? = try? LogReader(path: log).firstEvent()?.event.payload,
            started.source?.importer == ExchangeRecorder.recorderName
        else { return }
        throw RecordingError(
            .forkFailed,
            "\(log) was recorded by agent-eval record (\(started.source?.file ?? "a command")): it has no agent file to go on with",
            hint: "give its command after -- and the cassette it was recorded with, in place of --agent: agent-eval fork "
                + "\(ShellWords.quoted(log))\(at.map { " --at \($0)" } ?? "") … --parent-cassette DIR -- \(started.source?.file ?? "COMMAND") "
                + "(docs/replay.md, \"What if\")")
    }

    /// The option an edit of `kind` is given with.
    static func flag(_ kind: ForkEdit.Kind) -> String {
        kind == .toolFixture ? "--tool-fixture" : "--\(kind.rawValue)"
    }

    /// The fork of a recorded run: the command run again through the gateway, the parent's cassette
    /// answering up to the fork point; then the diff against the parent, as for any fork.
    func runRecorded() async throws -> Never {
        let report: Fork.Report
        let recording: CommandRecording.Outcome
        let interrupted: Int32?
        do {
            let (runId, path) = destination.destination(agent: "\(CommandRecording.agentName(for: command))-fork")
            let environment = ProcessInfo.processInfo.environment
            let upstreams = Upstreams.resolve(given: try RecordCommand.upstreamValues(recorded.upstreams), environment: environment)
            var job = try RecordedFork.job(
                parent: log, at: at, edits: try edits(), parentCassette: recorded.parentCassette ?? "", command: command,
                input: recorded.commandInput, model: models.model, logPath: path, runId: runId, timeoutMs: recorded.timeout * 1000,
                upstreams: upstreams, cassette: try models.cassette.map { try Cassette(directory: $0, mode: models.mode) },
                environment: environment)
            if models.cassette == nil || models.mode != .none {
                // The parent's upstream is not in its log: say where the requests past the fork point go.
                printError(
                    "past the fork point the model requests go to \(upstreams.openAI) (OpenAI) and \(upstreams.anthropic) (Anthropic)"
                        + (models.cassette.map { ", recorded into \($0)" } ?? "") + "; --upstream provider=URL sends them elsewhere")
            }
            job.recording.outputDescriptor = json ? 2 : 1
            job.recording.finishedLogs = await catalog.indexingSink()
            let commandRecording = job.recording
            (recording, interrupted) = try await withInterruption { try await commandRecording.run() }
            report = try Fork.report(job.request, plan: job.plan, log: path)
        } catch {
            throw diagnose(error)
        }
        for call in recording.unshownEdits {
            printError(
                "warning: the model was never shown the edited result of \(call): no model request after the fork point carried "
                    + "it back (the command ended first, or wrote the result back as text, which a fork does not edit)")
        }
        let forked = report.forked
        var lines = [
            "forked \(report.outcome.runId) from \(forked.parentRunId) after its step \(forked.step) (\(report.copiedEvents) events "
                + "copied; the command ran again from its start, the parent's cassette answering up to the fork point)"
        ]
        lines += forked.edits.map { "  edit: \($0.summary)" }
        if let model = forked.model { lines.append("  model from the fork on: \(model.name)") }
        lines += RecordCommand.describe(recording) + [""]
        lines += DiffCommand.lines(report.diff, left: report.parent, right: report.log, from: forked.step)
        try finish(report, lines: lines, interrupted: interrupted)
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

/// The options of a fork of a run `agent-eval record` recorded.
struct RecordedForkOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp("The cassette the parent was recorded with: it answers the requests up to the fork point.", valueName: "dir"))
    var parentCassette: String?

    @Option(
        name: .customLong("upstream"),
        help: ArgumentHelp(
            "Where a provider's requests go after the fork point, as openai=URL or anthropic=URL (repeatable), as for record.",
            valueName: "provider=URL"))
    var upstreams: [String] = []

    @Option(help: "Given to the command on its standard input and as AGENT_EVAL_INPUT (what record's --input gave the parent).")
    var commandInput: String?

    @Option(help: ArgumentHelp("Stop the command after this many seconds.", valueName: "seconds"))
    var timeout: Int = 600
}
