import AgentRuntime
import Foundation
import TraceCore

/// `mcp-proxy --bridge`: the proxy between a client and a server of different MCP eras, speaking
/// each one's. The specification's compatibility matrix has a 2025 client fail against a server of
/// 2026-07-28 only, and a client of 2026-07-28 only fail against a 2025 server; through the bridge
/// both work (docs/mcp.md, "Bridging eras").
///
/// Which way is learned at the client's first request: the session probes the server with
/// `server/discover` (with the client's envelope, or one made of its `initialize`). Then:
///
/// - **Toward a modern server** (a 2025 client, a server that answered the probe): the proxy
///   answers `initialize` from the server's `server/discover` answer, and `ping` and
///   `logging/setLevel` itself; every request gets the envelope; results lose `resultType` and
///   the cache hints. An `input_required` answer becomes the server's requests to the client, one
///   per input request, each under an id of the proxy's (`agent-eval-proxy-ask-N`); once the client
///   answered them all, the request is retried with `inputResponses` and the `requestState` as the
///   server gave it, under an id of the proxy's (`agent-eval-proxy-retry-N`), and its answer goes to
///   the client under the client's id.
/// - **Toward a legacy server** (a 2026-07-28 client, a server that did not answer the probe as a
///   modern one): the session opens the server's session with `initialize` (the client's
///   envelope gives its name and capabilities) and the proxy answers `server/discover` from it;
///   requests lose the envelope; results get `resultType: "complete"`, listings their cache hints.
///   A request the server sends the client during a call (elicitation, sampling, roots) becomes
///   that call's `input_required` answer, with a `requestState` of the proxy's; the client's retry
///   answers the server's request, and the call's answer goes to the client under the retry's id.
///   The server's `ping` is answered by the proxy.
///
/// A state machine with no input or output of its own: `MCPProxySession` sends what it says, and
/// judges and records what passes as it does for any client and server.
struct MCPBridge {
    enum Way: Equatable {
        /// Not probed yet.
        case unknown
        /// Both sides speak the same era: nothing to translate.
        case none
        /// A 2025 client, a server of 2026-07-28.
        case towardModern
        /// A 2026-07-28 client, a 2025 server.
        case towardLegacy
        /// The server could not be reached in either era: every request is answered with why.
        case unusable(String)
    }

    /// What to do with a message on its way to the server.
    enum Outgoing {
        case send([UInt8])
        case drop
        /// Taken by the bridge: `toServer` goes to the server (answers to its requests), and
        /// `fromServer` is handled as if the server had sent it (an answer the bridge gives for it).
        case consumed(toServer: [JSONValue], fromServer: [JSONValue])
    }

    /// What to do with a message the server sent.
    enum Incoming {
        case pass(JSONValue)
        /// Taken by the bridge; `toServer` answers the server (its `ping`).
        case consumed(toServer: [JSONValue])
    }

    /// What came of a server's `input_required` answer (toward a modern server).
    enum Asked {
        /// Send these requests to the client.
        case askClient([JSONValue])
        /// Nothing to ask: send this retry to the server.
        case retry(JSONValue)
        case fail(String)
    }

    /// What came of the client's answer to one of the bridge's requests (toward a modern server).
    enum Answered {
        case waiting
        /// Every question of the request `answerId` is answered: send this retry to the server.
        case retry(answerId: JSONValue, JSONValue)
        case fail(answerId: JSONValue, String)
    }

    /// What came of a server's request to the client (toward a legacy server).
    enum ServerAsked {
        /// Answer the server with this (the request belongs to no one call).
        case answerServer(JSONValue)
        /// Handle this as the server's answer: the call's `input_required`.
        case answerClient(JSONValue)
        /// Kept: the call already waits for the client's retry, which will carry it too.
        case queued
    }

