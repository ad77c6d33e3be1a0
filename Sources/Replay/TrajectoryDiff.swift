public import TraceCore
import TraceLog

/// Compares two runs' trajectories step by step: aligns their steps (tolerating steps inserted
/// or removed in one of them), then finds the first difference in what the agent decided and
/// what happened to it — tools and arguments, verdicts, results, the stop.
public struct TrajectoryDiff: Sendable {
    /// What one step did, as the diff compares it.
    public struct StepSketch: Sendable, Hashable {
        public var step: Int
        /// "call" decisions list each call; "answer", "ask_human", "stop", "invalid" otherwise.
        public var decisions: [String]
        /// What the user said in the step (a conversation's turns), as in `decisions`.
        public var userLines: [String] = []
        public var calls: [Call]
        public var tokens: Int
        public var durationUs: Int

        public struct Call: Sendable, Hashable {
            public var id: String
            public var tool: String
            public var arguments: JSONValue
            public var verdict: String
            public var results: [String]
            public var output: JSONValue?
        }

        /// What the alignment matches on: the decisions.
        var key: String { decisions.joined(separator: " | ") }

        /// Whether two steps decided the same, byte for byte: strings that are merely
        /// canonically equivalent (another Unicode normalisation) are other arguments.
        func hasSameKey(as other: StepSketch) -> Bool { key.utf8.elementsEqual(other.key.utf8) }
    }

    /// One row of the side-by-side view: a step of each run, or a step only one has.
    public struct Row: Sendable, Hashable {
        public var left: StepSketch?
        public var right: StepSketch?
        public var isSame: Bool
    }

    public struct Difference: Sendable, Hashable {
        public var leftStep: Int?
        public var rightStep: Int?
        /// Where, such as `call-3 refund_order arguments.amount_cents` or `stop`.
        public var path: String
        public var left: String
        public var right: String
        /// The call the difference is in, and where in it (`tool`, `arguments.amount_cents`,
        /// `verdict`, `results`); nil when the difference is not in one call.
        public var callId: String? = nil
        public var field: String? = nil
    }

    public var rows: [Row]
    public var first: Difference?
    public var leftStop: RunStopped?
    public var rightStop: RunStopped?
    public var leftState: StateSummary
    public var rightState: StateSummary
    public var leftDurationUs: Int
    public var rightDurationUs: Int
    /// Why a log does not check out: state digests that differ from its fold, events that do
    /// not fit the run (replay names them all). Such a log is never the same trajectory as
    /// another, whatever its steps say.
    public var leftProblems: [String] = []
    public var rightProblems: [String] = []

    public var isSame: Bool { first == nil && leftProblems.isEmpty && rightProblems.isEmpty }

    /// Diffs the logs at `left` and `right` (read with the replayer). A trajectory is the
    /// decisions, and each call's tool, arguments, verdict and result statuses; outputs are
    /// compared only for the calls in `outputsOf` (a fork's replaced results, compared at the
    /// end too, since a fork may replace a result of an earlier step) and the calls of the tools
    /// in `outputsOfTools` (a fork's tools that answer from a fixture).
    public static func compare(
        left: String, right: String, outputsOf: Set<String> = [], outputsOfTools: Set<String> = []
    ) throws -> TrajectoryDiff {
        let (leftSteps, leftFinal, leftProblems) = try sketches(of: left)
        let (rightSteps, rightFinal, rightProblems) = try sketches(of: right)
        var diff = compare(leftSteps, leftFinal, rightSteps, rightFinal, outputs: OutputsCompared(calls: outputsOf, tools: outputsOfTools))
        diff.leftProblems = leftProblems
        diff.rightProblems = rightProblems
        return diff
    }

    /// Why a replayed log does not check out, in sentences: its first state digest that
    /// differs, a tear, and its first anomalies.
    static func problems(of replay: Replayer.Result) -> [String] {
        var problems: [String] = []
        if let mismatch = replay.digestMismatches.first {
            problems.append(
                "the state digest recorded at seq \(mismatch.sequence) differs from the state folded from the log"
                    + (replay.digestMismatches.count > 1 ? " (and \(replay.digestMismatches.count - 1) more)" : "")
                    + ": the log was edited, or written by another fold")
        }
        // A torn log was compared up to its cut: what it did after was never seen.
        if let tear = replay.read.tear { problems.append("the log is torn (\(tear)): it is compared up to the cut") }
        for anomaly in replay.state.anomalies.prefix(3) { problems.append("seq \(anomaly.sequence): \(anomaly.message)") }
        if replay.state.anomalies.count > 3 {
            problems.append("and \(replay.state.anomalies.count - 3) more events that do not fit the run")
        }
        return problems
    }

