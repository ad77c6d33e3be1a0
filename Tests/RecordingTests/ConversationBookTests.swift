import ModelClients
import Testing
import TraceCore

@testable import Recording

/// The recorder's conversation rule (`ConversationBook`), as a value: which conversation a
/// request continues — the one whose call's result it carries, else one with its opening and
/// fewer messages — and how many are kept.
@Suite("Conversation book")
struct ConversationBookTests {
    /// An OpenAI chat request: a system prompt, a first user message, then `more` messages; a
    /// tool message for each id in `results`.
    static func request(system: String, user: String, more: [JSONValue] = [], results: [String] = []) -> ModelRequestView {
        var messages: [JSONValue] = [["role": "system", "content": .string(system)], ["role": "user", "content": .string(user)]]
        messages += more
        for id in results {
            messages.append([
                "role": "assistant", "content": .null,
                "tool_calls": [["id": .string(id), "type": "function", "function": ["name": "lookup", "arguments": "{}"]]],
            ])
            messages.append(["role": "tool", "tool_call_id": .string(id), "content": "ok"])
        }
        return ModelRequestView(api: .openAIChat, body: ["model": "m", "messages": .array(messages)])
    }

    /// Marks `id` as a call that conversation `number` proposed and that is still open.
    static func open(_ id: String, in number: Int, _ book: inout ConversationBook) {
        book.openCallOwner[id, default: []].append(number)
        book.conversations[number]?.openCalls[id] = (logId: id, tool: "lookup", atUs: 0)
    }

    @Test(
        "which conversation is the agent's talk with the user: the first, or one opening with what the user said — not a guardrail's question about it, nor a request for an answer in a schema"
    )
    func userTalk() {
        let said: Set<String> = ["hi, my order arrived broken"]
        func talks(_ number: Int, _ view: ModelRequestView) -> Bool {
            ExchangeRecorder.isUserTalk(
                number: number, goal: number == 1 ? "hi, my order arrived broken" : view.firstUserText ?? "", view: view, said: said)
        }
        let agent = Self.request(system: "You are a support agent.", user: "hi, my order arrived broken")
        #expect(talks(1, agent) && talks(2, agent))
        // A program that words the turn otherwise in its first conversation, or wraps it in a template.
        #expect(talks(1, Self.request(system: "s", user: "HI, MY ORDER ARRIVED BROKEN")))
        #expect(
            talks(
                2,
                Self.request(
                    system: "s", user: "hi, my order arrived broken",
                    more: [["role": "user", "content": "Customer: hi, my order arrived broken"]])))
        // A guardrail's chat: the user's words, then its own question about them.
        let guardrail = Self.request(
            system: "", user: "hi, my order arrived broken", more: [["role": "user", "content": "Is the message above safe?"]])
        #expect(!talks(1, guardrail) && !talks(2, guardrail))
        // An answer asked for in a JSON schema (the OpenAI Agents SDK's guardrail agent), in each API.
        let schemas: [(ModelAPI, String, JSONValue)] = [
            (.openAIChat, "response_format", ["type": "json_schema", "json_schema": ["name": "v"]]),
            (.openAIResponses, "text", ["format": ["type": "json_schema", "name": "v"]]),
            (.anthropicMessages, "output_format", ["type": "json_schema"]),
        ]
        for (api, key, format) in schemas {
            var request = JSONObject()
            request[key] = format
            request["model"] = "m"
            if api == .openAIResponses {
                request["input"] = "hi, my order arrived broken"
            } else {
                request["messages"] = [["role": "user", "content": "hi, my order arrived broken"]]
            }
            let view = ModelRequestView(api: api, body: .object(request))
            #expect(view.answersInSchema, "\(api)")
            #expect(!talks(1, view), "\(api)")
        }
        // A conversation that offers tools is the agent's, whatever format it asks for or reminds
        // its model of (an agent with structured output, a reminder after the user's words).
        let tool: JSONValue = ["type": "function", "function": ["name": "lookup_order", "parameters": ["type": "object"]]]
        for extra in [("response_format", ["type": "json_schema"] as JSONValue), ("messages", .null)] {
            var request = JSONObject()
            request["model"] = "m"
            request["tools"] = .array([tool])
            request["messages"] = [
                ["role": "user", "content": "hi, my order arrived broken"], ["role": "user", "content": "(Reminder: be brief.)"],
            ]
            if extra.0 == "response_format" { request[extra.0] = extra.1 }
            #expect(talks(1, ModelRequestView(api: .openAIChat, body: .object(request))), "\(extra.0)")
        }
        // A chat that does not open with the user's words is a side conversation, as before.
        #expect(!talks(2, Self.request(system: "notes", user: "Write the note on the conversation so far.")))
    }

    @Test("the same opening with more messages continues a conversation; another opening begins one; the first takes the run's goal")
    func openings() {
        var book = ConversationBook()
        let first = book.assign(Self.request(system: "s", user: "refund A-1"), runGoal: "the goal", maxKept: 10)
        book.conversations[first]?.lastMessageCount = 2
        let again = book.assign(
            Self.request(
                system: "s", user: "refund A-1", more: [["role": "assistant", "content": "ok"], ["role": "user", "content": "?"]]),
            runGoal: "the goal", maxKept: 10)
        let other = book.assign(Self.request(system: "sub-agent", user: "summarise"), runGoal: "the goal", maxKept: 10)
        #expect(first == 1 && again == 1 && other == 2)
        #expect(book.conversations[1]?.goal == "the goal" && book.conversations[2]?.goal == "summarise")
        #expect(book.count == 2)
    }

    @Test("a request carrying a call's result continues the conversation that proposed it, the newest owner of a reused id first")
    func results() {
        var book = ConversationBook()
        _ = book.assign(Self.request(system: "a", user: "x"), runGoal: nil, maxKept: 10)
        _ = book.assign(Self.request(system: "b", user: "y"), runGoal: nil, maxKept: 10)
        Self.open("call_7", in: 2, &book)
        // Its opening is the first conversation's, but it carries the second's call.
        #expect(book.assign(Self.request(system: "a", user: "x", results: ["call_7"]), runGoal: nil, maxKept: 10) == 2)
        // `call_1`, reused by both: the newest owner.
        Self.open("call_1", in: 1, &book)
        Self.open("call_1", in: 2, &book)
        #expect(book.assign(Self.request(system: "c", user: "z", results: ["call_1"]), runGoal: nil, maxKept: 10) == 2)
    }

    @Test("past maxKept the conversation answered longest ago with no open call is forgotten; one with an open call is kept")
    func bounded() {
        var book = ConversationBook()
        for (index, user) in ["one", "two"].enumerated() {
            let number = book.assign(Self.request(system: "s", user: user), runGoal: nil, maxKept: 2)
            book.conversations[number]?.lastAnswered = index + 1
        }
        Self.open("call_1", in: 1, &book)
        let third = book.assign(Self.request(system: "s", user: "three"), runGoal: nil, maxKept: 2)
        #expect(third == 3)
        #expect(Set(book.conversations.keys) == [1, 3], "the second, answered longest ago with no call open, is forgotten")
        #expect(book.byOpening["s\u{0}two"] == nil)
        // A request continuing the forgotten one begins a new conversation.
        #expect(book.assign(Self.request(system: "s", user: "two"), runGoal: nil, maxKept: 2) == 4)
    }
}