    /// The 2025 versions a client may open with; another is answered with the newest.
    static let legacyVersions = MCPEra.handshakeVersions
    static let newestLegacyVersion = MCPEra.handshakeVersions.last ?? "2025-11-25"
    /// The requests of 2026-07-28 that may be answered `input_required`.
    static let multiRoundMethods: Set<String> = ["tools/call", "prompts/get", "resources/read"]
    static let listingMethods: Set<String> = ["tools/list", "prompts/list", "resources/list", "resources/templates/list"]
    /// How long the probe waits, by default, before the server is taken for a 2025 one (as MCP
    /// tools' probe); `--bridge-probe-timeout` changes it.
    static let probeTimeout = Duration.seconds(5)
    static let askPrefix = "agent-eval-proxy-ask-"
    static let retryPrefix = "agent-eval-proxy-retry-"
    /// The ids a 2025 server knows the requests by that may be asked about: the proxy's, so a
    /// client that reuses an id (its request was answered `input_required`) never gives the
    /// server two requests of one id.
    static let upstreamPrefix = "agent-eval-proxy-up-"
    static let statePrefix = "agent-eval-bridge-"

    private(set) var way = Way.unknown
    /// Toward a modern server: the envelope the requests carry (the client's name and
    /// capabilities, from its `initialize`).
    private(set) var envelope: JSONValue?
    /// The server's `server/discover` answer (toward modern) or `initialize` answer (toward legacy).
    private var opening: JSONValue = [:]
    /// The versions each side speaks, for the log.
    private var clientVersion = ""
    private var serverVersion = ""
    private var sent = 0

    // Toward a modern server.
    /// The method and params (with the envelope) of each request that may be answered
    /// `input_required`, by the client's id, until it is answered for good.
    private var originals: [String: (method: String, params: JSONObject)] = [:]
    /// How often the server asked for input on each request, by the client's id (a call's rounds
    /// are counted by the session; this bounds the others).
    private var questionRounds: [String: Int] = [:]
    /// Questions out to the client, by the client's request id.
    private var asking: [String: (answerId: JSONValue, pending: [String: String], responses: JSONObject, state: JSONValue?)] = [:]
    /// The request each question out to the client (its id's key) is of.
    private var askOwners: [String: String] = [:]
    /// The client's id of each retry the bridge sent, by the retry's id.
    private var retries: [String: JSONValue] = [:]

    // Toward a legacy server.
    /// A request that may be asked about, by its id's key as the server knows it.
    private struct Exchange {
        var method: String
        var upstreamId: JSONValue
        /// The id the client waits on: the request's own, then its latest retry's.
        var alias: JSONValue
        /// The server's requests not yet put to the client.
        var queued: [(id: JSONValue, method: String, params: JSONValue?)] = []
        /// The server's requests put to the client, by input request key.
        var asked: [String: JSONValue] = [:]
        /// The `requestState` the client was given, while it has not retried.
        var state: String?
        /// The server's answer when it came while the client had not retried yet.
        var answer: JSONValue?
        var questions = 0
    }
    private var exchanges: [String: Exchange] = [:]
    private var states: [String: String] = [:]
    /// The method of each request passed to the server, by its id's key: its answer is dressed
    /// for the client's era.
    private var methods: [String: String] = [:]

    var isTranslating: Bool { way == .towardModern || way == .towardLegacy }

    /// What the log keeps of the bridge (`ProxyGate.bridgeMediaType`); nil while nothing is bridged.
    var note: JSONValue? {
        guard isTranslating else { return nil }
        return [
            "client_protocol_version": .string(clientVersion), "server_protocol_version": .string(serverVersion),
            "way": way == .towardModern ? "2025 client, 2026-07-28 server" : "2026-07-28 client, 2025 server",
        ]
    }

    // MARK: Learning the way

    /// The envelope of a 2025 client, made of its `initialize` params.
    static func envelope(ofInitialize params: JSONValue?) -> JSONValue {
        var capabilities = params?["capabilities"]?.objectValue ?? JSONObject()
        capabilities["tasks"] = nil  // 2025-11-25's tasks; 2026-07-28 has them as an extension
        let info = params?["clientInfo"]
        return .object(
            JSONObject([
                (MCPEra.protocolVersionKey, .string(MCPEra.statelessVersion)),
                (
                    MCPEra.clientInfoKey,
                    ["name": info?["name"] ?? "an MCP client", "version": info?["version"] ?? ""]
                ),
                (MCPEra.clientCapabilitiesKey, .object(capabilities)),
            ]))
    }

