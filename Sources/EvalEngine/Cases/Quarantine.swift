public import ConfigFile
public import Foundation
public import TraceCore
import TraceLog

/// A case set aside while someone fixes it (docs/eval-cases.md, "Quarantine"): it still runs and
/// is reported, its failures and regressions do not fail the gate, and it has an owner, a
/// reason and an end. Written as `quarantine:` in the case file, or as an entry of the
/// project's quarantine file (`.agent-eval/quarantine.yaml`).
public struct QuarantineEntry: Sendable, Hashable {
    public var caseId: String
    /// Who fixes it: a name, a handle, an address.
    public var owner: String
    /// Why, or the issue that tracks it.
    public var reason: String
    /// The last day (UTC, `YYYY-MM-DD`) the quarantine holds; after it the case fails the run and
    /// `check` reports the entry.
    public var until: String
    /// Where the entry is written.
    public var location: SourceLocation
    /// Written as a case file's `quarantine:` key (released by deleting it), not in the
    /// project's quarantine file (released with `agent-eval quarantine release`).
    public var isInCaseFile = false

    /// Whether the entry had ended when it was read (`isExpired(today:)` then): one answer for
    /// a whole run, even one that crosses midnight UTC.
    public let isExpiredNow: Bool

    public init(caseId: String, owner: String, reason: String, until: String, location: SourceLocation) {
        self.caseId = caseId
        self.owner = owner
        self.reason = reason
        self.until = until
        self.location = location
        isExpiredNow = QuarantineEntry.today() > until  // the rule of isExpired(today:)
    }

    /// A quarantined case that passed this many suite runs in a row (the catalog's history) is
    /// ready to release.
    public static let releaseStreak = 5

    /// Whether `today` (`YYYY-MM-DD`) is after `until`.
    public func isExpired(today: String = QuarantineEntry.today()) -> Bool { today > until }

    /// Today's date in UTC, `YYYY-MM-DD`.
    public static func today(_ now: Date = Date()) -> String { dayFormatter().string(from: now) }

    /// Whole days from one `YYYY-MM-DD` to another; nil when either is not a date.
    public static func days(from start: String, to end: String) -> Int? {
        let formatter = dayFormatter()
        guard let a = formatter.date(from: start), let b = formatter.date(from: end) else { return nil }
        return Int((b.timeIntervalSince(a) / 86_400).rounded())
    }

    /// The one reader and writer of the `YYYY-MM-DD` UTC days quarantines are written in.
    private static func dayFormatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter
    }

    /// Whether `text` is a real calendar date written `YYYY-MM-DD`.
    public static func isDate(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]), (1...12).contains(month), day >= 1
        else { return false }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return day <= days
    }

    /// The report's `quarantine` member.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("owner", owner)
        object.set("reason", reason)
        object.set("until", until)
        object.set("expired", isExpiredNow)
        object.set("file", location.path)
        object.set("line", location.line)
        return object.json
    }

    /// How to end the quarantine: the command, or the key to delete.
    public var releaseAdvice: String {
        isInCaseFile
            ? "delete its quarantine: key (\(location))" : "agent-eval quarantine release \(ShellWords.quoted(caseId))"
    }

    /// `owner alice, until 2026-12-31: flaky refund lookup (#123)`.
    public var sentence: String { "owner \(owner), until \(until): \(reason)" }

    /// Reads `{owner, reason, until}` (a case file's `quarantine:`, or one entry of the
    /// quarantine file with its `case:`), reporting every problem.
    static func read(_ node: ConfigNode, caseId: String?, errors: inout ConfigErrors) -> QuarantineEntry? {
        let before = errors.errors.count
        guard var fields = errors.collect({ () throws(ConfigError) in try node.mapping("quarantine") }) else { return nil }
        let id: String? =
            caseId
            ?? errors.collect { () throws(ConfigError) -> String in
                let node = try fields.required("case", hint: "each entry names the caseId it quarantines")
                let id = try node.nonEmptyString("case")
                guard EvalCase.isValidId(id) else { throw EvalCase.invalidIdError(id, key: "case", at: node.location) }
                return id
            }
        let owner = errors.collect { () throws(ConfigError) in
            try fields.required("owner", hint: "say who fixes the case: a name, a handle or an address").nonEmptyString("owner")
        }
        let reason = errors.collect { () throws(ConfigError) in
            try fields.required("reason", hint: "say why, or link the issue that tracks the fix").nonEmptyString("reason")
        }
        let until = errors.collect { () throws(ConfigError) -> String in
            let untilNode = try fields.required("until", hint: "a quarantine ends: give the last day it holds, e.g. until: 2026-12-31")
            let text = try untilNode.nonEmptyString("until")
            guard isDate(text) else {
                throw ConfigError(.invalidValue, "until must be a date written YYYY-MM-DD, found \"\(text)\"", at: untilNode.location)
            }
            return text
        }
        errors.errors.append(contentsOf: fields.unknownKeys(in: "quarantine"))
        guard errors.errors.count == before, let id, let owner, let reason, let until else { return nil }
        var entry = QuarantineEntry(caseId: id, owner: owner, reason: reason, until: until, location: node.location)
        entry.isInCaseFile = caseId != nil
        return entry
    }
}

