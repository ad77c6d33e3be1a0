public import Foundation
import Synchronization
public import TraceCore

/// This side of a JSON-RPC 2.0 conversation with a `JSONLinesProcess` (an MCP server over stdio):
/// the requests it sends, each matched to its answer by id, under a deadline (`Deadline.run` on
/// the injected clock) and the caller's cancellation; the server's own requests answered; every
/// request still waiting failed at once when the server fails. The one place the project matches
/// JSON-RPC ids to answers: MCP tools read a server's messages through it (`readMessages`), and
/// the MCP proxy, which reads them itself, hands it each answer (`take`).
///
/// ```swift
/// let peer = JSONRPCPeer(server: server, idPrefix: "agent-eval")
/// let reader = Task { await peer.readMessages { method, _ in method == "ping" ? .success([:]) : .failure(.methodNotFound(method)) } }
/// switch await peer.request("tools/list", params: [:], within: .seconds(30), on: clock) { … }
/// ```
public final class JSONRPCPeer: Sendable {
    /// A JSON-RPC error object: what the other side answered instead of a result.
    public struct RemoteError: Error, Sendable, Hashable {
        public var code: Int
        public var message: String
        public var data: JSONValue?

        public init(code: Int, message: String, data: JSONValue? = nil) {
            self.code = code
            self.message = message
            self.data = data
        }

        /// `-32601`: this side does not take the method the server asked for.
        public static func methodNotFound(_ method: String) -> RemoteError {
            RemoteError(code: -32601, message: "agent-eval does not take \(method)")
        }

        var json: JSONValue {
            var object = ObjectBuilder()
            object.set("code", code)
            object.set("message", message)
            object.set("data", data)
            return object.json
        }
    }

    /// How a request ended without a result.
    public enum Failure: Error, Sendable, Hashable {
        /// The server answered with an error object.
        case remote(RemoteError)
        /// The conversation ended (the server exited, failed, or could not be written to): why.
        case failed(String)
        /// No answer came within the deadline; the server was told (`notifications/cancelled`).
        case timedOut
        /// The caller was cancelled before the answer came.
        case cancelled
    }

    public typealias Answer = Result<JSONValue, Failure>

    private enum Slot {
        case waiting(CheckedContinuation<Answer, Never>?)
        case answered(Answer)
    }

    private struct State {
        var pending: [String: Slot] = [:]
        var sent = 0
        var failure: String?
        /// Answers to requests this peer never sent (or gave up on): how many, and the last one's id.
        var strays = 0
        var lastStray: String?
    }

    /// How many answers came for requests this peer never sent, or gave up on, and the last one's
    /// id (JSON): a server that mixes up ids answers another request than the one waiting, which
    /// would otherwise read as silence.
    public var strayAnswers: (count: Int, last: String?) { state.withLock { ($0.strays, $0.lastStray) } }

    public let server: JSONLinesProcess
    private let idPrefix: String
    private let state = Mutex(State())

    /// A peer of `server` whose request ids are `<idPrefix>-1`, `<idPrefix>-2`…
    public init(server: JSONLinesProcess, idPrefix: String) {
        self.server = server
        self.idPrefix = idPrefix
        _ = server.onFailure { [weak self] why in self?.failAll(why) }
    }

    /// Sends a request and waits for its answer within `duration` on `clock`, the write too: a
    /// server that does not read its input holds the caller past the deadline only when no
    /// `abandon` ends it (and a process outside the server's group that kept the pipe open can
    /// hold even that). A request the deadline passed is cancelled with the server
    /// (`notifications/cancelled`, sent without waiting), and its late answer is dropped. A
    /// caller that is cancelled gets `cancelled`, whatever its `abandon` made of the server.
    ///
    /// `abandon` runs when the wait is given up before the answer came — the deadline passed or
    /// the caller was cancelled — before this returns: MCP tools kill the server there, which
    /// also ends a write the server never read.
    public func request(
        _ method: String, params: JSONValue?, within duration: Duration, on clock: any Clock<Duration>,
        abandon: (@Sendable () -> Void)? = nil
    ) async -> Answer {
        let (key, id, failure) = state.withLock { state -> (String, JSONValue, String?) in
            state.sent += 1
            let id = JSONValue.string("\(idPrefix)-\(state.sent)")
            let key = JSONLinesProcess.key(id)
            if state.failure == nil { state.pending[key] = .waiting(nil) }
            return (key, id, state.failure)
        }
        if let failure { return .failure(.failed(failure)) }
        var message = JSONObject([("jsonrpc", "2.0"), ("id", id), ("method", .string(method))])
        if let params { message["params"] = params }
        let bytes = Data(JSONWriter.encode(JSONValue.object(message)))
        let server = self.server
        let (answer, timedOut) = await Deadline.run(within: duration, on: clock) { () -> Answer in
            await withTaskCancellationHandler {
                do {
                    try await server.send(bytes)
                } catch {
                    _ = self.state.withLock { $0.pending.removeValue(forKey: key) }
                    return .failure(.failed(server.failure ?? "\(error)"))
                }
                return await self.answer(key)
            } onCancel: {
                abandon?()
            }
        }
        guard timedOut else {
            if Task.isCancelled, case .failure = answer { return .failure(.cancelled) }
            return answer
        }
        _ = state.withLock { $0.pending.removeValue(forKey: key) }
        // The answer came as the deadline passed (its slot already taken): it stands.
        switch answer {
        case .success, .failure(.remote): return answer
        default: break
        }
        if case .failure(.failed) = answer, abandon == nil { return answer }
        let cancel: JSONValue = [
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": ["requestId": id, "reason": "agent-eval stopped waiting for the answer"],
        ]
        // Not waited for: a server that does not read its input must not hold the caller.
        Task { try? await server.send(Data(JSONWriter.encode(cancel))) }
        return .failure(.timedOut)
    }