    /// The server's era from the probe's answer: its `server/discover` result when it is a
    /// modern server, nil when it is a 2025 one; throws (why) when it speaks neither the bridge's
    /// modern version nor the 2025 era.
    static func discovered(_ answer: JSONRPCPeer.Answer) throws(BridgeFailure) -> JSONValue? {
        switch answer {
        case .success(let result):
            let supported = (result["supportedVersions"]?.arrayValue ?? []).compactMap(\.stringValue)
            return supported.contains(MCPEra.statelessVersion) ? result : nil
        case .failure(.remote(let error)) where error.code == -32022:
            // A modern error: a modern server, of versions the bridge does not speak — unless
            // it names a 2025 one, which is a dual server (then `initialize`).
            let supported = (error.data?["supported"]?.arrayValue ?? []).compactMap(\.stringValue)
            if supported.contains(where: legacyVersions.contains) { return nil }
            throw BridgeFailure(
                "the server answered the server/discover probe with -32022: it speaks "
                    + (supported.isEmpty ? "other versions" : supported.joined(separator: ", "))
                    + ", and the bridge speaks \(MCPEra.statelessVersion) and the 2025 era: use a client of the server's version, without --bridge"
            )
        default:
            return nil
        }
    }

    struct BridgeFailure: Error {
        var why: String
        init(_ why: String) { self.why = why }
    }

    /// `initialize`'s params for a 2025 server, from a 2026-07-28 client's envelope.
    static func initializeParams(envelope: JSONValue) -> JSONValue {
        var capabilities = envelope[MCPEra.clientCapabilitiesKey]?.objectValue ?? JSONObject()
        capabilities["extensions"] = nil
        let info = envelope[MCPEra.clientInfoKey]
        return [
            "protocolVersion": .string(newestLegacyVersion), "capabilities": .object(capabilities),
            "clientInfo": ["name": info?["name"] ?? "an MCP client", "version": info?["version"] ?? ""],
        ]
    }

    mutating func bridgeTowardModern(envelope: JSONValue, discovered: JSONValue, clientVersion: String?) {
        way = .towardModern
        self.envelope = envelope
        opening = discovered
        self.clientVersion = clientVersion.flatMap { Self.legacyVersions.contains($0) ? $0 : nil } ?? Self.newestLegacyVersion
        serverVersion = MCPEra.statelessVersion
    }

    mutating func bridgeTowardLegacy(initialized: JSONValue, clientVersion: String) {
        way = .towardLegacy
        opening = initialized
        self.clientVersion = clientVersion
        serverVersion = initialized["protocolVersion"]?.stringValue ?? Self.newestLegacyVersion
    }

    mutating func noBridge() { way = .none }
    mutating func unusable(_ why: String) { way = .unusable(why) }

    // MARK: The proxy's own answers

    /// The `initialize` result a 2025 client gets (toward a modern server).
    var initializeResult: JSONValue {
        var capabilities = opening["capabilities"]?.objectValue ?? JSONObject()
        capabilities["extensions"] = nil
        if var resources = capabilities["resources"]?.objectValue {
            // Subscriptions are 2026-07-28's subscriptions/listen: not bridged.
            resources["subscribe"] = nil
            capabilities["resources"] = .object(resources)
        }
        var result = JSONObject([
            ("protocolVersion", .string(clientVersion)), ("capabilities", .object(capabilities)),
            ("serverInfo", opening["_meta"]?[MCPEra.serverInfoKey] ?? ["name": "an MCP server", "version": ""]),
        ])
        if let instructions = opening["instructions"], instructions != .null { result["instructions"] = instructions }
        return .object(result)
    }

    /// The `server/discover` result a 2026-07-28 client gets (toward a legacy server).
    var discoverResult: JSONValue {
        var capabilities = opening["capabilities"]?.objectValue ?? JSONObject()
        for gone in ["logging", "tasks"] { capabilities[gone] = nil }
        if var resources = capabilities["resources"]?.objectValue {
            resources["subscribe"] = nil
            capabilities["resources"] = .object(resources)
        }
        var result = JSONObject([
            ("resultType", "complete"), ("supportedVersions", [.string(MCPEra.statelessVersion)]),
            ("capabilities", .object(capabilities)), ("ttlMs", 0), ("cacheScope", "private"),
            ("_meta", .object(JSONObject([(MCPEra.serverInfoKey, opening["serverInfo"] ?? ["name": "an MCP server", "version": ""])]))),
        ])
        if let instructions = opening["instructions"], instructions != .null { result["instructions"] = instructions }
        return .object(result)
    }

