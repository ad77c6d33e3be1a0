import ConfigFile
import Foundation
public import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a person answers a call that waits for approval in a running `agent-eval mcp-proxy`:
/// files beside the log (docs/mcp.md, "Approvals").
///
/// - The proxy writes `<log>.approvals/<call id>.pending.json` — the call id, tool, arguments
///   (redacted as the log redacts them), and the rule that asked — and waits. It also writes the
///   call's proof, a random secret, where the agent's tools do not reach: not beside the log (a
///   filesystem server rooted at the project could write an answer there) but in the user's
///   runtime or state folder (`proofDirectory`), readable by the user alone.
/// - `agent-eval approve <log> <call id>` or `agent-eval deny <log> <call id>` (or `serve`'s page)
///   writes `<call id>.json`: `{"granted": true|false, "approver": …, "reason": …, "proof": …}`,
///   atomically.
/// - The proxy reads it, records `approval_recorded`, removes the files and goes on. An answer
///   whose proof is not the call's was not written by agent-eval: it is a refusal that says so.
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

        public init(callId: String, tool: String, arguments: JSONValue, rule: String? = nil, reason: String? = nil) {
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

    /// The calls that wait in the proxy writing `log`, by call id. What each call is — its tool,
    /// arguments, rule — is read from where the proxy keeps the call's proof, which the agent's
    /// tools do not reach: the pending file beside the log says only which calls wait, since an
    /// agent that can write there could make it show another call than the one that would run.
    ///
    /// Only a process that holds the log's write lock (the proxy, or the run it is part of) waits:
    /// the pending files of a proxy that exited or was killed are left from it, and an answer to
    /// them would be taken by nothing — so they are not listed, and not answered.
    public static func pending(log: String) -> [PendingCall] {
        guard LogWriter.writerProcess(of: log) != nil else { return [] }
        return listed(log: log)
    }

    /// The calls the pending files beside `log` name, whoever writes it.
    private static func listed(log: String) -> [PendingCall] {
        let directory = directory(forLog: log)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".pending.json") }.sorted().compactMap { name in
            guard let data = FileManager.default.contents(atPath: directory + "/" + name),
                let value = try? JSONParser.parse(Array(data)), let shown = PendingCall(value)
            else { return nil }
            return proofRecord(log: log, callId: shown.callId)?.call ?? shown
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
        guard LogWriter.writerProcess(of: log) != nil else {
            let left = listed(log: log).contains { $0.callId == callId }
            throw RecordingError(
                .approvalFailed,
                left
                    ? "call \"\(callId)\" was waiting in \(log), but no process waits for its answer now: nothing holds the log's "
                        + "write lock (the proxy exited or was killed), so an answer would be taken by nothing"
                    : "no call \"\(callId)\" waits for approval in \(log): no process writes it",
                hint: left
                    ? "make the call again through a running mcp-proxy; agent-eval log verify \(log) says how the log ended"
                    : "nothing waits there now: no mcp-proxy (or run) is writing the log")
        }
        let waiting = pending(log: log)
        guard let call = waiting.first(where: { $0.callId == callId }) else {
            let others = waiting.map(\.callId)
            throw RecordingError(
                .approvalFailed, "no call \"\(callId)\" waits for approval in \(log)",
                hint: others.isEmpty
                    ? "nothing waits there now: the proxy may have given up (--approval-timeout) or the call was answered already"
                    : "waiting there: \(others.joined(separator: ", "))")
        }
        guard let proof = readProof(log: log, callId: callId) else {
            throw RecordingError(
                .approvalFailed,
                "call \"\(callId)\" waits in \(log), but its proof cannot be read from \(proofDirectory() ?? "the user's runtime folder")",
                hint: "answer as the user who runs the proxy, with the same XDG_RUNTIME_DIR (or HOME)")
        }
        var object = ObjectBuilder()
        object.set("granted", answer.isGranted)
        object.set("approver", answer.approver)
        object.set("reason", answer.reason)
        object.set("proof", proof)
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

    /// Asks for an answer to `call`, which waits in the proxy writing `log`: its proof, then its
    /// pending file. (Public for what stands in for a proxy, as tests of `approve` do.)
    public static func ask(log: String, call: PendingCall) throws {
        // What a person reads to decide, redacted as the log is: a secret in the arguments is no
        // more in these files than in the log.
        let text = Redactor.standard.redactEncoded(String(decoding: JSONWriter.encode(call.json), as: UTF8.self))
        // The proof first, with the call as it will run: a call is never seen waiting without one.
        try writeProof(log: log, callId: call.callId, call: (try? JSONParser.parse(Array(text.utf8))) ?? call.json)
        let directory = directory(forLog: log)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Made aside, readable by this user alone, then renamed into place whole.
        let aside = directory + "/.\(call.callId).pending.\(getpid()).json"
        guard FileManager.default.createFile(atPath: aside, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]),
            rename(aside, directory + "/\(call.callId).pending.json") == 0
        else {
            unlink(aside)
            throw RecordingError(.approvalFailed, "cannot write the request for approval of call \"\(call.callId)\" in \(directory)")
        }
    }

    /// The answer to `callId`, once one was written; a file that does not read as an answer, or
    /// whose proof is not the call's, is a refusal that says so.
    static func takeAnswer(log: String, callId: String) -> Answer? {
        let path = directory(forLog: log) + "/\(callId).json"
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let value = try? JSONParser.parse(Array(data)), let granted = value["granted"]?.boolValue else {
            return Answer(isGranted: false, approver: nil, reason: "the answer file \(path) does not hold {\"granted\": true|false}")
        }
        guard let expected = readProof(log: log, callId: callId), let given = value["proof"]?.stringValue,
            ContentHash.sameSecret(given, expected)
        else {
            return Answer(
                isGranted: false, approver: nil,
                reason: "the answer file \(path) carries no proof of this call: it was not written by agent-eval approve, deny or "
                    + "serve (an agent's own tool may have written it), so it is taken as a refusal")
        }
        return Answer(isGranted: granted, approver: value["approver"]?.stringValue, reason: value["reason"]?.stringValue)
    }

    // MARK: Proofs

    /// Where calls' proofs are kept: `$XDG_RUNTIME_DIR/agent-eval-approvals`, else
    /// `~/.local/state/agent-eval/approvals`; made with mode 0700. Nil when neither can be made
    /// (then no call can wait for approval: each is refused, saying why).
    static func proofDirectory() -> String? {
        let environment = ProcessInfo.processInfo.environment
        let base: String
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty, FileManager.default.fileExists(atPath: runtime) {
            base = runtime + "/agent-eval-approvals"
        } else {
            base = NSHomeDirectory() + "/.local/state/agent-eval/approvals"
        }
        do {
            try FileManager.default.createDirectory(
                atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            return nil
        }
        // Ours alone: a folder another user made could be read or planted in. One of ours that
        // others may read (made before, under another umask) is closed first.
        var info = stat()
        guard lstat(base, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else { return nil }
        if info.st_mode & 0o077 != 0 {
            guard chmod(base, 0o700) == 0, lstat(base, &info) == 0, info.st_mode & 0o077 == 0 else { return nil }
        }
        return base
    }

    /// The file of a call's proof: named by the log's path (absolute, links resolved: the proxy
    /// and `approve` may name it differently) and the call id, hashed.
    static func proofPath(log: String, callId: String) -> String? {
        let path = URL(fileURLWithPath: ConfigPath.absolute(log)).resolvingSymlinksInPath().path
        return proofDirectory().map { $0 + "/" + ContentHash.sha256Hex(Array((path + "\n" + callId).utf8)) }
    }

    private static func writeProof(log: String, callId: String, call: JSONValue) throws {
        guard let path = proofPath(log: log, callId: callId) else {
            throw RecordingError(
                .approvalFailed,
                "no folder readable by this user alone can hold the proof of call \"\(callId)\" ($XDG_RUNTIME_DIR/agent-eval-approvals, "
                    + "else ~/.local/state/agent-eval/approvals)",
                hint: "set XDG_RUNTIME_DIR to a folder of yours, or make ~/.local/state writable and yours alone")
        }
        var generator = SystemRandomNumberGenerator()
        let proof = (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }.joined(separator: "-")
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let why = String(cString: strerror(errno))
            throw RecordingError(.approvalFailed, "cannot write the proof of call \"\(callId)\" at \(path): \(why)")
        }
        defer { close(fd) }
        let bytes = JSONWriter.encode(["proof": .string(proof), "call": call] as JSONValue)
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
            throw RecordingError(.approvalFailed, "cannot write the proof of call \"\(callId)\" at \(path)")
        }
    }

    private static func readProof(log: String, callId: String) -> String? {
        proofRecord(log: log, callId: callId)?.proof
    }

    /// A call's proof and the call as the proxy asked about it, from where the agent's tools do
    /// not reach; nil when it cannot be read.
    private static func proofRecord(log: String, callId: String) -> (proof: String, call: PendingCall?)? {
        guard let path = proofPath(log: log, callId: callId), let data = FileManager.default.contents(atPath: path), !data.isEmpty else {
            return nil
        }
        guard let value = try? JSONParser.parse(Array(data)), let proof = value["proof"]?.stringValue else {
            // Written by an agent-eval before the record held the call: the proof alone.
            return (String(decoding: data, as: UTF8.self), nil)
        }
        return (proof, value["call"].flatMap(PendingCall.init))
    }

    /// Removes a call's files, and the folder once it is empty, under the folder's lock.
    static func clear(log: String, callId: String) {
        let directory = directory(forLog: log)
        if let proof = proofPath(log: log, callId: callId) { unlink(proof) }
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
