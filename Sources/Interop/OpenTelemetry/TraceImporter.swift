import Foundation
import TraceCore

/// Turns the spans of one trace into a run, reading the OpenTelemetry GenAI semantic
/// conventions (`gen_ai.operation.name` chat / execute_tool / invoke_agent) and the older
/// OpenLLMetry attributes (`gen_ai.prompt.N.*`, `gen_ai.completion.N.*`, `traceloop.*`), and
/// OpenInference's (`openinference.span.kind`, `llm.*`, `tool.*`, `input.value`/`output.value`).
///
/// One model call is often several spans (an agent framework's span around a client library's):
/// chat spans nested in a chat span are one call, and so are chat spans with the same
/// `gen_ai.response.id` whose times overlap (a framework's span and a client library's that do
/// not name each other; two calls one after the other are two calls, even when a server answers
/// both with one id). The call is imported once, from the deepest of its spans that holds the
/// reply; usage, model and finish reasons missing there are taken from the others. Tool spans
/// nested in a tool span of the same tool are one call the same way.
struct TraceImporter {
    let file: SourceFile
    let format: ImportFormat

    enum Operation { case chat, tool, agent, other }

    static func operation(of span: Span) -> Operation {
        switch span.string("gen_ai.operation.name") {
        case "chat", "text_completion", "generate_content", "completion": return .chat
        case "execute_tool": return .tool
        case "invoke_agent", "create_agent": return .agent
        default: break
        }
        switch span.string("traceloop.span.kind") {
        case "tool": return .tool
        case "agent", "workflow": return .agent
        default: break
        }
        switch span.string("openinference.span.kind") {
        case "LLM": return .chat
        case "TOOL": return .tool
        case "AGENT": return .agent
        default: break
        }
        if span.string("llm.request.type") != nil
            || span.attributes.keys.contains(where: { $0.hasPrefix("gen_ai.completion.") || $0.hasPrefix("gen_ai.prompt.") })
        {
            return .chat
        }
        return .other
    }

    func runs(from spans: [Span], grouping: SpanGrouping = .trace) -> [Result<ImportedRun, ImportError>] {
        var order: [String] = []
        var byTrace: [String: [Span]] = [:]
        for span in spans {
            if byTrace[span.traceId] == nil { order.append(span.traceId) }
            byTrace[span.traceId, default: []].append(span)
        }
        let groups = Self.group(order, byTrace, by: grouping)
        return groups.map { group in
            Result { () throws(ImportError) in
                try run(traceId: group.key, spans: group.traces.flatMap { byTrace[$0] ?? [] }, traces: group.traces.count)
            }
        }
    }

    /// The runs' traces, in the order their first trace comes: each run's key (its source id:
    /// the trace id, `session:ID`, or the first trace's id for a window) and traces.
    static func group(_ order: [String], _ byTrace: [String: [Span]], by grouping: SpanGrouping) -> [(key: String, traces: [String])] {
        switch grouping {
        case .trace:
            return order.map { ($0, [$0]) }
        case .session:
            var keys: [String] = []
            var groups: [String: [String]] = [:]
            for trace in order {
                let spans = byTrace[trace] ?? []
                let session = spans.lazy.compactMap { $0.string("session.id") ?? $0.string("gen_ai.conversation.id") }.first
                let key = session.map { "session:" + $0 } ?? trace
                if groups[key] == nil { keys.append(key) }
                groups[key, default: []].append(trace)
            }
            return keys.map { ($0, groups[$0] ?? []) }
        case .window(let gapUs):
            // Per service, traces by start time; a gap longer than the window starts a new run.
            struct Window {
                var traces: [String]
                var endUs: Int
            }
            let starts = order.map { trace in (trace, byTrace[trace]?.map(\.startUs).min() ?? 0) }
            var open: [String: Int] = [:]
            var windows: [Window] = []
            for (trace, start) in starts.sorted(by: { ($0.1, $0.0) < ($1.1, $1.0) }) {
                let spans = byTrace[trace] ?? []
                let service = spans.lazy.compactMap(\.service).first ?? ""
                let end = spans.map(\.endUs).max() ?? start
                if let index = open[service], start - windows[index].endUs <= gapUs {
                    windows[index].traces.append(trace)
                    windows[index].endUs = max(windows[index].endUs, end)
                } else {
                    open[service] = windows.count
                    windows.append(Window(traces: [trace], endUs: end))
                }
            }
            return windows.map { ($0.traces[0], $0.traces) }
        }
    }

    /// What a model call said, read from whichever attribute style its spans use.
    struct ModelReply {
        var calls: [(id: String?, name: String, arguments: JSONValue?)] = []
        var text: String?
        var finish: String?
        var hasContent: Bool { text != nil || !calls.isEmpty }
    }