    // MARK: Toward a modern server

    /// A client message on its way to a modern server.
    private mutating func towardModern(_ message: JSONValue) -> Outgoing {
        let method = message["method"]?.stringValue
        if method == "notifications/initialized" { return .drop }
        if method == "notifications/cancelled", let requestId = message["params"]?["requestId"] {
            // A request retried goes by the retry's id at the server.
            let key = JSONLinesProcess.key(requestId)
            guard let retry = retries.first(where: { JSONLinesProcess.key($0.value) == key })?.key,
                let retryId = try? JSONParser.parse(Array(retry.utf8))
            else { return .send(JSONWriter.encode(message)) }
            var params = message["params"]?.objectValue ?? JSONObject()
            params["requestId"] = retryId
            return .send(JSONWriter.encode(message.merging(["params": .object(params)])))
        }
        guard let method, let id = message["id"] else { return .send(JSONWriter.encode(message)) }
        if id.stringValue?.hasPrefix(Self.retryPrefix) == true { return .send(JSONWriter.encode(message)) }
        var params = message["params"]?.objectValue ?? JSONObject()
        var meta = params["_meta"]?.objectValue ?? JSONObject()
        for member in envelope?.objectValue ?? JSONObject() { meta[member.key] = member.value }
        params["_meta"] = .object(meta)
        if Self.multiRoundMethods.contains(method) { originals[JSONLinesProcess.key(id)] = (method, params) }
        return .send(JSONWriter.encode(message.merging(["params": .object(params)])))
    }

    /// A modern server's message on its way to a 2025 client: a retry's answer under the
    /// client's id, results without `resultType` and cache hints.
    private mutating func fromModern(_ message: JSONValue) -> JSONValue {
        guard message["method"] == nil, var id = message["id"] else { return message }
        var message = message
        if let clientId = retries.removeValue(forKey: JSONLinesProcess.key(id)) {
            id = clientId
            message = message.merging(["id": clientId])
        }
        guard var result = message["result"]?.objectValue else {
            originals[JSONLinesProcess.key(id)] = nil
            questionRounds[JSONLinesProcess.key(id)] = nil
            return message
        }
        switch result["resultType"]?.stringValue {
        case "input_required"?:
            return message
        case nil, "complete"?:
            break
        default:
            // A task, or a kind this bridge does not know: left as it is for the session to judge.
            originals[JSONLinesProcess.key(id)] = nil
            return message
        }
        originals[JSONLinesProcess.key(id)] = nil
        questionRounds[JSONLinesProcess.key(id)] = nil
        for modern in ["resultType", "ttlMs", "cacheScope"] { result[modern] = nil }
        return message.merging(["result": .object(result)])
    }

    /// The server answered the client's request `answerId` with `input_required`: its questions
    /// go to the client as requests, or, with none, the request is retried at once.
    mutating func ask(answerId: JSONValue, result: JSONValue?) -> Asked {
        let key = JSONLinesProcess.key(answerId)
        guard originals[key] != nil else { return .fail("the request was not kept, so it cannot be retried") }
        let rounds = (questionRounds[key] ?? 0) + 1
        questionRounds[key] = rounds
        if rounds >= MCPRound.limit {
            forget(key)
            return .fail("the server asked for input \(rounds) times; agent-eval mcp-proxy ends a request after \(MCPRound.limit) rounds")
        }
        if let asked = result?["inputRequests"], asked != .null, asked.objectValue == nil {
            forget(key)
            return .fail("the server's inputRequests are \(asked.typeDescription), not an object of questions")
        }
        let state = result?["requestState"].flatMap { $0 == .null ? nil : $0 }
        let questions = (result?["inputRequests"]?.objectValue.map(Array.init) ?? []).sorted { $0.key < $1.key }
        if questions.isEmpty { return .retry(retry(key, answerId: answerId, responses: JSONObject(), state: state)) }
        var requests: [JSONValue] = []
        var pending: [String: String] = [:]
        for question in questions {
            guard let method = question.value["method"]?.stringValue else {
                return .fail("the server's input request \"\(question.key)\" names no method")
            }
            sent += 1
            let askId = "\(Self.askPrefix)\(sent)"
            var request = JSONObject([("jsonrpc", "2.0"), ("id", .string(askId)), ("method", .string(method))])
            if var params = question.value["params"]?.objectValue {
                // 2025-11-25 requires a URL elicitation's id, which a 2026-07-28 question may leave
                // to its key: the key is unique within the request.
                if method == "elicitation/create", params["mode"]?.stringValue == "url", params["elicitationId"] == nil {
                    params["elicitationId"] = .string(question.key)
                }
                request["params"] = .object(params)
            } else if let params = question.value["params"], params != .null {
                request["params"] = params
            }
            requests.append(.object(request))
            pending[JSONLinesProcess.key(.string(askId))] = question.key
            askOwners[JSONLinesProcess.key(.string(askId))] = key
        }
        asking[key] = (answerId, pending, JSONObject(), state)
        return .askClient(requests)
    }