/// The project's quarantine file, `.agent-eval/quarantine.yaml` in the project root
/// (docs/eval-cases.md, "Quarantine"; docs/quarantine.schema.json):
///
/// ```yaml
/// quarantine:
///   - case: refund-flow
///     owner: alice
///     reason: https://github.com/acme/agents/issues/42
///     until: 2026-12-31
/// ```
public struct QuarantineFile: Sendable {
    public var path: String
    public var entries: [QuarantineEntry]

    public init(path: String, entries: [QuarantineEntry] = []) {
        self.path = path
        self.entries = entries
    }

    /// `.agent-eval/quarantine.yaml` in the project root of `directory` (the working directory).
    public static func defaultPath(in directory: String = FileManager.default.currentDirectoryPath) -> String {
        ConfigPath.projectRoot(of: directory) + "/.agent-eval/quarantine.yaml"
    }

    /// The file at `path`; an empty one when there is none.
    public static func load(path: String) throws(ConfigErrors) -> QuarantineFile {
        guard FileManager.default.fileExists(atPath: path) else { return QuarantineFile(path: path) }
        let root = try ConfigNode.loadReportingAll(path: path)
        var errors = ConfigErrors([])
        var entries: [QuarantineEntry] = []
        var seen: [String: SourceLocation] = [:]
        if var fields = errors.collect({ () throws(ConfigError) in try root.mapping("the quarantine file") }) {
            if let list = errors.collect({ () throws(ConfigError) in
                try fields.required("quarantine", hint: "the file holds quarantine: [entries]").list("quarantine")
            }) {
                for item in list {
                    guard let entry = QuarantineEntry.read(item, caseId: nil, errors: &errors) else { continue }
                    if let first = seen[entry.caseId] {
                        errors.errors.append(
                            ConfigError(
                                .invalidValue, "case \(entry.caseId) is quarantined twice (first at \(first))", at: item.location,
                                hint: "keep one entry per case"))
                        continue
                    }
                    seen[entry.caseId] = item.location
                    entries.append(entry)
                }
            }
            errors.errors.append(contentsOf: fields.unknownKeys(in: "the quarantine file"))
        }
        guard errors.errors.isEmpty else { throw errors }
        return QuarantineFile(path: path, entries: entries)
    }

    public func entry(for caseId: String) -> QuarantineEntry? { entries.first { $0.caseId == caseId } }

    /// The file's text: a header, then the entries sorted by case id, every value quoted.
    public var text: String {
        var lines = [
            "# Cases set aside while they are fixed: they run and are reported, their failures do not fail the gate.",
            "# Edited by `agent-eval quarantine add|release`; see docs/eval-cases.md, \"Quarantine\".",
            "quarantine:",
        ]
        if entries.isEmpty { lines[lines.count - 1] = "quarantine: []" }
        for entry in entries.sorted(by: { $0.caseId < $1.caseId }) {
            lines.append("  - case: \(JSONWriter.encodeString(.string(entry.caseId)))")
            lines.append("    owner: \(JSONWriter.encodeString(.string(entry.owner)))")
            lines.append("    reason: \(JSONWriter.encodeString(.string(entry.reason)))")
            lines.append("    until: \"\(entry.until)\"")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Writes the file, creating its folder.
    public func save() throws(EvalError) {
        do {
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw EvalError(
                .writeFailed, "cannot write the quarantine file \(path): \(FileProblem.writing(path) ?? FileProblem.reason(of: error))")
        }
    }

    /// Puts each case's entry on it (a case file's own `quarantine:` wins; both is an error,
    /// returned); the problems are in case order.
    public func apply(to cases: inout [EvalCase]) -> [EvalError] {
        var problems: [EvalError] = []
        for index in cases.indices {
            guard let entry = entry(for: cases[index].id) else { continue }
            if let own = cases[index].quarantine {
                problems.append(
                    EvalError(
                        .badCase,
                        "case \(cases[index].id) is quarantined both in its file (\(own.location)) and in \(path) (\(entry.location))",
                        location: entry.location, hint: "keep one of the two entries"))
                continue
            }
            cases[index].quarantine = entry
        }
        return problems
    }
}
