import AgentRuntime
import Foundation
import Synchronization
import TraceCore
import TraceLog

/// A fork of a recorded run (`RecordedFork`), as the recorder sees it: each request of the
/// program is one of its parent's before the fork point — matched by its canonical form, in
/// whatever order the program sends them — or one past it. The run is recorded apart
/// (`forkPrefixPath`) until the last request before the fork point is answered; then the fork's
/// log is made, the parent's events through the fork point copied and `run_forked` after them,
/// and everything from there (requests, the proxies' calls, spans) is recorded into it.
extension ExchangeRecorder {
    /// Where a fork's run is recorded until its fork point: its bookkeeping (conversations, calls)
    /// is built as for any run, and the file removed once the fork's log is made.
    var forkPrefixPath: String { logPath + ".fork-prefix" }

    static let overlapMessage =
        "the command sent a model request past the fork point while one before it was still unanswered: a fork of a program "
        + "whose requests overlap across the fork point is not supported"

    /// Places a fork's request: one of the parent's before the fork point (claimed), or one past
    /// it, sent on with the edits applied. Returns the exchange refused when the program did not
    /// retrace its parent, or asked past the fork point before the requests before it were
    /// answered; nil when it goes on.
    func forkRequest(_ exchange: inout Exchange, _ fork: RecordedFork) -> Exchange? {
        enum Place {
            case before(Int)
            case past
            case diverged(step: Int, JSONDifference?)
            case overlap
        }
        let canonical = exchange.canonical
        let place: Place = state.withLock { state in
            if state.forking.isForkMade { return .past }
            if let index = fork.unclaimedPosition(of: canonical, claimed: state.forking.prefixClaimed) {
                state.forking.prefixClaimed.insert(index)
                return .before(index)
            }
            guard let first = fork.requests.indices.first(where: { !state.forking.prefixClaimed.contains($0) }) else { return .overlap }
            return .diverged(step: fork.requestSteps[first], canonical.firstDifference(from: fork.requests[first]))
        }
        let cause: StopCause
        let message: String
        switch place {
        case .before(let index):
            exchange.prefixIndex = index
            return nil
        case .past:
            if let (rewritten, shown) = fork.rewritten(exchange.body, api: exchange.api) {
                // The edits are what the model is shown, and what the log stores as the request.
                exchange.body = rewritten
                exchange.canonical = RequestKey.canonical(rewritten)
                exchange.bytes = JSONWriter.encode(rewritten)
                state.withLock { $0.forking.editsShown.formUnion(shown) }
            }
            return nil
        case .diverged(let step, let difference):
            let text =
                difference.map { difference in
                    "at \(difference.path.isEmpty ? "the request" : difference.path) the parent sent " + Self.excerpt(difference.right)
                        + ", the command now sends " + Self.excerpt(difference.left)
                } ?? "the same request sent more often than the parent sent it"
            cause = .forkDiverged(text, step: step)
            message = "agent-eval fork: this request is not the parent's request of step \(step) (\(text))"
        case .overlap:
            cause = .forkOverlap
            message = "agent-eval fork: " + Self.overlapMessage
        }
        state.withLock { state in if state.stopCause == nil { state.stopCause = cause } }
        exchange.refusal = (409, message, "agent_eval_fork")
        onStop(cause)
        return exchange
    }

    /// Holds a request of a fork's program until it can be placed (`forkRequest`), before the
    /// fork is made:
    /// - while a request before the fork point is still being answered (at most 5 s): a streaming
    ///   SDK may send its next request as soon as it reads the end of an answer, before the
    ///   gateway has recorded it (or given back the claim of one that failed, for its retry);
    /// - while `body` is none of the parent's requests before the fork point left but one it
    ///   made after (at most 60 s): another conversation of the run (a sub-agent, a parallel
    ///   call) is ahead of the ones that still have requests before the fork point to send.
    /// A request that is neither goes on at once, and is refused as not retracing its parent.
    func settleForkPoint(body: JSONValue) async {
        guard let fork else { return }
        let canonical = RequestKey.canonical(body)
        let isLater = fork.laterRequests.contains(canonical)
        // Settled: the fork is made or refused, the request has a place, or nothing is left to
        // wait for (an answer in flight only during the first five seconds).
        let settled: @Sendable (inout State, Bool) -> Bool = { state, answersInFlightCount in
            guard !state.forking.isForkMade, state.stopCause == nil else { return true }
            if fork.unclaimedPosition(of: canonical, claimed: state.forking.prefixClaimed) != nil { return true }
            if answersInFlightCount, state.forking.prefixClaimed.count > state.forking.prefixAnswered { return false }
            return !isLater
        }
        if await state.wait(within: .seconds(5), on: clock, until: { settled(&$0, true) }) { return }
        await state.wait(within: .seconds(55), on: clock) { settled(&$0, false) }
    }

    /// A request before the fork point was answered and recorded (apart): after the last one,
    /// the fork's log is made.
    func prefixAnswered(_ fork: RecordedFork, state: inout State) throws {
        state.forking.prefixAnswered += 1
        // A fork refused meanwhile (a request that did not retrace, one that overlapped) is not made.
        guard state.forking.prefixAnswered == fork.requests.count, state.stopCause == nil else { return }
        shiftClock(fork, state: &state)
        try makeFork(fork, atUs: now(), state: &state)
    }