    /// The client's answer to one of the bridge's requests; nil for any other message.
    mutating func clientAnswered(_ message: JSONValue) -> Answered? {
        guard message["method"] == nil, let id = message["id"] else { return nil }
        guard let owner = askOwners.removeValue(forKey: JSONLinesProcess.key(id)), var waiting = asking[owner],
            let inputKey = waiting.pending.removeValue(forKey: JSONLinesProcess.key(id))
        else {
            // An answer to a question of a request that ended already: for no one (never the server).
            return way == .towardModern && id.stringValue?.hasPrefix(Self.askPrefix) == true ? .waiting : nil
        }
        // `"error": null` beside a result is no error; with no result, it is an answer that says nothing.
        if let error = message["error"], error != .null || message["result"] == nil {
            forget(owner)
            return .fail(
                answerId: waiting.answerId,
                "the client answered the server's input request \"\(inputKey)\" with an error"
                    + (error["code"]?.intValue.map { " (\($0))" } ?? "") + ": \(error["message"]?.stringValue ?? "no message")")
        }
        waiting.responses[inputKey] = message["result"] ?? [:]
        guard waiting.pending.isEmpty else {
            asking[owner] = waiting
            return .waiting
        }
        asking[owner] = nil
        return .retry(
            answerId: waiting.answerId, retry(owner, answerId: waiting.answerId, responses: waiting.responses, state: waiting.state))
    }

    /// The retry of the request `key` with the client's answers and the server's state.
    private mutating func retry(_ key: String, answerId: JSONValue, responses: JSONObject, state: JSONValue?) -> JSONValue {
        let original = originals[key] ?? ("tools/call", JSONObject())
        sent += 1
        let retryId = JSONValue.string("\(Self.retryPrefix)\(sent)")
        var params = original.params
        params["inputResponses"] = responses.isEmpty ? nil : .object(responses)
        params["requestState"] = state
        retries[JSONLinesProcess.key(retryId)] = answerId
        return ["jsonrpc": "2.0", "id": retryId, "method": .string(original.method), "params": .object(params)]
    }

    /// The request `key` ended (toward a modern server): nothing of it is kept.
    private mutating func forget(_ key: String) {
        originals[key] = nil
        asking[key] = nil
        questionRounds[key] = nil
        askOwners = askOwners.filter { $0.value != key }
        retries = retries.filter { JSONLinesProcess.key($0.value) != key }
    }

    /// Whether the client's id `key` is one the bridge still answers under (toward a modern
    /// server: a request whose questions are out, or whose retry is in flight).
    func holds(_ key: String) -> Bool {
        asking[key] != nil || (way == .towardModern && originals[key] != nil)
    }

    // MARK: Toward a legacy server

