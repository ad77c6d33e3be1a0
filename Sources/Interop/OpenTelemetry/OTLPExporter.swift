public import TraceCore
import TraceLog

/// Writes runs as OpenTelemetry traces in OTLP/JSON, with the GenAI semantic conventions' names
/// (docs/interop.md, "Export"): per run an `invoke_agent` root span, a `chat` span per model
/// decision and an `execute_tool` span per call that ran, its attempts as span events; policy
/// verdicts and approvals as events of the decision's span; the stop reason and limit on the root.
///
/// Prompts, answers, arguments and results are content, which the conventions make opt-in:
/// they are exported only with `includeContent`. Ids are derived from the run id, so exporting
/// a log twice gives the same trace.
public struct OTLPExporter: Sendable {
    public var includeContent: Bool
    /// Which version of the GenAI conventions the spans follow.
    public var conventions: Conventions
    /// The eval outcomes of the runs, by log path as `request(logs:)` is given it: written as
    /// `gen_ai.evaluation.result` events on each run's `invoke_agent` span.
    public var evaluations: [String: [EvaluationResult]]

    public init(includeContent: Bool = false, conventions: Conventions = .latest, evaluations: [String: [EvaluationResult]] = [:]) {
        self.includeContent = includeContent
        self.conventions = conventions
        self.evaluations = evaluations
    }

    /// The versions of the GenAI semantic conventions an export can follow (docs/interop.md,
    /// "Conventions"). The conventions' transition plan lets an instrumentation keep its default
    /// and read `OTEL_SEMCONV_STABILITY_OPT_IN`; agent-eval has always emitted the latest
    /// experimental names, so that stays the default.
    public enum Conventions: String, Sendable, CaseIterable {
        /// The latest experimental conventions (`gen_ai_latest_experimental`): `gen_ai.provider.name`,
        /// content as structured `gen_ai.input.messages` / `gen_ai.output.messages` /
        /// `gen_ai.system_instructions` / `gen_ai.tool.definitions` attributes, tool arguments and
        /// results on `execute_tool`, policy verdicts as `apply_guardrail` spans.
        case latest
        /// v1.36.0, what GenAI instrumentations emit unless opted in: `gen_ai.system`, content as
        /// `gen_ai.system.message` / `gen_ai.user.message` / `gen_ai.assistant.message` /
        /// `gen_ai.tool.message` / `gen_ai.choice` events, policy verdicts as
        /// `agent_eval.policy.verdict` events (v1.36 has no guardrail spans).
        case v1_36 = "v1.36"

        /// The variable the OpenTelemetry instrumentations read.
        public static let optInVariable = "OTEL_SEMCONV_STABILITY_OPT_IN"
        /// The variable's token that asks for the latest experimental GenAI conventions.
        public static let latestToken = "gen_ai_latest_experimental"

        /// The conventions asked for: `flag` (`latest`, `gen_ai_latest_experimental` or `v1.36`)
        /// first; else the variable, when it is set: its `gen_ai_latest_experimental` token gives
        /// the latest, a list without it v1.36 (what the rest of that process's GenAI
        /// instrumentation emits); else the latest. Nil for a flag value it does not know.
        public static func resolve(flag: String?, environment: [String: String]) -> Conventions? {
            if let flag {
                switch flag {
                case "latest", latestToken: return .latest
                case "v1.36", "v1.36.0", "1.36": return .v1_36
                default: return nil
                }
            }
            guard let list = environment[optInVariable] else { return .latest }
            let tokens = list.split(separator: ",").map { $0.split(separator: " ").joined() }
            return tokens.contains(latestToken) ? .latest : .v1_36
        }
    }

    /// One evaluation of a run, as the GenAI conventions' `gen_ai.evaluation.result` event says it.
    public struct EvaluationResult: Sendable, Hashable {
        /// `gen_ai.evaluation.name`.
        public var name: String
        /// `gen_ai.evaluation.score.value`.
        public var score: Double?
        /// `gen_ai.evaluation.score.label`.
        public var label: String?
        /// `gen_ai.evaluation.explanation`.
        public var explanation: String?

        public init(name: String, score: Double?, label: String?, explanation: String?) {
            self.name = name
            self.score = score
            self.label = label
            self.explanation = explanation
        }

