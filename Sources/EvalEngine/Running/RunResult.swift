public import TraceCore

/// What one run (a recorded log, or one repeat of a live case) showed.
public struct RunResult: Sendable {
    /// The log checked or written.
    public var logPath: String
    /// 1-based repeat number for live runs; 0 for recorded logs.
    public var repeatIndex: Int
    public var failures: [ExpectationFailure]
    public var notes: [CheckNote]
    /// Why the run could not be checked (an unreadable log, an agent that would not load);
    /// a harness error, not a failure.
    public var error: DiagnosticRecord?
    public var summary: RunSummary
    /// How long reading and checking the run took (not the run's own duration), in microseconds.
    public var checkDurationUs = 0
    /// What judge models were asked about the run and what they said (model-graded
    /// expectations), in the order asked.
    public var judgements: [Judgement] = []

    public init(
        logPath: String, repeatIndex: Int, failures: [ExpectationFailure], notes: [CheckNote], error: DiagnosticRecord?, summary: RunSummary
    ) {
        self.logPath = logPath
        self.repeatIndex = repeatIndex
        self.failures = failures
        self.notes = notes
        self.error = error
        self.summary = summary
    }

    public var passed: Bool { error == nil && failures.isEmpty }

    /// A short name for the run: the log's file name, or `repeat N`.
    public var label: String { Self.label(log: logPath, repeatIndex: repeatIndex) }

    /// `repeat N` for a live repeat, else the log's file name.
    public static func label(log: String, repeatIndex: Int) -> String {
        repeatIndex > 0 ? "repeat \(repeatIndex)" : (log.split(separator: "/").last.map(String.init) ?? log)
    }
}
