import AgentRuntime
import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import Recording
import TraceCore
import TraceLog

/// What `approve` and `deny` take: the log, the call, who answers and why.
struct WaitingCallAnswer: ParsableArguments {
    @Argument(help: "The log the proxy writes.")
    var log: String

    @Argument(help: "The call to answer (mcp-N); none lists the calls that wait.")
    var call: String?

    @Option(help: "Who answers (default: the USER variable).")
    var approver: String?

    @Option(help: "Why, recorded with the answer.")
    var reason: String?

    @Flag(help: "Print JSON on standard output.")
    var json = false

    /// Records the answer (`granted`, or refused) to the call, or lists the waiting calls when none is named.
    func answer(granted: Bool, verb: String) throws {
        let deny = !granted
        // The proxy makes its log before any call can wait: no log, no proxy (a mistyped path
        // would otherwise list nothing and pass).
        guard FileManager.default.fileExists(atPath: log) else {
            throw diagnose(
                CommandError(
                    "no_log", "there is no log at \(log)", at: SourceLocation(path: log),
                    hint: "give the log the proxy writes: it names it on its standard error when a call waits"))
        }
        // It must be a log: one being written may be torn or still empty, but a file that is no
        // log, or a damaged one, has no call to answer (a listing of none would pass).
        var state = RunState()
        do {
            _ = try LogReader(path: log).forEachEvent { _ = RunState.reduce(into: &state, $0.event) }
        } catch let error as LogError where error.code == .empty || error.code == .noEvent {
        } catch {
            throw diagnose(error)
        }
        // A run that stopped for approval (exec, run) is answered by resuming it, not here.
        let resumeHint =
            state.stop?.reason == .approvalRequired
            ? "this run stopped for approval: answer it by resuming it, agent-eval exec AGENT_FILE --resume \(ShellWords.quoted(log)) "
                + "--approve \(call ?? "ID") (or --deny \(call ?? "ID"))" : nil
        guard let call else {
            let waiting = MCPApprovals.pending(log: log)
            if waiting.isEmpty, let resumeHint, !json { printError("note: \(resumeHint)") }
            if json {
                printJSON(.array(waiting.map(\.json)))
            } else if waiting.isEmpty {
                say("no call waits for approval in \(log)")
            } else {
                for item in waiting {
                    say(
                        "\(item.callId)  \(item.tool) \(String(decoding: JSONWriter.encode(item.arguments), as: UTF8.self))"
                            + (item.reason.map { "  (\($0))" } ?? ""))
                }
            }
            return
        }
        let answered: MCPApprovals.PendingCall
        do {
            answered = try MCPApprovals.answer(
                log: log, callId: call,
                with: MCPApprovals.Answer(
                    isGranted: !deny, approver: approver ?? ProcessInfo.processInfo.environment["USER"] ?? "agent-eval \(verb)",
                    reason: reason))
        } catch  where error.code == .alreadyAnswered {
            // The call was answered, by someone else: this answer lost the race and is not taken.
            throw diagnose(error, exit: Exit.failure)
        } catch let error as any Diagnostic {
            guard let resumeHint else { throw diagnose(error) }
            throw diagnose(CommandError("not_waiting", error.message, at: SourceLocation(path: log), hint: resumeHint))
        } catch {
            throw diagnose(error)
        }
        if json {
            var object = ObjectBuilder()
            object.set("call_id", answered.callId)
            object.set("tool", answered.tool)
            object.set("granted", !deny)
            printJSON(object.json)
        } else {
            say("\(deny ? "denied" : "approved") \(answered.callId) (\(answered.tool))")
        }
    }
}
