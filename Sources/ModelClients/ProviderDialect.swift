import AgentRuntime
import TraceCore

/// What one provider's wire protocol needs: where requests go, their headers and body, and
/// how a reply (streamed or whole) is assembled into the recorded message.
protocol ProviderDialect: Sendable {
    var format: ReplyFormat { get }
    /// Appended to the base URL.
    var path: String { get }
    /// Headers besides `content-type`; `apiKey` is nil when no key is configured.
    func headers(apiKey: String?) -> [HTTPHeader]
    func body(for request: ModelRequest, settings: ModelSettings) -> JSONValue
    func makeAssembler() -> any ReplyAssembler
}

/// Builds one reply from a stream's events or a whole JSON body.
protocol ReplyAssembler: Sendable {
    /// Takes one streamed event; throws a `StreamProblem` for an `error` event or an event
    /// that is not what the protocol allows.
    mutating func consume(_ event: ServerSentEvent) throws(StreamProblem)
    /// Takes a whole (non-streamed) response body.
    mutating func consume(whole body: JSONValue) throws(StreamProblem)
    /// Content (text or a tool call) has arrived: the time to first token is now.
    var hasContent: Bool { get }
    /// The text of the reply so far (all text blocks, in order): it only grows while a stream
    /// is read, so its new end is what to show an observer.
    var textSoFar: String { get }
    /// The protocol's end marker arrived (`[DONE]`, `message_stop`, a whole body).
    var isComplete: Bool { get }
    /// The reply already says how it ended (a Chat Completions `finish_reason`, a Messages
    /// `stop_reason`), so a stream that then ends cleanly without its end marker is whole as
    /// the provider's SDKs read it: they end at the body's end, and the agent got the reply.
    var hasSaidItsEnd: Bool { get }
    /// The assembled message in the provider's own shape (`ReplyFormat`), and the usage.
    func reply() -> (raw: JSONValue, usage: TokenUsage?)
}

extension ReplyAssembler {
    /// Without a way to say its end but the end marker (the Responses API's `response.completed`
    /// is both), only the marker ends a reply.
    var hasSaidItsEnd: Bool { isComplete }
}

/// A reply stream that went wrong: what the provider or the bytes said, and whether asking
/// again may help.
struct StreamProblem: Error {
    var message: String
    var isRetryable: Bool
}

/// The conversation a request stands for, provider-neutral: the context packet as the first
/// user turn, then per step the calls the model made and what came back, then the feedback
/// on a rejected reply. Call ids are the runtime's (`call-N`), so the request depends only on
/// the log, never on a provider's volatile ids.
struct Conversation {
    enum Turn {
        case user(String)
        /// One step's calls with their observations, in proposal order.
        case calls([Observation])
        /// What the agent said to the user, in a conversation.
        case agent(String)
    }

    var system: String
    var turns: [Turn]

    init(_ request: ModelRequest) {
        system = request.instructions
        var opening: String
        var dialogue = request.dialogue[...]
        if let first = dialogue.first, first.speaker == .user {
            // A conversation opens with what the user said, not with a goal.
            opening = first.text
            dialogue = dialogue.dropFirst()
        } else {
            opening = "Goal: \(request.packet.goal)"
        }
        if !request.packet.stateSummary.isEmpty { opening += "\n\nState: \(request.packet.stateSummary)" }
        for (title, items) in [("Evidence", request.packet.evidence), ("Memory", request.packet.memory)] where !items.isEmpty {
            opening += "\n\n\(title):" + items.map { "\n- \($0.id)" + ($0.summary.map { ": \($0)" } ?? "") }.joined()
        }
        // Per step: the user's turn, then the step's calls, then what the agent said to the user.
        var items: [(step: Int, rank: Int, order: Int, turn: Turn)] = []
        for line in dialogue {
            items.append(
                (line.step, line.speaker == .user ? 0 : 2, items.count, line.speaker == .user ? .user(line.text) : .agent(line.text)))
        }
        var group: [Observation] = []
        for observation in request.observations {
            if let first = group.first, first.step != observation.step {
                items.append((first.step, 1, items.count, .calls(group)))
                group = []
            }
            group.append(observation)
        }
        if let first = group.first { items.append((first.step, 1, items.count, .calls(group))) }
        items.sort { ($0.step, $0.rank, $0.order) < ($1.step, $1.rank, $1.order) }
        turns = [.user(opening)] + items.map(\.turn)
        if let feedback = request.feedback { turns.append(.user(feedback)) }
    }

    /// What a tool result says to the model: status, and output or error, as canonical JSON
    /// written straight to bytes (the output is copied as the result holds it).
    static func resultText(_ observation: Observation) -> String {
        String(decoding: JSONWriter.encode(ResultText(observation: observation)), as: UTF8.self)
    }

    private struct ResultText: JSONObjectEncodable {
        let observation: Observation

        func members(into object: inout some JSONMemberSink) {
            object.set("error", observation.error)
            object.set("output", observation.outputText)
            object.set("status", observation.status)
        }
    }
}

/// Reads the text of one streamed event as JSON.
func parseEventJSON(_ event: ServerSentEvent, provider: String) throws(StreamProblem) -> JSONValue {
    do {
        return try JSONParser.parse(Array(event.data.utf8))
    } catch {
        let preview = event.data.count > 80 ? String(event.data.prefix(80)) + "…" : event.data
        throw StreamProblem(message: "the \(provider) stream sent an event that is not JSON (\(error)): \(preview)", isRetryable: false)
    }
}
