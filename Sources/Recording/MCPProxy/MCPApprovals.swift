import Foundation
public import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a person answers a call that waits for approval in a running `agent-eval mcp-proxy`:
/// files beside the log (docs/mcp.md, "Approvals").
///
/// - The proxy writes `<log>.approvals/<call id>.pending.json` — the call id, tool, arguments,
///   and the rule that asked — and waits.
/// - `agent-eval approve <log> <call id>` or `agent-eval deny <log> <call id>` (or anything that writes the same JSON)
///   writes `<call id>.json`: `{"granted": true|false, "approver": …, "reason": …}`, atomically.
/// - The proxy reads it, records `approval_recorded`, removes both files and goes on.
public enum MCPApprovals {
    /// A call that waits.
    public struct PendingCall: Sendable, Hashable {
        public var callId: String
        public var tool: String
        public var arguments: JSONValue
        public var rule: String?
        public var reason: String?

        /// As the pending file holds it (and `agent-eval approve --json` prints it).
        public var json: JSONValue {
            var object = ObjectBuilder()
            object.set("call_id", callId)
            object.set("tool", tool)
            object.set("arguments", arguments)
            object.set("rule", rule)
            object.set("reason", reason)
            return object.json
        }

        init(callId: String, tool: String, arguments: JSONValue, rule: String?, reason: String?) {
            self.callId = callId
            self.tool = tool
            self.arguments = arguments
            self.rule = rule
            self.reason = reason
        }

        init?(_ value: JSONValue) {
            guard let callId = value["call_id"]?.stringValue, let tool = value["tool"]?.stringValue else { return nil }
            self.init(
                callId: callId, tool: tool, arguments: value["arguments"] ?? [:], rule: value["rule"]?.stringValue,
                reason: value["reason"]?.stringValue)
        }
    }

    /// A person's answer.
    public struct Answer: Sendable, Hashable {
        public var isGranted: Bool
        public var approver: String?
        public var reason: String?

        public init(isGranted: Bool, approver: String? = nil, reason: String? = nil) {
            self.isGranted = isGranted
            self.approver = approver
            self.reason = reason
        }
    }

    /// The folder of a log's approvals.
    public static func directory(forLog log: String) -> String { log + ".approvals" }

    /// The calls that wait in the proxy writing `log`, by call id.
    public static func pending(log: String) -> [PendingCall] {
        let directory = directory(forLog: log)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".pending.json") }.sorted().compactMap { name in
            guard let data = FileManager.default.contents(atPath: directory + "/" + name),
                let value = try? JSONParser.parse(Array(data))
            else { return nil }
            return PendingCall(value)
        }
    }

    /// Answers the call `callId` that waits in the proxy writing `log`; returns the call.
    /// Throws when no such call waits (naming the ones that do) or the answer cannot be written.
    @discardableResult
    public static func answer(log: String, callId: String, with answer: Answer) throws(RecordingError) -> PendingCall {
        // The look at the waiting call and the answer's link, under the folder's lock: the proxy
        // clears a settled call's files under it too, so an answer is never linked after the
        // call it answers was taken and cleared (it would be told it was taken, and lie there).
        try withLock(log: log) { () throws(RecordingError) -> PendingCall in try place(answer, for: callId, log: log) }
    }

    private static func place(_ answer: Answer, for callId: String, log: String) throws(RecordingError) -> PendingCall {
        let waiting = pending(log: log)
        guard let call = waiting.first(where: { $0.callId == callId }) else {
            let others = waiting.map(\.callId)
            throw RecordingError(
                .approvalFailed, "no call \"\(callId)\" waits for approval in \(log)",
                hint: others.isEmpty
                    ? "nothing waits there now: the proxy may have given up (--approval-timeout) or the call was answered already"
                    : "waiting there: \(others.joined(separator: ", "))")
        }
        var object = ObjectBuilder()
        object.set("granted", answer.isGranted)
        object.set("approver", answer.approver)
        object.set("reason", answer.reason)
        // Written aside, then linked into place: `link` refuses a name that exists, so of two
        // people answering at once exactly one answer is taken, and the other is told.
        let final = directory(forLog: log) + "/\(callId).json"
        let aside = directory(forLog: log) + "/.\(callId).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).json"
        do {
            try Data(JSONWriter.encode(object.json)).write(to: URL(fileURLWithPath: aside))
        } catch {
            throw RecordingError(
                .approvalFailed, "cannot write the answer for call \"\(callId)\" beside \(log): \(error.localizedDescription)")
        }
        defer { unlink(aside) }
        guard link(aside, final) == 0 else {
            let linkError = errno
            if linkError == EEXIST {
                let other = takeAnswer(log: log, callId: callId)
                let said = other.map { ($0.isGranted ? "approved" : "denied") + ($0.approver.map { " by \($0)" } ?? "") } ?? "answered"
                throw RecordingError(
                    .alreadyAnswered, "call \"\(callId)\" was \(said) already; this answer was not taken",
                    hint: "agent-eval approve \(ShellWords.quoted(log)) lists the calls that still wait")
            }
            throw RecordingError(
                .approvalFailed, "cannot write the answer for call \"\(callId)\" beside \(log): \(String(cString: strerror(linkError)))")
        }
        return call
    }

    // MARK: The proxy's side

    static func ask(log: String, call: PendingCall) throws {
        let directory = directory(forLog: log)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(JSONWriter.encode(call.json)).write(
            to: URL(fileURLWithPath: directory + "/\(call.callId).pending.json"), options: .atomic)
    }

    /// The answer to `callId`, once one was written; a file that does not read as an answer is
    /// a refusal that says so (a person meant to answer, but not what they wrote).
    static func takeAnswer(log: String, callId: String) -> Answer? {
        let path = directory(forLog: log) + "/\(callId).json"
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let value = try? JSONParser.parse(Array(data)), let granted = value["granted"]?.boolValue else {
            return Answer(isGranted: false, approver: nil, reason: "the answer file \(path) does not hold {\"granted\": true|false}")
        }
        return Answer(isGranted: granted, approver: value["approver"]?.stringValue, reason: value["reason"]?.stringValue)
    }

    /// Removes a call's files, and the folder once it is empty, under the folder's lock.
    static func clear(log: String, callId: String) {
        let directory = directory(forLog: log)
        withLock(log: log) {
            for name in ["\(callId).pending.json", "\(callId).json"] { try? FileManager.default.removeItem(atPath: directory + "/" + name) }
            if (try? FileManager.default.contentsOfDirectory(atPath: directory))?.isEmpty == true {
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
    }

    /// Runs `body` holding the lock of the log's approvals folder (`flock` on the folder: released
    /// when the process ends, however it ends). With no folder nothing waits, and `body` runs as
    /// it is (it finds nothing).
    static func withLock<T, E: Error>(log: String, _ body: () throws(E) -> T) throws(E) -> T {
        let folder = open(directory(forLog: log), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { return try body() }
        defer { close(folder) }
        while flock(folder, LOCK_EX) != 0 && errno == EINTR {}
        defer { flock(folder, LOCK_UN) }
        return try body()
    }
}