        /// A run's results from an `agent-eval run` report (`--json`): per case run of `log`, one
        /// for the case (`agent-eval.case <id>`: 1 pass, 0 fail, no score when it could not run)
        /// and one per expectation it failed (`agent-eval.<expectation>`, 0, expected and actual).
        public static func fromReport(_ report: JSONValue) -> [String: [EvaluationResult]] {
            var byLog: [String: [EvaluationResult]] = [:]
            for entry in report["cases"]?.arrayValue ?? [] {
                let caseId = entry["case_id"]?.stringValue ?? "case"
                for run in entry["runs"]?.arrayValue ?? [] {
                    guard let log = run["log"]?.stringValue else { continue }
                    let outcome = run["outcome"]?.stringValue ?? "error"
                    let failures = run["failures"]?.arrayValue ?? []
                    let explanation: String
                    switch outcome {
                    case "pass": explanation = "every expectation of the case holds (\(entry["checks"]?.intValue ?? 0) checked)"
                    case "fail": explanation = "\(failures.count) expectation\(failures.count == 1 ? "" : "s") failed"
                    default: explanation = "the run could not be checked: " + (run["error"]?.stringValue ?? "")
                    }
                    var results = [
                        EvaluationResult(
                            name: "agent-eval.case \(caseId)", score: outcome == "pass" ? 1 : outcome == "fail" ? 0 : nil, label: outcome,
                            explanation: explanation)
                    ]
                    for failure in failures {
                        results.append(
                            EvaluationResult(
                                name: "agent-eval.\(failure["expectation"]?.stringValue ?? "expectation")", score: 0, label: "fail",
                                explanation:
                                    "expected \(failure["expected"]?.stringValue ?? "?"); actual \(failure["actual"]?.stringValue ?? "?")"))
                    }
                    byLog[log, default: []] += results
                }
            }
            return byLog
        }
    }

    /// The instrumentation scope every span is reported under.
    static let scope: JSONValue = ["name": "agent-eval", "version": "1"]

    /// One OTLP/JSON `ExportTraceServiceRequest` holding the runs of `logs`.
    public func request(logs: [String]) throws(ImportError) -> JSONValue {
        var resourceSpans: [JSONValue] = []
        for path in logs { resourceSpans.append(try self.resourceSpans(log: path)) }
        return ["resourceSpans": .array(resourceSpans)]
    }

    /// The `ResourceSpans` of one run: its service and its spans.
    public func resourceSpans(log path: String) throws(ImportError) -> JSONValue {
        let run = try ExportedRun(log: path, keepsConversation: includeContent)
        let started = run.started
        let spans = RunSpans(run: run, includeContent: includeContent, conventions: conventions, evaluations: evaluations[path] ?? [])
            .spans()
        let resource: [(String, JSONValue)] = [
            ("service.name", .string(started.agent.name)), ("telemetry.sdk.name", "agent-eval"), ("agent_eval.log", .string(path)),
        ]
        return [
            "resource": ["attributes": Self.attributes(resource)],
            "scopeSpans": [["scope": Self.scope, "spans": .array(spans)]],
        ]
    }

    /// OTLP's key-value list: `[{key, value: {stringValue | intValue | …}}]`, nil values left out.
    static func attributes(_ pairs: [(String, JSONValue?)]) -> JSONValue {
        .array(
            pairs.compactMap { key, value in
                guard let value, value != .null else { return nil }
                return ["key": .string(key), "value": anyValue(value)]
            })
    }

    static func anyValue(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string: return ["stringValue": value]
        // int64 is a string in OTLP/JSON (protobuf's JSON mapping).
        case .int(let number): return ["intValue": .string(String(number))]
        case .double: return ["doubleValue": value]
        case .bool: return ["boolValue": value]
        case .array(let items): return ["arrayValue": ["values": .array(items.map(anyValue))]]
        case .object, .null: return ["stringValue": .string(JSONWriter.encodeString(value))]
        }
    }
}

/// Builds the spans of one run from its export view.
private struct RunSpans {
    let run: ExportedRun
    let includeContent: Bool
    let conventions: OTLPExporter.Conventions
    let evaluations: [OTLPExporter.EvaluationResult]

    typealias Message = ExportedRun.Message

