public import TraceCore

/// The one error type of pipelines: a pipeline that could not be started, resumed, rolled
/// back or recorded. Failures *inside* a pipeline (a task that fails, an output that does not
/// validate) are not errors: they are recorded, and the pipeline's recovery policies decide.
public struct PipelineError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// The pipeline log could not be written or read.
        case log
        /// No pipeline log where one was expected.
        case notFound = "not_found"
        /// The log is a run log, not a pipeline log.
        case notPipeline = "not_pipeline"
        /// The pipeline file differs from the one the run started with.
        case fileChanged = "file_changed"
        /// The pipeline cannot be resumed as asked (it already stopped, a task is unfinished…).
        case cannotResume = "cannot_resume"
        /// A task named on the command line is not in the pipeline.
        case unknownTask = "unknown_task"
        /// A command the earlier run started still runs: resuming would start a second copy.
        case stillRunning = "still_running"
    }

    public var code: Code
    public var message: String
    /// The pipeline log or directory concerned.
    public var path: String
    public var hint: String?

    public init(_ code: Code, _ message: String, path: String, hint: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.hint = hint
    }

    public var diagnosticCode: String { "pipeline." + code.rawValue }
    public var place: SourceLocation? { path.isEmpty ? nil : SourceLocation(path: path) }
}
