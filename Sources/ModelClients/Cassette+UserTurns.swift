public import AgentRuntime
import Synchronization
public import TraceCore

/// A cassette's recordings of a simulated user's model, by turn (`--user frozen`,
/// docs/conversations.md): each request the user's model was sent holds its instructions (the
/// persona and scenario) and the conversation so far with the roles flipped, so a recording is a
/// turn of the user whose instructions it holds, the turn after the user's own turns it shows.
extension Cassette: RecordedUserTurns {
    public func replies(of settings: ModelSettings, instructions: String, turn: Int) throws -> [RecordedUserReply] {
        let candidates = entries.withLock { entries in
            entries.values.filter { $0.provider == settings.provider.rawValue && $0.model == settings.name }
        }
        var replies: [RecordedUserReply] = []
        for entry in candidates.sorted(by: { $0.file < $1.file }) {
            let recording = try load(entry)
            guard let shown = Self.userTranscript(recording.request, provider: settings.provider), shown.instructions == instructions,
                shown.lines.count { $0.speaker == .agent } == turn - 1
            else { continue }
            var reader = ReplyReader(api: Self.api(of: recording.request, provider: settings.provider))
            reader.take(.head(status: recording.status, headers: [HTTPHeader(name: "content-type", value: recording.contentType)]))
            reader.take(.chunk(recording.body))
            let reply = reader.finish()
            guard let raw = reply.raw else { continue }
            let request = recording.request
            let sampling = SamplingSettings(
                temperature: request["temperature"]?.doubleValue,
                maxTokens: (request["max_tokens"] ?? request["max_output_tokens"])?.intValue,
                seed: request["seed"]?.intValue)
            replies.append(
                RecordedUserReply(
                    sampling: sampling == SamplingSettings() ? nil : sampling, transcript: shown.lines,
                    reply: ModelReply(raw: JSONWriter.encodeString(raw), format: reply.format.rawValue, usage: reply.usage),
                    file: entry.file))
        }
        return replies
    }

    /// The recording of `reply` was replayed: it is used, the other candidates of its turn not.
    public func replayed(_ reply: RecordedUserReply) {
        let keys = entries.withLock { entries in entries.values.filter { $0.file == reply.file }.map(\.key) }
        used.withLock { used in for key in keys { used.insert(key) } }
    }

    /// The API a recorded request was sent to, from its shape.
    static func api(of request: JSONValue, provider: ModelSettings.Provider) -> ModelAPI {
        if provider == .anthropic { return .anthropicMessages }
        return request["input"] != nil && request["messages"] == nil ? .openAIResponses : .openAIChat
    }

    /// A recorded request's instructions and its messages as `ModelUser.transcript` gives them:
    /// what the user's model was told (the kickoff, the agent's lines) as `user`, its own turns
    /// (`assistant`) as `agent`. Nil for a request that is not a chat.
    static func userTranscript(_ request: JSONValue, provider: ModelSettings.Provider) -> (instructions: String, lines: [DialogueLine])? {
        var instructions = text(of: request["system"]) ?? text(of: request["instructions"]) ?? ""
        guard let messages = (request["messages"] ?? request["input"])?.arrayValue else { return nil }
        var lines: [DialogueLine] = []
        for message in messages {
            let role = message["role"]?.stringValue ?? ""
            if role == "system" || role == "developer" {
                instructions = text(of: message["content"]) ?? ""
                continue
            }
            // The user's own turns were its model's replies; everything else it was told. A message
            // of several text blocks (Anthropic's, which joins consecutive lines of one side) is a
            // line per block.
            let said: [String]
            if let blocks = message["content"]?.arrayValue {
                said = blocks.compactMap { $0["text"]?.stringValue }
            } else {
                said = [message["content"]?.stringValue ?? ""]
            }
            for text in said {
                lines.append(DialogueLine(speaker: role == "assistant" ? .agent : .user, text: text, step: lines.count, turn: 0))
            }
        }
        return (instructions, lines)
    }

    /// A message's text: a string, or its text blocks joined.
    private static func text(of content: JSONValue?) -> String? {
        if let text = content?.stringValue { return text }
        guard let blocks = content?.arrayValue else { return nil }
        return blocks.compactMap { $0["text"]?.stringValue }.joined(separator: "\n")
    }
}
