import Foundation
import Synchronization
public import TraceCore
import TraceLog

/// Recorded model interactions, so a run against a real model can be replayed offline and
/// deterministically (in CI, say). `docs/models.md` specifies the files.
///
/// Each request is keyed by `sha256` of the provider name and the canonical JSON of the
/// request body: the model, messages, tools and sampling parameters, and nothing else (no
/// headers, so no key; no provider ids, since the runtime's call ids are used). The response
/// is stored as the exact bytes the server sent (the event stream included), gzip-compressed,
/// one file per interaction, listed in `index.json` one line per interaction.
public final class Cassette: Sendable {
    /// What happens to a request.
    public enum Mode: String, Sendable, CaseIterable {
        /// Replay only: a request with no recording is an error (the default).
        case none
        /// Replay what is recorded, record what is not.
        case new
        /// Send everything live and record it again.
        case all
    }

    struct Entry: Sendable, Hashable {
        var key: String
        var file: String
        var provider: String
        var model: String
    }

    public let directory: String
    public let mode: Mode
    // Guarded by the mutex: the index, by key.
    let entries: Mutex<[String: Entry]>
    // Guarded by the mutex: the keys this process replayed or recorded.
    let used = Mutex<Set<String>>([])

    /// Opens the cassette in `directory` (which need not exist yet when recording).
    public init(directory: String, mode: Mode) throws {
        self.directory = directory
        self.mode = mode
        var loaded: [String: Entry] = [:]
        let indexPath = directory + "/index.json"
        if FileManager.default.fileExists(atPath: indexPath) {
            let bytes = try Self.read(indexPath)
            let value: JSONValue
            do {
                value = try JSONParser.parse(bytes)
            } catch {
                throw ModelClientError(
                    .configuration, "\(indexPath) is not JSON (\(error))",
                    hint: "restore it from version control, or record again with --record all")
            }
            for (position, item) in (value["interactions"]?.arrayValue ?? []).enumerated() {
                guard let key = item["key"]?.stringValue, let file = item["file"]?.stringValue,
                    !file.contains("/"), !file.hasPrefix(".")
                else {
                    throw ModelClientError(
                        .configuration, "\(indexPath): interactions[\(position)] needs \"key\" and a plain \"file\" name",
                        hint: "restore it from version control, or record again with --record all")
                }
                loaded[key] = Entry(
                    key: key, file: file, provider: item["provider"]?.stringValue ?? "", model: item["model"]?.stringValue ?? "")
            }
        } else if mode == .none && !FileManager.default.fileExists(atPath: directory) {
            throw ModelClientError(
                .configuration, "the cassette \(directory) does not exist",
                hint: "record it first with --record new (needs the model server)")
        }
        entries = Mutex(loaded)
    }

    /// The key of a request body.
    public static func key(provider: String, body: JSONValue) -> String {
        ContentHash.sha256(Array("\(provider)\n".utf8) + JSONWriter.encode(body))
    }

    /// A transport that answers from this cassette, and (by mode) records `live`'s answers: only
    /// whole ones (`isWhole`).
    func transport(provider: String, live: any ModelTransport) -> any ModelTransport {
        CassetteTransport(
            cassette: self, provider: provider, live: live,
            key: { request in
                let body = (try? JSONParser.parse(request.body)) ?? .string(String(decoding: request.body, as: UTF8.self))
                return (Cassette.key(provider: provider, body: body), body)
            }, keeps: Self.isWhole)
    }

    /// Whether a live 200 answer is whole, as `ReplyReader` reads it: a stream to its end marker, a
    /// body that is the API's reply. Only such an answer is kept — a stream cut short, or one that
    /// ended in an error event, replayed to every retry and every later run would fail them all.
    static func isWhole(_ request: TransportRequest, _ recording: Recording) -> Bool {
        guard let api = ModelAPI(path: request.url) else { return false }
        var reader = ReplyReader(api: api)
        reader.take(.head(status: recording.status, headers: [HTTPHeader(name: "content-type", value: recording.contentType)]))
        reader.take(.chunk(recording.body))
        return reader.finish().raw != nil
    }