    var runId: String { run.runId }
    var started: RunStarted { run.started }
    var startUs: Int { run.startUs }

    var isLatest: Bool { conventions == .latest }
    /// The provider's attribute: `gen_ai.provider.name`, in v1.36 `gen_ai.system`.
    var providerKey: String { isLatest ? "gen_ai.provider.name" : "gen_ai.system" }

    var traceId: String { String(ContentHash.sha256Hex(Array(runId.utf8)).prefix(32)) }

    func spanId(_ key: String) -> String { String(ContentHash.sha256Hex(Array("\(runId)\u{0}\(key)".utf8)).prefix(16)) }

    func spans() -> [JSONValue] {
        let root = spanId("run")
        var spans: [JSONValue] = []
        var decisionEvents: [String: [JSONValue]] = [:]
        // Each policy verdict: an `apply_guardrail` span under the decision that proposed the call.
        var guardrails: [JSONValue] = []
        let calls = run.calls
        let instructions = run.instructions
        for judgement in run.judgements {
            switch judgement {
            case .verdict(let verdict, let event, let index?) where !isLatest:
                // v1.36 has no guardrail spans: the verdict is an event of the decision's span.
                decisionEvents[calls[index].decisionKey, default: []].append(
                    spanEvent(
                        "agent_eval.policy.verdict", at: event.timeUs,
                        [
                            ("gen_ai.tool.call.id", text(verdict.callId)), ("gen_ai.tool.name", text(verdict.tool)),
                            ("agent_eval.verdict", text(verdict.verdict.rawValue)), ("agent_eval.rule", text(verdict.rule)),
                            ("agent_eval.reason", text(verdict.reason)),
                        ]))
            case .verdict(let verdict, let event, let index?):
                // The verdict in the policy's own words (allow, deny, approval_required): the
                // conventions ask for the guardrail's native decision, not a translation.
                let result = spanEvent(
                    "gen_ai.guardrail.result", at: event.timeUs,
                    [
                        ("gen_ai.guardrail.decision", text(verdict.verdict.rawValue)), ("agent_eval.rule", text(verdict.rule)),
                        ("agent_eval.reason", text(verdict.reason)),
                    ])
                guardrails.append(
                    span(
                        id: spanId("guardrail:\(event.sequence)"), parent: spanId(calls[index].decisionKey),
                        name: "apply_guardrail \(started.policy.name)", kind: 1, startUs: event.timeUs, endUs: event.timeUs,
                        attributes: [
                            ("gen_ai.operation.name", "apply_guardrail"), ("gen_ai.guardrail.name", .string(started.policy.name)),
                            ("gen_ai.tool.call.id", text(verdict.callId)), ("gen_ai.tool.name", text(verdict.tool)),
                        ],
                        events: [result], status: ["code": 0]))
            case .approval(let approval, let event, let index?):
                decisionEvents[calls[index].decisionKey, default: []].append(
                    spanEvent(
                        "agent_eval.approval", at: event.timeUs,
                        [
                            ("gen_ai.tool.call.id", text(approval.callId)), ("agent_eval.granted", .bool(approval.isGranted)),
                            ("agent_eval.approver", text(approval.approver)), ("agent_eval.reason", text(approval.reason)),
                        ]))
            case .verdict, .approval:
                continue  // about a call not proposed (yet)
            }
        }
        for decision in run.decisions {
            let (key, event, made, start, model) = (decision.key, decision.event, decision.made, decision.startUs, decision.model)
            var attributes: [(String, JSONValue?)] = [
                ("gen_ai.operation.name", "chat"), (providerKey, .string(model.provider)),
                ("gen_ai.request.model", .string(model.name)),
                ("gen_ai.usage.input_tokens", made.usage.map { .int($0.input) }),
                ("gen_ai.usage.output_tokens", made.usage.map { .int($0.output) }),
                ("agent_eval.step", .int(event.step)), ("agent_eval.cost_usd", made.costUSD.map { .double($0) }),
            ]
            var status: JSONValue = ["code": 0]
            // The reply: its text, the calls it proposed, why it finished.
            var replyText: String?
            var replyCalls: [ToolCall] = []
            var finish: String
            switch made.outcome {
            case .valid(.toolCalls(let proposed)):
                attributes.append(("gen_ai.response.finish_reasons", ["tool_calls"]))
                replyCalls = proposed
                finish = "tool_call"
            case .valid(.answer(let text)), .valid(.askHuman(let text)):
                attributes.append(("gen_ai.response.finish_reasons", ["stop"]))
                replyText = text
                finish = "stop"
            case .valid(.stop(let reason)):
                attributes.append(("gen_ai.response.finish_reasons", ["stop"]))
                attributes.append(("agent_eval.stop", .string(reason)))
                finish = "stop"
            case .invalid(let invalid):
                replyText = made.raw
                finish = "error"
                attributes.append(("error.type", "invalid_decision"))
                attributes.append(("agent_eval.invalid_kind", .string(invalid.kind.rawValue)))
                status = ["code": 2, "message": .string(invalid.message)]
            }
            var events = decisionEvents[key] ?? []
            if includeContent {
                let input = decision.input ?? [.user(started.goal)]
                let isStop: Bool
                if case .valid(.stop) = made.outcome { isStop = true } else { isStop = false }
                if isLatest {
                    attributes.append(("gen_ai.input.messages", .string(JSONWriter.encodeString(.array(input.map(\.structured))))))
                    if let instructions { attributes.append(("gen_ai.system_instructions", systemInstructions(instructions))) }
                    if !isStop {
                        var parts: [JSONValue] = replyText.map { [["type": "text", "content": .string($0)]] } ?? []
                        parts += replyCalls.map {
                            ["type": "tool_call", "id": .string($0.id), "name": .string($0.name), "arguments": $0.arguments]
                        }
                        attributes.append(("gen_ai.output.messages", output(parts, finish: finish)))
                    }
                } else {
                    var messages: [(String, JSONValue)] = []
                    if let instructions { messages.append(("gen_ai.system.message", ["content": .string(instructions)])) }
                    messages += input.map(\.v136)
                    events =
                        messages.map { legacyEvent($0.0, at: start, body: $0.1) } + events
                    if !isStop {
                        var message = JSONObject()
                        message["role"] = "assistant"
                        if let replyText { message["content"] = .string(replyText) }
                        if !replyCalls.isEmpty { message["tool_calls"] = .array(replyCalls.map(Message.v136ToolCall)) }
                        events.append(
                            legacyEvent(
                                "gen_ai.choice", at: event.timeUs,
                                body: ["index": 0, "finish_reason": .string(finish), "message": .object(message)]))
                    }
                }
            }
            spans.append(
                span(
                    id: spanId(key), parent: root, name: "chat \(model.name)", kind: 3, startUs: start, endUs: event.timeUs,
                    attributes: attributes, events: events, status: status))
        }
        spans += guardrails
        for call in calls {
            guard let begin = call.firstIntentUs else { continue }
            var status: JSONValue = ["code": 0]
            var attributes: [(String, JSONValue?)] = [
                ("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", .string(call.tool)),
                ("gen_ai.tool.call.id", .string(call.id)),
                ("gen_ai.tool.type", "function"), ("agent_eval.attempts", .int(call.attempts.count)),
            ]
            if let last = call.last, last.status != .ok {
                attributes.append(("error.type", .string(last.status.rawValue)))
                status = ["code": 2, "message": .string(last.error ?? last.status.rawValue)]
            }
            // v1.36 has no such attributes: a call's arguments are in the reply's gen_ai.choice, its
            // result in the next decision's gen_ai.tool.message.
            if includeContent, isLatest {
                attributes.append(("gen_ai.tool.call.arguments", .string(JSONWriter.encodeString(call.arguments))))
                if let last = call.last, last.status == .ok {
                    attributes.append(("gen_ai.tool.call.result", .string(JSONWriter.encodeString(run.response(last)))))
                }
            }
            spans.append(
                span(
                    id: spanId("tool:\(call.id)"), parent: root, name: "execute_tool \(call.tool)", kind: 1, startUs: begin,
                    endUs: call.lastUs ?? begin, attributes: attributes, events: call.attempts.map(attemptEvent), status: status))
        }
        var rootAttributes: [(String, JSONValue?)] = [
            ("gen_ai.operation.name", "invoke_agent"), ("gen_ai.agent.name", .string(started.agent.name)),
            ("gen_ai.agent.version", started.agent.version.map { .string($0) }), ("gen_ai.conversation.id", .string(runId)),
            (providerKey, .string(started.model.provider)), ("gen_ai.request.model", .string(started.model.name)),
            ("agent_eval.forked_from", text(run.forked?.parentRunId)), ("agent_eval.fork_step", run.forked.map { .int($0.step) }),
            ("gen_ai.usage.input_tokens", .int(run.usage.input)), ("gen_ai.usage.output_tokens", .int(run.usage.output)),
            ("agent_eval.run_id", .string(runId)),
        ]
        var rootStatus: JSONValue = ["code": 0]
        var endUs = run.lastUs
        if let (stopped, at) = run.stop {
            endUs = at
            rootAttributes += [
                ("agent_eval.stop_reason", .string(stopped.reason.rawValue)),
                ("agent_eval.stop_limit", stopped.limit.map { .string($0.rawValue) }),
            ]
            if !stopped.reason.isOrdinaryEnd {
                rootAttributes.append(("error.type", .string(stopped.reason.rawValue)))
                rootStatus = ["code": 2, "message": .string(stopped.error ?? stopped.limit?.rawValue ?? stopped.reason.rawValue)]
            }
            if includeContent, isLatest, let answer = stopped.answer {
                rootAttributes.append(("gen_ai.output.messages", output([["type": "text", "content": .string(answer)]], finish: "stop")))
            }
        } else {
            rootAttributes.append(("agent_eval.stop_reason", "unfinished"))
        }
        if includeContent, isLatest {
            rootAttributes.append(("gen_ai.input.messages", .string(JSONWriter.encodeString([Message.user(started.goal).structured]))))
            if let instructions { rootAttributes.append(("gen_ai.system_instructions", systemInstructions(instructions))) }
        }
        if includeContent, isLatest, !started.tools.isEmpty {
            let definitions: [JSONValue] = started.tools.map { tool in
                ["type": "function", "name": .string(tool.name), "description": .string(tool.description), "parameters": tool.inputSchema]
            }
            rootAttributes.append(("gen_ai.tool.definitions", .string(JSONWriter.encodeString(.array(definitions)))))
        }
        // The run's eval outcomes, where a tracing backend shows them beside the run.
        let evaluationEvents = evaluations.map { result in
            spanEvent(
                "gen_ai.evaluation.result", at: endUs,
                [
                    ("gen_ai.evaluation.name", .string(result.name)), ("gen_ai.evaluation.score.value", result.score.map(JSONValue.double)),
                    ("gen_ai.evaluation.score.label", text(result.label)), ("gen_ai.evaluation.explanation", text(result.explanation)),
                ])
        }
        let rootSpan = span(
            id: root, parent: nil, name: "invoke_agent \(started.agent.name)", kind: 1, startUs: startUs, endUs: endUs,
            attributes: rootAttributes,
            events: (includeContent ? run.userTurns.map(userTurnEvent) : []) + evaluationEvents, status: rootStatus)
        return [rootSpan] + spans
    }

