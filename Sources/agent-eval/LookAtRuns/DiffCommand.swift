import ArgumentParser
import Foundation
import Pipelines
import Replay
import TraceCore
import Viewer

/// `agent-eval diff`: where two runs' trajectories part.
struct DiffCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Compare two runs' trajectories step by step and show where they part.",
        discussion: """
            Aligns the two runs' steps by what the agent decided, so a step inserted or removed in one run does \
            not throw off the rest, then reports the first divergence — a tool, an argument (by key path), a \
            verdict, a result, the stop — and a side-by-side summary with tokens and durations.

            A log that does not check out — a state digest that differs from its fold, an event that does not \
            fit the run — is listed as such under the diff, and is never the same trajectory as another \
            (`replay` shows where). A pipeline log is not a run's log: compare its child runs, or read it with \
            `pipeline show`.

            Exit codes: 0 the same trajectory; 1 they diverge, or a log does not check out; 2 a log cannot be read \
            or is a pipeline log; 64 usage error.

            Examples:
              agent-eval diff runs/before.jsonl.gz runs/after.jsonl.gz
              agent-eval diff a.jsonl.gz b.jsonl.gz --json
              agent-eval diff a.jsonl.gz b.jsonl.gz --html diff.html
            """
    )

    @Argument(help: "The first log (shown on the left).")
    var left: String

    @Argument(help: "The second log (shown on the right).")
    var right: String

    @Flag(help: "Print the machine-readable form.")
    var json = false

    @Option(
        help: ArgumentHelp(
            "Also write the two runs side by side as one self-contained HTML page, the first divergence marked down to the argument.",
            valueName: "file"))
    var html: String?

    @OptionGroup var limits: LogReadLimits

    func run() throws {
        for log in [left, right] where PipelineTarget.detected(log) != nil {
            throw diagnose(
                CommandError(
                    "pipeline_log", "\(log) is a pipeline log: diff compares two runs' trajectories, and a pipeline has tasks, not steps",
                    hint: "read it with agent-eval pipeline show \(ShellWords.quoted(log)), or diff the child runs of its agent attempts"))
        }
        let diff: TrajectoryDiff
        var view: DiffView?
        do {
            if html != nil {
                let made = try DiffView.make(left: left, right: right)
                view = made
                diff = made.diff
            } else {
                diff = try TrajectoryDiff.compare(left: left, right: right)
            }
        } catch {
            throw diagnose(error)
        }
        if let html, let view { try HTMLOutput.write(HTMLPage(title: "diff \(left) \(right)", data: view.document), to: html) }
        if json {
            printJSON(diff.json(left: left, right: right))
        } else {
            var output = OutputBuffer()
            for line in Self.lines(diff, left: left, right: right) { output.append(line) }
            output.flush()
        }
        if let html {
            let line = "wrote \(html): \(HTMLOutput.link(to: html))"
            if json { printError(line) } else { say(line) }
        }
        throw diff.isSame ? Exit.success : Exit.failure
    }

    /// The diff as `diff` prints it; from a fork point, the steps both runs share before it
    /// are one line.
    static func lines(
        _ diff: TrajectoryDiff, left: String, right: String, from forkStep: Int? = nil,
        shared sharedLabel: String = "the shared prefix (the parent's steps, copied)"
    ) -> [String] {
        var lines: [String] = []
        for (label, problems) in [("A", diff.leftProblems), ("B", diff.rightProblems)] where !problems.isEmpty {
            lines.append("\(label) does not check out (replay shows where):")
            for problem in problems { lines.append("  \(problem)") }
        }
        if let first = diff.first {
            let place = [first.leftStep.map { "step \($0) of A" }, first.rightStep.map { "step \($0) of B" }].compactMap { $0 }.joined(
                separator: " / ")
            lines.append("first divergence: \(place): \(first.path)")
            lines.append("  A: \(first.left)")
            lines.append("  B: \(first.right)")
        } else if diff.isSame {
            lines.append("same trajectory: the same decisions, verdicts, results and stop")
        } else {
            lines.append("the same steps, but not the same trajectory: a log does not check out")
        }
        lines.append("")
        lines.append("     A: \(left)")
        lines.append("     B: \(right)")
        var rows = diff.rows[...]
        if let forkStep {
            let shared = rows.prefix { row in
                row.isSame && (row.left?.step ?? Int.max) < forkStep && (row.right?.step ?? Int.max) < forkStep
            }
            if let last = shared.last?.left?.step {
                lines.append("= 0–\(last)      \(sharedLabel)")
            }
            rows = rows.dropFirst(shared.count)
        }
        for row in rows {
            let mark = row.isSame ? "=" : (row.left == nil ? "+" : (row.right == nil ? "-" : "≠"))
            let label = row.left.map { "\($0.step)" } ?? "–"
            let other = row.right.map { "\($0.step)" } ?? "–"
            lines.append("\(mark) \(label.padded(3))/\(other.padded(3)) A: \(row.left?.summary ?? "(no step)")")
            if !row.isSame { lines.append("          B: \(row.right?.summary ?? "(no step)")") }
        }
        lines.append("stop      A: \(stop(diff.leftStop))   B: \(stop(diff.rightStop))")
        lines.append("tokens    A: \(diff.leftState.totalTokens)   B: \(diff.rightState.totalTokens)")
        lines.append(
            "tool calls A: \(diff.leftState.executedCalls) (+\(diff.leftState.deniedCalls) denied)   B: \(diff.rightState.executedCalls) (+\(diff.rightState.deniedCalls) denied)"
        )
        lines.append("duration  A: \(diff.leftDurationUs / 1000) ms   B: \(diff.rightDurationUs / 1000) ms")
        return lines
    }

    static func stop(_ stop: RunStopped?) -> String {
        guard let stop else { return "none" }
        return stop.reason.rawValue + (stop.limit.map { " (\($0.rawValue))" } ?? "")
    }
}

extension String {
    func padded(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
