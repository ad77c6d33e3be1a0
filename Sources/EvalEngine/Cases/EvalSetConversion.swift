import AgentRuntime
import Foundation
public import TraceCore
import TraceLog

/// Google ADK's eval sets as agent-eval cases (`agent-eval case from-evalset`): an EvalSet JSON
/// file (`eval_cases` → `conversation` → invocations, in snake_case or the camelCase ADK's models
/// also write), or ADK's older test file (a list of `{query, expected_tool_use, reference}`).
///
/// Each single-turn eval case becomes one case file: the user's text as `input`, the expected tool
/// uses as a `sequence` in the matching mode ADK's `tool_trajectory_avg_score` uses (`EXACT` →
/// `strict`, `IN_ORDER` → `in_order`, `ANY_ORDER` → `superset`), each call's arguments matched
/// exactly, and the expected final response as `answer.similarTo` at ADK's `response_match_score`
/// threshold (ROUGE-1). A conversation of several invocations (a multi-turn case) becomes a
/// conversation case (docs/conversations.md): a scripted user says each invocation's text in its
/// turn, the tool uses are checked per turn (`turns:`), and the last final response is the
/// answer's reference. An eval case given as a `conversation_scenario` (a starting prompt, a
/// conversation plan and a persona for ADK's user simulator) becomes a conversation case whose user
/// is a model (`--user-model`): the prompt its opening, the plan its task, the persona who it is.
/// A command runs a conversation with its user's turns on its standard input (`{input}` dropped).
public enum EvalSetConversion {
    /// ADK's `conversation_scenario`: what its LLM-backed user simulator plays.
    public struct Scenario: Sendable {
        /// The user's fixed first message.
        public var startingPrompt: String
        /// What the user is to get done, in order.
        public var plan: String
        /// Who the user is: ADK's persona's description and its behaviours' instructions (or a
        /// prebuilt persona's id, when the file gives only that).
        public var persona: String?
    }

    /// One invocation: what the user said, the tools the agent should use, what it should answer.
    public struct Invocation: Sendable {
        public var input: String
        public var toolUses: [(name: String, arguments: JSONValue)]
        public var finalResponse: String?
    }

    /// One eval case read from the file.
    public struct ReadCase: Sendable {
        public var id: String
        /// One for a single-turn case; a conversation's in order; none for a scenario.
        public var invocations: [Invocation]
        /// The scenario a simulated user plays, for an eval case given as one.
        public var scenario: Scenario?

        public init(id: String, input: String, toolUses: [(name: String, arguments: JSONValue)], finalResponse: String?) {
            self.init(id: id, invocations: [Invocation(input: input, toolUses: toolUses, finalResponse: finalResponse)])
        }

        public init(id: String, invocations: [Invocation]) {
            self.id = id
            self.invocations = invocations
        }

        public var input: String { invocations.first?.input ?? "" }
        public var toolUses: [(name: String, arguments: JSONValue)] { invocations.first?.toolUses ?? [] }
        public var finalResponse: String? { invocations.first?.finalResponse }
        public var isConversation: Bool { invocations.count > 1 || scenario != nil }
    }

    /// Why `read` cannot become a case run by `runner` with `userModel` playing a scenario's user;
    /// nil when it can.
    public static func problem(_ read: ReadCase, runner: Runner, userModel: String?, path: String) -> EvalError? {
        if read.scenario != nil, userModel == nil {
            return EvalError(
                .unreadableInput,
                "eval case \"\(read.id)\" is a conversation scenario, whose user a model plays, and no --user-model is given; it is left out",
                location: SourceLocation(path: path),
                hint: "give the model that plays the user: --user-model openai:gpt-4.1-mini (any model an agent file's model: takes)")
        }
        if read.isConversation, case .command(let words) = runner, words.contains(where: { $0 != "{input}" && $0.contains("{input}") }) {
            return EvalError(
                .unreadableInput,
                "eval case \"\(read.id)\" is a conversation, whose turns come on the command's standard input, and the command puts "
                    + "{input} inside a word; it is left out", location: SourceLocation(path: path),
                hint: "give {input} as a word of its own (it is dropped for conversations), or convert with --agent AGENT.yaml")
        }
        return nil
    }

    /// How ADK's trajectory criterion matches tool uses.
    public enum Match: String, Sendable, CaseIterable {
        case exact
        case inOrder = "in_order"
        case anyOrder = "any_order"

        var sequenceMode: String {
            switch self {
            case .exact: "strict"
            case .inOrder: "in_order"
            case .anyOrder: "superset"
            }
        }
    }

