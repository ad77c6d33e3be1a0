import AgentRuntime
import ArgumentParser
import Foundation
import Replay
import TraceCore
import TraceLog

/// `agent-eval replay <log> --rerun --agent <file>`: re-drive the current runtime with a log.
enum RerunCommand {
    static func run(log: String, agentPath: String, json: Bool) async throws {
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
            var object = ObjectBuilder()
            object.set("schema", "agent-eval/rerun")
            object.set("version", 1)
            object.set("log", log)
            object.set("agent", agentPath)
            object.set("identical", report.divergence == nil)
            object.set("recorded_events", report.recordedEvents)
            object.set("new_events", report.newEvents)
            if let divergence = report.divergence {
                var entry = ObjectBuilder()
                entry.set("step", divergence.step)
                entry.set("seq", divergence.sequence)
                entry.set("kind", divergence.kind)
                entry.set("field", divergence.fieldPath)
                entry.set("recorded", divergence.recorded)
                entry.set("new", divergence.new)
                entry.set("cause", divergence.cause)
                object.set("divergence", entry.json)
            }
            object.set("unanswered", JSONValue.array(report.unanswered.map { .string($0) }))
            object.set("recorded_stop", report.recordedStop?.reason)
            object.set("new_stop", report.newStop?.reason)
            printJSON(object.json)
        } else if let divergence = report.divergence {
            print("diverged at step \(divergence.step), seq \(divergence.sequence) (\(divergence.kind)), field \(divergence.fieldPath)")
            print("  recorded: \(divergence.recorded)")
            print("  now:      \(divergence.new)")
            if let cause = divergence.cause { print("  cause:    \(cause)") }
            print(
                "  stop:     recorded \(report.recordedStop?.reason.rawValue ?? "none"), now \(report.newStop?.reason.rawValue ?? "none")")
            print("  look:     agent-eval replay \(log) --step \(divergence.step)")
        } else {
            print("identical: the current runtime and \(agentPath) reproduce all \(report.recordedEvents) events of \(log)")
        }
        if !report.unanswered.isEmpty && !json {
            for message in report.unanswered { print("  not sent live: \(message)") }
        }
        throw report.divergence == nil ? Exit.success : Exit.failure
    }
}
