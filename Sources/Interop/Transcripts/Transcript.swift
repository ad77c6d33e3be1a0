public import TraceCore

/// A message transcript and what surrounds it: one episode of a result file, or a whole file
/// that is one conversation.
public struct Episode: Sendable {
    /// The messages, in order.
    public var messages: [JSONValue]
    /// The episode's id in its file (`id`, `episode_id`, `task_id`, `sample_id`), with the trial
    /// number when there is one (`task_id:trial`); without one, its place in the file (`line 3`);
    /// nil for a file that is one transcript.
    public var id: String?
    /// Declared tools (`tools`, OpenAI or Anthropic shape), when the file has them.
    public var tools: [JSONValue]
    /// An Anthropic system prompt given beside the messages.
    public var system: JSONValue?
    /// The model, when the episode names it.
    public var model: String?
    /// Everything else the episode holds (reward, trial, info), kept as metadata.
    public var metadata: JSONValue?
    /// Where the episode is in its file, for messages: `line 4`, `results[3]`.
    public var place: String

    public init(
        messages: [JSONValue], id: String? = nil, tools: [JSONValue] = [], system: JSONValue? = nil, model: String? = nil,
        metadata: JSONValue? = nil, place: String
    ) {
        self.messages = messages
        self.id = id
        self.tools = tools
        self.system = system
        self.model = model
        self.metadata = metadata
        self.place = place
    }
}

/// Finds the episodes of a transcript file: a list of messages, an object with a message list,
/// JSON Lines of messages or of episodes, or a result file holding many episodes (found by
/// `episodesPath` or, without it, by looking for the one list of episodes).
enum EpisodeFinder {
    /// Keys under which an episode keeps its messages, in the order they are tried.
    /// `input` last: Inspect AI's datasets keep a sample's chat messages there.
    static let messageKeys = ["messages", "traj", "trajectory", "conversation", "transcript", "chat", "history", "input"]
    static let idKeys = ["id", "episode_id", "task_id", "sample_id", "instance_id"]
    static let trialKeys = ["trial", "epoch", "attempt", "run"]

    /// The episodes found: each one, or why that one cannot be imported (the others still are).
    static func episodes(in document: SourceFile.Document, file: String, episodesPath: String?, messagesKey: String?) throws(ImportError)
        -> [Result<Episode, ImportError>]
    {
        switch document {
        case .lines(let lines):
            if episodesPath == nil, let first = lines.first, isMessage(first.value) {
                // Chat messages a line each: every line must be one, or the file is misread.
                if let odd = lines.first(where: { !isMessage($0.value) }) {
                    throw notAMessage(odd.value, at: "line \(odd.line)", file: file, line: odd.line)
                }
                return [.success(Episode(messages: lines.map(\.value), place: "the file"))]
            }
            var episodes: [Result<Episode, ImportError>] = []
            for (line, value) in lines {
                do {
                    episodes += try episodesIn(value, path: episodesPath, file: file, place: "line \(line)", messagesKey: messagesKey)
                } catch {
                    episodes.append(.failure(error))
                }
            }
            if !episodes.contains(where: { (try? $0.get()) != nil }), let first = episodes.first, case .failure(let error) = first {
                throw error
            }
            return episodes
        case .json(let value):
            return try episodesIn(value, path: episodesPath, file: file, place: "", messagesKey: messagesKey)
        }
    }

    static func episodesIn(_ value: JSONValue, path: String?, file: String, place: String, messagesKey: String?) throws(ImportError)
        -> [Result<Episode, ImportError>]
    {
        var value = value
        var place = place
        if let path, !path.isEmpty {
            for key in path.split(separator: ".").map(String.init) {
                let next: JSONValue?
                if let index = Int(key), let array = value.arrayValue {
                    // Written out: in `c ? array[index] : nil` the nil is JSON's null (JSONValue
                    // takes the literal), which read an index past the end as a null there.
                    if array.indices.contains(index) { next = array[index] } else { next = nil }
                } else {
                    next = value[key]
                }
                guard let next else {
                    throw ImportError(
                        .wrongFormat, "\(file)\(place.isEmpty ? "" : " (\(place))"): --episodes-path \(path): there is no \"\(key)\"",
                        location: SourceLocation(path: file),
                        hint: value.objectValue.map { "the keys there are: " + $0.keys.joined(separator: ", ") })
                }
                value = next
                place += place.isEmpty ? key : ".\(key)"
            }
        }
        if let array = value.arrayValue {
            if array.first.map(isMessage) ?? true {
                // A list of chat messages: one item that is not a message is an error at that
                // item, not a list of episodes none of which has messages.
                if let odd = array.firstIndex(where: { !isMessage($0) }) {
                    throw notAMessage(array[odd], at: "\(place)[\(odd)]", file: file)
                }
                return [
                    .success(
                        try episode(["messages": value], place: place.isEmpty ? "the file" : place, file: file, messagesKey: "messages"))
                ]
            }
            let episodes = array.enumerated().map { index, item in
                Result { () throws(ImportError) in try episode(item, place: "\(place)[\(index)]", file: file, messagesKey: messagesKey) }
            }
            // A list none of whose items is an episode is not a result file.
            if !episodes.contains(where: { (try? $0.get()) != nil }), let first = episodes.first, case .failure(let error) = first {
                throw error
            }
            return episodes
        }
        if let object = value.objectValue {
            // An episode — or one whose message list has an item that is no message, which
            // `episode` names.
            if messagesKeyIn(object, preferred: messagesKey) != nil || oddMessage(in: object, preferred: messagesKey) != nil {
                return [.success(try episode(value, place: place.isEmpty ? "the file" : place, file: file, messagesKey: messagesKey))]
            }
            // A wrapper: the one member that is a list of episodes.
            let lists = object.filter { member in
                guard let items = member.value.arrayValue, !items.isEmpty else { return false }
                return items.contains { $0.objectValue.map { messagesKeyIn($0, preferred: messagesKey) != nil } ?? false }
            }
            if lists.count == 1, let list = lists.first {
                return try episodesIn(
                    list.value, path: nil, file: file, place: place.isEmpty ? list.key : "\(place).\(list.key)", messagesKey: messagesKey)
            }
            if lists.count > 1 {
                throw ImportError(
                    .ambiguousFormat, "\(file): several members hold episodes (\(lists.map(\.key).joined(separator: ", ")))",
                    location: SourceLocation(path: file), hint: "choose one with --episodes-path")
            }
        }
        throw ImportError(
            .wrongFormat,
            "\(file)\(place.isEmpty ? "" : " (\(place))") holds no message transcript: expected a list of chat messages, an object with "
                + "a \"messages\" list, or a list of episodes with one",
            location: SourceLocation(path: file),
            hint: "point at the episodes with --episodes-path and at their messages with --messages-key")
    }