    private func run(traceId: String, spans unsorted: [Span], traces: Int = 1) throws(ImportError) -> ImportedRun {
        // By start, then end: spans that start together (an exporter that knows no more of a
        // model call than when it ended) come in the order they ended.
        let spans = unsorted.sorted { ($0.startUs, $0.endUs, $0.spanId) < ($1.startUs, $1.endUs, $1.spanId) }
        var warnings: [String] = []
        let spanIds = Set(spans.map(\.spanId))
        for span in spans {
            if let parent = span.parentId, !spanIds.contains(parent) {
                warnings.append("span \(span.spanId) (\(span.name)) names parent \(parent), which is not in the trace: read as a root")
            }
        }
        let tree = SpanTree(spans)
        for cycle in tree.cycles {
            let named = cycle.sorted().prefix(8).map { "\(spans[$0].spanId) (\(spans[$0].name))" }
            let more = cycle.count > named.count ? " and \(cycle.count - named.count) more" : ""
            warnings.append(
                cycle.count == 1
                    ? "span \(named[0]) names itself as its parent: read as a root"
                    : "spans \(named.joined(separator: ", "))\(more) name each other as parents, round in a cycle that no tree can "
                        + "hold: each is read as a root")
        }
        let operations = spans.map(Self.operation)
        // A model call or a tool whose parent has not come: the span around it (the agent's, a
        // request handler's) has not ended, so neither has the run.
        let openBecause = spans.indices.first { index in
            [.chat, .tool].contains(operations[index]) && spans[index].parentId.map { !spanIds.contains($0) } == true
        }.map { "span \(spans[$0].spanId) (\(spans[$0].name)) names parent \(spans[$0].parentId ?? ""), which has not come" }

        // Chat spans grouped into model calls: by their outermost chat ancestor, then by response id.
        let outerChat = tree.outermostAncestors { operations[$0] == .chat ? "chat" : nil }
        var chatGroups: [[Int]] = []
        var groupOf: [Int: Int] = [:]
        var groupOfResponse: [String: Int] = [:]
        for index in spans.indices where operations[index] == .chat {
            let span = spans[index]
            if let outer = outerChat[index], let group = groupOf[outer] {
                chatGroups[group].append(index)
                groupOf[index] = group
            } else if let response = Self.responseId(span), let group = groupOfResponse[response],
                chatGroups[group].contains(where: { spans[$0].startUs <= span.endUs && span.startUs <= spans[$0].endUs })
            {
                chatGroups[group].append(index)
                groupOf[index] = group
            } else {
                groupOf[index] = chatGroups.count
                chatGroups.append([index])
            }
            if let response = Self.responseId(span), let group = groupOf[index] { groupOfResponse[response] = group }
        }
        // Tool spans grouped the same way: nested spans of one tool are one call.
        let outerTool = tree.outermostAncestors { index in
            operations[index] == .tool ? "tool:" + (Self.toolName(spans[index]).map { "=" + $0 } ?? "") : nil
        }
        var toolGroups: [[Int]] = []
        var toolGroupOf: [Int: Int] = [:]
        for index in spans.indices where operations[index] == .tool {
            if let outer = outerTool[index], let group = toolGroupOf[outer] {
                toolGroups[group].append(index)
                toolGroupOf[index] = group
            } else {
                toolGroupOf[index] = toolGroups.count
                toolGroups.append([index])
            }
        }
        /// A group's spans, the deepest first.
        func deepestFirst(_ group: [Int]) -> [Span] { group.sorted { tree.depth[$0] > tree.depth[$1] }.map { spans[$0] } }

        // One step per model call, in the order the calls started.
        var steps: [ImportedStep] = []
        var stepStarts: [Int] = []
        /// Whether each step's model call had its reply content captured.
        var captured: [Bool] = []
        /// Whether each step is a model call's (not a tool span's own step): the stop is read from these.
        var isModelStep: [Bool] = []
        var lastFinish: String?
        var pending: [(step: Int, index: Int, sourceId: String?, name: String)] = []
        var ids = CallIds()
        var reusedSourceIds = Set<String>()
        func logId(_ sourceId: String?) -> String {
            let (id, isReused) = ids.next(sourceId)
            if isReused, let sourceId {
                reusedSourceIds.insert(sourceId)
                warnings.append("call id \"\(sourceId)\" is used again; the log names the later call \"\(id)\"")
            }
            return id
        }
        var model: ModelIdentity?
        var goal: String?
        /// How each step's model call said it ended (its finish reason) and its span, nil for a
        /// tool's own step.
        var finishes: [String?] = []
        var stepSpanIds: [String?] = []
        /// Each step's `agent_eval.step` (agent-eval's own export), nil for a tool's own step.
        var stepNumbers: [Int?] = []
        /// The last model call failed (an error status, no reply): the span and why, until a
        /// later model call answers.
        var lastFailedCall: (spanId: String, error: String)?
        for group in chatGroups {
            let depthSorted = deepestFirst(group)
            let replies = depthSorted.map { Self.reply(of: $0) }
            let chosen = replies.indices.first { replies[$0].hasContent } ?? 0
            let span = depthSorted[chosen]
            var reply = replies[chosen]
            if !reply.hasContent, let failed = depthSorted.first(where: { $0.error != nil }) {
                // A model call that failed (a rate limit, a server error) made no decision: it is
                // no step, and if nothing answered after it, the run ends as its model failed.
                let why = [failed.string("error.type"), failed.error].compactMap { $0 }.joined(separator: ": ")
                warnings.append("model call \(failed.spanId) (\(failed.name)) failed (\(why)) and has no reply: no decision")
                lastFailedCall = (failed.spanId, why)
                continue
            }
            lastFailedCall = nil
            reply.finish = reply.finish ?? replies.lazy.compactMap(\.finish).first
            let usage = depthSorted.lazy.compactMap(Self.usage).first
            if model == nil {
                let name = depthSorted.lazy.compactMap {
                    $0.string("gen_ai.response.model") ?? $0.string("gen_ai.request.model") ?? $0.string("llm.model_name")
                }.first
                let provider = depthSorted.lazy.compactMap {
                    $0.string("gen_ai.provider.name") ?? $0.string("gen_ai.system") ?? $0.string("llm.provider") ?? $0.string("llm.system")
                }.first
                if name != nil || provider != nil { model = ModelIdentity(provider: provider ?? "unknown", name: name ?? "unknown") }
            }
            if goal == nil { goal = depthSorted.lazy.compactMap(Self.userText).first }
            // A message attribute that is there but not JSON was most likely cut by the exporter.
            var cutAttributes: [String] = []
            for layer in depthSorted {
                for key in ["gen_ai.output.messages", "gen_ai.input.messages"] {
                    let value = Self.messageAttribute(key, of: layer)
                    guard let text = value?.stringValue, Self.messages(value) == nil else { continue }
                    cutAttributes.append(key)
                    warnings.append(
                        "span \(layer.spanId) (\(layer.name)): \(key) is not valid JSON"
                            + (Self.endsTooEarly(text) ? ", it ends too early (\(text.count) characters)" : "")
                            + ": an exporter's attribute length limit (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT) cuts long values; "
                            + (key == "gen_ai.output.messages"
                                ? "the reply's text and calls in it are lost, its tool calls come from tool spans; " : "")
                            + "the span is kept whole in the step's stored records")
                }
            }
            lastFinish = reply.finish ?? lastFinish
            var calls: [ImportedCall] = []
            for call in reply.calls {
                let id = logId(call.id)
                let arguments = TranscriptImporter.arguments(call.arguments, call: id, at: "span \(span.spanId)", warnings: &warnings)
                calls.append(ImportedCall(call: ToolCall(id: id, name: call.name, arguments: arguments)))
                pending.append((steps.count, calls.count - 1, call.id, call.name))
            }
            let decision: ImportedStep.Decision
            if let invalid = depthSorted.lazy.compactMap(Self.invalidDecision).first {
                decision = .invalid(invalid)
            } else {
                decision = !calls.isEmpty ? .calls(calls) : .answer(reply.text ?? "")
            }
            steps.append(
                ImportedStep(
                    decision: decision, raw: span.record, format: "otlp.span", records: group.map { spans[$0].record }, usage: usage,
                    latencyUs: max(0, span.endUs - span.startUs), timeUs: span.startUs))
            stepStarts.append(span.startUs)
            captured.append(reply.hasContent)
            isModelStep.append(true)
            finishes.append(reply.finish)
            stepSpanIds.append(span.spanId)
            stepNumbers.append(span.int("agent_eval.step"))
            if !reply.hasContent, case .answer = decision, !cutAttributes.contains("gen_ai.output.messages") {
                warnings.append(
                    "model call \(span.spanId) carries no reply content (content capture off?): its tool calls come from tool spans")
            }
        }

        // Each tool call: paired with a proposed call by id, else by name, else added to the model
        // call before it (whose reply content was not captured) or to a step of its own.
        /// Tool spans that hold no result, and unpaired ones that hold no arguments (content capture off).
        var withoutResult: [String] = []
        var withoutArguments: [String] = []
        for group in toolGroups {
            let depthSorted = deepestFirst(group)
            let span = depthSorted[0]
            let name = depthSorted.lazy.compactMap(Self.toolName).first ?? span.name
            let sourceId = depthSorted.lazy.compactMap(Self.toolCallId).first
            let arguments = depthSorted.lazy.compactMap(Self.toolArguments).first
            var resultValue = depthSorted.lazy.compactMap(Self.toolResult).first
            let error = depthSorted.lazy.compactMap { $0.error ?? $0.string("error.type") }.first
            // A tool span without its result (v1.36 has no attribute for it): the result the next
            // model call was given back, when its input names the call.
            if resultValue == nil, error == nil, let sourceId, !reusedSourceIds.contains(sourceId) {
                // The first model call to end after the tool did: the one it answered to.
                let next = chatGroups.joined().map { spans[$0] }.filter { $0.endUs >= span.endUs }.min { $0.endUs < $1.endUs }
                if let given = next.flatMap({ Self.toolResponse(sourceId, in: $0) }) { resultValue = .string(given) }
            }
            let text = resultValue.map { $0.stringValue ?? JSONWriter.encodeString($0) } ?? ""
            var result = ImportedResult.fromContent(
                text, isError: error != nil, durationUs: max(0, span.endUs - span.startUs), timeUs: span.startUs)
            if resultValue == nil { result.output = nil }
            if let error { result.error = error }
            if resultValue == nil, error == nil { withoutResult.append("\(span.spanId) (\(name))") }
            // agent-eval's export: each attempt an `agent_eval.tool.attempt` event, the last the result.
            let attempts = Self.attempts(of: depthSorted)
            if let last = attempts.last {
                result.status = last.status
                result.durationUs = last.durationUs
                result.timeUs = last.timeUs
                result.isRetryable = last.isRetryable
                if last.status != .ok {
                    result.output = nil
                    result.error = last.error ?? result.error
                }
            }
            let earlier = Array(attempts.dropLast())
            let slot =
                pending.firstIndex { sourceId != nil && $0.sourceId == sourceId }
                ?? pending.firstIndex {
                    // By name, only a call proposed before the tool ran: a tool the agent's own
                    // code ran first is not the model's later call of it.
                    $0.name == name && (sourceId == nil || $0.sourceId == nil) && stepStarts[$0.step] <= span.startUs + 1_000
                }
            if let slot {
                let target = pending.remove(at: slot)
                guard case .calls(var calls) = steps[target.step].decision else { continue }
                calls[target.index].result = result
                calls[target.index].earlierAttempts = earlier
                steps[target.step].decision = .calls(calls)
                steps[target.step].records += group.map { spans[$0].record }
                if span.startUs < stepStarts[target.step] {
                    warnings.append(
                        "tool span \(span.spanId) starts before the model call that proposed it: clocks disagree; order kept by the call")
                }
                continue
            }
            let id = logId(sourceId)
            if arguments == nil { withoutArguments.append("\(span.spanId) (\(name))") }
            let argumentsValue = TranscriptImporter.arguments(arguments, call: id, at: "span \(span.spanId)", warnings: &warnings)
            var call = ImportedCall(call: ToolCall(id: id, name: name, arguments: argumentsValue), result: result)
            call.earlierAttempts = earlier
            // The model call it belongs to: the last that started before it, when its reply
            // content was not captured; otherwise a step of its own.
            let owner = stepStarts.lastIndex { $0 <= span.startUs }
            if let owner, !captured[owner] {
                steps[owner].decision = .calls(steps[owner].calls + [call])
                steps[owner].records += group.map { spans[$0].record }
            } else {
                let at = (owner ?? -1) + 1
                steps.insert(
                    ImportedStep(
                        decision: .calls([call]), raw: span.record, format: "otlp.span", records: group.map { spans[$0].record },
                        timeUs: span.startUs),
                    at: at)
                stepStarts.insert(span.startUs, at: at)
                captured.insert(true, at: at)
                isModelStep.insert(false, at: at)
                finishes.insert(nil, at: at)
                stepSpanIds.insert(nil, at: at)
                stepNumbers.insert(nil, at: at)
                pending = pending.map { ($0.step >= at ? $0.step + 1 : $0.step, $0.index, $0.sourceId, $0.name) }
            }
        }
        if !withoutResult.isEmpty {
            warnings.append(
                "tool span\(withoutResult.count == 1 ? "" : "s") \(withoutResult.joined(separator: ", ")) carr\(withoutResult.count == 1 ? "ies" : "y") "
                    + "no result (content capture off?): recorded as run, without output")
        }
        if !withoutArguments.isEmpty {
            warnings.append(
                "tool span\(withoutArguments.count == 1 ? "" : "s") \(withoutArguments.joined(separator: ", ")) "
                    + "carr\(withoutArguments.count == 1 ? "ies" : "y") no arguments, and no model call proposed "
                    + (withoutArguments.count == 1 ? "it" : "them") + ": recorded with {}")
        }
        // A call without a tool span whose result a later model call was given (its input's tool
        // message): it ran, and that is its result (when it took is not known).
        var readBack: [String] = []
        pending = pending.filter { call in
            // A source that reuses ids (call_0 every turn) cannot tell its calls' results apart this way.
            guard let later = stepStarts.indices.first(where: { $0 > call.step && isModelStep[$0] }), let sourceId = call.sourceId,
                !reusedSourceIds.contains(sourceId)
            else {
                return true
            }
            // The next model call's input: the one the agent sent right after running the tool.
            let next = chatGroups.flatMap { $0 }.map { spans[$0] }.filter { $0.startUs >= stepStarts[later] }.min {
                $0.startUs < $1.startUs
            }
            guard let next, let text = Self.toolResponse(sourceId, in: next) else { return true }
            guard case .calls(var calls) = steps[call.step].decision else { return true }
            calls[call.index].result = ImportedResult.fromContent(text, timeUs: stepStarts[later])
            steps[call.step].decision = .calls(calls)
            readBack.append(calls[call.index].call.id)
            return false
        }
        if !readBack.isEmpty {
            warnings.append(
                "call\(readBack.count == 1 ? "" : "s") \(readBack.map { "\"\($0)\"" }.joined(separator: ", ")) ha\(readBack.count == 1 ? "s" : "ve") "
                    + "no tool span: the result is read from the tool message a later model call was given (its duration is not known)")
        }
        for call in pending {
            warnings.append(
                "call \"\(steps[call.step].calls[call.index].call.id)\" (\(call.name)) has no tool span and no later model call was "
                    + "given its result: it counts as proposed, not run")
        }
        if traces > 1 {
            warnings.append("\(traces) traces read as one run (--group-by)")
        }

        let used = Set(chatGroups.joined()).union(toolGroups.joined())
        let restIndices = spans.indices.filter { !used.contains($0) }
        let rest = restIndices.map { spans[$0] }
        let agent = restIndices.first { operations[$0] == .agent }.map { spans[$0] }
        let root = restIndices.first { tree.parent[$0] == nil }.map { spans[$0] } ?? spans.first
        if goal == nil { goal = agent.flatMap(Self.userText) }
        let failure = (agent ?? root).flatMap { span in span.error.map { (span, $0) } }
        // The run ends as its last model call did: a tool the agent's own code ran after the
        // answer does not make it end "after tool calls".
        let modelSteps = zip(steps, isModelStep).filter(\.1).map(\.0)
        let stop: RunStopped?
        let sourceStop: String
        if let span = agent ?? root, span.string("agent_eval.stop_reason") == "unfinished" {
            // agent-eval's export of a log that ends without run_stopped.
            stop = nil
            sourceStop = "unfinished"
        } else if let span = agent ?? root, let recorded = span.string("agent_eval.stop_reason").flatMap(StopReason.init(rawValue:)) {
            // agent-eval's own export: its stop reason and limit, read back as they were.
            var answer: String?
            if recorded == .success, case .answer(let text)? = modelSteps.last?.decision { answer = text }
            stop = RunStopped(
                reason: recorded, limit: span.string("agent_eval.stop_limit").flatMap(LimitKind.init(rawValue:)), answer: answer,
                error: recorded == .success ? nil : span.error)
            sourceStop = recorded.rawValue
        } else if let failed = lastFailedCall {
            // No model call answered after the last one failed: the run ends as its model did.
            stop = RunStopped(
                reason: .blocked, error: "\(RunStopped.modelFailurePrefix) model call \(failed.spanId) failed: \(failed.error)")
            sourceStop = "error: " + failed.error
        } else if let last = isModelStep.lastIndex(of: true), !captured[last], case .answer = steps[last].decision,
            !["stop", "end_turn", "length", "max_tokens"].contains(finishes[last].map(Self.finishWord) ?? "")
        {
            // The last model call's reply was not captured, and no tool span followed it: whether
            // it answered or asked for tools (its finish reason says calls, or nothing) is not in
            // the trace, so neither is how the run ended.
            let said = finishes[last].map { "its finish reason is \($0)" } ?? "it gives no finish reason"
            stop = RunStopped(
                reason: .blocked,
                error:
                    "\(RunStopped.modelFailurePrefix) \(RunStopped.replyNotCapturedPhrase) (span \(stepSpanIds[last] ?? "?"), \(said)): what "
                    + "the model said last, and so how the run ended, is not in the trace")
            sourceStop = "reply not captured"
        } else if let finish = lastFinish.map(Self.finishWord), ["length", "max_tokens"].contains(finish) {
            // The model ran out of output tokens; an error on the agent span is its consequence.
            stop = TranscriptImporter.stop(after: modelSteps, finish: finish).stopped
            sourceStop = lastFinish ?? finish
        } else if let (span, message) = failure {
            let type = span.string("error.type")
            stop = RunStopped(reason: .blocked, error: [type, message].compactMap { $0 }.joined(separator: ": "))
            sourceStop = "error: " + ([type, message].compactMap { $0 }.joined(separator: ": "))
        } else {
            let mapped = TranscriptImporter.stop(after: modelSteps.isEmpty ? steps : modelSteps, finish: lastFinish.map(Self.finishWord))
            stop = mapped.stopped
            sourceStop = lastFinish ?? mapped.source
        }
        guard let first = spans.first else {
            throw ImportError(.badRun, "trace \(traceId) has no spans", location: SourceLocation(path: file.path))
        }
        let agentName =
            agent?.string("gen_ai.agent.name") ?? root?.service ?? first.service ?? root?.name ?? TranscriptImporter.agentName(file.path)
        let tools = Self.declaredTools(in: spans, warnings: &warnings)
        var run = ImportedRun(
            source: RunSource(
                format: format.rawValue, file: file.path, id: traceId, importer: ImportWriter.importer, stop: sourceStop,
                metadata: nil),
            goal: goal ?? "", agentName: agentName, model: model ?? ModelIdentity(provider: "unknown", name: "unknown"), tools: tools,
            preamble: rest.map(\.record), steps: steps, stop: stop, startUs: spans.map(\.startUs).min() ?? 0, warnings: warnings)
        run.openBecause = openBecause
        Self.readUserTurns(spans, steps: zip(stepNumbers, stepStarts).map { ($0, $1) }, into: &run)
        return run
    }

    /// A conversation's user turns, as agent-eval's export gives them (`agent_eval.user_turn`
    /// events of the run's span, with content): each before the first step of its step number
    /// (or, without one, that starts after it), the turn that ends the conversation after the
    /// last. A turn missing from the trace (an event an exporter dropped) leaves the run
    /// unfinished: no turn check passes on a conversation with a gap in it.
    static func readUserTurns(_ spans: [Span], steps: [(number: Int?, startUs: Int)], into run: inout ImportedRun) {
        var said: [(turn: UserTurn, step: Int?, timeUs: Int)] = []
        for span in spans {
            for event in span.events where event.name == "agent_eval.user_turn" {
                guard let number = event.int("agent_eval.turn"), number > 0, let text = event.string("agent_eval.user.text") else {
                    run.warnings.append("span \(span.spanId): an agent_eval.user_turn event without its turn number or text is left out")
                    continue
                }
                let source = event.string("agent_eval.user.source").flatMap(UserTurn.Source.init(rawValue:)) ?? .given
                var turn = UserTurn(
                    turn: number, text: text, source: source,
                    ends: event.string("agent_eval.user.ends").flatMap(UserTurn.Ending.init(rawValue:)),
                    line: event.int("agent_eval.user.line"), costUSD: event.double("agent_eval.cost_usd"),
                    latencyUs: event.int("agent_eval.latency_us"))
                if let name = event.string("gen_ai.request.model") {
                    let provider = event.string("gen_ai.provider.name") ?? event.string("gen_ai.system") ?? "unknown"
                    turn.model = ModelIdentity(provider: provider, name: name)
                }
                if let input = event.int("gen_ai.usage.input_tokens"), let output = event.int("gen_ai.usage.output_tokens") {
                    turn.usage = TokenUsage(input: input, output: output)
                }
                said.append((turn, event.int("agent_eval.step"), event.timeUs))
            }
        }
        guard !said.isEmpty else { return }
        said.sort { ($0.turn.turn, $0.timeUs) < ($1.turn.turn, $1.timeUs) }
        var turns: [(beforeStep: Int, turn: UserTurn)] = []
        var missing: [Int] = []
        var repeated: [Int] = []
        var previous = 0
        for var (turn, step, timeUs) in said {
            if turn.turn == previous { repeated.append(turn.turn) }
            if turn.turn > previous + 1 { missing += Array(previous + 1..<turn.turn) }
            previous = turn.turn
            // Numbered 1, 2, 3… as a log's turns are.
            turn.turn = turns.count + 1
            let before =
                step.flatMap { step in steps.firstIndex { ($0.number ?? .min) >= step } }
                ?? steps.firstIndex { $0.number == nil && $0.startUs >= timeUs } ?? steps.count
            // Never before a turn said earlier.
            turns.append((max(before, turns.last?.beforeStep ?? 0), turn))
        }
        run.userTurns = turns
        var gaps: [String] = []
        if !missing.isEmpty {
            gaps.append(
                "user turn\(missing.count == 1 ? "" : "s") \(missing.map(String.init).joined(separator: ", ")) of the conversation "
                    + "\(missing.count == 1 ? "is" : "are") not in the trace")
        }
        if !repeated.isEmpty {
            gaps.append(
                "user turn\(repeated.count == 1 ? "" : "s") \(repeated.map(String.init).joined(separator: ", ")) "
                    + "\(repeated.count == 1 ? "comes" : "come") twice in the trace")
        }
        if !gaps.isEmpty {
            run.leaveUnfinished(because: gaps.joined(separator: "; ") + " (the turns are numbered on in order)")
        }
    }

    /// The tools the trace declares, in the order its spans start: the GenAI conventions'
    /// `gen_ai.tool.definitions` (on a model call or agent span, or on an event of one; a list, or
    /// a JSON string of one) and OpenLLMetry's `llm.request.functions.N.name` / `.description` /
    /// `.parameters`. Each model call usually repeats the list: a tool keeps its first
    /// definition. A definitions attribute that does not parse (cut by an exporter's length
    /// limit) is reported; the tools the run called are declared all the same.
    static func declaredTools(in spans: [Span], warnings: inout [String]) -> [ToolSpec] {
        var definitions: [JSONValue] = []
        /// Where the attribute is there but does not parse, and how long it is when cut short.
        var unreadable: [(place: String, cutAt: Int?)] = []
        for span in spans {
            let places = [(span.attributes, "")] + span.events.map { ($0.attributes, ", event \($0.name)") }
            for (attributes, place) in places {
                guard let value = attributes["gen_ai.tool.definitions"] else { continue }
                switch Self.parsed(value) {
                case .array(let list)?: definitions += list
                case .object(let definition)?: definitions.append(.object(definition))
                default:
                    let text = value.stringValue ?? JSONWriter.encodeString(value)
                    unreadable.append(("\(span.spanId) (\(span.name)\(place))", Self.endsTooEarly(text) ? text.count : nil))
                }
            }
            var index = 0
            while let name = span.string("llm.request.functions.\(index).name") {
                var definition = JSONObject()
                definition["name"] = .string(name)
                definition["description"] = span["llm.request.functions.\(index).description"]
                if let parameters = span["llm.request.functions.\(index).parameters"] {
                    // Reported once per tool, though every model call repeats it.
                    if let text = parameters.stringValue, (try? JSONParser.parse(Array(text.utf8))) == nil,
                        !definitions.contains(where: { $0["name"]?.stringValue == name })
                    {
                        warnings.append(
                            "span \(span.spanId) (\(span.name)): llm.request.functions.\(index).parameters is not valid JSON"
                                + (Self.endsTooEarly(text) ? ", it ends too early (\(text.count) characters)" : "")
                                + ": \(name) is declared with an open schema")
                    }
                    definition["parameters"] = parameters
                }
                definitions.append(.object(definition))
                index += 1
            }
            // OpenInference: `llm.tools.N.tool.json_schema`, a provider's tool definition as JSON.
            index = 0
            while let schema = span["llm.tools.\(index).tool.json_schema"] {
                if let definition = Self.parsed(schema), definition.objectValue != nil {
                    definitions.append(definition["function"] ?? definition)
                }
                index += 1
            }
        }
        if !unreadable.isEmpty {
            // One note for the trace: every model call repeats the list, so one limit cuts them all.
            let lengths = Array(Set(unreadable.compactMap(\.cutAt))).sorted().map(String.init)
            warnings.append(
                "gen_ai.tool.definitions is not a JSON list of tool definitions on span\(unreadable.count == 1 ? "" : "s") "
                    + unreadable.map(\.place).joined(separator: ", ")
                    + (lengths.isEmpty
                        ? ""
                        : ": it ends too early (\(lengths.joined(separator: ", ")) characters); an exporter's attribute length limit "
                            + "(OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT) cuts long values")
                    + "; the tools declared only there are lost, the tools the run called are declared")
        }
        return ImportedRun.tools(declaredBy: definitions)
    }

    /// A model call that agent-eval's runtime rejected (its own export marks it).
    static func invalidDecision(_ span: Span) -> InvalidDecision? {
        guard span.string("error.type") == "invalid_decision" else { return nil }
        let kind = span.string("agent_eval.invalid_kind").flatMap(InvalidDecisionKind.init(rawValue:)) ?? .unparseable
        return InvalidDecision(kind: kind, message: span.error ?? "the model's reply was rejected")
    }

    static func toolName(_ span: Span) -> String? {
        span.string("gen_ai.tool.name") ?? span.string("traceloop.entity.name") ?? span.string("tool.name")
            ?? span.string("tool_call.function.name")
    }

    /// The id of the call a tool span ran, as the model's reply named it.
    static func toolCallId(_ span: Span) -> String? {
        span.string("gen_ai.tool.call.id") ?? span.string("tool_call.id")
    }

    static func toolArguments(_ span: Span) -> JSONValue? {
        span["gen_ai.tool.call.arguments"] ?? span["traceloop.entity.input"] ?? span["tool_call.function.arguments"]
            ?? (span.string("openinference.span.kind") == "TOOL" ? span["input.value"] : nil)
    }

    /// A call's attempts as agent-eval's export gives them (`agent_eval.tool.attempt` events of
    /// its span, in attempt order): status, error, duration, start. None when the spans have no
    /// such events, or one of them is not of that shape (the span alone is read then).
    static func attempts(of spans: [Span]) -> [ImportedResult] {
        guard let span = spans.first(where: { $0.events.contains { $0.name == "agent_eval.tool.attempt" } }) else { return [] }
        var attempts: [(number: Int, result: ImportedResult)] = []
        for event in span.events where event.name == "agent_eval.tool.attempt" {
            guard let number = event.int("agent_eval.attempt"), let status = event.string("agent_eval.status").flatMap(ToolStatus.init)
            else { return [] }
            let durationUs = max(0, event.int("agent_eval.duration_us") ?? 0)
            var result = ImportedResult(
                status: status, output: nil, error: event.string("agent_eval.error"), durationUs: durationUs,
                timeUs: event.timeUs - durationUs)
            if case .bool(let flag)? = event.attributes["agent_eval.retryable"] { result.isRetryable = flag }
            attempts.append((number, result))
        }
        return attempts.sorted { $0.number < $1.number }.map(\.result)
    }

    static func toolResult(_ span: Span) -> JSONValue? {
        span["gen_ai.tool.call.result"] ?? span["traceloop.entity.output"]
            ?? (span.string("openinference.span.kind") == "TOOL" ? span["output.value"] : nil)
    }

    /// The provider's id of a model call's reply: `gen_ai.response.id`, or the `id` of
    /// OpenInference's recorded response body.
    static func responseId(_ span: Span) -> String? {
        if let id = span.string("gen_ai.response.id") { return id }
        guard span.string("openinference.span.kind") == "LLM", let output = span["output.value"].flatMap(Self.parsed) else {
            return nil
        }
        return output["id"]?.stringValue
    }

    /// The finish reason's word without a provider's prefix (`FinishReason.STOP` → `stop`).
    static func finishWord(_ value: String) -> String {
        (value.split(separator: ".").last.map(String.init) ?? value).lowercased()
    }

    static func usage(_ span: Span) -> TokenUsage? {
        let input = span.int("gen_ai.usage.input_tokens") ?? span.int("gen_ai.usage.prompt_tokens") ?? span.int("llm.token_count.prompt")
        let output =
            span.int("gen_ai.usage.output_tokens") ?? span.int("gen_ai.usage.completion_tokens")
            ?? span.int("llm.token_count.completion")
        guard input != nil || output != nil else { return nil }
        return TokenUsage(input: input ?? 0, output: output ?? 0)
    }

    /// The reply of a model call span: `gen_ai.output.messages`, OpenLLMetry's
    /// `gen_ai.completion.N.*`, or a `gen_ai.choice` event.
    static func reply(of span: Span) -> ModelReply {
        var reply = ModelReply()
        // A list; exporters without list values (Jaeger tags) write it as a JSON string.
        let reasons = span["gen_ai.response.finish_reasons"].flatMap(Self.parsed)
        reply.finish = reasons?.arrayValue?.first?.stringValue ?? span.string("gen_ai.response.finish_reasons")
        if let messages = Self.messages(Self.messageAttribute("gen_ai.output.messages", of: span)) {
            for message in messages {
                for part in message["parts"]?.arrayValue ?? [] {
                    switch part["type"]?.stringValue {
                    case "text":
                        reply.text = (reply.text ?? "") + (part["content"]?.stringValue ?? "")
                    case "tool_call":
                        reply.calls.append((part["id"]?.stringValue, part["name"]?.stringValue ?? "", part["arguments"]))
                    default: continue
                    }
                }
                reply.finish = reply.finish ?? message["finish_reason"]?.stringValue
            }
            return reply
        }
        if span.string("llm.output_messages.0.message.role") != nil {
            // OpenInference: flattened messages, `llm.output_messages.0.message.*`.
            let prefix = "llm.output_messages.0.message."
            reply.text = span.string(prefix + "content")
            reply.finish = reply.finish ?? span.string("llm.finish_reason")
            if reply.finish == nil, let output = span["output.value"].flatMap(Self.parsed) {
                reply.finish = output["choices"]?.arrayValue?.first?["finish_reason"]?.stringValue ?? output["stop_reason"]?.stringValue
            }
            var index = 0
            while let name = span.string(prefix + "tool_calls.\(index).tool_call.function.name") {
                reply.calls.append(
                    (
                        span.string(prefix + "tool_calls.\(index).tool_call.id"), name,
                        span[prefix + "tool_calls.\(index).tool_call.function.arguments"]
                    ))
                index += 1
            }
            if !reply.calls.isEmpty, reply.text?.isEmpty == true { reply.text = nil }
            return reply
        }
        if span.attributes.keys.contains(where: { $0.hasPrefix("gen_ai.completion.0.") }) {
            reply.text = span.string("gen_ai.completion.0.content")
            reply.finish = reply.finish ?? span.string("gen_ai.completion.0.finish_reason")
            var index = 0
            while let name = span.string("gen_ai.completion.0.tool_calls.\(index).name") {
                reply.calls.append(
                    (
                        span.string("gen_ai.completion.0.tool_calls.\(index).id"), name,
                        span["gen_ai.completion.0.tool_calls.\(index).arguments"]
                    ))
                index += 1
            }
            if reply.calls.isEmpty, let name = span.string("gen_ai.completion.0.function_call.name") {
                reply.calls.append((nil, name, span["gen_ai.completion.0.function_call.arguments"]))
            }
            if !reply.calls.isEmpty, reply.text?.isEmpty == true { reply.text = nil }
            return reply
        }
        for event in span.events where event.name == "gen_ai.choice" {
            // The message itself, or (v1.36's body) a choice holding it.
            let choice = event.attributes["message"].flatMap(Self.parsed) ?? event.attributes["body"].flatMap(Self.parsed)
            let body = choice?["message"] ?? choice
            reply.finish = reply.finish ?? event.attributes["finish_reason"]?.stringValue ?? choice?["finish_reason"]?.stringValue
            if let content = body?["content"]?.stringValue { reply.text = content }
            for call in (body?["tool_calls"]?.arrayValue ?? []) {
                let function = call["function"] ?? call
                reply.calls.append((call["id"]?.stringValue, function["name"]?.stringValue ?? "", function["arguments"]))
            }
        }
        return reply
    }

    /// The text of the tool result for call `id` a model call was given in its input: the GenAI
    /// conventions' `tool_call_response` part, OpenInference's or OpenLLMetry's tool message.
    /// The last such message: the input holds the whole history, the newest answer last.
    static func toolResponse(_ id: String, in span: Span) -> String? {
        var found: String?
        // v1.36: a gen_ai.tool.message event per result given back.
        for event in span.events where event.name == "gen_ai.tool.message" {
            guard let body = event.attributes["body"].flatMap(Self.parsed), body["id"]?.stringValue == id else { continue }
            found = body["content"].map { $0.stringValue ?? JSONWriter.encodeString($0) } ?? ""
        }
        if let messages = Self.messages(span["gen_ai.input.messages"]) {
            for message in messages {
                for part in message["parts"]?.arrayValue ?? [] where part["type"]?.stringValue == "tool_call_response" {
                    guard part["id"]?.stringValue == id, let response = part["response"] else { continue }
                    found = response.stringValue ?? JSONWriter.encodeString(response)
                }
            }
        }
        for (prefix, infix, idKey) in [("llm.input_messages.", ".message.", "tool_call_id"), ("gen_ai.prompt.", ".", "tool_call_id")] {
            var index = 0
            while let role = span.string(prefix + "\(index)\(infix)role") {
                if role == "tool", span.string(prefix + "\(index)\(infix)\(idKey)") == id {
                    found = span.string(prefix + "\(index)\(infix)content") ?? ""
                }
                index += 1
            }
        }
        return found
    }

    /// The first user text the span was given (`gen_ai.input.messages` or `gen_ai.prompt.N.*`).
    static func userText(_ span: Span) -> String? {
        // v1.36: the first gen_ai.user.message event.
        for event in span.events where event.name == "gen_ai.user.message" {
            if let content = event.attributes["body"].flatMap(Self.parsed)?["content"]?.stringValue { return content }
        }
        if let messages = Self.messages(Self.messageAttribute("gen_ai.input.messages", of: span)) {
            for message in messages where message["role"]?.stringValue == "user" {
                let text = (message["parts"]?.arrayValue ?? []).compactMap { $0["content"]?.stringValue }.joined(separator: "\n")
                if !text.isEmpty { return text }
                if let content = message["content"]?.stringValue { return content }
            }
        }
        for prefix in ["gen_ai.prompt.", "llm.input_messages."] {
            let infix = prefix == "gen_ai.prompt." ? "." : ".message."
            var index = 0
            while let role = span.string(prefix + "\(index)\(infix)role") {
                if role == "user", let content = span.string(prefix + "\(index)\(infix)content") { return content }
                index += 1
            }
        }
        return nil
    }

    /// A list of messages given as a JSON string (the conventions' form) or as a value.
    /// The name of the event the GenAI conventions may put a call's messages on instead of the
    /// span's attributes (`gen_ai.input.messages`, `gen_ai.output.messages`, …).
    static let operationDetailsEvent = "gen_ai.client.inference.operation.details"

    /// A message attribute (`gen_ai.input.messages`, `gen_ai.output.messages`) of a model call:
    /// the span's own, or its operation-details event's.
    static func messageAttribute(_ key: String, of span: Span) -> JSONValue? {
        span[key] ?? span.events.lazy.filter { $0.name == Self.operationDetailsEvent }.compactMap { $0.attributes[key] }.first
    }

    static func messages(_ value: JSONValue?) -> [JSONValue]? {
        guard let value else { return nil }
        return parsed(value)?.arrayValue
    }

    /// Whether `text` (which does not parse) ends inside a string, object or list: a value cut
    /// short, as an exporter's length limit or a model's token limit leaves it.
    static func endsTooEarly(_ text: String) -> Bool {
        let scan = JSONWriter.nesting(of: text.utf8)
        return scan.endsInString || scan.open > 0
    }

    static func parsed(_ value: JSONValue) -> JSONValue? {
        if let text = value.stringValue { return try? JSONParser.parse(Array(text.utf8)) }
        return value
    }
}
