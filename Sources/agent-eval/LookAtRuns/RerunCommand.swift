import AgentRuntime
import ArgumentParser
import EvalEngine
import Foundation
import MCPTools
import ModelClients
import Replay
import TraceCore

/// `agent-eval rerun <log> --agent <file>`: re-drive the current runtime with a log.
struct RerunCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "rerun",
        abstract: "Re-drive the current runtime with a log's recorded model outputs and tool results.",
        discussion: """
            Runs the agent as it is now (its agent file, policy and tools' schemas) with the model replies and \
            tool results recorded in the log, and reports the first event where the new run differs from the \
            recorded one: the step, the event, the field, both values, and the cause when it can tell (a rule \
            that now denies, a schema that now rejects, a limit that now fires). Nothing is sent to a live model \
            or tool: a request the log cannot answer is refused and listed. `agent-eval replay LOG --rerun \
            --agent FILE` is the same command.

            --mode prefix goes live instead of refusing: the log's model replies and tool results are served while \
            the run asks what the log's run asked (the same context packet for each decision, the same call), and \
            from the first request that differs on, the agent file's model and tools answer (--model, --base-url, \
            --cassette as for exec). It prints where and why the run went live and its trajectory against the \
            recorded one from there (the recorded rest is the baseline), and keeps the new run's log (--out, --log).

            Exit codes: 0 the same run; 1 the run diverges; 2 the log or the agent file cannot be read; \
            64 usage error.

            Examples:
              agent-eval rerun Fixtures/runs/support-refund.jsonl.gz --agent Fixtures/agents/support-stricter/agent.yaml
              agent-eval rerun run.jsonl.gz --agent agent.yaml --json
              agent-eval rerun run.jsonl.gz --agent agent.yaml --mode prefix --model openai:gpt-4o-mini
            """
    )

    @Argument(help: "The recorded log (.jsonl.gz).")
    var log: String

    @Option(help: "The agent file as it is now.")
    var agent: String

    @Flag(help: "Print the documented machine-readable form (docs/replay.md).")
    var json = false

    @Option(
        help: ArgumentHelp(
            "strict: everything from the log, a request it cannot answer is refused; prefix: the log while the requests "
                + "match, live from the first that differs.", valueName: "strict|prefix"))
    var mode = "strict"

    @OptionGroup(title: "Model (prefix mode: what answers once the run goes live)")
    var models: ModelArguments

    @OptionGroup(title: "New log (prefix mode)")
    var destination: NewLogOptions

    func validate() throws {
        guard let mode = Rerun.Mode(rawValue: mode) else { throw ValidationError("--mode takes strict or prefix; got \(self.mode)") }
        if mode == .strict && (models.model != nil || models.baseURL != nil || models.cassette != nil) {
            throw ValidationError("--model, --base-url and --cassette choose what answers live: they go with --mode prefix")
        }
        try models.requireCassetteForRecord()
        if let given = destination.log, URL(fileURLWithPath: given).standardizedFileURL == URL(fileURLWithPath: log).standardizedFileURL {
            throw ValidationError("--log names the recorded log itself: give the new run another file")
        }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        if Rerun.Mode(rawValue: mode) == .prefix {
            try await prefix()
        } else {
            try await Self.rerun(log: log, agentPath: agent, json: json)
        }
    }

    /// `--mode prefix`: the log while the requests match, live after; the new run is kept.
    func prefix() async throws {
        let report: Rerun.Report
        do {
            let shelf = CassetteShelf()
            let agent = try AgentFile.load(
                path: self.agent, models: try models.options(shelf: shelf), servers: try models.toolServers(shelf: shelf))
            let (runId, path) = destination.destination(agent: "\(agent.name)-rerun")
            report = try await Rerun.run(log: log, agent: agent, output: path, mode: .prefix, runId: runId)
        } catch {
            throw diagnose(error)
        }
        let identical = report.divergence == nil && report.wentLive == nil
        if json {
            printJSON(report.json(log: log, agent: agent))
        } else {
            var output = OutputBuffer()
            if let live = report.wentLive {
                let place =
                    live.decision.map { "decision \($0 + 1) (step \(live.step ?? 0))" } ?? "call \(live.callId ?? "?")"
                output.append("went live at \(place): \(live.reason)")
            } else {
                output.append("never went live: the log answered every request")
            }
            output.append("new run: \(report.newLog)")
            if let diff = report.diff {
                output.append("")
                // From where the runs part: where the run went live, or an earlier step the current
                // code already decided otherwise.
                let from = [report.wentLive?.step, diff.first?.leftStep].compactMap { $0 }.min()
                for line in DiffCommand.lines(
                    diff, left: log, right: report.newLog, from: from, shared: "the same as the log's, served from it")
                {
                    output.append(line)
                }
            }
            output.flush()
        }
        throw identical ? Exit.success : Exit.failure
    }

    static func rerun(log: String, agentPath: String, json: Bool) async throws {
        let report: Rerun.Report
        do {
            let agent = try AgentFile.load(path: agentPath)
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-rerun-\(getpid()).jsonl.gz").path
            defer { try? FileManager.default.removeItem(atPath: output) }
            report = try await Rerun.run(log: log, agent: agent, output: output)
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(report.json(log: log, agent: agentPath))
        } else if let divergence = report.divergence {
            say("diverged at step \(divergence.step), seq \(divergence.sequence) (\(divergence.kind)), field \(divergence.fieldPath)")
            say("  recorded: \(divergence.recorded)")
            say("  now:      \(divergence.new)")
            if let cause = divergence.cause { say("  cause:    \(cause)") }
            say(
                "  stop:     recorded \(report.recordedStop?.reason.rawValue ?? "none"), now \(report.newStop?.reason.rawValue ?? "none")")
            say("  look:     \(EvalReport.replayCommand(log: log, step: divergence.step))")
        } else {
            say("identical: the current runtime and \(agentPath) reproduce all \(report.recordedEvents) events of \(log)")
        }
        if !report.unanswered.isEmpty && !json {
            for request in report.unanswered { say("  not sent live: \(request.message)") }
        }
        throw report.divergence == nil ? Exit.success : Exit.failure
    }
}