    /// How the cases run their agent.
    public enum Runner: Sendable {
        /// `agent: PATH` (relative to the case file).
        case agent(String)
        /// `command: [...]`, `{input}` where the input goes.
        case command([String])
    }

    /// The eval set's id, and each eval case read or why it is left out.
    public static func read(_ path: String) throws(EvalError) -> (setId: String, cases: [Result<ReadCase, EvalError>]) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        } catch let error as TraceCoreError {
            throw EvalError(.unreadableInput, "\(path) is not valid JSON: \(error.message)", location: SourceLocation(path: path))
        } catch {
            throw EvalError(
                .unreadableInput, "cannot read \(path): \(FileProblem.reading(path) ?? FileProblem.reason(of: error))",
                location: SourceLocation(path: path))
        }
        // `shop.test.json`, `shop.evalset.json`: the name is `shop`.
        var stem = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        for suffix in [".test", ".evalset"] where stem.hasSuffix(suffix) { stem = String(stem.dropLast(suffix.count)) }
        if let list = value.arrayValue {
            // The older test file: one invocation a row.
            return (
                stem,
                list.enumerated().map { index, row in
                    guard let query = row["query"]?.stringValue else {
                        return .failure(
                            EvalError(.unreadableInput, "\(path): row \(index + 1) has no \"query\"", location: SourceLocation(path: path)))
                    }
                    let uses = (row["expected_tool_use"]?.arrayValue ?? []).map { use in
                        (use["tool_name"]?.stringValue ?? "", use["tool_input"] ?? [:])
                    }
                    let reference = row["reference"]?.stringValue
                    return .success(
                        ReadCase(
                            id: "\(stem)-\(index + 1)", input: query, toolUses: uses,
                            finalResponse: reference?.isEmpty == true ? nil : reference))
                }
            )
        }
        guard let cases = field(value, "eval_cases", "evalCases")?.arrayValue else {
            throw EvalError(
                .unreadableInput, "\(path) is not an ADK eval set: it has no \"eval_cases\" (or \"evalCases\") list",
                location: SourceLocation(path: path),
                hint: "give an EvalSet file (…evalset.json) or an ADK test file (a list of {query, expected_tool_use, reference})")
        }
        let setId = field(value, "eval_set_id", "evalSetId")?.stringValue ?? stem
        return (
            setId,
            cases.enumerated().map { index, item in
                let id = field(item, "eval_id", "evalId")?.stringValue ?? "\(setId)-\(index + 1)"
                if let scenario = field(item, "conversation_scenario", "conversationScenario"), scenario != .null {
                    guard let prompt = field(scenario, "starting_prompt", "startingPrompt")?.stringValue, !prompt.isEmpty,
                        let plan = field(scenario, "conversation_plan", "conversationPlan")?.stringValue, !plan.isEmpty
                    else {
                        return .failure(
                            EvalError(
                                .unreadableInput,
                                "eval case \"\(id)\" has a conversation_scenario without a starting_prompt and a conversation_plan; "
                                    + "it is left out", location: SourceLocation(path: path)))
                    }
                    var read = ReadCase(id: id, invocations: [])
                    read.scenario = Scenario(
                        startingPrompt: prompt, plan: plan, persona: persona(field(scenario, "user_persona", "userPersona")))
                    return .success(read)
                }
                let conversation = field(item, "conversation")?.arrayValue ?? []
                guard !conversation.isEmpty else {
                    return .failure(
                        EvalError(
                            .unreadableInput, "eval case \"\(id)\" has neither a conversation nor a conversation_scenario; it is left out",
                            location: SourceLocation(path: path)))
                }
                return .success(ReadCase(id: id, invocations: conversation.map(Self.invocation)))
            }
        )
    }

    /// ADK's user persona as one text: its description, then its behaviours' instructions (ADK's
    /// `{{ stop_signal }}` as the stop token agent-eval's user says); a prebuilt persona's id as it is.
    static func persona(_ value: JSONValue?) -> String? {
        guard let value, value != .null else { return nil }
        if let id = value.stringValue { return id.isEmpty ? nil : "ADK's prebuilt persona \(id)" }
        var parts: [String] = []
        if let description = value["description"]?.stringValue, !description.isEmpty { parts.append(description) }
        for behavior in value["behaviors"]?.arrayValue ?? [] {
            let instructions = field(behavior, "behavior_instructions", "behaviorInstructions")?.arrayValue ?? []
            parts += instructions.compactMap(\.stringValue)
        }
        let text = parts.joined(separator: " ")
            .replacingOccurrences(of: "{{ stop_signal }}", with: UserTurn.Ending.tokens[0].token)
            .replacingOccurrences(of: "`###STOP###`", with: UserTurn.Ending.tokens[0].token)
        return text.isEmpty ? (value["id"]?.stringValue).map { "ADK's prebuilt persona \($0)" } : text
    }

    /// One invocation of an eval case's conversation.
    static func invocation(_ invocation: JSONValue) -> Invocation {
        let input = text(of: field(invocation, "user_content", "userContent"))
        let intermediate = field(invocation, "intermediate_data", "intermediateData")
        var uses = (intermediate.flatMap { field($0, "tool_uses", "toolUses") }?.arrayValue ?? []).map { use in
            (name: use["name"]?.stringValue ?? "", arguments: use["args"] ?? [:])
        }
        // ADK's other form: the invocation's events, whose parts hold the function calls.
        for event in intermediate.flatMap({ field($0, "invocation_events", "invocationEvents") })?.arrayValue ?? [] {
            for part in event["content"]?["parts"]?.arrayValue ?? [] {
                guard let call = field(part, "function_call", "functionCall") else { continue }
                uses.append((call["name"]?.stringValue ?? "", call["args"] ?? [:]))
            }
        }
        let response = field(invocation, "final_response", "finalResponse").map(text(of:))
        return Invocation(input: input, toolUses: uses, finalResponse: response?.isEmpty == true ? nil : response)
    }

    /// A member by its snake_case name or its camelCase one.
    static func field(_ value: JSONValue, _ snake: String, _ camel: String? = nil) -> JSONValue? {
        value[snake] ?? camel.flatMap { value[$0] }
    }

    /// The text parts of a `Content` (`{parts: [{text}], role}`), joined.
    static func text(of content: JSONValue?) -> String {
        (content?["parts"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue }.joined(separator: "\n")
    }

    /// A case id from an eval id: letters, digits, `-`, `_`, `.` and `:` kept, the rest `-`.
    public static func caseId(_ id: String) -> String {
        let kept = String(id.map { $0.isLetter || $0.isNumber || "-_.:".contains($0) ? $0 : "-" })
        guard kept.utf8.count > maxCaseIdBytes else { return kept.isEmpty ? "case" : kept }
        // Too long for a file name (255 bytes on most file systems, with `.yaml` and a number
        // after it): its start, and 8 hex digits of the whole eval id's SHA-256, so two long ids
        // that share a start stay two cases.
        let digest = String(ContentHash.sha256(Array(id.utf8)).dropFirst("sha256:".count).prefix(8))
        var start = ""
        for character in kept {
            if start.utf8.count + character.utf8.count > maxCaseIdBytes - digest.count - 1 { break }
            start.append(character)
        }
        return start + "-" + digest
    }

    /// The longest case id made from an eval id, in UTF-8 bytes: its file name (`ID.yaml`, or
    /// `ID-2.yaml` for a second id that cleans to the same) stays well under 255.
    public static let maxCaseIdBytes = 120

    /// The case file's text.
    /// `caseId` names the case (unique in the directory written); by default the eval id's.
    public static func yaml(
        for read: ReadCase, setId: String, source: String, runner: Runner, match: Match, responseThreshold: Double, caseId: String? = nil,
        userModel: String? = nil
    ) -> String {
        /// A YAML double-quoted scalar: JSON's escapes, and every character outside printable
        /// ASCII as `\uXXXX` (YAML reads U+0085, U+2028 and U+2029 as line breaks, and refuses
        /// some controls raw).
        func quoted(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case " "..."~": out.unicodeScalars.append(scalar)
                default:
                    out += scalar.value > 0xFFFF ? String(format: "\\U%08X", scalar.value) : String(format: "\\u%04X", scalar.value)
                }
            }
            return out + "\""
        }
        /// Text for a comment line: on one line.
        func plain(_ text: String) -> String { String(text.map { $0.isNewline ? " " : $0 }) }
        var lines =
            read.scenario == nil
            ? [
                "# From the ADK eval set \"\(plain(setId))\" (\(plain(source))), eval case \"\(plain(read.id))\": tool uses matched "
                    + "\(match.rawValue.uppercased()),",
                "# the final response by word overlap (ROUGE-1) of at least \(responseThreshold), as ADK's default criteria do.",
            ]
            : [
                "# From the ADK eval set \"\(plain(setId))\" (\(plain(source))), eval case \"\(plain(read.id))\": a conversation scenario",
                "# for ADK's user simulator, played here by the user's model; it passes when the user ends it done (###STOP###).",
            ]
        lines.append("caseId: \(quoted(caseId ?? Self.caseId(read.id)))")
        switch runner {
        case .agent(let path): lines.append("agent: \(quoted(path))")
        case .command(let words) where read.isConversation:
            lines.append("# The program reads the user's turns on its standard input, one line each (docs/conversations.md).")
            lines.append("command: [\(words.filter { $0 != "{input}" }.map(quoted).joined(separator: ", "))]")
        case .command(let words): lines.append("command: [\(words.map(quoted).joined(separator: ", "))]")
        }
        if let scenario = read.scenario {
            return (lines + scenarioLines(scenario, userModel: userModel ?? "", quoted: quoted)).joined(separator: "\n") + "\n"
        }
        if read.isConversation {
            return (lines + conversationLines(read, match: match, responseThreshold: responseThreshold, quoted: quoted, plain: plain))
                .joined(separator: "\n") + "\n"
        }
        lines.append("input: \(quoted(read.input))")
        lines.append("expected:")
        if read.toolUses.isEmpty {
            if match == .exact || read.finalResponse == nil { lines.append("  maxToolCalls: 0") }
        } else {
            lines.append("  sequence:")
            lines.append("    mode: \(match.sequenceMode)")
            lines.append("    calls:")
            for use in read.toolUses {
                let arguments: JSONValue = ["mode": "exact", "match": use.arguments]
                lines.append("      - {tool: \(quoted(use.name)), arguments: \(JSONWriter.encodeString(arguments))}")
            }
        }
        if let response = read.finalResponse {
            lines.append("  answer: {similarTo: \(quoted(response)), min: \(responseThreshold)}")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A scenario's user, played by `userModel`: the starting prompt its opening, the plan its
    /// task, ADK's persona who it is; the case passes when the user ends the conversation
    /// satisfied (`user_stop`), as ADK's simulator ends it when the plan is done.
    static func scenarioLines(_ scenario: Scenario, userModel: String, quoted: (String) -> String) -> [String] {
        [
            "user:",
            "  persona: \(quoted(scenario.persona ?? "A user following the conversation plan of ADK's scenario."))",
            "  scenario:",
            "    task: \(quoted(scenario.plan))",
            "  opening: \(quoted(scenario.startingPrompt))",
            "  model: \(quoted(userModel))",
            "  maxTurns: \(Conversation.defaultMaxTurns)",
            "# Record the user's and the agent's model calls once (--record new) to replay the conversation offline:",
            "# cassette: cassettes/NAME",
            "expected:",
            "  stopReason: user_stop",
        ]
    }

    /// A conversation case's user and expectations: the user says each invocation's text in its
    /// turn and ends after the last is answered; each turn's tool uses are that turn's sequence;
    /// the last final response is the answer's reference (the earlier ones, as comments).
    static func conversationLines(
        _ read: ReadCase, match: Match, responseThreshold: Double, quoted: (String) -> String, plain: (String) -> String
    ) -> [String] {
        let count = read.invocations.count
        var lines = [
            "user:", "  persona: The user of ADK's eval case, saying each invocation's text in turn.", "  opening: \(quoted(read.input))",
        ]
        lines.append("  script:")
        for (index, invocation) in read.invocations.enumerated().dropFirst() {
            lines.append("    - {after: {turn: \(index + 1)}, say: \(quoted(invocation.input))}")
        }
        lines.append("    - {after: {turn: \(count + 1)}, say: \"\", end: user_stop}   # every invocation answered")
        lines.append("  maxTurns: \(count + 1)")
        lines.append("expected:")
        lines.append("  stopReason: user_stop")
        var turns: [String] = []
        for (index, invocation) in read.invocations.enumerated() {
            if invocation.toolUses.isEmpty {
                if match == .exact || invocation.finalResponse == nil { turns.append("    \(index + 1): {maxToolCalls: 0}") }
                continue
            }
            let calls = invocation.toolUses.map { use -> String in
                let arguments: JSONValue = ["mode": "exact", "match": use.arguments]
                return "{tool: \(quoted(use.name)), arguments: \(JSONWriter.encodeString(arguments))}"
            }
            turns.append("    \(index + 1): {sequence: {mode: \(match.sequenceMode), calls: [\(calls.joined(separator: ", "))]}}")
        }
        // An empty `turns:` would read as null: only turns that expect something.
        if !turns.isEmpty { lines += ["  turns:"] + turns }
        for (index, invocation) in read.invocations.enumerated().dropLast() {
            if let response = invocation.finalResponse { lines.append("  # turn \(index + 1)'s reference answer: \(plain(response))") }
        }
        if let response = read.invocations.last?.finalResponse {
            lines.append("  answer: {similarTo: \(quoted(response)), min: \(responseThreshold)}")
        }
        return lines
    }
}