    /// A client message on its way to a 2025 server.
    private mutating func towardLegacy(_ message: JSONValue) -> Outgoing {
        let method = message["method"]?.stringValue
        if method == "notifications/cancelled", let requestId = message["params"]?["requestId"] {
            let key = JSONLinesProcess.key(requestId)
            guard let found = exchanges.first(where: { JSONLinesProcess.key($0.value.alias) == key }) else {
                return .send(JSONWriter.encode(message))
            }
            var params = message["params"]?.objectValue ?? JSONObject()
            params["requestId"] = found.value.upstreamId
            let cancel = message.merging(["params": .object(params)])
            return .consumed(toServer: [cancel] + abandon(upstreamKey: found.key, why: "the client cancelled the request"), fromServer: [])
        }
        guard let method, let id = message["id"] else { return .send(JSONWriter.encode(message)) }
        var params = message["params"]?.objectValue ?? JSONObject()
        if Self.multiRoundMethods.contains(method), MCPEra.continues(.object(params)) {
            return continued(id: id, method: method, params: params)
        }
        if var meta = params["_meta"]?.objectValue {
            for key in meta.keys where key.hasPrefix("io.modelcontextprotocol/") { meta[key] = nil }
            params["_meta"] = meta.isEmpty ? nil : .object(meta)
        }
        var forwarded = message
        if message["params"] != nil { forwarded = message.merging(["params": .object(params)]) }
        var upstreamId = id
        if Self.multiRoundMethods.contains(method) {
            sent += 1
            upstreamId = .string("\(Self.upstreamPrefix)\(sent)")
            forwarded = forwarded.merging(["id": upstreamId])
            exchanges[JSONLinesProcess.key(upstreamId)] = Exchange(method: method, upstreamId: upstreamId, alias: id)
        }
        methods[JSONLinesProcess.key(upstreamId)] = method
        return .send(JSONWriter.encode(forwarded))
    }

    /// A 2026-07-28 client's retry: its answers go to the server's requests, and the request's
    /// answer, when it comes, goes to the client under the retry's id.
    private mutating func continued(id: JSONValue, method: String, params: JSONObject) -> Outgoing {
        // The state must be one given, still waiting, to a request of this method: a state cannot
        // carry one request's answers to another's.
        guard let state = params["requestState"]?.stringValue, let key = states[state], var exchange = exchanges[key],
            exchange.state == state, exchange.method == method
        else {
            let error: JSONValue = [
                "jsonrpc": "2.0", "id": id,
                "error": [
                    "code": -32602,
                    "message": .string(
                        "agent-eval mcp-proxy --bridge: the retry's requestState is not one the proxy gave a \(method) waiting for input (altered, used already, or another request's)"
                    ),
                ],
            ]
            return .consumed(toServer: [], fromServer: [error])
        }
        states[state] = nil
        exchange.state = nil
        exchange.alias = id
        if let answer = exchange.answer {
            // The server answered while the client had not retried: the retry gets it.
            exchanges[key] = nil
            return .consumed(toServer: [], fromServer: [answer.merging(["id": id])])
        }
        let responses = params["inputResponses"]?.objectValue ?? JSONObject()
        var answers: [JSONValue] = []
        for (inputKey, serverId) in exchange.asked.sorted(by: { $0.key < $1.key }) {
            if let response = responses[inputKey] {
                answers.append(["jsonrpc": "2.0", "id": serverId, "result": response])
            } else {
                answers.append(
                    [
                        "jsonrpc": "2.0", "id": serverId,
                        "error": ["code": -32603, "message": .string("the client gave no answer to input request \"\(inputKey)\"")],
                    ])
            }
        }
        exchange.asked = [:]
        var next: [JSONValue] = []
        if !exchange.queued.isEmpty { next.append(question(&exchange, key: key)) }
        exchanges[key] = exchange
        return .consumed(toServer: answers, fromServer: next)
    }

    /// A 2025 server's message on its way to a 2026-07-28 client.
    private mutating func fromLegacy(_ message: JSONValue) -> Incoming {
        if let method = message["method"]?.stringValue {
            if method == "ping", let id = message["id"] { return .consumed(toServer: [["jsonrpc": "2.0", "id": id, "result": [:]]]) }
            return .pass(message)
        }
        guard let id = message["id"] else { return .pass(message) }
        let key = JSONLinesProcess.key(id)
        var message = message
        if var result = message["result"]?.objectValue {
            if result["resultType"] == nil { result["resultType"] = "complete" }
            if let method = methods[key], Self.listingMethods.contains(method) {
                if result["ttlMs"] == nil { result["ttlMs"] = 0 }
                if result["cacheScope"] == nil { result["cacheScope"] = "private" }
            }
            message = message.merging(["result": .object(result)])
        }
        methods[key] = nil
        guard var exchange = exchanges[key] else { return .pass(message) }
        if exchange.state != nil {
            // The client has the server's question and has not retried: its retry gets this.
            exchange.answer = message
            exchanges[key] = exchange
            return .consumed(toServer: [])
        }
        exchanges[key] = nil
        return .pass(message.merging(["id": exchange.alias]))
    }

