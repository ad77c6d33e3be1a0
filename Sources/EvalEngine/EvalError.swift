import ConfigFile
public import TraceCore

/// The one error type of the eval engine: the harness could not run (exit 2). A case that
/// fails is not an error; it is a result.
public struct EvalError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// A case file is malformed; `location` says where.
        case badCase = "bad_case"
        /// Two cases share a caseId.
        case duplicateCase = "duplicate_case"
        /// No case files were found, or none is left after filtering.
        case noCases = "no_cases"
        /// A path given does not exist.
        case missingPath = "missing_path"
        /// A baseline file cannot be read.
        case unreadableBaseline = "unreadable_baseline"
        /// A regression gate (`--fail-on regression`) found no baseline to compare with, or the
        /// baseline directory given does not exist.
        case missingBaseline = "missing_baseline"
        /// `--baseline-branch`: the catalog holds no suite run on the branch.
        case noBaseRun = "no_base_run"
        /// What was asked needs the catalog, which could not be opened.
        case noCatalog = "no_catalog"
        /// `--record` with nowhere to record: no `--cassette`, and no case names one.
        case recordNeedsCassette = "record_needs_cassette"
        /// A results report given to `results merge` cannot be read, is not a report, or does
        /// not fit with the others (another suite or shard count, the same shard or case twice,
        /// another k, a baseline in some only).
        case badReport = "bad_report"
        /// The reports given to `results merge` do not hold their whole suite: a shard is
        /// missing, the shards lack cases of the suite, or a report does not record its shard
        /// (an older agent-eval wrote it). `--allow-partial` merges them as a partial report.
        case incompleteSuite = "incomplete_suite"
        /// Writing a report or a baseline failed.
        case writeFailed = "write_failed"
        /// A run did not finish (no `run_stopped`, a torn or empty log): it cannot show what was
        /// not called.
        case unfinishedRun = "unfinished_run"
        /// A recorded state digest differs from the state the log folds to: the log was edited
        /// (with its chain recomputed) or written by a different fold.
        case digestMismatch = "digest_mismatch"
        /// The fold found events that do not fit (a reused call id, a result for a call never
        /// proposed, a tool run without an allow verdict, an intent or a result naming another tool
        /// than its call's).
        case anomalousRun = "anomalous_run"
        /// Two logs of a case hold the same run (a copy under another name): it would count as
        /// two attempts.
        case duplicateRun = "duplicate_run"
        /// A case names a tool that none of its runs has: a typo would make the check vacuous.
        case unknownTool = "unknown_tool"
        /// A case names a pipeline task the pipeline does not have, or checks a command task's
        /// trajectory.
        case unknownTask = "unknown_task"
        /// The log a live run was to write exists already.
        case logExists = "log_exists"
        /// `init` would overwrite files of a project that is there already.
        case projectExists = "project_exists"
        /// A judge model could not grade a rubric: no judge was given, the model could not be
        /// reached, or its reply was not a verdict.
        case judgeFailed = "judge_failed"
        /// The suite was interrupted (Ctrl-C, SIGTERM) before the case's runs were done, or a run
        /// was stopped from outside before it ended on its own.
        case interrupted
        /// The agent's model did not answer (down, an HTTP error, a reply that does not parse, still
        /// answering when time ran out) and that ended the run: it shows the harness, not the agent.
        case modelFailed = "model_failed"
        /// A command case's agent asked the model something its cassette has no answer for: it
        /// changed (or the cassette is stale), and a replay cannot say what it would do next.
        case cassetteMiss = "cassette_miss"
        /// A conversation's simulated user could not give a turn (an empty, malformed or refused
        /// reply, its model failing, a script with nothing to say): the run shows the simulator,
        /// not the agent (docs/conversations.md).
        case simulatorFault = "simulator_fault"
        /// A case's `state:` command could not show the environment's final state (it failed,
        /// hung, or printed no JSON): the state expectation has no evidence.
        case stateUnseen = "state_unseen"
        /// A command case's program could not be run through the recording gateway, or a
        /// pipeline task's attempt could not be run at all (`TaskFinished.couldNotRunPrefix`).
        case commandFailed = "command_failed"
        /// A file to bring over from another tool (an ADK eval set) cannot be read as one.
        case unreadableInput = "unreadable_input"
    }

    public var code: Code
    public var message: String
    public var location: SourceLocation?
    public var hint: String?
    /// The error underneath (a log that cannot be read, a config error).
    public var underlying: DiagnosticRecord?

    public init(_ code: Code, _ message: String, location: SourceLocation? = nil, hint: String? = nil, cause: (any Diagnostic)? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.hint = hint
        self.underlying = cause.map { DiagnosticRecord($0) }
    }

    init(_ error: ConfigError) {
        self.init(.badCase, error.message, location: error.location, hint: error.hint)
    }

    public var diagnosticCode: String { "eval." + code.rawValue }
    public var place: SourceLocation? { location }
    public var cause: (any Diagnostic)? { underlying }
}
