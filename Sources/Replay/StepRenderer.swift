import Foundation
import TraceCore
import TraceLog

/// Renders replayed steps as text for people: the context packet (what went in, what was left
/// out and why), the raw and parsed decision, verdicts, intents and results, what changed in
/// the state, digest checks and the stop.
public struct StepRenderer: Sendable {
    /// Show payloads in full instead of shortened.
    public var isFull: Bool
    /// A terminal's width: every line is cut to it, or, in full mode (`isFull`), wrapped at it so
    /// that nothing is lost; nil leaves lines whole.
    public var width: Int?

    public init(isFull: Bool = false, width: Int? = nil) {
        self.isFull = isFull
        self.width = width
    }

    public func lines(for step: ReplayStep) -> [String] {
        var lines: [String] = []
        let time = step.events.first.map { Event.formatTime($0.event.timeUs) } ?? ""
        let range = step.firstSequence == step.lastSequence ? "seq \(step.firstSequence)" : "seq \(step.firstSequence)–\(step.lastSequence)"
        lines.append("── step \(step.step) · \(range) · \(time) " + String(repeating: "─", count: 20))
        let checks = Dictionary(uniqueKeysWithValues: step.digests.map { ($0.sequence, $0) })
        for recorded in step.events {
            lines.append(contentsOf: render(recorded.event, digest: checks[recorded.event.sequence]))
        }
        let changes = step.after.changes(since: step.before)
        if !changes.isEmpty { lines.append("state     " + changes.joined(separator: ", ")) }
        guard let width else { return lines }
        return isFull ? lines.flatMap { Self.wrap($0, to: width) } : lines.map { Self.cut($0, to: width) }
    }

    /// `line` in pieces of at most `width` characters, each piece after the first indented by two
    /// spaces, at its own newlines too: all of it, on a screen that narrow.
    public static func wrap(_ line: String, to width: Int) -> [String] {
        let width = max(4, width)
        var pieces: [String] = []
        for part in line.split(separator: "\n", omittingEmptySubsequences: false) {
            var rest = Substring(part)
            var first = pieces.isEmpty
            repeat {
                let room = first ? width : width - 2
                pieces.append((first ? "" : "  ") + rest.prefix(room))
                rest = rest.dropFirst(room)
                first = false
            } while !rest.isEmpty
        }
        return pieces
    }

