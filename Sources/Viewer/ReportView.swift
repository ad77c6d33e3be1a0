import Pipelines
public import TraceCore

/// The data of an eval report's page: the results document exactly as `agent-eval run --json`
/// prints it, and the runs its cases checked, each as a run view, so every failed expectation
/// links to its step. Runs of failing cases come first; runs are embedded until `eventBudget`
/// events are in the page, and the rest are listed with the command that shows them.
public struct ReportView: Sendable {
    public var document: JSONValue
    /// Logs embedded, and logs left out because of the budget.
    public var embedded: [String]
    public var leftOut: [String]

    public static let defaultEventBudget = 200_000

    public static func make(results: JSONValue, eventBudget: Int = defaultEventBudget) -> ReportView {
        let cases = results["cases"]?.arrayValue ?? []
        // Failing and erroring cases' logs first, then passing ones; each log once.
        var ordered: [String] = []
        var seen = Set<String>()
        for wantPassing in [false, true] {
            for entry in cases where ["pass", "flaky_pass"].contains(entry["outcome"]?.stringValue ?? "") == wantPassing {
                for run in entry["runs"]?.arrayValue ?? [] {
                    let failureLogs = (run["failures"]?.arrayValue ?? []).compactMap { $0["log"]?.stringValue }
                    for log in [run["log"]?.stringValue].compactMap({ $0 }) + failureLogs where seen.insert(log).inserted {
                        ordered.append(log)
                    }
                }
            }
        }
        // A pipeline case's log is a pipeline log: it has a page of its own (`agent-eval view`),
        // and read as a run it would be judged by a run's rules. Its tasks' runs are embedded.
        let pipelines = ordered.filter(PipelineReplay.isPipelineLog)
        let pipelineSet = Set(pipelines)
        let (runs, embedded, leftOut) = RunView.embed(ordered.filter { !pipelineSet.contains($0) }, eventBudget: eventBudget)
        var object = ObjectBuilder()
        object.set("view", "report")
        object.set("results", results)
        object.set("runs", JSONValue.array(runs))
        object.set("runs_left_out", JSONValue.array(leftOut.map { .string($0) }))
        if !pipelines.isEmpty { object.set("pipelines", JSONValue.array(pipelines.map { .string($0) })) }
        return ReportView(document: object.json, embedded: embedded, leftOut: leftOut)
    }
}
