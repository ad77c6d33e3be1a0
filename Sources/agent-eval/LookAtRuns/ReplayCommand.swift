import AgentRuntime
import ArgumentParser
import Catalog
import Foundation
import Pipelines
import Replay
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `agent-eval replay`: rebuild a run from its log and show it step by step.
struct ReplayCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Rebuild a run from its log alone and show it step by step.",
        discussion: """
            Replay needs no model, network or clock: it folds the log's events into the run state with the same \
            code the runtime used, checks every recorded state digest against the rebuilt state, and shows each \
            step: the context packet (what went in, what was left out and why), the raw and the parsed decision, \
            each verdict, each tool intent and result, what changed in the state, and the stop with the limit \
            that fired.

            On a terminal (without --step, --until, --json or --plain) replay is interactive: n/p next and \
            previous step, g to jump to a step, f to the next failure, v to show payloads in full, q to quit.

            --step N reads one step through the log's step table in the catalog (made by `index`, or by the \
            first replay of the log, and made again when the log changed): only the gzip member holding the \
            step is read, and the state's counters at the step's end come from the table. With --no-catalog the \
            table is made in memory by a full replay.

            --rerun --agent FILE is `agent-eval rerun LOG --agent FILE` (see its help); it takes no other \
            replay option.

            Exit codes: 0 replayed and every digest matches, or the log records none (--rerun: the same run); 1 a \
            digest does not match, with --step: of that step or one before it (--rerun: the run diverges), or the log \
            is torn (replayed to the cut, with a warning); 2 the log cannot be read, is damaged, or holds no \
            event (empty, or cut before its first event); 64 usage error.

            Examples:
              agent-eval replay Fixtures/runs/support-refund.jsonl.gz
              agent-eval replay Fixtures/runs/support-refund.jsonl.gz --step 2
              agent-eval replay run.jsonl.gz --until 5 --full
              agent-eval replay run.jsonl.gz --json | jq '.steps[] | {step, problems}'
            """
    )

    @Argument(help: "The log file (.jsonl.gz).")
    var log: String

    @Option(help: "Show only this step, and the state at its end.")
    var step: Int?

    @Option(help: "Replay up to and including this step.")
    var until: Int?

    @Flag(help: "Show payloads untruncated (with --step: also the whole state at the step's end).")
    var full = false

    @Flag(help: "Print the documented machine-readable form (docs/replay.md).")
    var json = false

    @Flag(help: "Plain output even on a terminal.")
    var plain = false

    @Flag(help: "Same as `agent-eval rerun LOG --agent FILE`.")
    var rerun = false

    @Option(help: "The agent file for --rerun.")
    var agent: String?

    @OptionGroup var catalog: CatalogArguments

    @Flag(help: "Keep no step table in the catalog: make it in memory by a full replay.")
    var noCatalog = false

    func validate() throws {
        if step != nil && until != nil { throw ValidationError("--step and --until do not go together") }
        if rerun && agent == nil { throw ValidationError("--rerun needs --agent <file>: the agent as it is now") }
        if !rerun && agent != nil { throw ValidationError("--agent only applies with --rerun") }
        if rerun {
            let conflicting = [
                step.map { _ in "--step" }, until.map { _ in "--until" }, full ? "--full" : nil, plain ? "--plain" : nil,
            ].compactMap { $0 }
            if !conflicting.isEmpty {
                throw ValidationError("--rerun takes only --agent and --json; \(conflicting.joined(separator: ", ")) do not apply to it")
            }
        }
        if let step, step < 0 { throw ValidationError("--step must be 0 or more") }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        // A pipeline log replays as its DAG: each task's status and the child runs to step into.
        if PipelineTarget.detected(log) != nil {
            let show = try PipelineShowCommand.parse([log] + (json ? ["--json"] : []))
            try await show.run()
            return
        }
        if rerun, let agent {
            try await RerunCommand.rerun(log: log, agentPath: agent, json: json)
            return
        }
        // Reading the log, the catalog's step table and the terminal all wait: on a thread of
        // their own, never on the cooperative pool (docs/architecture.md, "Blocking work").
        let command = self
        try await OwnThread.run(name: "agent-eval replay") {
            if let step = command.step {
                try command.showStep(step)
            } else if !command.json && !command.plain && command.until == nil && isatty(1) == 1 && isatty(0) == 1 {
                try InteractiveReplay(log: command.log, store: command.stepStore()).run()
            } else {
                try command.replayAll()
            }
        }
    }

    func showStep(_ number: Int) throws {
        let index: StepIndex
        do {
            index = try StepIndex.open(log: log, store: stepStore()).index
        } catch {
            throw diagnose(error)
        }
        let step: ReplayStep
        do {
            guard let found = try index.replayStep(number) else {
                let last = index.record(at: index.stepCount - 1)?.step ?? 0
                throw diagnose(CommandError("no_such_step", "\(log) has no step \(number); its steps are 0 to \(last)"))
            }
            step = found
        } catch let error as LogError {
            throw diagnose(error)
        }
        var fullState: RunState?
        if full {
            do {
                fullState = try Replayer(path: log).state(atEndOf: number)
            } catch {
                throw diagnose(error)
            }
        }
        if json {
            printJSON(step.document(log: log, runId: index.runId, fullState: fullState))
        } else {
            var output = OutputBuffer()
            for line in StepRenderer(isFull: full).lines(for: step) { output.append(line) }
            output.append("state at the end of step \(number):")
            for line in Self.describe(step.after) { output.append("  " + line) }
            if let fullState {
                output.append("whole state (canonical JSON of RunState):")
                output.append(JSONWriter.encodePretty(fullState.json))
            }
            output.flush()
        }
        // The state shown builds on every step before it: an earlier digest that did not match
        // makes it doubtful too.
        var earlier: [Int] = []
        if index.digestMismatches > 0 {
            var position = 0
            while let record = index.record(at: position), record.step < number {
                if record.hasDigestMismatch { earlier.append(record.step) }
                position += 1
            }
        }
        if !earlier.isEmpty {
            printError(
                "warning: the recorded state digest of step\(earlier.count == 1 ? "" : "s") "
                    + "\(earlier.map(String.init).joined(separator: ", ")) does not match the state folded from the log, "
                    + "and the state shown builds on \(earlier.count == 1 ? "it" : "them"); agent-eval replay \(ShellWords.quoted(log)) shows where"
            )
        }
        throw step.digests.contains { !$0.isMatch } || !earlier.isEmpty ? Exit.failure : Exit.success
    }

    /// Where step tables are kept: the catalog's, unless --no-catalog. A catalog that cannot be
    /// read or written only means the table is made in memory.
    func stepStore() -> CatalogStepStore? {
        noCatalog ? nil : catalog.pathOrWarn().map { CatalogStepStore(path: $0) }
    }

    /// Micro-dollars as dollars with all six decimals, never in exponent form ($1e-06 before).
    static func dollars(microUSD: Int) -> String {
        let magnitude = microUSD.magnitude
        let fraction = String(magnitude % 1_000_000)
        return (microUSD < 0 ? "-" : "") + "\(magnitude / 1_000_000)." + String(repeating: "0", count: 6 - fraction.count) + fraction
    }

    static func describe(_ state: StateSummary) -> [String] {
        var lines = [
            "\(counted(state.eventCount, "event")), \(counted(state.stepsCompleted, "step")) ended, "
                + "\(counted(state.decisions, "decision")) (\(state.invalidDecisions) rejected)",
            "\(counted(state.calls, "call")) proposed: \(state.executedCalls) executed, \(state.deniedCalls) denied, "
                + "\(state.awaitingApproval) awaiting approval; \(counted(state.toolAttempts, "attempt")), \(state.failedAttempts) failed",
            "tokens \(state.inputTokens) in + \(state.outputTokens) out = \(state.totalTokens); cost $\(Self.dollars(microUSD: state.costMicroUSD))",
        ]
        if let stop = state.stopReason {
            lines.append("stopped: \(stop.rawValue)" + (state.limit.map { " (\($0.rawValue))" } ?? ""))
        } else {
            lines.append("running")
        }
        return lines
    }

    func replayAll() throws {
        var output = OutputBuffer()
        let renderer = StepRenderer(isFull: full)
        var stepCount = 0
        let result: Replayer.Result
        // --json streams: each step is written as it is replayed, never collected.
        if json { output.append(raw: Replayer.Result.streamingHead(log: log)) }
        do {
            result = try Replayer(path: log).replay(until: until) { step, _ in
                if json {
                    if stepCount > 0 { output.append(raw: [UInt8(ascii: ",")]) }
                    output.append(raw: JSONWriter.encode(step.json))
                } else {
                    for line in renderer.lines(for: step) { output.append(line) }
                }
                stepCount += 1
                return true
            }
        } catch let error as LogError {
            if json { output.append(raw: Replayer.Result.streamingTail(error: error) + [0x0A]) }
            output.flush()
            throw diagnose(error)
        }
        if json {
            output.append(raw: result.streamingTail() + [0x0A])
            output.flush()
        } else {
            let checked = result.digestsChecked
            var line = "replayed \(counted(result.stepsReplayed, "step")), \(counted(result.state.eventCount, "event")); "
            if checked == 0 {
                // Nothing was compared, so nothing "matches": a log need not record digests
                // (docs/log-format.md §4), and then proves nothing about its state.
                line += "no state digest to check (no step_ended in what was replayed), so nothing proves the rebuilt state"
            } else {
                let mismatches = result.digestMismatches.count
                line += "\(counted(checked, "state digest")) checked"
                line += mismatches == 0 ? ", all match the rebuilt state" : ", \(mismatches) DO NOT MATCH"
            }
            output.append(line)
            output.flush()
            if let tear = result.read.tear {
                printError("warning: \(log) is torn: \(tear)")
                printError(
                    "hint: everything before the cut was replayed, and nothing after it was seen; run `agent-eval log repair "
                        + "\(ShellWords.quoted(log))` to seal it")
            }
        }
        // A torn log replays to its cut: what came after was never seen, so it is not a clean replay.
        throw result.digestMismatches.isEmpty && result.read.tear == nil ? Exit.success : Exit.failure
    }
}