    /// Whose outputs a diff compares.
    struct OutputsCompared {
        var calls: Set<String> = []
        var tools: Set<String> = []

        func contains(_ call: StepSketch.Call) -> Bool { calls.contains(call.id) || tools.contains(call.tool) }
    }

    static func compare(
        _ leftSteps: [StepSketch], _ leftFinal: RunState, _ rightSteps: [StepSketch], _ rightFinal: RunState,
        outputs: OutputsCompared = OutputsCompared()
    ) -> TrajectoryDiff {
        var rows = align(leftSteps, rightSteps, outputs: outputs)
        var first: Difference?
        for row in rows where !row.isSame {
            first = difference(row, outputs: outputs)
            break
        }
        // A replaced result of a step before the one it was replaced in shows only at the end.
        if first == nil {
            for id in outputs.calls.sorted() {
                guard let before = leftFinal.call(id: id), let after = rightFinal.call(id: id),
                    before.lastResult?.output != after.lastResult?.output
                else { continue }
                first = Difference(
                    leftStep: before.step, rightStep: after.step, path: "\(id) \(before.tool) output",
                    left: JSONWriter.encodeString(before.lastResult?.output ?? .null),
                    right: JSONWriter.encodeString(after.lastResult?.output ?? .null), callId: id, field: "output")
                if let index = rows.firstIndex(where: { $0.left?.step == before.step }) { rows[index].isSame = false }
                break
            }
        }
        if first == nil, leftFinal.stop?.reason != rightFinal.stop?.reason || leftFinal.stop?.limit != rightFinal.stop?.limit {
            first = Difference(
                leftStep: leftFinal.step, rightStep: rightFinal.step, path: "stop", left: describe(leftFinal.stop),
                right: describe(rightFinal.stop))
        }
        return TrajectoryDiff(
            rows: rows, first: first, leftStop: leftFinal.stop, rightStop: rightFinal.stop, leftState: StateSummary(leftFinal),
            rightState: StateSummary(rightFinal), leftDurationUs: leftFinal.elapsedUs, rightDurationUs: rightFinal.elapsedUs)
    }

    static func describe(_ stop: RunStopped?) -> String {
        guard let stop else { return "no stop" }
        return stop.reason.rawValue + (stop.limit.map { " (\($0.rawValue))" } ?? "")
    }

    /// The steps of a log as sketches, the final state, and why the log does not check out.
    static func sketches(of path: String) throws -> ([StepSketch], RunState, [String]) {
        var sketches: [StepSketch] = []
        let result = try Replayer(path: path).replay { step, state in
            var decisions: [String] = []
            var userLines: [String] = []
            var callIds: [String] = []
            var started: Int?
            for recorded in step.events {
                started = started ?? recorded.event.timeUs
                // What the user said is part of a conversation's trajectory: the same agent given
                // other words is another run, whatever it did with them.
                if case .userTurn(let turn) = recorded.event.payload {
                    let line = "user \(turn.turn): \(turn.text)" + (turn.ends.map { " (\($0.rawValue))" } ?? "")
                    decisions.append(line)
                    userLines.append(line)
                    continue
                }
                guard case .decisionMade(let made) = recorded.event.payload else { continue }
                switch made.outcome {
                case .valid(.toolCalls(let calls)):
                    decisions.append(calls.map { "\($0.name)\($0.argumentsText.string)" }.joined(separator: ", "))
                    callIds.append(contentsOf: calls.map(\.id))
                case .valid(.answer(let text)): decisions.append("answer \(text)")
                case .valid(.askHuman(let text)): decisions.append("ask_human \(text)")
                case .valid(.stop(let reason)): decisions.append("stop \(reason)")
                case .invalid(let invalid): decisions.append("invalid \(invalid.kind.rawValue)")
                }
            }
            if decisions.isEmpty {
                for recorded in step.events {
                    if case .runStopped(let stop) = recorded.event.payload { decisions.append("stopped \(describe(stop))") }
                }
            }
            if step.step == 0 && decisions.isEmpty { decisions = ["start"] }
            // What became of each call is read from the final state, below: a recorded run's
            // results come back with the next request, a step after the call.
            let calls = callIds.compactMap { id in state.call(id: id) }.map { call in
                StepSketch.Call(
                    id: call.id, tool: call.tool, arguments: call.arguments, verdict: call.verdict?.verdict.rawValue ?? "none",
                    results: [], output: nil)
            }
            let ended = step.events.last?.event.timeUs ?? 0
            var sketch = StepSketch(
                step: step.step, decisions: decisions, calls: calls, tokens: step.after.totalTokens - step.before.totalTokens,
                durationUs: max(0, ended - (started ?? ended)))
            sketch.userLines = userLines
            sketches.append(sketch)
            return true
        }
        let final = result.state
        // Each call by its id and step: a provider may reuse an id in a later step.
        var calls: [String: [Int: Int]] = [:]
        for (index, call) in final.calls.enumerated() { calls[call.id, default: [:]][call.step] = index }
        for index in sketches.indices {
            for (position, call) in sketches[index].calls.enumerated() {
                guard let found = calls[call.id]?[sketches[index].step] else { continue }
                let record = final.calls[found]
                sketches[index].calls[position].verdict = record.verdict?.verdict.rawValue ?? "none"
                sketches[index].calls[position].results = record.results.map(\.status.rawValue)
                sketches[index].calls[position].output = record.lastResult?.output
            }
        }
        return (sketches, final, problems(of: result))
    }

