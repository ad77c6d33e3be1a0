public import TraceCore
public import TraceLog

/// Logs whose state digests a test decides: events written by the real writer, each
/// `step_ended`'s digest the one the fold as it is now computes for the state before it — or, at
/// the step `wrongDigestAt` names, a digest no state has (what an edit of an event before it
/// leaves). For logs edited in ways our runtime never writes (turns out of order, a changed
/// event) that must still check out, or must not.
public enum DigestedLog {
    /// A digest no state has.
    public static let wrongDigest = "sha256:" + String(repeating: "e", count: 64)

    /// Writes `events` to a new log at `path` (event N at `time_us` N ms); the state they fold to.
    @discardableResult
    public static func write(
        _ events: some Sequence<(payload: EventPayload, step: Int)>, to path: String, runId: String,
        options: LogWriter.Options = LogWriter.Options(), wrongDigestAt wrong: Int? = nil
    ) throws -> RunState {
        var state = RunState()
        var digester = StateDigester()
        try LogWriter.withWriter(creating: path, runId: runId, options: options) { writer in
            for (payload, step) in events {
                var payload = payload
                if case .stepEnded = payload {
                    payload = .stepEnded(StepEnded(stateDigest: step == wrong ? wrongDigest : digester.digest(of: state)))
                }
                let event = try writer.append(payload, step: step, timeUs: 1_000 * (state.eventCount + 1))
                digester.track(RunState.reduce(into: &state, event))
            }
        }
        return state
    }
}
