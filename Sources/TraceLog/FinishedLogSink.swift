/// What happens to run logs once the runs that wrote them have closed them: the catalog indexes
/// them, a live exporter sends their traces. The command that starts runs builds one sink and
/// passes it in once — to the runtime (`exec`), the eval session (`run`: once per case, with the
/// case's logs), or the recorder (`record`) — instead of each command doing both itself.
///
/// A sink reports its own failures (a warning, say): the logs stay written whatever it does, and
/// the run's outcome never depends on it.
public protocol FinishedLogSink: Sendable {
    /// `logs` are closed run logs, in the order they were written: one run's log, or a live
    /// case's runs (its repeats, or a pipeline's child runs), which a sink may treat as one batch.
    func logsFinished(_ logs: [String]) async
}

/// Several sinks, each given the logs in turn, in the order given.
public struct FinishedLogSinks: FinishedLogSink {
    public let sinks: [any FinishedLogSink]

    public init(_ sinks: [any FinishedLogSink]) {
        self.sinks = sinks
    }

    /// The sinks given, or nil when there are none (nothing to call).
    public static func combining(_ sinks: [(any FinishedLogSink)?]) -> (any FinishedLogSink)? {
        let present = sinks.compactMap { $0 }
        if present.isEmpty { return nil }
        return present.count == 1 ? present[0] : FinishedLogSinks(present)
    }

    public func logsFinished(_ logs: [String]) async {
        guard !logs.isEmpty else { return }
        for sink in sinks { await sink.logsFinished(logs) }
    }
}