    /// Makes a fork's log at its fork point: the parent's events through it, copied, then
    /// `run_forked`; what the recorder records from here goes into it. The run recorded apart
    /// up to here came from the same answers to the same requests; its file is removed.
    private func makeFork(_ fork: RecordedFork, atUs: Int, state: inout State) throws {
        try? state.recorder?.writer.close()
        unlink(forkPrefixPath)
        let writer = try LogWriter.create(at: logPath, runId: runId, options: options)
        writer.redact(also: state.secrets.sorted(), rule: "header")
        let recorder = try RunRecorder.copying(fork.prefix, into: writer)
        recorder.timeUs = atUs
        try recorder.record(.runForked(fork.forked))
        recorder.step += 1
        state.recorder = recorder
        state.forking.isForkMade = true
        // What the fork's log holds, not what the run recorded apart held: its stored contents,
        // and the numbers of the calls no model proposed (`span-N`, `mcp-N`) it used.
        state.stored = Set(
            fork.prefix.compactMap { event in
                if case .contentStored(let content) = event.payload { return content.hash }
                return nil
            })
        // A number past any count (`mcp-9223372036854775807` in a parent from elsewhere) is not
        // one the recorder made: counting on from it would overflow.
        func highest(_ prefix: String) -> Int {
            recorder.state.calls.compactMap { call -> Int? in
                guard call.id.hasPrefix(prefix), let number = Int(call.id.dropFirst(prefix.count)) else { return nil }
                return JSONScanner.isMeasure(number) ? number : nil
            }.max() ?? 0
        }
        state.spans.spanCallCount = highest("span-")
        state.proxying.unproposedCalls = highest("mcp-")
    }

    /// Puts the run on its parent's clock at its fork point: the times it keeps of what came
    /// before (calls still open, answers and results for matching spans) too, so that
    /// durations hold. Spans are moved onto it as they come (`keep`).
    private func shiftClock(_ fork: RecordedFork, state: inout State) {
        guard let last = fork.prefix.last?.timeUs else { return }
        let shift = clockNow() - last - 1
        forkShift.store(shift, ordering: .relaxed)
        for (number, var conversation) in state.book.conversations {
            for (id, call) in conversation.openCalls { conversation.openCalls[id]?.atUs = call.atUs - shift }
            state.book.conversations[number] = conversation
        }
        state.spans.exchangeStarts = state.spans.exchangeStarts.map { $0 - shift }
        state.spans.recentResults = state.spans.recentResults.map { ($0.tool, $0.proposedAtUs - shift, $0.recordedAtUs - shift) }
    }

    /// Ends a fork whose program ended before its fork point: the run recorded apart removed, and
    /// why no fork was made.
    func abandonFork(_ ending: Ending, state: inout State) -> RecordingError {
        try? state.recorder?.writer.close()
        state.recorder = nil
        unlink(forkPrefixPath)
        let expected = fork?.requests.count ?? 0
        let retrace =
            "a fork runs the command again from its start, its tools included: they, its input and its code must give what they gave the parent up to the fork point"
        switch (state.stopCause, ending) {
        case (.forkDiverged(let difference, let step)?, _):
            return RecordingError(
                .forkFailed,
                "the command did not retrace its parent: its model request of step \(step) is not the parent's (\(difference))",
                hint: retrace)
        case (.forkOverlap?, _):
            return RecordingError(.forkFailed, Self.overlapMessage)
        case (.notRecorded(let message, let step)?, _):
            return RecordingError(
                .forkFailed, "the parent's cassette does not answer the request of step \(step): \(message)",
                hint: "give the cassette the parent was recorded with (record --cassette DIR --record new|all): --parent-cassette DIR")
        case (.maxRequests?, _), (.tokenBudget?, _):
            return RecordingError(.forkFailed, "the command's model budget stopped it before its fork point: no fork was made")
        case (_, .stopped):
            return RecordingError(.forkFailed, "the fork was interrupted before its fork point: no fork was made")
        case (_, .timedOut(let ms)):
            return RecordingError(
                .forkFailed, "the command ran longer than \(ms / 1000) s (--timeout) before its fork point: no fork was made")
        case (_, .signalled(let signal)):
            return RecordingError(
                .forkFailed,
                "the command was killed by signal \(signal) after \(state.forking.prefixAnswered) of the \(expected) model requests of its parent before the fork point: no fork was made"
            )
        case (_, .exited(let status)):
            return RecordingError(
                .forkFailed,
                "the command exited with status \(status) after \(state.forking.prefixAnswered) of the \(expected) model requests of its parent before the fork point: it did not retrace its parent",
                hint: retrace)
        }
    }

    /// The calls whose edited result no request past the fork point carried to the model (the
    /// program ended first, or wrote the result back in a form the fork does not edit): the
    /// model was never shown it.
    public var unshownEdits: [String] {
        let shown = state.withLock { $0.forking.editsShown }
        return (fork?.editedCalls ?? []).filter { !shown.contains($0) }
    }
}