    func render(_ event: Event, digest: DigestCheck?) -> [String] {
        switch event.payload {
        case .runStarted(let started):
            var lines = [
                "run       \(event.runId) · agent \(started.agent.name)\(started.agent.version.map { " v\($0)" } ?? "") · model "
                    + "\(started.model.provider)/\(started.model.name) · policy \(started.policy.name)",
                "  goal    \(short(started.goal))",
                "  tools   "
                    + started.tools.map { "\($0.name) (\($0.sideEffect.rawValue)\($0.server.map { ", mcp \($0)" } ?? ""))" }
                    .joined(separator: ", "),
            ]
            for server in started.toolServers {
                lines.append(
                    "  server  \(server.name): \(server.kind) \(server.serverName)\(server.serverVersion.isEmpty ? "" : " " + server.serverVersion)"
                        + (server.protocolVersion.map { " (protocol \($0))" } ?? ""))
            }
            let limits = started.limits
            let limitText = [
                limits.maxSteps.map { "max_steps \($0)" }, limits.maxToolCalls.map { "max_tool_calls \($0)" },
                limits.timeoutMs.map { "timeout \($0) ms" }, limits.tokenBudget.map { "token_budget \($0)" },
            ].compactMap { $0 }
            if !limitText.isEmpty { lines.append("  limits  " + limitText.joined(separator: ", ")) }
            if started.actor != nil || started.route != nil {
                lines.append("  acts for \(started.actor ?? "–") via \(started.route ?? "–")")
            }
            return lines
        case .contextBuilt(let packet):
            var lines = ["context   ~\(packet.tokenEstimate) tokens · tools shown: \(packet.toolsDisclosed.joined(separator: ", "))"]
            lines.append("  summary \(short(packet.stateSummary))")
            if let delta = packet.delta {
                // Only a read that began in the middle of the log leaves a packet as its delta.
                lines.append("  (written as changes to the packet of seq \(delta.baseSequence), which this read did not reach)")
            }
            for item in packet.observations {
                lines.append("  sees    \(item.id): \(short(item.summary ?? ""))\(item.contentHash.map { " [\($0.prefix(15))…]" } ?? "")")
            }
            for item in packet.evidence { lines.append("  evidence \(item.id): \(short(item.summary ?? ""))") }
            for item in packet.memory { lines.append("  memory  \(item.id): \(short(item.summary ?? ""))") }
            for item in packet.omitted {
                lines.append("  omitted \(item.id) (\(item.reason.rawValue)\(item.detail.map { ": \($0)" } ?? ""))")
            }
            return lines
        case .decisionMade(let made):
            var facts: [String] = []
            if let usage = made.usage { facts.append("\(usage.input)+\(usage.output) tokens") }
            if let latency = made.latencyUs { facts.append(Self.duration(latency)) }
            if let cost = made.costUSD { facts.append("$\(cost)") }
            var lines = ["decision  " + facts.joined(separator: " · ")]
            lines.append("  raw     \(short(made.raw))")
            switch made.outcome {
            case .valid(.answer(let text)): lines.append("  parsed  answer: \(short(text))")
            case .valid(.askHuman(let text)): lines.append("  parsed  ask a human: \(short(text))")
            case .valid(.stop(let reason)): lines.append("  parsed  stop: \(short(reason))")
            case .valid(.toolCalls(let calls)):
                for call in calls { lines.append("  parsed  \(call.id): \(call.name) \(short(call.argumentsText.string))") }
            case .invalid(let invalid): lines.append("  REJECTED \(invalid.kind.rawValue): \(invalid.message)")
            }
            return lines
        case .verdictGiven(let verdict):
            return [
                "verdict   \(verdict.callId) \(verdict.tool) → \(verdict.verdict.rawValue.uppercased())"
                    + (verdict.rule.map { " (rule \($0))" } ?? "") + (verdict.reason.map { ": \($0)" } ?? "")
            ]
        case .toolIntended(let intent):
            return [
                "intent    \(intent.callId) \(intent.tool) attempt \(intent.attempt) \(short(intent.argumentsText.string))"
            ]
        case .toolCompleted(let result):
            var line =
                "result    \(result.callId) \(result.tool) attempt \(result.attempt) \(result.status.rawValue) in \(Self.duration(result.durationUs))"
            if let error = result.error { line += " — \(short(error))\(result.isRetryable == true ? " (retryable)" : "")" }
            if let output = result.outputText { line += " → \(short(output.string))" }
            var lines = [line]
            if let hash = result.contentHash { lines.append("  output  stored as content \(hash)") }
            if let stderr = result.stderr, !stderr.isEmpty { lines.append("  stderr  \(short(stderr))") }
            return lines
        case .userTurn(let turn):
            var facts = ["turn \(turn.turn)", turn.source.rawValue]
            if let usage = turn.usage { facts.append("\(usage.input)+\(usage.output) tokens (the user's)") }
            var lines = ["user      " + facts.joined(separator: " · ")]
            if !turn.text.isEmpty { lines.append("  says    \(short(turn.text))") }
            if let ends = turn.ends { lines.append("  ends    the conversation: \(ends.rawValue)") }
            return lines
        case .approvalRecorded(let approval):
            return [
                "approval  \(approval.callId) \(approval.isGranted ? "granted" : "REFUSED")\(approval.approver.map { " by \($0)" } ?? "")"
                    + (approval.reason.map { ": \($0)" } ?? "")
            ]
        case .stepEnded(let ended):
            guard let digest else { return ["digest    \(ended.stateDigest)"] }
            return digest.isMatch
                ? ["digest    ✔ \(ended.stateDigest.prefix(23))… matches the rebuilt state"]
                : ["digest    ✘ recorded \(ended.stateDigest.prefix(23))…, rebuilt \(digest.computed.prefix(23))…"]
        case .contentStored(let content):
            var lines = ["content   \(content.hash.prefix(23))… \(content.mediaType), \(content.byteCount) bytes"]
            if isFull, content.encoding == .utf8 { lines.append("  body    \(content.body)") }
            return lines
        case .runStopped(let stop):
            var line = "stop      \(stop.reason.rawValue)" + (stop.limit.map { " (limit \($0.rawValue) fired)" } ?? "")
            if let error = stop.error { line += " — \(short(error))" }
            var lines = [line]
            if let answer = stop.answer { lines.append("  answer  \(short(answer))") }
            return lines
        case .runForked(let forked):
            var lines = [
                "fork      of run \(forked.parentRunId) after its step \(forked.step)"
                    + (forked.parentLog.map { " (\($0))" } ?? "") + ", parent head \(forked.parentHead.prefix(16))…"
            ]
            if forked.edits.isEmpty { lines.append("  edit    none: the same run, continued live") }
            for edit in forked.edits { lines.append("  edit    \(short(edit.summary))") }
            // The copied run_started names the parent's agent and model; this says who went on.
            let goesOn = [forked.agent.map { "agent \($0.name)" }, forked.model.map { "model \($0.provider)/\($0.name)" }].compactMap { $0 }
            if !goesOn.isEmpty { lines.append("  then    " + goesOn.joined(separator: ", ")) }
            return lines
        case .pipeline(let event):
            return ["\(event.kind.padding(toLength: 9, withPad: " ", startingAt: 0)) \(short(event.summary))"]
        case .unknown(let kind, let data):
            return ["unknown   \(kind) (a newer writer's event, kept and skipped) \(short(JSONWriter.encodeString(data)))"]
        }
    }

    func short(_ text: String) -> String {
        let flat = isFull ? text : text.replacingOccurrences(of: "\n", with: "⏎")
        guard !isFull, flat.count > 160 else { return flat }
        return String(flat.prefix(159)) + "…"
    }

    /// `line` cut to `width` characters, with an ellipsis when cut.
    public static func cut(_ line: String, to width: Int) -> String {
        line.count <= width ? line : String(line.prefix(max(1, width - 1))) + "…"
    }

    static func duration(_ microseconds: Int) -> String {
        if microseconds < 1_000 { return "\(microseconds) µs" }
        if microseconds < 1_000_000 {
            let tenths = (microseconds + 50) / 100
            return "\(tenths / 10).\(tenths % 10) ms"
        }
        let hundredths = (microseconds + 5_000) / 10_000
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100) s"
    }
}
