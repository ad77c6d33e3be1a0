import Foundation
public import TraceCore

/// `agent-eval case from-log`: a case that pins a run's trajectory — tools called, their order
/// and arguments, the stop reason and limit — as a starting point to edit. Argument keys whose
/// values change from run to run (ids, timestamps, nonces) are listed in `ignoreKeys`. A run
/// that did not finish gets `allowUnfinished: true` and no `toolsNotCalled`.
public struct CaseDraft: Sendable {
    public var mode: SequenceExpectation.Mode
    /// How arguments are pinned: exact (the default), superset (at least these keys), or ignore.
    public var argumentMode: ArgumentMatcher.Mode
    /// Keys to ignore on top of the volatile ones found.
    public var ignoredKeys: [String]
    public var caseId: String?

    public init(
        mode: SequenceExpectation.Mode = .strict, argumentMode: ArgumentMatcher.Mode = .exact, ignoredKeys: [String] = [],
        caseId: String? = nil
    ) {
        self.mode = mode
        self.argumentMode = argumentMode
        self.ignoredKeys = ignoredKeys
        self.caseId = caseId
    }

    /// Key names that usually hold a value that differs between runs.
    public static let volatileKeyNames: Set<String> = [
        "id", "request_id", "requestid", "trace_id", "span_id", "session_id", "idempotency_key", "nonce", "timestamp", "time", "date",
        "datetime", "created_at", "updated_at", "uuid",
    ]

