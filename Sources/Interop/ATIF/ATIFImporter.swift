import Foundation
import TraceCore

/// Reads ATIF (the Agent Trajectory Interchange Format, v1.4 and later: Harbor/Terminal-Bench,
/// NVIDIA NeMo Agent Toolkit) into runs (docs/interop.md, "ATIF").
///
/// One `Trajectory` document is one run: its first user step is the goal, each agent step a
/// decision — its `tool_calls` the calls, each with the `observation.results` entry whose
/// `source_call_id` names it as the result; an agent step without tool calls is an answer. Steps
/// copied from an earlier trajectory (`is_copied_context`) are left out, system steps ride along
/// as records. Embedded sub-agent trajectories (`subagent_trajectories`) are runs of their own,
/// and a call whose result refers to one says so in its output. A `continued_trajectory_ref` that
/// names a file beside this one is read as the same run, continued.
struct ATIFImporter {
    let file: SourceFile

    /// The oldest version read.
    static let oldestMinor = 4

    func runs(from document: JSONValue) throws(ImportError) -> [Result<ImportedRun, ImportError>] {
        var documents: [JSONValue] = []
        if let list = document.arrayValue { documents = list } else { documents = [document] }
        var runs: [Result<ImportedRun, ImportError>] = []
        for trajectory in documents {
            runs += self.runs(of: trajectory, parent: nil)
        }
        return runs
    }

    /// The run of a trajectory, then those of its embedded sub-agents.
    private func runs(of trajectory: JSONValue, parent: String?) -> [Result<ImportedRun, ImportError>] {
        var runs = [Result { () throws(ImportError) in try run(trajectory, parent: parent) }]
        let id = trajectory["trajectory_id"]?.stringValue ?? trajectory["session_id"]?.stringValue
        for sub in trajectory["subagent_trajectories"]?.arrayValue ?? [] {
            runs += self.runs(of: sub, parent: id)
        }
        return runs
    }

    static func version(of trajectory: JSONValue) -> (major: Int, minor: Int)? {
        guard let tag = trajectory["schema_version"]?.stringValue, tag.hasPrefix("ATIF-v") else { return nil }
        let parts = tag.dropFirst("ATIF-v".count).split(separator: ".").compactMap { Int($0) }
        guard parts.count >= 2 else { return nil }
        return (parts[0], parts[1])
    }

