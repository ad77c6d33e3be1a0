import Foundation
public import TraceCore
import TraceLog

/// Writes a run as an ATIF v1.8 trajectory (`agent-eval export atif`; docs/interop.md, "ATIF"):
/// the goal as the first user step, then an agent step per model decision — its calls as
/// `tool_calls`, their results as `observation.results` (a failed result's error in the result's
/// `extra`), its tokens and cost as `metrics`, an answer as the step's message — and the run's
/// totals as `final_metrics`. What ATIF has no field for (the stop reason and limit, verdicts)
/// goes under `extra.agent_eval`, which the importer reads back: import → export → import gives
/// the same trajectory and stop.
public struct ATIFExporter: Sendable {
    /// The schema version written.
    public static let schemaVersion = "ATIF-v1.8"

    public init() {}

    public func trajectory(log path: String) throws(ImportError) -> JSONValue {
        let (events, first, started) = try OTLPExporter.runEvents(log: path)
        var contents: [String: [UInt8]] = [:]
        var steps: [JSONValue] = [
            Self.object([
                ("step_id", 1), ("timestamp", .string(Self.iso(first.timeUs))), ("source", "user"), ("message", .string(started.goal)),
            ])
        ]
        /// The agent step being built: its index in `steps`, its calls' ids, its results.
        var open: (index: Int, callIds: Set<String>, results: [JSONValue])?
        var totals = (input: 0, output: 0, cost: 0.0, hasCost: false)
        var verdicts: [JSONValue] = []
        var stop: RunStopped?
        func closeStep() {
            guard let current = open else { return }
            if !current.results.isEmpty, var step = steps[current.index].objectValue {
                step["observation"] = ["results": .array(current.results)]
                steps[current.index] = .object(step)
            }
            open = nil
        }
        for event in events {
            switch event.payload {
            case .contentStored(let content):
                if let bytes = content.bytes { contents[content.hash] = bytes }
            case .decisionMade(let made):
                closeStep()
                var step: [(String, JSONValue)] = [
                    ("step_id", .int(steps.count + 1)), ("timestamp", .string(Self.iso(event.timeUs))), ("source", "agent"),
                    ("model_name", .string(started.model.name)),
                ]
                var ids = Set<String>()
                switch made.outcome {
                case .valid(.answer(let text)):
                    step.append(("message", .string(text)))
                case .valid(.toolCalls(let calls)):
                    step.append(("message", ""))
                    step.append(
                        (
                            "tool_calls",
                            .array(
                                calls.map { call in
                                    ids.insert(call.id)
                                    let arguments: JSONValue =
                                        call.arguments.objectValue != nil ? call.arguments : ["input": call.arguments]
                                    return Self.object([
                                        ("tool_call_id", .string(call.id)), ("function_name", .string(call.name)), ("arguments", arguments),
                                    ])
                                })
                        ))
                case .valid(.askHuman(let question)):
                    step.append(("message", .string(question)))
                    step.append(("extra", ["agent_eval": ["decision": "ask_human"]]))
                case .valid(.stop(let reason)):
                    step.append(("message", .string(reason)))
                    step.append(("extra", ["agent_eval": ["decision": "stop"]]))
                case .invalid(let invalid):
                    step.append(("message", .string(made.raw)))
                    step.append(("extra", ["agent_eval": ["invalid_decision": .string(invalid.message)]]))
                }
                var metrics: [(String, JSONValue)] = []
                if let usage = made.usage {
                    metrics += [("prompt_tokens", .int(usage.input)), ("completion_tokens", .int(usage.output))]
                    totals.input += usage.input
                    totals.output += usage.output
                }
                if let cost = made.costUSD {
                    metrics.append(("cost_usd", .double(cost)))
                    totals.cost += cost
                    totals.hasCost = true
                }
                if !metrics.isEmpty { step.append(("metrics", Self.object(metrics))) }
                steps.append(Self.object(step))
                open = (steps.count - 1, ids, [])
            case .toolCompleted(let completed):
                guard let current = open, current.callIds.contains(completed.callId) else { continue }
                // The last attempt's result stands (an earlier one is replaced).
                var text: String
                if let output = completed.output {
                    text = output.stringValue ?? JSONWriter.encodeString(output)
                } else if let hash = completed.contentHash, let bytes = contents[hash] {
                    text = String(decoding: bytes, as: UTF8.self)
                } else {
                    text = completed.error ?? ""
                }
                var result: [(String, JSONValue)] = [("source_call_id", .string(completed.callId)), ("content", .string(text))]
                if completed.status != .ok {
                    var extra = ObjectBuilder()
                    extra.set("status", completed.status.rawValue)
                    extra.set("error", completed.error)
                    result.append(("extra", extra.json))
                }
                var results = current.results.filter { $0["source_call_id"]?.stringValue != completed.callId }
                results.append(Self.object(result))
                open = (current.index, current.callIds, results)
            case .verdictGiven(let verdict):
                verdicts.append([
                    "call_id": .string(verdict.callId), "tool": .string(verdict.tool), "verdict": .string(verdict.verdict.rawValue),
                ])
            case .runStopped(let stopped):
                stop = stopped
            default:
                continue
            }
        }
        closeStep()
        var extra = ObjectBuilder()
        extra.set("run_id", first.runId)
        extra.set("stop_reason", stop?.reason.rawValue ?? "unfinished")
        extra.set("stop_limit", stop?.limit?.rawValue)
        extra.set("stop_error", stop?.error)
        if !verdicts.isEmpty { extra.set("verdicts", JSONValue.array(verdicts)) }
        let tools: [JSONValue] = started.tools.map { tool in
            [
                "type": "function",
                "function": ["name": .string(tool.name), "description": .string(tool.description), "parameters": tool.inputSchema],
            ]
        }
        var agent: [(String, JSONValue)] = [
            ("name", .string(started.agent.name)), ("version", .string(String(started.agent.configDigest.prefix(19)))),
            ("model_name", .string(started.model.name)),
        ]
        if !tools.isEmpty { agent.append(("tool_definitions", .array(tools))) }
        var finalMetrics: [(String, JSONValue)] = [
            ("total_prompt_tokens", .int(totals.input)), ("total_completion_tokens", .int(totals.output)),
            ("total_steps", .int(steps.count)),
        ]
        if totals.hasCost { finalMetrics.append(("total_cost_usd", .double(totals.cost))) }
        return Self.object([
            ("schema_version", .string(Self.schemaVersion)), ("session_id", .string(first.runId)), ("trajectory_id", .string(first.runId)),
            ("agent", Self.object(agent)), ("steps", .array(steps)), ("final_metrics", Self.object(finalMetrics)),
            ("extra", ["agent_eval": extra.json]),
        ])
    }

    static func object(_ pairs: [(String, JSONValue)]) -> JSONValue { .object(JSONObject(pairs)) }

    /// ISO 8601 with milliseconds, UTC (the formatter's precision).
    static func iso(_ microseconds: Int) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(microseconds) / 1_000_000))
    }
}
