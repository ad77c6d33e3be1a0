import Interop
import ModelClients
import TraceCore

/// What a model request says about the agent's run, read from its body: the conversation's
/// opening (system text and first user message), the tool results it carries, and the tools it
/// discloses. Read the same way for the three APIs (docs/record.md, "What the gateway sees").
struct ModelRequestView {
    /// One tool result the request carries back to the model.
    struct ToolResult {
        /// The call id the result answers (`tool_call_id`, `tool_use_id`, `call_id`).
        var callId: String
        var text: String
        /// The framework marked it as a failure (`is_error`); a failure its text signals is read
        /// when it is recorded (`ImportedResult.fromContent`).
        var isError: Bool
    }

    /// A tool exchange the framework wrote back as text instead of as tool messages
    /// (smolagents): an assistant message that names the call (its id in the text), then the
    /// user message holding the result. Which calls it names is known only to the recorder,
    /// which knows the calls still open.
    struct EchoedExchange {
        var callText: String
        var resultText: String
    }

    var api: ModelAPI
    var model: String
    /// The system prompt or instructions, joined.
    var system: String
    /// The first user message's text: the run's goal.
    var firstUserText: String?
    /// The last user message's text (tool results written back as user messages left out):
    /// what the request asks the model about.
    var lastUserText: String?
    /// The request asks for an answer in a JSON schema or as a JSON object (`response_format`,
    /// the Responses API's `text.format`, Anthropic's `output_format`): a classifier's or an
    /// extractor's question (an input guardrail), not talk with a person.
    var answersInSchema: Bool
    var results: [ToolResult]
    var echoes: [EchoedExchange]
    /// The tools the request discloses, in the request's order.
    var tools: [ToolSpec]
    /// Messages (or input items) in the request.
    var messageCount: Int

    init(api: ModelAPI, body: JSONValue) {
        self.api = api
        model = body["model"]?.stringValue ?? "unknown"
        tools = ImportedRun.tools(declaredBy: body["tools"]?.arrayValue ?? [])
        var system: [String] = []
        var firstUser: String?
        var results: [ToolResult] = []
        var echoes: [EchoedExchange] = []
        var count = 0
        /// The text of an assistant message that carries no tool call of its own, waiting for
        /// the user message after it.
        var pendingEcho: String?
        func echo(_ resultContent: JSONValue?) {
            if let callText = pendingEcho { echoes.append(EchoedExchange(callText: callText, resultText: MessageText.of(resultContent))) }
            pendingEcho = nil
        }
        var lastUser: String?
        func user(_ content: JSONValue?) {
            let text = MessageText.of(content)
            if firstUser == nil { firstUser = text }
            lastUser = text
        }
        switch api {
        case .openAIChat:
            for message in body["messages"]?.arrayValue ?? [] {
                count += 1
                let role = message["role"]?.stringValue
                if role == "user" { echo(message["content"]) }
                pendingEcho =
                    role == "assistant" && (message["tool_calls"]?.arrayValue ?? []).isEmpty
                    ? MessageText.of(message["content"]) : nil
                switch role {
                case "system"?, "developer"?: system.append(MessageText.of(message["content"]))
                case "user"?: user(message["content"])
                case "tool"?, "function"?:
                    let text = MessageText.of(message["content"])
                    results.append(
                        ToolResult(
                            callId: message["tool_call_id"]?.stringValue ?? message["name"]?.stringValue ?? "", text: text,
                            isError: false))
                default: continue
                }
            }
        case .anthropicMessages:
            if let text = body["system"].map(MessageText.of), !text.isEmpty { system.append(text) }
            for message in body["messages"]?.arrayValue ?? [] {
                count += 1
                guard message["role"]?.stringValue == "user" else {
                    let hasCall = (message["content"]?.arrayValue ?? []).contains { $0["type"]?.stringValue == "tool_use" }
                    pendingEcho = hasCall ? nil : MessageText.of(message["content"])
                    continue
                }
                let blocks = message["content"]?.arrayValue ?? []
                let toolResults = blocks.filter { $0["type"]?.stringValue == "tool_result" }
                if toolResults.isEmpty {
                    echo(message["content"])
                    user(message["content"])
                    continue
                }
                pendingEcho = nil
                for block in toolResults {
                    let text = MessageText.of(block["content"])
                    results.append(
                        ToolResult(
                            callId: block["tool_use_id"]?.stringValue ?? "", text: text,
                            isError: block["is_error"]?.boolValue == true))
                }
            }
        case .openAIResponses:
            if let instructions = body["instructions"]?.stringValue, !instructions.isEmpty { system.append(instructions) }
            switch body["input"] {
            case .string(let text)?:
                count = 1
                firstUser = text
                lastUser = text
            case .array(let items)?:
                for item in items {
                    count += 1
                    switch (item["type"]?.stringValue, item["role"]?.stringValue) {
                    case ("function_call_output"?, _):
                        let text = MessageText.of(item["output"])
                        results.append(
                            ToolResult(callId: item["call_id"]?.stringValue ?? "", text: text, isError: false))
                    case (_, "system"?), (_, "developer"?): system.append(MessageText.of(item["content"]))
                    case (_, "user"?): user(item["content"])
                    default: continue
                    }
                }
            default: break
            }
        }
        self.system = system.filter { !$0.isEmpty }.joined(separator: "\n\n")
        firstUserText = firstUser
        lastUserText = lastUser
        let format = body["response_format"]?["type"] ?? body["text"]?["format"]?["type"] ?? body["output_format"]?["type"]
        answersInSchema = format == .string("json_schema") || format == .string("json_object")
        self.results = results
        self.echoes = echoes.filter { !$0.callText.isEmpty }
        messageCount = count
    }

}