    private static func messagesKeyIn(_ object: JSONObject, preferred: String?) -> String? {
        for key in (preferred.map { [$0] } ?? messageKeys) {
            if let list = object[key]?.arrayValue, list.allSatisfy(isMessage) { return key }
        }
        return nil
    }

    /// The first item of `object`'s message list that is not a chat message, when the list
    /// begins with one (so it is the episode's messages, one of them wrong): its key and index.
    private static func oddMessage(in object: JSONObject, preferred: String?) -> (key: String, index: Int, value: JSONValue)? {
        for key in (preferred.map { [$0] } ?? messageKeys) {
            guard let list = object[key]?.arrayValue, let first = list.first, isMessage(first) else { continue }
            if let odd = list.firstIndex(where: { !isMessage($0) }) { return (key, odd, list[odd]) }
        }
        return nil
    }

    /// The error for an item of a message list that is not a chat message, at `place`.
    static func notAMessage(_ value: JSONValue, at place: String, file: String, line: Int? = nil) -> ImportError {
        let found =
            value.objectValue.map { "an object without a string \"role\" (its keys: \($0.keys.joined(separator: ", ")))" }
            ?? value.typeDescription
        return ImportError(
            .badRun, "\(file) \(place): not a chat message (an object with a string \"role\"): found \(found)",
            location: SourceLocation(path: file, line: line ?? 0),
            hint: "every item of a message list is a message; fix or remove this one")
    }

    private static func episode(_ value: JSONValue, place: String, file: String, messagesKey: String?) throws(ImportError) -> Episode {
        if let object = value.objectValue, messagesKeyIn(object, preferred: messagesKey) == nil,
            let odd = oddMessage(in: object, preferred: messagesKey)
        {
            throw notAMessage(
                odd.value, at: "\(place.isEmpty || place == "the file" ? "" : place + ".")\(odd.key)[\(odd.index)]", file: file)
        }
        guard let object = value.objectValue, let key = messagesKeyIn(object, preferred: messagesKey),
            let messages = object[key]?.arrayValue
        else {
            let keys = value.objectValue.map { " (its keys: \($0.keys.joined(separator: ", ")))" } ?? " (it is \(value.typeDescription))"
            throw ImportError(
                .badRun, "\(file) \(place): the episode has no message list\(keys)", location: SourceLocation(path: file),
                hint: "name its messages' key with --messages-key")
        }
        var id = idKeys.lazy.compactMap { object[$0].flatMap(scalarText) }.first
        let trial = trialKeys.lazy.compactMap { object[$0].flatMap(scalarText) }.first
        if let trial { id = "\(id ?? place):\(trial)" }
        // One of many episodes without an id of its own: its place (`line 3`, `results[2]`), so
        // that each has its own run id and file.
        if id == nil, place != "the file" { id = place }
        var rest = JSONObject()
        for member in object where member.key != key && member.key != "tools" && member.key != "system" {
            rest[member.key] = member.value
        }
        return Episode(
            messages: messages, id: id, tools: object["tools"]?.arrayValue ?? [], system: object["system"],
            model: object["model"]?.stringValue, metadata: rest.isEmpty ? nil : .object(rest), place: place)
    }

    /// A chat message: an object with a string `role` and no list of messages of its own (an
    /// episode may name the agent's role beside its messages).
    static func isMessage(_ value: JSONValue) -> Bool {
        guard value["role"]?.stringValue != nil, let object = value.objectValue else { return false }
        return !messageKeys.contains { object[$0]?.arrayValue != nil }
    }

    static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): return text
        case .int(let number): return String(number)
        case .double(let number): return String(number)
        default: return nil
        }
    }
}

/// The text of a chat message's content, as the transcripts of every provider hold it: a string,
/// or the text parts of a list of blocks (nested `content` included), joined by newlines.
public enum MessageText {
    public static func of(_ content: JSONValue?) -> String {
        switch content {
        case .string(let text)?: return text
        case .array(let parts)?:
            return parts.compactMap { part -> String? in
                if let text = part.stringValue { return text }
                if let text = part["text"]?.stringValue { return text }
                if let nested = part["content"] { return of(nested) }
                return nil
            }.joined(separator: "\n")
        case nil, .null?: return ""
        case let other?: return JSONWriter.encodeString(other)
        }
    }
}
