public import TraceCore

/// What `ProjectCheck` found: each file it looked at, in the order it got to them, with what
/// the file is and every problem in it. The JSON form is documented in docs/eval-cases.md
/// ("Checking files").
public struct CheckReport: Sendable {
    public enum Severity: String, Sendable, Hashable {
        /// The file cannot be used as it is: `run` would stop before running anything.
        case error
        /// Probably a mistake, but the file can be used (`check --strict` fails on these too).
        case warning
    }

    public struct Problem: Sendable, Hashable {
        public var severity: Severity
        public var diagnostic: DiagnosticRecord
    }

    public struct File: Sendable {
        public var path: String
        /// What the file is; nil for a file that was skipped or could not be parsed.
        public var kind: ConfigFileKind?
        /// What it holds ("3 cases", "agent support-agent, 4 tools"); nil when it has errors.
        public var summary: String?
        public var problems: [Problem] = []
        /// What `check --verbose` shows under the file's line: a pipeline's tasks in plan order,
        /// each with what it needs (`fetch [command]`, `report [command] ← classify, enrich`).
        public var details: [String] = []
        /// A folder's file that is none of the kinds agent-eval reads.
        public var isSkipped = false
        /// For a case file that reads: its cases, in file order (what a test runner such as the
        /// pytest plugin collects).
        public var cases: [ListedCase] = []
    }

    /// A case as `check --json` lists it: its id, the line it starts on, its tags.
    public struct ListedCase: Sendable, Hashable {
        public var id: String
        public var line: Int
        public var tags: [String]
    }

    public private(set) var files: [File] = []
    /// Where each path is in `files`, and every problem added: each problem costs the same
    /// however many came before it.
    private var fileIndexes: [String: Int] = [:]
    private var reported: Set<DiagnosticRecord> = []

    public init() {}

    public var errors: [Problem] { files.flatMap(\.problems).filter { $0.severity == .error } }
    public var warnings: [Problem] { files.flatMap(\.problems).filter { $0.severity == .warning } }
    public var checkedFiles: [File] { files.filter { !$0.isSkipped } }

    /// Whether the file at `path` was checked (it is one of the kinds agent-eval reads, or has
    /// problems), not skipped.
    public func hasChecked(_ path: String) -> Bool {
        fileIndexes[path].map { !files[$0].isSkipped } ?? false
    }

    /// Exit status: 0 without errors (and, when `strict`, without warnings), else 2.
    public func exitStatus(strict: Bool = false) -> Int32 {
        errors.isEmpty && (!strict || warnings.isEmpty) ? 0 : 2
    }

    /// `N files checked: no problems`, or the counts.
    public var summaryLine: String {
        let checked = checkedFiles.count
        let skipped = files.count - checked
        var line = "\(checked) file\(checked == 1 ? "" : "s") checked"
        if skipped > 0 { line += " (\(skipped) skipped)" }
        let (errorCount, warningCount) = (errors.count, warnings.count)
        if errorCount == 0 && warningCount == 0 { return line + ": no problems" }
        var parts: [String] = []
        if errorCount > 0 { parts.append("\(errorCount) error\(errorCount == 1 ? "" : "s")") }
        if warningCount > 0 { parts.append("\(warningCount) warning\(warningCount == 1 ? "" : "s")") }
        return line + ": " + parts.joined(separator: ", ")
    }

    mutating func note(
        _ path: String, kind: ConfigFileKind?, summary: String?, details: [String] = [], cases: [ListedCase] = []
    ) {
        let index = fileIndex(path)
        files[index].kind = kind
        files[index].summary = summary
        files[index].details = details
        files[index].cases = cases
        files[index].isSkipped = kind == nil && summary != nil && files[index].problems.isEmpty
    }

    /// Adds a problem to `path`'s file (once: a file several cases name reports each problem once).
    mutating func add(_ problem: Problem, to path: String) {
        let index = fileIndex(path)
        files[index].isSkipped = false
        guard reported.insert(problem.diagnostic).inserted else { return }
        files[index].problems.append(problem)
    }

    private mutating func fileIndex(_ path: String) -> Int {
        if let index = fileIndexes[path] { return index }
        files.append(File(path: path))
        fileIndexes[path] = files.count - 1
        return files.count - 1
    }

    /// The machine-readable form.
    public var json: JSONValue {
        var object = JSONObject()
        object["version"] = 1
        object["ok"] = .bool(errors.isEmpty)
        object["errors"] = .int(errors.count)
        object["warnings"] = .int(warnings.count)
        object["files"] = .array(
            files.map { file in
                var entry = JSONObject()
                entry["path"] = .string(file.path)
                entry["kind"] = file.kind.map { .string($0.rawValue) } ?? (file.isSkipped ? .string("skipped") : .null)
                entry["summary"] = file.summary.map(JSONValue.string) ?? .null
                if file.kind == .cases {
                    entry["cases"] = .array(
                        file.cases.map { listed in
                            ["case_id": .string(listed.id), "line": .int(listed.line), "tags": .array(listed.tags.map(JSONValue.string))]
                        })
                }
                entry["problems"] = .array(
                    file.problems.map { problem in
                        var item = JSONObject()
                        item["severity"] = .string(problem.severity.rawValue)
                        item["code"] = .string(problem.diagnostic.diagnosticCode)
                        item["message"] = .string(problem.diagnostic.message)
                        if let place = problem.diagnostic.place {
                            item["path"] = .string(place.path)
                            if place.line > 0 {
                                item["line"] = .int(place.line)
                                item["column"] = .int(place.column)
                            }
                        }
                        item["hint"] = problem.diagnostic.hint.map(JSONValue.string) ?? .null
                        return .object(item)
                    })
                return .object(entry)
            })
        return .object(object)
    }
}