    /// A 2025 server's request to the client (elicitation, sampling, roots), passed by the
    /// session's policy: the question of the one request it can belong to.
    mutating func serverAsked(_ message: JSONValue) -> ServerAsked {
        guard let id = message["id"], let method = message["method"]?.stringValue else { return .queued }
        let open = exchanges.filter { $0.value.answer == nil }
        guard open.count == 1, let (key, found) = open.first else {
            let why =
                open.isEmpty
                ? "the 2026-07-28 client can be asked only within one of its requests, and none is in flight"
                : "the 2026-07-28 client can be asked only within one of its requests, and \(open.count) are in flight: which one asks cannot be told"
            return .answerServer(
                ["jsonrpc": "2.0", "id": id, "error": ["code": -32603, "message": .string("agent-eval mcp-proxy --bridge: \(why)")]])
        }
        var exchange = found
        exchange.queued.append((id, method, message["params"]))
        if exchange.state != nil {
            exchanges[key] = exchange
            return .queued
        }
        let answer = question(&exchange, key: key)
        exchanges[key] = exchange
        return .answerClient(answer)
    }

    /// The `input_required` answer carrying the exchange's queued questions.
    private mutating func question(_ exchange: inout Exchange, key: String) -> JSONValue {
        sent += 1
        let state = "\(Self.statePrefix)\(sent)"
        var questions = JSONObject()
        for asked in exchange.queued {
            exchange.questions += 1
            let inputKey = "\(asked.method.split(separator: "/").first.map(String.init) ?? "request")-\(exchange.questions)"
            var request = JSONObject([("method", .string(asked.method))])
            if let params = asked.params, params != .null { request["params"] = params }
            questions[inputKey] = .object(request)
            exchange.asked[inputKey] = asked.id
        }
        exchange.queued = []
        exchange.state = state
        states[state] = key
        return [
            "jsonrpc": "2.0", "id": exchange.alias,
            "result": ["resultType": "input_required", "inputRequests": .object(questions), "requestState": .string(state)],
        ]
    }

    /// The session gave up on the request the client knows as `answerId` (its question was
    /// refused, or it took too many rounds): the server's requests of it are answered with an
    /// error, so the server is not left waiting. Toward a modern server, nothing is kept of it.
    mutating func abandon(answerId: JSONValue) -> [JSONValue] {
        let key = JSONLinesProcess.key(answerId)
        if way == .towardModern {
            forget(key)
            return []
        }
        guard let found = exchanges.first(where: { JSONLinesProcess.key($0.value.alias) == key }) else { return [] }
        return abandon(upstreamKey: found.key, why: "agent-eval mcp-proxy ended the request")
    }

    private mutating func abandon(upstreamKey: String, why: String) -> [JSONValue] {
        guard let exchange = exchanges.removeValue(forKey: upstreamKey) else { return [] }
        if let state = exchange.state { states[state] = nil }
        let ids = exchange.asked.sorted { $0.key < $1.key }.map(\.value) + exchange.queued.map(\.id)
        return ids.map { ["jsonrpc": "2.0", "id": $0, "error": ["code": -32603, "message": .string(why)]] }
    }

    // MARK: Both ways

    /// A client message on its way to the server.
    mutating func outgoing(_ message: JSONValue) -> Outgoing {
        switch way {
        case .towardModern: towardModern(message)
        case .towardLegacy: towardLegacy(message)
        default: .send(JSONWriter.encode(message))
        }
    }

    /// A server message on its way to the client.
    mutating func incoming(_ message: JSONValue) -> Incoming {
        switch way {
        case .towardModern: .pass(fromModern(message))
        case .towardLegacy: fromLegacy(message)
        default: .pass(message)
        }
    }
}
