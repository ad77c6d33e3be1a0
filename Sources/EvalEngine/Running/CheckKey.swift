import Foundation
public import TraceCore
import TraceLog

/// What a case check's result depends on besides the log: the case (its whole file, so any
/// edit counts), the options that change a check, and the program doing the checking (its
/// executable's size and modification time, so a rebuilt or upgraded agent-eval never trusts
/// results an older one stored). A cache may keep a result under this key for as long as the
/// log's facts are unchanged.
public struct CheckKey: Sendable, Hashable {
    /// A SHA-256 hex digest.
    public let digest: String

    /// Bump when what a check result holds changes (`RunResult.cacheJSON`). (2: the run's id and start.)
    static let formVersion = 2

    /// The key for checking `evalCase` under `options`; nil when its file or the executable
    /// cannot be read (then nothing is cached).
    public init?(case evalCase: EvalCase, options: EvalOptions) {
        guard let file = Self.fileDigest(evalCase.location.path) else { return nil }
        self.init(case: evalCase, options: options, fileDigest: file)
    }

    /// The keys of `cases`, in order (nil where `init(case:options:)` gives nil), each case
    /// file read and hashed once however many cases it holds.
    public static func keys(for cases: [EvalCase], options: EvalOptions) -> [CheckKey?] {
        var digests: [String: String?] = [:]
        return cases.map { evalCase in
            let path = evalCase.location.path
            let digest = digests[path] ?? fileDigest(path)
            digests[path] = .some(digest)
            return digest.flatMap { CheckKey(case: evalCase, options: options, fileDigest: $0) }
        }
    }

    private init?(case evalCase: EvalCase, options: EvalOptions, fileDigest: String) {
        guard let program = Self.executableIdentity else { return nil }
        var text = "agent-eval check result \(Self.formVersion), facts \(LogFacts.extractorVersion)\n"
        text += "\(program)\n\(evalCase.id)\n\(evalCase.location.line)\n"
        text += "countsDeniedAttempts \(options.countsDeniedAttempts), allowsUnfinished \(evalCase.allowsUnfinished)\n"
        if evalCase.allowsReusedCallIds { text += "allowsReusedCallIds true\n" }
        text += "file \(fileDigest)\n"
        // The policy file is another file: an edit to it changes the result too.
        if let policy = evalCase.policy { text += "policy \(policy.digest)\n" }
        digest = ContentHash.sha256Hex(Array(text.utf8))
    }

    /// The SHA-256 of the case file at `path`; nil when it cannot be read.
    private static func fileDigest(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { ContentHash.sha256Hex($0) }
    }

    /// `size:mtime_ns` of the running executable (nil where it cannot be found).
    static let executableIdentity: String? = FileStamp(path: "/proc/self/exe").map { "\($0.size):\($0.mtimeNs)" }
}

extension RunResult {
    /// The cache's form of a result without an error: `{"failures", "notes", "summary"}`; the
    /// log path, repeat index and check time belong to the run that uses it.
    public var cacheJSON: JSONValue {
        let failures = failures.map(\.fields.json)
        let notes = notes.map { note in
            var entry = ObjectBuilder()
            entry.set("message", note.message)
            entry.set("step", note.step)
            return entry.json
        }
        var summary = ObjectBuilder()
        summary.set("tools", JSONValue.array(self.summary.tools.map { .string($0) }))
        summary.set("attempted", JSONValue.array(self.summary.attempted.map { .string($0) }))
        summary.set("stop_reason", self.summary.stopReason?.rawValue)
        summary.set("limit", self.summary.limit?.rawValue)
        summary.set("steps", self.summary.steps)
        summary.set("tokens", self.summary.tokens)
        summary.set("duration_ms", self.summary.durationMs)
        summary.set("tear", self.summary.tear)
        summary.set("user_turns", self.summary.userTurns)
        summary.set("user_tokens", self.summary.userTokens)
        summary.set("available_tools", JSONValue.array(self.summary.availableTools.map { .string($0) }))
        summary.set("available_servers", JSONValue.array(self.summary.availableServers.map { .string($0) }))
        summary.set("run_id", self.summary.runId)
        summary.set("started_at_us", self.summary.startedAtUs)
        var object = ObjectBuilder()
        object.set("failures", JSONValue.array(failures))
        object.set("notes", JSONValue.array(notes))
        object.set("summary", summary.json)
        return object.json
    }

    /// A result from its cache form, for `log`; nil when the form does not fit (then the
    /// cache entry is ignored and the log checked again).
    public init?(cached json: JSONValue, log: String, repeatIndex: Int) {
        func strings(_ value: JSONValue?) -> [String]? {
            guard let array = value?.arrayValue else { return nil }
            let texts = array.compactMap(\.stringValue)
            return texts.count == array.count ? texts : nil
        }
        guard let failureList = json["failures"]?.arrayValue, let noteList = json["notes"]?.arrayValue,
            let summaryObject = json["summary"], let tools = strings(summaryObject["tools"]),
            let attempted = strings(summaryObject["attempted"]), let available = strings(summaryObject["available_tools"]),
            // An entry from before servers were kept is checked again: a case's policy names them.
            let servers = strings(summaryObject["available_servers"]),
            let steps = summaryObject["steps"]?.intValue, let tokens = summaryObject["tokens"]?.intValue,
            let durationMs = summaryObject["duration_ms"]?.intValue
        else { return nil }
        var failures: [ExpectationFailure] = []
        for entry in failureList {
            guard let expectation = entry["expectation"]?.stringValue, let expected = entry["expected"]?.stringValue,
                let actual = entry["actual"]?.stringValue
            else { return nil }
            failures.append(
                ExpectationFailure(
                    expectation: expectation, expected: expected, actual: actual, step: entry["step"]?.intValue,
                    callId: entry["call_id"]?.stringValue, log: entry["log"]?.stringValue))
        }
        var notes: [CheckNote] = []
        for entry in noteList {
            guard let message = entry["message"]?.stringValue else { return nil }
            notes.append(CheckNote(message: message, step: entry["step"]?.intValue))
        }
        var summary = RunSummary()
        summary.tools = tools
        summary.attempted = attempted
        if let reason = summaryObject["stop_reason"]?.stringValue {
            guard let stopReason = StopReason(rawValue: reason) else { return nil }
            summary.stopReason = stopReason
        }
        if let limit = summaryObject["limit"]?.stringValue {
            guard let kind = LimitKind(rawValue: limit) else { return nil }
            summary.limit = kind
        }
        summary.steps = steps
        summary.tokens = tokens
        summary.durationMs = durationMs
        summary.tear = summaryObject["tear"]?.stringValue
        summary.userTurns = summaryObject["user_turns"]?.intValue
        summary.userTokens = summaryObject["user_tokens"]?.intValue
        summary.availableTools = available
        summary.availableServers = servers
        summary.runId = summaryObject["run_id"]?.stringValue
        summary.startedAtUs = summaryObject["started_at_us"]?.intValue
        self.init(logPath: log, repeatIndex: repeatIndex, failures: failures, notes: notes, error: nil, summary: summary)
    }
}

extension ExpectationFailure {
    /// `{expectation, expected, actual, step?, call_id?, log?}`: a failure in reports and in the cache.
    var fields: ObjectBuilder {
        var entry = ObjectBuilder()
        entry.set("expectation", expectation)
        entry.set("expected", expected)
        entry.set("actual", actual)
        entry.set("step", step)
        entry.set("call_id", callId)
        entry.set("log", log)
        return entry
    }
}