    /// A transport like `transport(provider:live:)` whose requests are keyed by the caller: `key`
    /// gives a request's key and the request as it is stored (and compared, on a miss). The
    /// recording gateway keys requests by their canonical form and how often they were asked.
    /// Only answers that `ReplyReader` reads whole are kept: a 200 whose stream ended in an error
    /// event is not an answer to replay.
    public func transport(
        provider: String, live: any ModelTransport, keyedBy key: @escaping @Sendable (TransportRequest) -> (key: String, request: JSONValue)
    ) -> any ModelTransport {
        CassetteTransport(cassette: self, provider: provider, live: live, key: key, keeps: Self.isWhole)
    }

    // MARK: Exchanges that are not HTTP (MCP requests)

    /// The recorded answer of a request that is not an HTTP exchange (an MCP request of MCP
    /// tools), keyed as `key(provider:body:)` keys `request`: the JSON stored, or nil when none
    /// is. The cassette's files and index are the same as for model requests (docs/models.md).
    public func answer(provider: String, request: JSONValue) throws -> JSONValue? {
        guard let recording = try recording(forKey: Self.key(provider: provider, body: request)) else { return nil }
        do {
            return try JSONParser.parse(recording.body)
        } catch {
            throw ModelClientError(
                .configuration, "the recording of a \(provider) request in \(directory) is not JSON (\(error))",
                hint: "record it again with --record all")
        }
    }

    /// Whether the cassette holds any recording of `provider`'s.
    public func holds(provider: String) -> Bool {
        entries.withLock { $0.values.contains { $0.provider == provider } }
    }

    /// Keeps `answer` as the recording of `request` (`label` names its file: the method), with
    /// the values of secret-looking variables of this process and `secrets` redacted.
    public func keep(answer: JSONValue, provider: String, request: JSONValue, label: String, secrets: [String] = []) throws {
        let redactor = Redactor.standard.adding(secrets, rule: "header")
        let body = Array(redactor.redactText(String(decoding: JSONWriter.encode(answer), as: UTF8.self)).utf8)
        try record(
            key: Self.key(provider: provider, body: request), provider: provider, request: request,
            recording: Recording(request: request, status: 200, contentType: "application/json", body: body), label: label)
    }

    /// Why `request` cannot be answered: this cassette holds no recording of it, and where the
    /// nearest recording of `provider` differs.
    public func missing(provider: String, request: JSONValue) -> String {
        let key = Self.key(provider: provider, body: request)
        var message = "the cassette \(directory) has no recording of this \(provider) request (key \(key.prefix(23))…)"
        if let (file, difference) = nearest(to: request, provider: provider) {
            message +=
                "; the nearest, \(file), differs at \(difference.path.isEmpty ? "the top" : difference.path): recorded "
                + CassetteTransport.short(difference.right) + ", now " + CassetteTransport.short(difference.left)
        }
        return message
    }

    // MARK: Reading and writing recordings

    struct Recording {
        var request: JSONValue
        var status: Int
        var contentType: String
        var body: [UInt8]
    }

    func recording(forKey key: String) throws -> Recording? {
        guard let entry = entries.withLock({ $0[key] }) else { return nil }
        used.withLock { _ = $0.insert(key) }
        return try load(entry)
    }

    /// The recordings no request of this process asked for, by file name, sorted: after a run
    /// that covered every case using the cassette (`--record new` in particular, which keeps the
    /// old ones), what the agents no longer ask — stale recordings to review or delete.
    public var unusedFiles: [String] {
        let used = used.withLock { $0 }
        return entries.withLock { entries in entries.values.filter { !used.contains($0.key) }.map(\.file) }.sorted()
    }