    private func run(_ trajectory: JSONValue, parent: String?) throws(ImportError) -> ImportedRun {
        let location = SourceLocation(path: file.path)
        guard let version = Self.version(of: trajectory) else {
            throw ImportError(
                .wrongFormat, "\(file.path) is not an ATIF trajectory: no schema_version \"ATIF-vX.Y\"", location: location,
                hint: "ATIF documents start with {\"schema_version\": \"ATIF-v1.8\", \"agent\": …, \"steps\": […]}")
        }
        guard version.major == 1, version.minor >= Self.oldestMinor else {
            throw ImportError(
                .wrongFormat, "\(file.path) is ATIF v\(version.major).\(version.minor); ATIF v1.\(Self.oldestMinor) to v1.8 is read",
                location: location)
        }
        var warnings: [String] = []
        let agent = trajectory["agent"] ?? [:]
        var stepsJSON = trajectory["steps"]?.arrayValue ?? []
        // A continuation (after a summarisation, say) in a file beside this one: the same run.
        var continuation = trajectory["continued_trajectory_ref"]?.stringValue
        let directory = (file.path as NSString).deletingLastPathComponent
        var followed: Set<String> = [(file.path as NSString).lastPathComponent]
        while let reference = continuation {
            // A file beside this one, named by its name: not a path elsewhere.
            guard !reference.contains("/"), !reference.hasPrefix(".") else {
                warnings.append("continued_trajectory_ref \"\(reference)\" names no file beside this one: the run ends here")
                break
            }
            guard followed.insert(reference).inserted else {
                warnings.append("continued_trajectory_ref \"\(reference)\" comes back to a file already read: the run ends here")
                break
            }
            guard let next = try? SourceFile.read((directory as NSString).appendingPathComponent(reference)).json() else {
                warnings.append("continued_trajectory_ref \"\(reference)\" is not a trajectory file beside this one: the run ends here")
                break
            }
            stepsJSON += next["steps"]?.arrayValue ?? []
            continuation = next["continued_trajectory_ref"]?.stringValue
        }
        let defaultModel = agent["model_name"]?.stringValue
        var goal: String?
        /// Every user step's text, with the step it comes before: a conversation's turns.
        var userMessages: [(beforeStep: Int, text: String)] = []
        /// The user messages whose ending agent-eval's export recorded (`extra.agent_eval.ends`).
        var recordedEndings: Set<Int> = []
        var preamble: [JSONValue] = []
        var steps: [ImportedStep] = []
        var ids = CallIds()
        var copied = 0
        var startUs: Int?
        /// The user step the trajectory ends on, after the agent's last: the agent never answered it.
        var endingUserStep: Int?
        for step in stepsJSON {
            if step["is_copied_context"]?.boolValue == true {
                copied += 1
                continue
            }
            let timeUs = step["timestamp"]?.stringValue.flatMap(InspectImporter.isoMicros)
            if startUs == nil { startUs = timeUs }
            let text = Self.text(of: step["message"])
            switch step["source"]?.stringValue {
            case "agent":
                endingUserStep = nil
                var calls: [ImportedCall] = []
                let stepNumber = step["step_id"]?.intValue ?? steps.count + 1
                // A `tool_calls` or `results` that is no list holds calls or results this importer
                // cannot read: an error, never a step without them (which would be an answer).
                for (name, value) in [("tool_calls", step["tool_calls"]), ("observation.results", step["observation"]?["results"])]
                where value != nil && value != .null && value?.arrayValue == nil {
                    throw ImportError(
                        .wrongFormat, "agent step \(stepNumber): \(name) is no list", location: SourceLocation(path: file.path),
                        hint: "ATIF gives each step's tool calls and observation results as lists")
                }
                let results = step["observation"]?["results"]?.arrayValue ?? []
                let toolCalls = step["tool_calls"]?.arrayValue ?? []
                /// The results already given to a call: one result is one call's, never two.
                var used = Set<Int>()
                // Results not tied to a call (source_call_id is optional): one call and one result
                // pair by position; others stay in the step's records, and the import says so.
                let untied = results.filter { $0["source_call_id"]?.stringValue == nil }
                if !untied.isEmpty, !(toolCalls.count == 1 && results.count == 1) {
                    warnings.append(
                        "agent step \(step["step_id"]?.intValue ?? steps.count + 1) has \(counted(untied.count, "observation result")) "
                            + "tied to no tool call (no source_call_id): kept as the step's records, not as results")
                }
                for call in toolCalls {
                    let sourceId = call["tool_call_id"]?.stringValue
                    let (id, isReused) = ids.next(sourceId)
                    if isReused, let sourceId {
                        warnings.append("call id \"\(sourceId)\" is used again; the log names the later call \"\(id)\"")
                    }
                    var imported = ImportedCall(
                        call: ToolCall(id: id, name: call["function_name"]?.stringValue ?? "", arguments: call["arguments"] ?? [:]))
                    if let sourceId,
                        let index = results.indices.first(where: {
                            !used.contains($0) && results[$0]["source_call_id"]?.stringValue == sourceId
                        })
                    {
                        used.insert(index)
                        imported.result = Self.result(results[index], timeUs: timeUs)
                    } else if toolCalls.count == 1, results.count == 1, untied.count == 1 {
                        used.insert(0)
                        imported.result = Self.result(results[0], timeUs: timeUs)
                    }
                    calls.append(imported)
                }
                // A result that names a call the step does not make (or one more than it has
                // results for) belongs to no call: kept as the step's record, and said.
                for (index, result) in results.enumerated() where !used.contains(index) {
                    if let named = result["source_call_id"]?.stringValue {
                        warnings.append(
                            "agent step \(stepNumber) has a result for call \"\(named)\", which no call of the step left unanswered: "
                                + "kept as the step's record, not as a result")
                    }
                }
                let metrics = step["metrics"]
                let usage = metrics.flatMap { metrics -> TokenUsage? in
                    let input = metrics["prompt_tokens"]?.intValue
                    let output = metrics["completion_tokens"]?.intValue
                    guard input != nil || output != nil else { return nil }
                    return TokenUsage(input: input ?? 0, output: output ?? 0)
                }
                steps.append(
                    ImportedStep(
                        decision: calls.isEmpty ? .answer(text) : .calls(calls), raw: step, format: "atif.step", records: [step],
                        usage: usage, costUSD: metrics?["cost_usd"]?.doubleValue, timeUs: timeUs))
            case "user":
                if goal == nil { goal = text }
                if !steps.isEmpty { endingUserStep = step["step_id"]?.intValue ?? steps.count + 1 }
                // agent-eval's export marks a turn that ended the conversation: its stop token, as the user gave it.
                let ending = step["extra"]?["agent_eval"]?["ends"]?.stringValue.flatMap(UserTurn.Ending.init(rawValue:))
                let token = UserTurn.Ending.tokens.first { $0.ending == ending }.map { " " + $0.token } ?? ""
                if ending != nil { recordedEndings.insert(userMessages.count) }
                userMessages.append((steps.count, text + token))
                if steps.isEmpty { preamble.append(step) } else { steps[steps.count - 1].records.append(step) }
            default:
                if steps.isEmpty { preamble.append(step) } else { steps[steps.count - 1].records.append(step) }
            }
        }
        if copied > 0 { warnings.append("\(counted(copied, "step")) copied from an earlier trajectory (is_copied_context) left out") }
        for (index, step) in steps.enumerated() {
            for call in step.calls where call.result == nil {
                warnings.append("call \"\(call.call.id)\" (step \(index + 1)) has no observation result: it counts as proposed, not run")
            }
        }
        var stop = TranscriptImporter.stop(after: steps, finish: nil) as (stopped: RunStopped?, source: String)
        // agent-eval's own export: the stop as it was recorded.
        if let recorded = trajectory["extra"]?["agent_eval"], let reason = recorded["stop_reason"]?.stringValue {
            if reason == "unfinished" {
                stop = (nil, "unfinished")
            } else if let reason = StopReason(rawValue: reason) {
                var answer: String?
                if reason == .success || reason.isConversationEnding, case .answer(let text)? = steps.last?.decision { answer = text }
                stop = (
                    RunStopped(
                        reason: reason, limit: recorded["stop_limit"]?.stringValue.flatMap(LimitKind.init(rawValue:)), answer: answer,
                        error: recorded["stop_error"]?.stringValue),
                    reason.rawValue
                )
            }
        }
        // Ending on the user's turn, which the agent never answered: what it would have done is not
        // in the file, so the run did not finish — unless the turn ends the conversation, or the
        // file is agent-eval's own export, whose recorded stop says how it ended.
        let userTurns = TranscriptImporter.userTurns(userMessages, steps: steps.count, trusted: recordedEndings, warnings: &warnings)
        if let endingUserStep, trajectory["extra"]?["agent_eval"]?["stop_reason"] == nil {
            if let ending = userTurns.last?.turn.ends {
                let answer: String? = if case .answer(let text)? = steps.last?.decision { text } else { nil }
                stop = (RunStopped(reason: ending.stopReason, answer: answer), "the user's \(ending.rawValue) (step \(endingUserStep))")
            } else {
                stop = (nil, TranscriptImporter.userTurnStop)
                warnings.append(
                    "the trajectory ends on a user turn (step \(endingUserStep)), which the agent never answered: "
                        + "the run is imported unfinished (no run_stopped), not as ending on its last reply")
            }
        }
        let id = trajectory["trajectory_id"]?.stringValue ?? trajectory["session_id"]?.stringValue
        var metadata = ObjectBuilder()
        metadata.set("schema_version", trajectory["schema_version"]?.stringValue)
        metadata.set("parent_trajectory", parent)
        metadata.set("notes", trajectory["notes"]?.stringValue)
        let name = agent["name"]?.stringValue ?? TranscriptImporter.agentName(file.path)
        let modelName = stepsJSON.lazy.compactMap { $0["model_name"]?.stringValue }.first ?? defaultModel ?? "unknown"
        return ImportedRun(
            source: RunSource(
                format: ImportFormat.atif.rawValue, file: file.path, id: id, importer: ImportWriter.importer, stop: stop.source,
                metadata: metadata.json),
            goal: goal ?? "", agentName: name, model: ModelIdentity(provider: "unknown", name: modelName),
            tools: ImportedRun.tools(declaredBy: agent["tool_definitions"]?.arrayValue ?? []), preamble: preamble, steps: steps,
            stop: stop.stopped, startUs: startUs ?? file.modifiedUs, warnings: warnings,
            userTurns: userTurns)
    }