    /// Sends a notification; throws when the server cannot be written to.
    public func notify(_ method: String, params: JSONValue?) async throws {
        var message = JSONObject([("jsonrpc", "2.0"), ("method", .string(method))])
        if let params { message["params"] = params }
        try await server.send(Data(JSONWriter.encode(JSONValue.object(message))))
    }

    /// Waits for the answer of the request `key`; `cancelled` when the caller is cancelled first.
    private func answer(_ key: String) async -> Answer {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Answer? in
                    switch state.pending[key] {
                    case .answered(let answer)?:
                        state.pending[key] = nil
                        return answer
                    case .waiting?:
                        state.pending[key] = .waiting(continuation)
                        return nil
                    case nil:
                        return .failure(.failed(state.failure ?? "the request was withdrawn"))
                    }
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            _ = resolve(key, .failure(.cancelled))
        }
    }

    /// Gives the request `key` its answer; false when no request of this peer waits for it.
    private func resolve(_ key: String, _ answer: Answer) -> Bool {
        let (found, continuation) = state.withLock { state -> (Bool, CheckedContinuation<Answer, Never>?) in
            guard case .waiting(let continuation)? = state.pending[key] else { return (false, nil) }
            if continuation == nil {
                state.pending[key] = .answered(answer)
            } else {
                state.pending[key] = nil
            }
            return (true, continuation)
        }
        continuation?.resume(returning: answer)
        return found
    }

    /// Takes a message of the server's if it answers one of this peer's requests: true when it
    /// did (the request has its answer), false for anything else (left to the caller).
    public func take(_ message: JSONValue) -> Bool {
        guard let id = message["id"], let answer = Self.answer(of: message) else { return false }
        return resolve(JSONLinesProcess.key(id), answer)
    }

    /// What a JSON-RPC answer says: its result, or its error object; nil for a message that is
    /// not an answer (a request, a notification, neither `result` nor `error`). The one reading
    /// of an answer, over stdio and over HTTP.
    public static func answer(of message: JSONValue) -> Answer? {
        guard message["method"] == nil, message["id"] != nil else { return nil }
        // `"error": null` beside a result (a serializer that writes every member) is no error.
        if let error = message["error"], error != .null {
            return .failure(
                .remote(
                    RemoteError(
                        code: error["code"]?.intValue ?? 0, message: error["message"]?.stringValue ?? "no message", data: error["data"])))
        }
        if let result = message["result"] { return .success(result) }
        // `"error": null` and no result: an answer that says nothing, which nothing may wait on.
        if message["error"] != nil {
            return .failure(.remote(RemoteError(code: 0, message: "the server answered with \"error\": null and no result", data: nil)))
        }
        return nil
    }

    /// The conversation is over: every request waiting fails with `why`, and later ones at once.
    public func failAll(_ why: String) {
        let waiting = state.withLock { state -> [CheckedContinuation<Answer, Never>] in
            if state.failure == nil { state.failure = why }
            var waiting: [CheckedContinuation<Answer, Never>] = []
            for (key, slot) in state.pending {
                guard case .waiting(let continuation) = slot else { continue }
                if let continuation {
                    waiting.append(continuation)
                    state.pending[key] = nil
                } else {
                    state.pending[key] = .answered(.failure(.failed(why)))
                }
            }
            return waiting
        }
        for continuation in waiting { continuation.resume(returning: .failure(.failed(why))) }
    }

    /// Reads the server's messages until they end: answers go to this peer's requests, the
    /// server's requests to `answering` (its result or error is sent back), notifications and
    /// answers nobody waits for are dropped. At the end every request still waiting fails.
    public func readMessages(answering: @Sendable (_ method: String, _ params: JSONValue?) -> Result<JSONValue, RemoteError>) async {
        do {
            for try await line in server.messages {
                guard let message = try? JSONParser.parse(Array(line)), !take(message) else { continue }
                if message["method"] == nil, let id = message["id"], Self.answer(of: message) != nil {
                    state.withLock { state in
                        state.strays += 1
                        state.lastStray = JSONWriter.encodeString(id)
                    }
                    continue
                }
                guard let method = message["method"]?.stringValue, let id = message["id"] else { continue }
                var reply = JSONObject([("jsonrpc", "2.0"), ("id", id)])
                switch answering(method, message["params"]) {
                case .success(let result): reply["result"] = result
                case .failure(let error): reply["error"] = error.json
                }
                // Not waited for: reading goes on whether or not the server reads its input.
                let bytes = Data(JSONWriter.encode(JSONValue.object(reply)))
                let server = self.server
                Task { try? await server.send(bytes) }
            }
        } catch {}
        failAll(server.failure ?? "the server closed its output")
    }
}