    func load(_ entry: Entry) throws -> Recording {
        let path = directory + "/" + entry.file
        let value: JSONValue
        do {
            value = try JSONParser.parse(try GzipData.decompress(try Self.read(path), path: path))
        } catch let error as ModelClientError {
            throw error
        } catch {
            // The reader's message names the file already: said once.
            var reason = (error as? any Diagnostic)?.message ?? "\(error)"
            if reason.hasPrefix(path + ": ") { reason.removeFirst(path.count + 2) }
            if reason.hasPrefix(path + " ") { reason = "it " + reason.dropFirst(path.count + 1) }
            throw ModelClientError(
                .configuration, "the recording \(path) cannot be read: \(reason)", hint: "record it again with --record all")
        }
        // The file must be the recording of the request the index gives it for: an index pointing
        // a request at another's recording (an edit, files mixed from two cassettes) replayed the
        // other answer without a word.
        guard let stored = value["key"]?.stringValue, stored == entry.key else {
            let made = value["key"]?.stringValue.map { "was made for another request (key \($0.prefix(23))…)" } ?? "names no request key"
            throw ModelClientError(
                .configuration,
                "the recording \(path) \(made), but the cassette's index.json gives it for the request with key \(entry.key.prefix(23))…: "
                    + "the index or the file was edited, or mixed with another cassette's",
                hint: "restore the cassette from version control, or record it again with --record all")
        }
        let response = value["response"] ?? .null
        let body: [UInt8]
        if let text = response["body"]?.stringValue {
            body = Array(text.utf8)
        } else if let encoded = response["body_base64"]?.stringValue, let decoded = Base64.decode(encoded) {
            body = decoded
        } else {
            throw ModelClientError(.configuration, "the recording \(path) has no response body", hint: "record it again with --record all")
        }
        // A status no HTTP answer has (a hand edit, a damaged file) is refused here: the gateway
        // would pass it on as the answer's status line.
        let status = response["status"]?.intValue ?? 0
        guard status == 0 || (100...599).contains(status) else {
            throw ModelClientError(
                .configuration, "the recording \(path) has the HTTP status \(status), which no answer has (100 to 599)",
                hint: "record it again with --record all")
        }
        return Recording(
            request: value["request"] ?? .null, status: status,
            contentType: response["content_type"]?.stringValue ?? "", body: body)
    }

    func record(key: String, provider: String, request: JSONValue, recording: Recording, label: String? = nil) throws {
        let model = label ?? request["model"]?.stringValue ?? ""
        let safeModel = String(model.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." ? $0 : "_" }.prefix(60))
        let file = "\(provider)-\(safeModel)-\(key.dropFirst("sha256:".count).prefix(16)).json.gz"
        var response = ObjectBuilder()
        response.set("status", recording.status)
        response.set("content_type", recording.contentType)
        if let text = String(validating: recording.body, as: UTF8.self) {
            response.set("body", text)
        } else {
            response.set("body_base64", Base64.encode(recording.body))
        }
        let document: JSONValue = [
            "version": 1, "key": .string(key), "provider": .string(provider), "request": Self.redacted(request),
            "response": response.json,
        ]
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.write(try GzipData.compress(JSONWriter.encode(document) + [0x0A]), to: directory + "/" + file)
        used.withLock { _ = $0.insert(key) }
        try entries.withLock { entries in
            entries[key] = Entry(key: key, file: file, provider: provider, model: model)
            try Self.write(Self.indexText(entries), to: directory + "/index.json")
        }
    }

    /// A request as a cassette keeps it: redacted as every log is (`Redactor.standard`: a key the
    /// agent put in the body, `api_key` or `password` anywhere in it, a value of a variable whose
    /// name looks secret), since a cassette is committed beside the cases. The key it is found by
    /// is the request's as sent; the response is kept as it came, byte for byte, to be replayed.
    static func redacted(_ request: JSONValue) -> JSONValue {
        let text = JSONWriter.encodeString(request)
        let redacted = Redactor.standard.redactEncoded(text)
        guard redacted != text, let value = try? JSONParser.parse(Array(redacted.utf8)) else { return request }
        return value
    }

    /// One interaction per line, by key, so a new recording is a one-line diff.
    static func indexText(_ entries: [String: Entry]) -> [UInt8] {
        let lines = entries.values.sorted { $0.key < $1.key }.map { entry -> String in
            let item: JSONValue = [
                "key": .string(entry.key), "file": .string(entry.file), "provider": .string(entry.provider),
                "model": .string(entry.model),
            ]
            return "    " + JSONWriter.encodeString(item)
        }
        return Array(("{\n  \"version\": 1,\n  \"interactions\": [\n" + lines.joined(separator: ",\n") + "\n  ]\n}\n").utf8)
    }

    /// The recording whose request is closest to `request` (the longest common prefix of
    /// their canonical JSON), and the first field where they differ.
    func nearest(to request: JSONValue, provider: String) -> (file: String, difference: JSONDifference)? {
        // Compared as kept: a recorded request is redacted (`redacted`).
        let request = Self.redacted(request)
        let text = JSONWriter.encode(request)
        var best: (file: String, request: JSONValue, shared: Int)?
        for entry in entries.withLock({ Array($0.values) }) where entry.provider == provider {
            guard let recorded = try? load(entry) else { continue }
            let shared = zip(text, JSONWriter.encode(recorded.request)).prefix { $0 == $1 }.count
            if let current = best, shared < current.shared || (shared == current.shared && entry.file > current.file) { continue }
            best = (entry.file, recorded.request, shared)
        }
        guard let best, let difference = request.firstDifference(from: best.request) else { return nil }
        return (best.file, difference)
    }

    static func read(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ModelClientError(.configuration, "cannot read \(path)")
        }
        return Array(data)
    }

