import TraceCore
import TraceLog

extension RunSession {
    /// Runs allowed calls: all calls of a round concurrently, recorded in proposal order.
    ///
    /// Each round first records a `tool_intended` per call (a durability point: the log is
    /// flushed before any tool starts), then runs them together, then records each
    /// `tool_completed` in proposal order — so the log is the same whatever order they
    /// finished in. Failures marked retryable go to the next round after the backoff, while
    /// attempts remain.
    func execute(_ calls: [ToolCall]) async throws {
        var round: [(call: ToolCall, tool: Tool, attempt: Int)] = calls.compactMap { call in
            agent.tools[call.name].map { (call, $0, (state.call(id: call.id)?.attempts ?? 0) + 1) }
        }
        while !round.isEmpty {
            // The run's timeout_ms holds for its tools too: no attempt starts once it is up, a
            // backoff does not sleep past it, and an attempt gets no more than what is left.
            let wait = round.map { $0.tool.retry.backoff(before: $0.attempt) }.max() ?? 0
            if let left = runTimeLeftMs(), left <= wait {
                // The run's time runs out while the retry waits: it waits that long, and no more.
                if left > 0 { try await environment.sleep(left) }
                return
            }
            if wait > 0 { try await environment.sleep(wait) }
            let left = runTimeLeftMs()
            if let left, left <= 0 { return }
            for entry in round {
                try recorder.record(
                    .toolIntended(
                        ToolIntended(callId: entry.call.id, tool: entry.call.name, arguments: entry.call.arguments, attempt: entry.attempt))
                )
            }
            let requests = round.map { entry in
                (
                    entry.tool,
                    ToolRequest(
                        callId: entry.call.id, tool: entry.call.name, arguments: entry.call.arguments, attempt: entry.attempt,
                        timeoutMs: min(entry.tool.timeoutMs, left ?? .max))
                )
            }
            let results = await Self.run(requests, environment: environment)
            var next: [(call: ToolCall, tool: Tool, attempt: Int)] = []
            for (index, entry) in round.enumerated() {
                let (outcome, durationUs) = results[index]
                try recordCompletion(of: entry.call, attempt: entry.attempt, outcome: outcome, durationUs: durationUs)
                if outcome.status == .error, outcome.isRetryable, entry.attempt < entry.tool.retry.maxAttempts {
                    next.append((entry.call, entry.tool, entry.attempt + 1))
                }
            }
            round = next
        }
    }

    /// `runTimeLeft()` in whole ms.
    func runTimeLeftMs() -> Int? {
        runTimeLeft().map { left in
            let (seconds, attoseconds) = left.components
            return Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        }
    }

    /// Runs requests concurrently, each under its tool's timeout; results in request order.
    static func run(_ requests: [(Tool, ToolRequest)], environment: RuntimeEnvironment) async -> [(ToolOutcome, Int)] {
        if requests.count == 1, let (tool, request) = requests.first {
            return [await attempt(tool, request, environment: environment)]
        }
        return await withTaskGroup(of: (Int, ToolOutcome, Int).self) { group in
            for (index, (tool, request)) in requests.enumerated() {
                group.addTask {
                    let (outcome, duration) = await attempt(tool, request, environment: environment)
                    return (index, outcome, duration)
                }
            }
            var results = [(ToolOutcome, Int)](repeating: (ToolOutcome(status: .error), 0), count: requests.count)
            for await (index, outcome, duration) in group { results[index] = (outcome, duration) }
            return results
        }
    }

    /// One attempt: the host's answer, or a timeout, or the error it threw — never a throw.
    ///
    /// The deadline is the tool's timeout plus the host's own grace period (for hosts that stop
    /// their work themselves and report it), kept by `Deadline` on the run's clock: when it
    /// passes, the host's task is cancelled. A host that ignores cancellation is waited for,
    /// and its late answer is recorded as the timeout it was.
    static func attempt(_ tool: Tool, _ request: ToolRequest, environment: RuntimeEnvironment) async -> (ToolOutcome, Int) {
        let elapsed = environment.stopwatch()
        let (answer, timedOut) = await Deadline.run(
            within: .milliseconds(request.timeoutMs + tool.host.timeoutGraceMs), on: environment.clock
        ) { await Self.hostAnswer(of: tool, request) }
        let outcome = timedOut ? Self.timeout(of: request) : answer
        return (outcome, outcome.durationUs ?? environment.recordedDuration(elapsed()))
    }

    /// The host's answer, however it ends.
    private static func hostAnswer(of tool: Tool, _ request: ToolRequest) async -> ToolOutcome {
        do {
            return try await tool.host.invoke(request)
        } catch is CancellationError {
            return .failure("\(request.tool) was cancelled")
        } catch {
            return .failure("the tool host failed: \(error)")
        }
    }

    private static func timeout(of request: ToolRequest) -> ToolOutcome {
        .failure("\(request.tool) did not finish within \(request.timeoutMs) ms and was cancelled", isRetryable: true)
    }

    /// Records one finished attempt; output too large or too deeply nested for an event (or
    /// not JSON) is stored as content first and referenced by hash.
    func recordCompletion(of call: ToolCall, attempt: Int, outcome: ToolOutcome, durationUs: Int) throws {
        var output = outcome.output
        var contentHash: String?
        if let output, outcome.rawOutput == nil {
            let bytes = JSONWriter.encode(output)
            // Output nested deeper than a log line may hold is kept as stored text instead.
            if bytes.count > agent.context.inlineOutputBytes || output.nests(deeperThan: JSONValue.recordableDepth) {
                contentHash = try storeContent(ContentStored(bytes: bytes, mediaType: "application/json"))
            }
        }
        if contentHash != nil { output = nil }
        if let raw = outcome.rawOutput {
            contentHash = try storeContent(ContentStored(bytes: raw, mediaType: "application/octet-stream"))
        }
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: call.id, tool: call.name, attempt: attempt, status: outcome.status, output: output, contentHash: contentHash,
                    error: outcome.error, isRetryable: outcome.status == .ok ? nil : outcome.isRetryable, stderr: outcome.stderr,
                    durationUs: durationUs)))
    }

    /// Stores content once per log (its contents, a resumed run's included); returns its hash.
    /// What is stored, named and shown to the model is what the log keeps: the content redacted
    /// before it is hashed (`LogWriter.keptContent`), so a live run's context and a resumed or
    /// replayed one's hold the same bytes, and two outputs that differ only in a secret are one.
    func storeContent(_ content: ContentStored) throws -> String {
        let kept = try recorder.store(content) { contents[$0] != nil }
        contents[kept.hash] = contents[kept.hash] ?? kept.bytes
        return kept.hash
    }
}
