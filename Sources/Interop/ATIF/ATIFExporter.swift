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
        let run = try ExportedRun(log: path, keepsConversation: false)
        let started = run.started
        var steps: [JSONValue] = [
            Self.object([
                ("step_id", 1), ("timestamp", .string(Self.iso(run.startUs))), ("source", "user"), ("message", .string(started.goal)),
            ])
        ]
        // A conversation's later user turns come between the decisions, in the log's order.
        var turns = run.laterTurns[...]
        func userSteps(before sequence: Int) {
            while let next = turns.first, next.event.sequence < sequence {
                turns = turns.dropFirst()
                var step: [(String, JSONValue)] = [
                    ("step_id", .int(steps.count + 1)), ("timestamp", .string(Self.iso(next.event.timeUs))), ("source", "user"),
                    ("message", .string(next.turn.text)),
                ]
                // A turn that ends the conversation says so, for the importer to end it the same way.
                if let ends = next.turn.ends { step.append(("extra", ["agent_eval": ["ends": .string(ends.rawValue)]])) }
                steps.append(Self.object(step))
            }
        }
        for decision in run.decisions {
            userSteps(before: decision.event.sequence)
            let made = decision.made
            var step: [(String, JSONValue)] = [
                ("step_id", .int(steps.count + 1)), ("timestamp", .string(Self.iso(decision.event.timeUs))), ("source", "agent"),
                ("model_name", .string(started.model.name)),
            ]
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
                                let arguments: JSONValue = call.arguments.objectValue != nil ? call.arguments : ["input": call.arguments]
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
            if let usage = made.usage { metrics += [("prompt_tokens", .int(usage.input)), ("completion_tokens", .int(usage.output))] }
            if let cost = made.costUSD { metrics.append(("cost_usd", .double(cost))) }
            if !metrics.isEmpty { step.append(("metrics", Self.object(metrics))) }
            // The results given back before the next decision, the last attempt of each standing.
            let results: [JSONValue] = decision.results.map { completed in
                var result: [(String, JSONValue)] = [
                    ("source_call_id", .string(completed.callId)), ("content", .string(run.text(of: completed))),
                ]
                if completed.status != .ok {
                    var extra = ObjectBuilder()
                    extra.set("status", completed.status.rawValue)
                    extra.set("error", completed.error)
                    result.append(("extra", extra.json))
                }
                return Self.object(result)
            }
            if !results.isEmpty { step.append(("observation", ["results": .array(results)])) }
            steps.append(Self.object(step))
        }
        userSteps(before: Int.max)
        let verdicts: [JSONValue] = run.verdicts.map { verdict in
            ["call_id": .string(verdict.callId), "tool": .string(verdict.tool), "verdict": .string(verdict.verdict.rawValue)]
        }
        let stop = run.stop?.stopped
        let first = (runId: run.runId, timeUs: run.startUs)
        let totals = (input: run.usage.input, output: run.usage.output, cost: run.costUSD ?? 0, hasCost: run.costUSD != nil)
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
