public import TraceCore

/// What an observer of a live run is told, as it happens.
public enum RunUpdate: Sendable {
    /// An event, just recorded (in the log's order; the log holds it already, durable by the
    /// agent's durability settings). A context packet comes whole, as the model was given it,
    /// though the log may hold it as a delta on the packet before it.
    case event(Event)
    /// A piece of the model's text as it streams in (models over HTTP with `stream: true`).
    /// A retried request streams its text again.
    case modelText(String)
    /// The run has stopped and its log is closed: the last update.
    case finished(RunOutcome)
}

/// Where a model client that streams sends its text as it arrives: set by the runtime around
/// each model request when someone observes the run (`RuntimeEnvironment.observe`), nil
/// otherwise. Model clients call it with each new piece of text.
public enum ModelTextObserver {
    /// The observer of the current task, if any.
    public static var current: (@Sendable (String) -> Void)? { sink?.send }

    /// Runs `operation` with `observer` as the current observer.
    public static func with<T>(_ observer: (@Sendable (String) -> Void)?, _ operation: () async throws -> T) async rethrows -> T {
        try await $sink.withValue(observer.map(Sink.init)) { try await operation() }
    }

    /// The task-local holds the closure in a class: with an optional function type as its
    /// value, the release build (Swift 6.3, Linux) crashed in `swift_task_localValuePush`.
    final class Sink: Sendable {
        let send: @Sendable (String) -> Void

        init(_ send: @escaping @Sendable (String) -> Void) {
            self.send = send
        }
    }

    @TaskLocal static var sink: Sink?
}

extension RuntimeEnvironment {
    /// `observe` as the recorder wants it: told of each event written.
    var eventObserver: ((Event) -> Void)? {
        observe.map { observe in { observe(.event($0)) } }
    }
}

extension AgentRuntime {
    /// Runs the agent like `run`, as a sequence of updates: every event as it is recorded, the
    /// model's streamed text, and the outcome last. Ending the iteration early (or cancelling
    /// the task that iterates) interrupts the run, which stops with a recorded reason and a
    /// whole log. Errors that keep the run from starting (a log that cannot be written, an MCP
    /// server that does not start) end the sequence by throwing.
    ///
    /// ```swift
    /// for try await update in runtime.updates(goal: "Refund order A-1042", log: "runs/a.jsonl.gz") {
    ///     if case .event(let event) = update { print(event.summaryLine) }
    /// }
    /// ```
    public func updates(
        goal: String, log path: String, runId: String? = nil, actor: String? = nil, route: String? = nil
    ) -> AsyncThrowingStream<RunUpdate, any Error> {
        AsyncThrowingStream { yield in
            var observed = self
            let previous = environment.observe
            observed.environment.observe = { update in
                previous?(update)
                yield(update)
            }
            return .finished(try await observed.run(goal: goal, log: path, runId: runId, actor: actor, route: route))
        }
    }
}
