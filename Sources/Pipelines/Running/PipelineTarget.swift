import AgentRuntime
import Foundation
public import TraceCore
import TraceLog

/// Where a pipeline run lives: its directory, or its log inside it.
public struct PipelineTarget: Sendable {
    public let directory: String
    public let log: String

    public init(_ given: String) throws(PipelineError) {
        let text = given.count > 1 && given.hasSuffix("/") ? String(given.dropLast()) : given
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: text, isDirectory: &isDirectory) else {
            throw PipelineError(
                .notFound, "no pipeline run at \(text)", path: text,
                hint: "give the run's directory (printed by pipeline run) or its pipeline.jsonl.gz")
        }
        if isDirectory.boolValue {
            directory = text
            log = text + "/" + PipelineRunner.logName
        } else {
            log = text
            let parent = (text as NSString).deletingLastPathComponent
            directory = parent.isEmpty ? "." : parent
        }
    }

    /// The pipeline run at `given` when it is one: a pipeline run's directory, or a log that
    /// starts with pipeline_started (`started()`, the test `replay` makes too). Nil for anything
    /// else (a run's log, a missing file), which the caller then reads as it would.
    public static func detected(_ given: String) -> PipelineTarget? {
        guard let target = try? PipelineTarget(given), (try? target.started()) != nil else { return nil }
        return target
    }

    /// A new pipeline run's id: pipe-<time>-<random>, as run ids are run-<time>-<random>.
    public static func newRunId() -> String {
        "pipe-" + RuntimeEnvironment.live.makeRunId().dropFirst("run-".count)
    }

    /// Where a pipeline run is made: `<out>/<pipeline>-<run id>`.
    public static func directory(under out: String, pipeline: String, runId: String) -> String {
        "\(out)/\(RuntimeEnvironment.fileNameComponent("\(pipeline)-\(runId)"))"
    }

    /// The pipeline_started event of the log: which file and input the run began with.
    public func started() throws -> PipelineStarted {
        // Only the start is read: a pipeline killed mid-write has a torn tail that resume seals.
        guard case .pipeline(.started(let started))? = try LogReader(path: log).firstEvent()?.event.payload else {
            throw PipelineError(.notPipeline, "\(log) is not a pipeline log (it does not start with pipeline_started)", path: log)
        }
        return started
    }
}