    func text(_ value: String?) -> JSONValue? { value.map { .string($0) } }

    /// A conversation's user turn: an event of the run's span, at the step it starts, with what
    /// the user said (content: exported only with it) and how the turn was made, so that
    /// `import otlp` gives the conversation back turn by turn (docs/interop.md).
    func userTurnEvent(_ turn: (turn: UserTurn, event: Event)) -> JSONValue {
        let said = turn.turn
        return spanEvent(
            "agent_eval.user_turn", at: turn.event.timeUs,
            [
                ("agent_eval.turn", .int(said.turn)), ("agent_eval.step", .int(turn.event.step)),
                ("agent_eval.user.text", .string(said.text)), ("agent_eval.user.source", .string(said.source.rawValue)),
                ("agent_eval.user.ends", text(said.ends?.rawValue)), ("agent_eval.user.line", said.line.map { .int($0) }),
                (providerKey, text(said.model?.provider)), ("gen_ai.request.model", text(said.model?.name)),
                ("gen_ai.usage.input_tokens", said.usage.map { .int($0.input) }),
                ("gen_ai.usage.output_tokens", said.usage.map { .int($0.output) }),
                ("agent_eval.cost_usd", said.costUSD.map { .double($0) }),
                ("agent_eval.latency_us", said.latencyUs.map { .int($0) }),
            ])
    }

