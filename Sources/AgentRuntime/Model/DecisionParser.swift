public import TraceCore

/// Turns a model's raw reply into a typed decision, or says precisely why it is not one.
///
/// The reply is one JSON object with exactly one of:
/// - `{"answer": "text"}`
/// - `{"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1"}}, …]}`
/// - `{"ask_human": "question"}`
/// - `{"stop": "reason"}` (or `{"stop": {"reason": "…"}}`)
///
/// A reply wrapped in a Markdown code fence is unwrapped first. Tool call ids are assigned
/// by the runtime (`call-1`, `call-2`… in proposal order over the run), never taken from the
/// model, so they are stable under replay.
public struct DecisionParser: Sendable {
    public var tools: ToolRegistry

    public init(tools: ToolRegistry) {
        self.tools = tools
    }

    /// Parses `raw`; `nextCallNumber` is the number the first proposed call gets. `format`
    /// names a provider's message shape (`ReplyFormat`); nil means the decision object above.
    public func parse(_ raw: String, format: String? = nil, nextCallNumber: Int) -> DecisionMade.Outcome {
        guard let format else { return parseDecisionText(raw, nextCallNumber: nextCallNumber) }
        guard let known = ReplyFormat(rawValue: format) else {
            let formats = ReplyFormat.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            return .invalid(
                InvalidDecision(kind: .unparseable, message: "the reply's format \"\(format)\" is not one this version reads (\(formats))"))
        }
        switch known.decisionObject(from: raw) {
        case .decision(let object): return parse(decisionObject: object, nextCallNumber: nextCallNumber)
        case .rejected(let invalid): return .invalid(invalid)
        }
    }

    private func parseDecisionText(_ raw: String, nextCallNumber: Int) -> DecisionMade.Outcome {
        let text = Self.unfenced(raw)
        if text.allSatisfy(\.isWhitespace) {
            return .invalid(InvalidDecision(kind: .empty, message: "the reply is empty"))
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(text.utf8))
        } catch {
            let preview = text.count > 60 ? String(text.prefix(60)) + "…" : text
            return .invalid(
                InvalidDecision(kind: .unparseable, message: "the reply is not JSON (\(error)): \"\(preview)\""))
        }
        return parse(decisionObject: value, nextCallNumber: nextCallNumber)
    }

    /// Validates a decision object: exactly one form, known tools, arguments that fit.
    private func parse(decisionObject value: JSONValue, nextCallNumber: Int) -> DecisionMade.Outcome {
        guard let object = value.objectValue else {
            return .invalid(InvalidDecision(kind: .unparseable, message: "the reply must be a JSON object, found \(value.typeDescription)"))
        }
        if value.nests(deeperThan: JSONValue.recordableDepth) {
            return .invalid(
                InvalidDecision(
                    kind: .unparseable, message: "the reply nests deeper than \(JSONValue.recordableDepth) levels, more than a log can hold"
                ))
        }
        let forms = ["answer", "tool_calls", "ask_human", "stop"].filter { object[$0] != nil }
        if forms.count > 1 {
            return .invalid(
                InvalidDecision(
                    kind: .contradictory,
                    message: "the reply has \(forms.map { "\"\($0)\"" }.joined(separator: " and ")); a decision is exactly one of them"))
        }
        guard let form = forms.first else {
            if object.isEmpty { return .invalid(InvalidDecision(kind: .empty, message: "the reply is an empty object")) }
            return .invalid(
                InvalidDecision(
                    kind: .unparseable,
                    message: "the reply has none of \"answer\", \"tool_calls\", \"ask_human\", \"stop\" (it has "
                        + object.keys.map { "\"\($0)\"" }.joined(separator: ", ") + ")"))
        }
        for key in object.keys where key != form {
            return .invalid(
                InvalidDecision(kind: .unparseable, message: "the reply has an unexpected member \"\(key)\" beside \"\(form)\""))
        }
        let body = object[form] ?? .null
        switch form {
        case "answer", "ask_human":
            guard let text = body.stringValue else {
                return .invalid(InvalidDecision(kind: .unparseable, message: "\"\(form)\" must be a string, found \(body.typeDescription)"))
            }
            guard !text.allSatisfy(\.isWhitespace) else {
                return .invalid(InvalidDecision(kind: .empty, message: "\"\(form)\" is empty"))
            }
            return .valid(form == "answer" ? .answer(text) : .askHuman(text))
        case "stop":
            if let reason = body.stringValue ?? body["reason"]?.stringValue { return .valid(.stop(reason: reason)) }
            return .invalid(InvalidDecision(kind: .unparseable, message: "\"stop\" must be a reason string or {\"reason\": …}"))
        default:
            return parseCalls(body, nextCallNumber: nextCallNumber)
        }
    }

    private func parseCalls(_ body: JSONValue, nextCallNumber: Int) -> DecisionMade.Outcome {
        guard let items = body.arrayValue else {
            return .invalid(InvalidDecision(kind: .unparseable, message: "\"tool_calls\" must be a list, found \(body.typeDescription)"))
        }
        guard !items.isEmpty else { return .invalid(InvalidDecision(kind: .empty, message: "\"tool_calls\" is an empty list")) }
        var calls: [ToolCall] = []
        for (index, item) in items.enumerated() {
            let place = "tool_calls[\(index)]"
            guard let object = item.objectValue else {
                return .invalid(InvalidDecision(kind: .unparseable, message: "\(place) must be an object, found \(item.typeDescription)"))
            }
            guard let name = object["name"]?.stringValue else {
                return .invalid(InvalidDecision(kind: .unparseable, message: "\(place) has no \"name\" string"))
            }
            guard let tool = tools[name] else {
                let known = tools.names.map { "\"\($0)\"" }.joined(separator: ", ")
                return .invalid(
                    InvalidDecision(
                        kind: .unknownTool, message: "\(place) calls \"\(name)\", which is not a tool of this agent (tools: \(known))"))
            }
            let arguments = object["arguments"] ?? .object(JSONObject())
            if let problem = tool.schema.violation(of: arguments, root: "arguments") {
                return .invalid(InvalidDecision(kind: .invalidArguments, message: "\(place) (\(name)): \(problem)"))
            }
            calls.append(ToolCall(id: "call-\(nextCallNumber + index)", name: name, arguments: arguments))
        }
        return .valid(.toolCalls(calls))
    }

    /// The text inside a Markdown code fence, or the text itself.
    static func unfenced(_ raw: String) -> String {
        let trimmed = raw.trimmingWhitespace()
        guard trimmed.hasPrefix("```"), trimmed.hasSuffix("```"), trimmed.count >= 6 else { return raw }
        var inner = trimmed.dropFirst(3).dropLast(3)
        if let newline = inner.firstIndex(of: "\n") {
            let language = inner[..<newline]
            if language.allSatisfy({ $0.isLetter }) { inner = inner[inner.index(after: newline)...] }
        }
        return String(inner)
    }
}

extension String {
    func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