    /// Writes through a new file renamed over the old one, so a reader never sees half a file.
    /// The new file's name is unique to the write: runs of one `--jobs` process record the same
    /// interaction at the same time, and each rename must find its own file.
    static func write(_ bytes: [UInt8], to path: String) throws {
        let temporary = path + ".tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(bytes)) else {
            throw ModelClientError(.configuration, "cannot write \(temporary)")
        }
        if rename(temporary, path) != 0 {
            throw ModelClientError(.configuration, "cannot move \(temporary) to \(path) (errno \(errno))")
        }
    }
}

/// Answers from the cassette; sends live (and records) what the mode allows.
struct CassetteTransport: ModelTransport {
    let cassette: Cassette
    let provider: String
    let live: any ModelTransport
    let key: @Sendable (TransportRequest) -> (key: String, request: JSONValue)
    /// Whether a live 200 answer is kept (`Cassette.isWhole`).
    let keeps: @Sendable (TransportRequest, Cassette.Recording) -> Bool

    func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws {
        let (key, body) = self.key(request)
        if cassette.mode != .all, let recording = try cassette.recording(forKey: key) {
            try receive([
                .head(status: recording.status, headers: [HTTPHeader(name: "content-type", value: recording.contentType)]),
                .chunk(recording.body),
            ])
            return
        }
        guard cassette.mode != .none else {
            var message = "the cassette \(cassette.directory) has no recording of this \(provider) request (key \(key.prefix(23))…)"
            if let (file, difference) = cassette.nearest(to: body, provider: provider) {
                message +=
                    "; the nearest, \(file), differs at \(difference.path.isEmpty ? "the top" : difference.path): recorded "
                    + Self.short(difference.right) + ", now " + Self.short(difference.left)
            }
            throw ModelClientError(
                .notRecorded, message, hint: "record it with --record new (needs the model server), or fix what changed the request")
        }
        var status = 0
        var contentType = ""
        var bytes: [UInt8] = []
        // The reader may stop at a stream's end marker (`RequestPolicy.EnoughRead`): what came
        // is the whole answer, and is kept as one.
        var stoppedByReader = false
        do {
            try await live.exchange(request) { parts in
                for part in parts {
                    switch part {
                    case .head(let code, let headers):
                        status = code
                        contentType = headers.first { $0.name.lowercased() == "content-type" }?.value ?? ""
                    case .chunk(let chunk):
                        bytes += chunk
                    }
                }
                try receive(parts)
            }
        } catch is RequestPolicy.EnoughRead {
            stoppedByReader = true
        }
        // Only whole successful answers are kept: a 429 replayed forever helps nobody. What an
        // upstream echoes of the request's headers (its key, a cookie) and key-shaped values are
        // kept redacted, as the log keeps them (`ModelForwarder.secrets`, `Redactor.standard`).
        let redactor = Redactor.standard.adding(ModelForwarder.secrets(of: request), rule: "header")
        if let text = String(validating: bytes, as: UTF8.self) {
            let redacted = redactor.redactText(text)
            if redacted != text { bytes = Array(redacted.utf8) }
        }
        let recording = Cassette.Recording(request: body, status: status, contentType: contentType, body: bytes)
        if status == 200, keeps(request, recording) {
            try cassette.record(
                key: key, provider: provider, request: body,
                recording: recording)
        }
        if stoppedByReader { throw RequestPolicy.EnoughRead() }
    }

    static func short(_ value: JSONValue?) -> String {
        guard let value else { return "nothing" }
        let text = JSONWriter.encodeString(value)
        return text.count > 80 ? String(text.prefix(80)) + "…" : text
    }
}