    /// One attempt of a call: an event of its span.
    func attemptEvent(_ attempt: (result: ToolCompleted, timeUs: Int)) -> JSONValue {
        let result = attempt.result
        return spanEvent(
            "agent_eval.tool.attempt", at: attempt.timeUs,
            [
                ("agent_eval.attempt", .int(result.attempt)), ("agent_eval.status", text(result.status.rawValue)),
                ("agent_eval.duration_us", .int(result.durationUs)),
                ("error.type", result.status == .ok ? nil : text(result.status.rawValue)),
                ("agent_eval.error", text(result.error)), ("agent_eval.retryable", result.isRetryable.map(JSONValue.bool)),
            ])
    }

    /// `gen_ai.system_instructions`: the agent's instructions as one text part.
    func systemInstructions(_ instructions: String) -> JSONValue {
        .string(JSONWriter.encodeString([["type": "text", "content": .string(instructions)]]))
    }

    /// A v1.36 content event: its body (a log record's body in the conventions) as a JSON string.
    func legacyEvent(_ name: String, at timeUs: Int, body: JSONValue) -> JSONValue {
        spanEvent(name, at: timeUs, [("gen_ai.system", .string(started.model.provider)), ("body", .string(JSONWriter.encodeString(body)))])
    }

    func output(_ parts: [JSONValue], finish: String) -> JSONValue {
        .string(JSONWriter.encodeString([["role": "assistant", "parts": .array(parts), "finish_reason": .string(finish)]]))
    }

