import AgentRuntime
import ArgumentParser
import EvalEngine
import Foundation
import Replay
import TraceCore

/// `agent-eval rerun <log> --agent <file>`: re-drive the current runtime with a log.
struct RerunCommand: AsyncParsableCommand {
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

            Exit codes: 0 the same run; 1 the run diverges; 2 the log or the agent file cannot be read; \
            64 usage error.

            Examples:
              agent-eval rerun Fixtures/runs/support-refund.jsonl.gz --agent Fixtures/agents/support-stricter/agent.yaml
              agent-eval rerun run.jsonl.gz --agent agent.yaml --json
            """
    )

    @Argument(help: "The recorded log (.jsonl.gz).")
    var log: String

    @Option(help: "The agent file as it is now.")
    var agent: String

    @Flag(help: "Print the documented machine-readable form (docs/replay.md).")
    var json = false

    func run() async throws {
        try await Self.rerun(log: log, agentPath: agent, json: json)
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
