extension EventPayload {
    /// The first **measure** (docs/log-format.md §2: a time, a duration, a token count) outside
    /// 0…2^53 − 1 (`JSONScanner.maximumMeasure`), as a field path and the value; nil when every
    /// one is in range. Readers refuse such an event, so the writer asks this before it writes
    /// one: a log this project writes is one it can read (an import of a source with a time
    /// before 1970 or past the range is refused at the writer, naming the field).
    public var malformedMeasure: (fieldPath: String, value: Int)? {
        func check(_ value: Int?, _ path: String) -> (fieldPath: String, value: Int)? {
            guard let value, !JSONScanner.isMeasure(value) else { return nil }
            return (path, value)
        }
        func check(_ usage: TokenUsage?, _ path: String) -> (fieldPath: String, value: Int)? {
            guard let usage else { return nil }
            return check(usage.input, path + ".input") ?? check(usage.output, path + ".output")
        }
        switch self {
        case .decisionMade(let decision):
            return check(decision.usage, "data.usage") ?? check(decision.latencyUs, "data.latency_us")
                ?? check(decision.timeToFirstTokenUs, "data.ttft_us")
        case .userTurn(let turn):
            return check(turn.usage, "data.usage") ?? check(turn.latencyUs, "data.latency_us")
        case .toolCompleted(let completed):
            return check(completed.durationUs, "data.duration_us")
        case .pipeline(.taskFinished(let finished)):
            return check(finished.durationUs, "data.duration_us")
        case .runStarted, .contextBuilt, .verdictGiven, .toolIntended, .approvalRecorded, .stepEnded, .contentStored, .runForked,
            .runStopped, .pipeline, .unknown:
            return nil
        }
    }
}