    func spanEvent(_ name: String, at timeUs: Int, _ attributes: [(String, JSONValue?)]) -> JSONValue {
        ["timeUnixNano": .string(String(timeUs * 1000)), "name": .string(name), "attributes": OTLPExporter.attributes(attributes)]
    }

    func span(
        id: String, parent: String?, name: String, kind: Int, startUs: Int, endUs: Int, attributes: [(String, JSONValue?)],
        events: [JSONValue],
        status: JSONValue
    ) -> JSONValue {
        var object = JSONObject()
        object["traceId"] = .string(traceId)
        object["spanId"] = .string(id)
        if let parent { object["parentSpanId"] = .string(parent) }
        object["name"] = .string(name)
        object["kind"] = .int(kind)
        object["startTimeUnixNano"] = .string(String(startUs * 1000))
        object["endTimeUnixNano"] = .string(String(max(startUs, endUs) * 1000))
        object["attributes"] = OTLPExporter.attributes(attributes)
        if !events.isEmpty { object["events"] = .array(events) }
        object["status"] = status
        return .object(object)
    }
}

/// The conversation in the conventions' two forms.
extension ExportedRun.Message {
    /// The latest conventions' form: a role and typed parts.
    var structured: JSONValue {
        switch self {
        case .user(let text): return ["role": "user", "parts": [["type": "text", "content": .string(text)]]]
        case .assistant(let text): return ["role": "assistant", "parts": [["type": "text", "content": .string(text)]]]
        case .calls(let calls):
            return [
                "role": "assistant",
                "parts": .array(
                    calls.map { ["type": "tool_call", "id": .string($0.id), "name": .string($0.name), "arguments": $0.arguments] }),
            ]
        case .result(let id, let response):
            return ["role": "tool", "parts": [["type": "tool_call_response", "id": .string(id), "response": response]]]
        }
    }

    /// v1.36's form: the event's name and body.
    var v136: (String, JSONValue) {
        switch self {
        case .user(let text): return ("gen_ai.user.message", ["content": .string(text)])
        case .assistant(let text): return ("gen_ai.assistant.message", ["content": .string(text)])
        case .calls(let calls): return ("gen_ai.assistant.message", ["tool_calls": .array(calls.map(Self.v136ToolCall))])
        case .result(let id, let response):
            return (
                "gen_ai.tool.message",
                ["id": .string(id), "content": .string(response.stringValue ?? JSONWriter.encodeString(response))]
            )
        }
    }

    static func v136ToolCall(_ call: ToolCall) -> JSONValue {
        ["id": .string(call.id), "type": "function", "function": ["name": .string(call.name), "arguments": call.arguments]]
    }
}