    /// A result's content as text: a string, or the text parts of a `ContentPart` list; a
    /// sub-agent reference when that is all there is.
    static func result(_ value: JSONValue, timeUs: Int?) -> ImportedResult {
        if value["content"] == nil || value["content"] == .null, let references = value["subagent_trajectory_ref"]?.arrayValue {
            let named = references.compactMap { $0["trajectory_id"]?.stringValue ?? $0["trajectory_path"]?.stringValue }
            return ImportedResult(status: .ok, output: ["subagent_trajectories": .array(named.map(JSONValue.string))], timeUs: timeUs)
        }
        // agent-eval's export marks a failed result in its `extra`.
        let status = value["extra"]?["status"]?.stringValue.flatMap(ToolStatus.init(rawValue:))
        var result = ImportedResult.fromContent(text(of: value["content"]), isError: status != nil && status != .ok, timeUs: timeUs)
        if let status, status != .ok {
            result.status = status
            if let error = value["extra"]?["error"]?.stringValue { result.error = error }
        }
        return result
    }

    /// A message or content: a string, or the text of a `ContentPart` list (`{type: text, text}`).
    static func text(of value: JSONValue?) -> String {
        if let text = value?.stringValue { return text }
        return (value?.arrayValue ?? []).compactMap { $0["type"]?.stringValue == "text" ? $0["text"]?.stringValue : nil }.joined(
            separator: "\n")
    }
}