    /// The case file's text (YAML; values in JSON's flow form, which YAML reads as written).
    /// `logReference` is the log's path as the case file names it (relative to the case file).
    public func yaml(for state: RunState, logReference: String) -> String {
        let executed = state.executedCalls
        var lines: [String] = []
        let source =
            state.start?.source.map { " (imported from \($0.format): \($0.file))" }
            ?? state.forked.map {
                " (a fork of run \($0.parentRunId) after its step \($0.step): \($0.edits.isEmpty ? "no edit" : $0.edits.map(\.summary).joined(separator: "; ").split(whereSeparator: \.isNewline).joined(separator: " ")))"
            }
            ?? ""
        lines.append("# Drafted by `agent-eval case from-log` from run \(state.runId ?? "?")\(source).")
        lines.append("# It pins what the run did; loosen what may change (docs/eval-cases.md).")
        let id = caseId ?? Self.caseId(from: logReference)
        lines.append("caseId: \(Self.scalar(id))")
        lines.append("logs: \(Self.scalar(logReference))")
        if state.stop == nil {
            // Else the case could not run: a run that did not finish cannot be graded unless the
            // case says so. What it never called is not pinned, as it might have called it later.
            lines.append("# The run did not finish (its log ends before run_stopped): the case checks what it recorded.")
            lines.append("allowUnfinished: true")
        }
        lines.append("expected:")
        var called: [String] = []
        for call in executed where !called.contains(call.tool) { called.append(call.tool) }
        lines.append("  toolsCalled: \(Self.flow(.array(called.map { .string($0) })))")
        let offered = (state.start?.tools.map(\.name) ?? []).filter { name in !state.calls.contains { $0.tool == name } }
        if !offered.isEmpty, state.stop != nil { lines.append("  toolsNotCalled: \(Self.flow(.array(offered.map { .string($0) })))") }
        if let stop = state.stop {
            lines.append("  stopReason: \(stop.reason.rawValue)")
            if let limit = stop.limit { lines.append("  limit: \(limit.rawValue)") }
        }
        lines.append("  sequence:")
        lines.append("    mode: \(mode.rawValue)")
        if executed.isEmpty {
            lines.append("    calls: []")
        } else {
            lines.append("    calls:")
            for call in executed {
                lines.append("      - tool: \(Self.scalar(call.tool))")
                guard argumentMode != .ignore else { continue }
                guard call.arguments.objectValue != nil else {
                    lines.append("        # arguments not pinned: the run gave \(call.arguments.typeDescription), not an object")
                    continue
                }
                let ignored = ignoredKeys + Self.volatileKeys(in: call.arguments)
                var matcher: [(String, JSONValue)] = [("mode", .string(argumentMode.rawValue)), ("match", call.arguments)]
                if !ignored.isEmpty { matcher.append(("ignoreKeys", .array(Self.unique(ignored).map { .string($0) }))) }
                lines.append("        arguments: \(Self.flow(.object(JSONObject(matcher))))")
            }
        }
        if state.isConversation { lines += conversationLines(state) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A conversation's draft adds what the agent called within each user turn (`turns:`), and,
    /// as comments, the user's turns as a script a live case can say again (docs/conversations.md).
    func conversationLines(_ state: RunState) -> [String] {
        var lines = ["  turns:"]
        for record in state.userTurns {
            // A turn the agent never answered (the user's closing words) has nothing to check.
            guard let slice = state.slice(turn: record.turn.turn), !slice.decisions.isEmpty else { continue }
            var called: [String] = []
            for call in slice.executedCalls where !called.contains(call.tool) { called.append(call.tool) }
            lines.append(
                "    \(record.turn.turn): "
                    + (called.isEmpty ? "{maxToolCalls: 0}" : "{toolsCalled: \(Self.flow(.array(called.map { .string($0) })))}"))
        }
        if lines.count == 1 { lines = [] }
        lines.append("# The run is a conversation. To run it live, replace logs: with agent: (its agent file) and this")
        lines.append("# user, who says again what the recorded user said, turn by turn:")
        lines.append("# user:")
        for record in state.userTurns {
            let text = Self.flow(.string(record.turn.text))
            if record.turn.turn == 1 {
                lines.append("#   opening: \(text)")
                lines.append("#   script:")
            } else {
                let end = record.turn.ends.map { ", end: \($0.rawValue)" } ?? ""
                lines.append("#     - {after: {turn: \(record.turn.turn)}, say: \(text)\(end)}")
            }
        }
        lines.append("#   maxTurns: \(max(state.userTurns.count, 1))")
        return lines
    }

    /// Dotted paths of keys in `arguments` that are volatile by name or by value (a UUID, an ISO
    /// 8601 time).
    static func volatileKeys(in arguments: JSONValue, at path: String = "") -> [String] {
        guard let object = arguments.objectValue else { return [] }
        var keys: [String] = []
        for member in object {
            let memberPath = path.isEmpty ? member.key : "\(path).\(member.key)"
            if volatileKeyNames.contains(member.key.lowercased()) || (member.value.stringValue.map(looksVolatile) ?? false) {
                keys.append(memberPath)
            } else if member.value.objectValue != nil {
                keys += volatileKeys(in: member.value, at: memberPath)
            }
        }
        return keys
    }

    static func looksVolatile(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        // 8-4-4-4-12 hex: a UUID.
        if bytes.count == 36, [8, 13, 18, 23].allSatisfy({ bytes[$0] == UInt8(ascii: "-") }),
            text.replacingOccurrences(of: "-", with: "").allSatisfy(\.isHexDigit)
        {
            return true
        }
        // 2026-11-23T10:00:00…: a time.
        if bytes.count >= 19, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":")
        {
            return true
        }
        return false
    }

    static func unique(_ items: [String]) -> [String] {
        var seen = Set<String>()
        return items.filter { seen.insert($0).inserted }
    }

    static func caseId(from path: String) -> String {
        let name = (path as NSString).lastPathComponent
        let stem = name.hasSuffix(".jsonl.gz") ? String(name.dropLast(".jsonl.gz".count)) : (name as NSString).deletingPathExtension
        return stem.isEmpty ? "drafted-case" : stem
    }

    /// A YAML scalar: plain when it cannot be misread, else a JSON (double-quoted) string.
    static func scalar(_ text: String) -> String {
        let plain =
            !text.isEmpty && text.allSatisfy { $0.isLetter || $0.isNumber || "-_./".contains($0) } && text.first?.isLetter == true
            && !["true", "false", "null", "yes", "no", "on", "off"].contains(text.lowercased())
        return plain ? text : JSONWriter.encodeString(.string(text))
    }

    /// A value in JSON's flow form, which is YAML too.
    static func flow(_ value: JSONValue) -> String { JSONWriter.encodeString(value) }
}