    /// The most cells the alignment's table may have (4,194,304 integers, 32 MiB): two runs of
    /// 2,000 steps each are aligned exactly; longer ones as `align` says.
    static let maximumTableCells = 1 << 22

    /// Longest common subsequence on the steps' decisions: matched steps pair up, the rest are
    /// steps only one run has. When the table would have more than `maximumTableCells` cells
    /// (`serve`'s compare page asked for two long logs), the steps both runs begin and end with
    /// alike are paired first, and what is left between them, if still too large, is paired by
    /// position: the memory stays bounded, never steps × steps.
    static func align(_ left: [StepSketch], _ right: [StepSketch], outputs: OutputsCompared = OutputsCompared()) -> [Row] {
        func outcomes(_ step: StepSketch) -> [String] {
            step.calls.map { call in
                outcome(call) + (outputs.contains(call) ? " " + JSONWriter.encodeString(call.output ?? .null) : "")
            }
        }
        if (left.count + 1).multipliedSaturating(by: right.count + 1) > maximumTableCells {
            var prefix = 0
            while prefix < left.count, prefix < right.count, left[prefix].hasSameKey(as: right[prefix]) { prefix += 1 }
            var suffix = 0
            while suffix < left.count - prefix, suffix < right.count - prefix,
                left[left.count - 1 - suffix].hasSameKey(as: right[right.count - 1 - suffix])
            {
                suffix += 1
            }
            let same = { (i: Int, j: Int) in Row(left: left[i], right: right[j], isSame: outcomes(left[i]) == outcomes(right[j])) }
            var rows = (0..<prefix).map { same($0, $0) }
            let middleLeft = Array(left[prefix..<(left.count - suffix)])
            let middleRight = Array(right[prefix..<(right.count - suffix)])
            if (middleLeft.count + 1).multipliedSaturating(by: middleRight.count + 1) <= maximumTableCells {
                rows += align(middleLeft, middleRight, outputs: outputs)
            } else {
                for index in 0..<max(middleLeft.count, middleRight.count) {
                    let (a, b) = (index < middleLeft.count ? middleLeft[index] : nil, index < middleRight.count ? middleRight[index] : nil)
                    let isSame = a.flatMap { a in b.map { b in a.hasSameKey(as: b) && outcomes(a) == outcomes(b) } } ?? false
                    rows.append(Row(left: a, right: b, isSame: isSame))
                }
            }
            rows += (0..<suffix).map { same(left.count - suffix + $0, right.count - suffix + $0) }
            return rows
        }
        let n = left.count
        let m = right.count
        var table = [[Int]](repeating: [Int](repeating: 0, count: m + 1), count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                table[i][j] = left[i].hasSameKey(as: right[j]) ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        var rows: [Row] = []
        var i = 0
        var j = 0
        while i < n || j < m {
            if i < n, j < m, left[i].hasSameKey(as: right[j]) {
                rows.append(Row(left: left[i], right: right[j], isSame: outcomes(left[i]) == outcomes(right[j])))
                i += 1
                j += 1
            } else if i < n, j < m, table[i + 1][j] == table[i][j + 1] {
                // Neither side is an insertion: the same place, decided differently.
                rows.append(Row(left: left[i], right: right[j], isSame: false))
                i += 1
                j += 1
            } else if j >= m || (i < n && table[i + 1][j] >= table[i][j + 1]) {
                rows.append(Row(left: left[i], right: nil, isSame: false))
                i += 1
            } else {
                rows.append(Row(left: nil, right: right[j], isSame: false))
                j += 1
            }
        }
        return rows
    }

    /// A step's calls by tool; for a step without calls, what it decided instead.
    static func describeCalls(_ step: StepSketch) -> String {
        step.calls.isEmpty ? "no call (\(step.key.isEmpty ? "no decision" : step.key))" : step.calls.map(\.tool).joined(separator: ", ")
    }

    /// `text` with every character outside ASCII written as its code points (`e\u{301}`).
    static func codePoints(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars {
            if scalar.isASCII { shown.unicodeScalars.append(scalar) } else { shown += "\\u{\(String(scalar.value, radix: 16))}" }
        }
        return shown
    }

    /// A call's result statuses, in order; "not run" for none.
    static func describeResults(_ results: [String]) -> String {
        results.isEmpty ? "not run" : results.joined(separator: ", ")
    }

    static func outcome(_ call: StepSketch.Call) -> String {
        "\(call.tool) \(call.verdict) \(call.results.joined(separator: ","))"
    }

    /// The first thing that differs in a row.
    static func difference(_ row: Row, outputs: OutputsCompared = OutputsCompared()) -> Difference {
        guard let left = row.left else {
            return Difference(leftStep: nil, rightStep: row.right?.step, path: "step", left: "(no such step)", right: row.right?.key ?? "")
        }
        guard let right = row.right else {
            return Difference(leftStep: left.step, rightStep: nil, path: "step", left: left.key, right: "(no such step)")
        }
        for (a, b) in zip(left.calls, right.calls) {
            if a.tool != b.tool {
                return Difference(
                    leftStep: left.step, rightStep: right.step, path: "\(a.id) tool", left: a.tool, right: b.tool, callId: a.id,
                    field: "tool")
            }
            if a.arguments != b.arguments, let difference = a.arguments.firstDifference(from: b.arguments, at: "arguments") {
                var (shownLeft, shownRight) = (
                    JSONWriter.encodeString(difference.leftOrAbsent), JSONWriter.encodeString(difference.rightOrAbsent)
                )
                // Text that looks the same but is other code points (another Unicode
                // normalisation) is shown by its code points.
                if shownLeft == shownRight { (shownLeft, shownRight) = (codePoints(shownLeft), codePoints(shownRight)) }
                return Difference(
                    leftStep: left.step, rightStep: right.step, path: "\(a.id) \(a.tool) \(difference.path)", left: shownLeft,
                    right: shownRight, callId: a.id, field: difference.path)
            }
            if a.verdict != b.verdict {
                return Difference(
                    leftStep: left.step, rightStep: right.step, path: "\(a.id) \(a.tool) verdict", left: a.verdict, right: b.verdict,
                    callId: a.id, field: "verdict")
            }
            if a.results != b.results {
                return Difference(
                    leftStep: left.step, rightStep: right.step, path: "\(a.id) \(a.tool) results", left: describeResults(a.results),
                    right: describeResults(b.results), callId: a.id, field: "results")
            }
            if outputs.contains(a), a.output != b.output {
                return Difference(
                    leftStep: left.step, rightStep: right.step, path: "\(a.id) \(a.tool) output",
                    left: JSONWriter.encodeString(a.output ?? .null), right: JSONWriter.encodeString(b.output ?? .null), callId: a.id,
                    field: "output")
            }
        }
        if left.calls.count != right.calls.count {
            return Difference(
                leftStep: left.step, rightStep: right.step, path: "calls", left: describeCalls(left), right: describeCalls(right))
        }
        return Difference(leftStep: left.step, rightStep: right.step, path: "decision", left: left.key, right: right.key)
    }
}
