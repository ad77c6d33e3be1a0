public import TraceCore

/// Writes a run's events and folds each into the live state, so the state the runtime holds
/// is exactly the state a replay of the log rebuilds: there is no second bookkeeping path.
///
/// `endStep()` records the digest of the state as it stands, which replay checks.
public final class RunRecorder {
    public let writer: LogWriter
    /// The fold of every event written so far.
    public private(set) var state: RunState
    /// The step the next events belong to.
    public var step: Int
    /// Where events' times come from: the clock when there is one (a live run); else `timeUs`,
    /// which a recorder of events timed by their source sets (an import, the recording gateway).
    private let clock: (@Sendable () -> Int)?
    /// The time the next events are recorded at when the recorder has no clock (microseconds
    /// since the epoch); the last event's time otherwise.
    public var timeUs: Int
    private let observe: ((Event) -> Void)?
    private var digester = StateDigester()
    /// Observers are told of packets whole (the writer writes most of them as deltas).
    private var packets = ContextPacketResolver()

    /// Records into `writer`, timestamping events with `clock` (microseconds since the epoch),
    /// or, without one, at `timeUs` (`record(_:at:)`). `state` is the fold of what the log
    /// already holds (empty for a new log). `observe` is told of each event once it is written.
    public init(
        writer: LogWriter, state: RunState = RunState(), clock: (@Sendable () -> Int)? = nil, timeUs: Int = 0,
        observe: ((Event) -> Void)? = nil
    ) {
        self.writer = writer
        self.state = state
        self.step = state.step
        self.clock = clock
        self.timeUs = timeUs
        self.observe = observe
    }

    /// Appends an event for the current step, at the clock's time (or `timeUs`), and folds it
    /// into `state`.
    @discardableResult
    public func record(_ payload: EventPayload) throws -> Event {
        try record(payload, at: clock?() ?? timeUs)
    }

    /// Stores `content` as the log keeps it — redacted before it is hashed (`LogWriter.keptContent`)
    /// — unless `isStored` says the log holds that already; returns the content kept, whose hash
    /// is the one events name it by. The one way every writer of a run stores content.
    @discardableResult
    public func store(_ content: ContentStored, unless isStored: (String) -> Bool) throws -> ContentStored {
        let kept = writer.keptContent(content) ?? content
        if !isStored(kept.hash) { try record(.contentStored(kept)) }
        return kept
    }

    /// Appends an event for the current step at `timeUs`, which the next events keep on a
    /// recorder without a clock, and folds it into `state`.
    @discardableResult
    public func record(_ payload: EventPayload, at timeUs: Int) throws -> Event {
        self.timeUs = timeUs
        let event = try writer.append(payload, step: step, timeUs: timeUs)
        digester.track(RunState.reduce(into: &state, event))
        if let observe {
            // The written event, redacted as written, with a delta packet made whole again on
            // the packets written before it (the writer's first packet is always whole).
            observe((try? packets.resolve(event)) ?? event)
        }
        // A signing writer adds signature events; the live state folds them as a replay will.
        for signature in writer.takeSignatureEvents() {
            digester.track(RunState.reduce(into: &state, signature))
            observe?(signature)
        }
        return event
    }

    /// A recorder for a run that begins with another run's events (a fork's copy of its parent,
    /// `RunForked`): each is written with its payload, step and time, under this writer's run
    /// id; each `step_ended` with the digest of this run's state (which holds its id), so a
    /// replay checks it; the other run's signature events are left out. The recorder's step is
    /// the last event's: the caller records what belongs to it, then moves on.
    public static func copying(
        _ events: [Event], into writer: LogWriter, clock: (@Sendable () -> Int)? = nil, observe: ((Event) -> Void)? = nil
    ) throws -> RunRecorder {
        var state = RunState()
        var digester = StateDigester()
        for event in events {
            if case .unknown(let kind, _) = event.payload, kind == LogSigner.kind { continue }
            var payload = event.payload
            if case .stepEnded = payload { payload = .stepEnded(StepEnded(stateDigest: digester.digest(of: state))) }
            let copied = try writer.append(payload, step: event.step, timeUs: event.timeUs)
            digester.track(RunState.reduce(into: &state, copied))
            for signature in writer.takeSignatureEvents() { digester.track(RunState.reduce(into: &state, signature)) }
        }
        return RunRecorder(writer: writer, state: state, clock: clock, timeUs: events.last?.timeUs ?? 0, observe: observe)
    }

    /// Ends the current step: records `step_ended` with the digest of the state before it,
    /// then moves on to the next step.
    @discardableResult
    public func endStep() throws -> Event {
        let event = try record(.stepEnded(StepEnded(stateDigest: digester.digest(of: state))))
        step += 1
        return event
    }
}
