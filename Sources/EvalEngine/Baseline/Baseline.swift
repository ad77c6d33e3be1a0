import Foundation
public import TraceCore

/// What a case did when the baseline was taken: reviewable, one small pretty-printed JSON file
/// per case (`<dir>/<caseId>.json`), with keys and lists in a stable order so that a changed
/// baseline shows up as a small diff in review.
public struct Baseline: Sendable, Hashable {
    public var caseId: String
    public var passed: Bool
    public var passRate: Double
    public var runCount: Int
    /// Per run (log file name or `repeat N`): executed tools in order, and the stop reason.
    public var runs: [Trajectory]
    /// Every tool executed in any run, sorted.
    public var toolsSeen: [String]
    /// Every tool proposed but not run in any run, sorted.
    public var toolsAttempted: [String]
    /// Every pipeline task that ran in any run, sorted (empty for agent runs).
    public var tasksSeen: [String]

    public struct Trajectory: Sendable, Hashable {
        public var run: String
        public var tools: [String]
        /// The stop reason of a run, or the status of a pipeline.
        public var stopReason: String?
        /// The tasks a pipeline ran, in plan order.
        public var tasks: [String] = []
    }

    public init(_ result: CaseResult) {
        caseId = result.id
        passed = result.passed
        passRate = result.passRate
        runCount = result.runs.count
        runs = result.runs.map {
            Trajectory(run: $0.label, tools: $0.summary.tools, stopReason: $0.summary.stopName, tasks: $0.summary.tasks)
        }
        toolsSeen = Array(Set(result.runs.flatMap(\.summary.tools))).sorted()
        toolsAttempted = Array(Set(result.runs.flatMap(\.summary.attempted))).sorted()
        tasksSeen = Array(Set(result.runs.flatMap(\.summary.tasks))).sorted()
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("case_id", caseId)
        object.set("outcome", passed ? "pass" : "fail")
        object.set("pass_rate", passRate)
        object.set("runs", runCount)
        object.set(
            "trajectories",
            JSONValue.array(
                runs.map { run in
                    var entry = ObjectBuilder()
                    entry.set("run", run.run)
                    entry.set("tools", JSONValue.array(run.tools.map { .string($0) }))
                    entry.set("stop_reason", run.stopReason)
                    if !run.tasks.isEmpty { entry.set("tasks", JSONValue.array(run.tasks.map { .string($0) })) }
                    return entry.json
                }))
        object.set("tools_seen", JSONValue.array(toolsSeen.map { .string($0) }))
        object.set("tools_attempted", JSONValue.array(toolsAttempted.map { .string($0) }))
        if !tasksSeen.isEmpty { object.set("tasks_seen", JSONValue.array(tasksSeen.map { .string($0) })) }
        object.set("version", 1)
        return object.json
    }

    init(json: JSONValue, path: String) throws(EvalError) {
        func field<T>(_ name: String, _ read: (JSONValue) -> T?) throws(EvalError) -> T {
            guard let value = json[name], let typed = read(value) else {
                throw EvalError(
                    .unreadableBaseline, "\(path): \"\(name)\" is missing or has the wrong type",
                    hint: "write the baseline again from a run you trust")
            }
            return typed
        }
        guard try field("version", \.intValue) == 1 else {
            throw EvalError(
                .unreadableBaseline, "\(path): baseline version is not 1", hint: "write the baseline again from a run you trust")
        }
        caseId = try field("case_id", \.stringValue)
        passed = try field("outcome", \.stringValue) == "pass"
        passRate = try field("pass_rate", \.doubleValue)
        runCount = try field("runs", \.intValue)
        let strings = { (value: JSONValue) -> [String]? in value.arrayValue?.compactMap(\.stringValue) }
        runs = try field("trajectories", \.arrayValue).map { entry in
            Trajectory(
                run: entry["run"]?.stringValue ?? "", tools: entry["tools"].flatMap(strings) ?? [],
                stopReason: entry["stop_reason"]?.stringValue, tasks: entry["tasks"].flatMap(strings) ?? [])
        }
        toolsSeen = try field("tools_seen", strings)
        toolsAttempted = try field("tools_attempted", strings)
        tasksSeen = json["tasks_seen"].flatMap(strings) ?? []
    }

    /// Writes one file per result into `directory`, replacing older ones.
    public static func write(_ results: [CaseResult], to directory: String) throws(EvalError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for result in results {
                let text = JSONWriter.encodePretty(Baseline(result).json)
                try text.write(toFile: "\(directory)/\(result.id).json", atomically: true, encoding: .utf8)
            }
        } catch {
            throw EvalError(.writeFailed, "cannot write the baseline in \(directory): \(error.localizedDescription)")
        }
    }

    /// The baseline of each case that has one in `directory`.
    public static func read(for cases: [EvalCase], from directory: String) throws(EvalError) -> [String: Baseline] {
        var baselines: [String: Baseline] = [:]
        for evalCase in cases {
            let path = "\(directory)/\(evalCase.id).json"
            guard FileManager.default.fileExists(atPath: path) else { continue }
            let value: JSONValue
            do {
                value = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
            } catch {
                throw EvalError(
                    .unreadableBaseline, "\(path) is not a readable baseline: \(error)",
                    hint: "write the baseline again from a run you trust")
            }
            baselines[evalCase.id] = try Baseline(json: value, path: path)
        }
        return baselines
    }
}
