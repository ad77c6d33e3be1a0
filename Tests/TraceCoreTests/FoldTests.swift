import Foundation
import Testing
import TraceCore

/// Builds events with dense sequence numbers; the fold does not check hashes.
struct EventScript {
    var events: [Event] = []
    var time = 1_000_000

    mutating func add(_ payload: EventPayload, step: Int) {
        events.append(Event(runId: "r1", sequence: events.count, step: step, timeUs: time, previousHash: "", payload: payload))
        time += 1_000
    }
}

@Suite("The fold")
struct FoldTests {
    static let started = RunStarted(
        goal: "refund A-1", agent: AgentIdentity(name: "a", configDigest: "sha256:" + String(repeating: "0", count: 64)),
        model: ModelIdentity(provider: "scripted", name: "m"), policy: PolicyIdentity(name: "p"),
        tools: [ToolSpec(name: "lookup", description: "d", inputSchema: ["type": "object"], sideEffect: .read)],
        limits: RunLimits(maxSteps: 3, tokenBudget: 100))

    @Test(
        "a list trimmed from outside the fold (a settled front): the next decision proposing the newest id again leaves every call found where it is"
    )
    func callIndexAfterTrimming() {
        var script = EventScript()
        for id in ["a", "b", "c"] {
            script.add(
                .decisionMade(DecisionMade(raw: "{}", outcome: .valid(.toolCalls([ToolCall(id: id, name: "t", arguments: [:])])))), step: 1)
        }
        var state = RunState(folding: script.events)
        state.calls.removeFirst(1)
        var more = EventScript()
        more.events = script.events
        more.add(
            .decisionMade(DecisionMade(raw: "{}", outcome: .valid(.toolCalls([ToolCall(id: "c", name: "t", arguments: [:])])))), step: 2)
        more.add(.verdictGiven(VerdictGiven(callId: "b", tool: "t", verdict: .allow)), step: 2)
        for event in more.events.dropFirst(3) { RunState.reduce(into: &state, event) }
        #expect(state.calls.map(\.id) == ["b", "c", "c"])
        #expect(state.calls[0].verdict?.verdict == .allow, "the verdict lands on b, where it now is")
        #expect(state.anomalies.map(\.message).allSatisfy { $0.contains("\"c\"") }, "\(state.anomalies)")
    }

    @Test("a fork's edit of a result not yet come: an anomaly in a run of the runtime, none in a recorded run's fork")
    func editOfAResultToCome() {
        func fold(source: RunSource?) -> RunState {
            var started = Self.started
            started.source = source
            var script = EventScript()
            script.add(.runStarted(started), step: 0)
            let lookup = ToolCall(id: "c1", name: "lookup", arguments: ["id": "A-1"])
            script.add(
                .decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls([lookup])), usage: TokenUsage(input: 1, output: 1))),
                step: 0)
            script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "lookup", verdict: .allow)), step: 0)
            script.add(.toolIntended(ToolIntended(callId: "c1", tool: "lookup", arguments: ["id": "A-1"], attempt: 1)), step: 0)
            script.add(
                .runForked(
                    RunForked(parentRunId: "r0", parentHead: "h", step: 0, edits: [ForkEdit(kind: .result, callId: "c1", value: "lost")])),
                step: 0)
            return RunState(folding: script.events)
        }
        let runtime = fold(source: nil)
        #expect(runtime.anomalies.map(\.message) == [#"event 4 (run_forked): edits the result of call "c1", which has none"#])
        #expect(runtime.call(id: "c1")?.results.isEmpty == true)
        let recorded = fold(source: RunSource(format: "gateway", file: "python3 agent.py", importer: "agent-eval-record/1"))
        #expect(recorded.anomalies.isEmpty)
        #expect(recorded.call(id: "c1")?.results.isEmpty == true, "the result is recorded when it comes")
    }

    @Test("a run with an allowed call, a denied call and an answer folds to exactly this state")
    func wholeState() {
        var script = EventScript()
        script.add(.runStarted(Self.started), step: 0)
        script.add(.contextBuilt(ContextBuilt(goal: "refund A-1", stateSummary: "-", tokenEstimate: 40)), step: 1)
        let lookup = ToolCall(id: "c1", name: "lookup", arguments: ["id": "A-1"])
        let delete = ToolCall(id: "c2", name: "delete", arguments: [:])
        script.add(
            .decisionMade(
                DecisionMade(
                    raw: "r", outcome: .valid(.toolCalls([lookup, delete])), usage: TokenUsage(input: 40, output: 9), latencyUs: 500,
                    costUSD: 0.25)),
            step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "lookup", verdict: .allow)), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c2", tool: "delete", verdict: .deny, reason: "no", rule: "r2")), step: 1)
        script.add(.toolIntended(ToolIntended(callId: "c1", tool: "lookup", arguments: ["id": "A-1"], attempt: 1)), step: 1)
        let result = ToolCompleted(callId: "c1", tool: "lookup", attempt: 1, status: .ok, output: ["total": 5], durationUs: 700)
        script.add(.toolCompleted(result), step: 1)
        script.add(.stepEnded(StepEnded(stateDigest: "sha256:ab")), step: 1)
        script.add(.unknown(kind: "future_thing", data: ["x": 1]), step: 2)
        script.add(.runStopped(RunStopped(reason: .success, answer: "done")), step: 2)

        var expected = RunState()
        expected.runId = "r1"
        expected.start = Self.started
        expected.startedAtUs = 1_000_000
        expected.lastEventAtUs = 1_009_000
        expected.eventCount = 10
        expected.step = 2
        expected.stepsCompleted = 1
        expected.contextPacketCount = 1
        expected.lastTokenEstimate = 40
        expected.decisions = [
            DecisionRecord(step: 1, sequence: 2, outcome: .valid(.toolCalls([lookup, delete])), usage: TokenUsage(input: 40, output: 9))
        ]
        var first = ToolCallRecord(id: "c1", tool: "lookup", step: 1, arguments: ["id": "A-1"])
        first.verdict = VerdictGiven(callId: "c1", tool: "lookup", verdict: .allow)
        first.attempts = 1
        first.results = [result]
        var second = ToolCallRecord(id: "c2", tool: "delete", step: 1, arguments: [:])
        second.verdict = VerdictGiven(callId: "c2", tool: "delete", verdict: .deny, reason: "no", rule: "r2")
        expected.calls = [first, second]
        expected.usage.inputTokens = 40
        expected.usage.outputTokens = 9
        expected.usage.costUSD = 0.25
        expected.usage.modelCalls = 1
        expected.usage.modelLatencyUs = 500
        expected.usage.toolAttempts = 1
        expected.usage.toolTimeUs = 700
        expected.lastStateDigest = "sha256:ab"
        expected.stop = RunStopped(reason: .success, answer: "done")
        expected.unknownEventCount = 1
        expected.counters.executedCalls = 1
        expected.counters.deniedCalls = 1

        let state = RunState(folding: script.events)
        #expect(state == expected)
        #expect(state.digest == expected.digest)

        // The trajectory queries the evals use.
        #expect(state.executedToolNames == ["lookup"])
        #expect(state.deniedCalls.map(\.id) == ["c2"])
        #expect(state.attemptedCalls.count == 2)
        #expect(state.toolCallCount == 1)
        #expect(state.verdict(forCall: "c2")?.rule == "r2")
        #expect(state.results(forCall: "c1") == [result])
        #expect(state.stopReason == .success)
        #expect(state.finalAnswer == "done")
        #expect(state.usage.totalTokens == 49)
        #expect(state.elapsedUs == 9_000)
    }

    /// What a state's counters and lists must be after each event of `script`, written by
    /// hand from the events, not computed by the fold.
    struct Expected: Sendable, Hashable, CustomStringConvertible {
        var events: Int
        var decisions: Int
        var calls: Int
        var counters: [Int]  // invalid, executed, denied, awaiting, failed attempts, failed calls
        var stop: StopReason?

        init(_ events: Int, _ decisions: Int, _ calls: Int, _ counters: [Int], _ stop: StopReason? = nil) {
            (self.events, self.decisions, self.calls, self.counters, self.stop) = (events, decisions, calls, counters, stop)
        }

        init(_ state: RunState) {
            let c = state.counters
            self.init(
                state.eventCount, state.decisions.count, state.calls.count,
                [c.invalidDecisions, c.executedCalls, c.deniedCalls, c.callsAwaitingApproval, c.failedAttempts, c.failedCalls],
                state.stopReason)
        }

        var description: String {
            "\(events) events, \(decisions) decisions, \(calls) calls, counters \(counters), stop \(stop?.rawValue ?? "-")"
        }
    }

    @Test("after every event the state's counts are those written by hand for that prefix")
    func prefixes() {
        var script = EventScript()
        let lookup = ToolCall(id: "c1", name: "lookup", arguments: [:])
        let refund = ToolCall(id: "c2", name: "refund", arguments: [:])
        let delete = ToolCall(id: "c3", name: "delete", arguments: [:])
        script.add(.runStarted(Self.started), step: 0)
        script.add(.decisionMade(DecisionMade(raw: "?", outcome: .invalid(InvalidDecision(kind: .unparseable, message: "x")))), step: 1)
        script.add(.decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls([lookup, refund, delete])))), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "lookup", verdict: .allow)), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c2", tool: "refund", verdict: .approvalRequired)), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c3", tool: "delete", verdict: .deny)), step: 1)
        script.add(.toolIntended(ToolIntended(callId: "c1", tool: "lookup", arguments: [:], attempt: 1)), step: 1)
        script.add(.toolCompleted(ToolCompleted(callId: "c1", tool: "lookup", attempt: 1, status: .error, durationUs: 1)), step: 1)
        script.add(.toolIntended(ToolIntended(callId: "c1", tool: "lookup", arguments: [:], attempt: 2)), step: 1)
        script.add(.toolCompleted(ToolCompleted(callId: "c1", tool: "lookup", attempt: 2, status: .ok, output: 1, durationUs: 1)), step: 1)
        script.add(.runStopped(RunStopped(reason: .approvalRequired)), step: 1)
        script.add(.approvalRecorded(ApprovalRecorded(callId: "c2", isGranted: false)), step: 1)
        script.add(.runStopped(RunStopped(reason: .success)), step: 1)
        let expected: [Expected] = [
            Expected(1, 0, 0, [0, 0, 0, 0, 0, 0]),
            Expected(2, 1, 0, [1, 0, 0, 0, 0, 0]),
            Expected(3, 2, 3, [1, 0, 0, 0, 0, 0]),
            Expected(4, 2, 3, [1, 0, 0, 0, 0, 0]),
            Expected(5, 2, 3, [1, 0, 0, 1, 0, 0]),
            Expected(6, 2, 3, [1, 0, 1, 1, 0, 0]),
            Expected(7, 2, 3, [1, 1, 1, 1, 0, 1]),  // started, no result yet: counts as failed so far
            Expected(8, 2, 3, [1, 1, 1, 1, 1, 1]),
            Expected(9, 2, 3, [1, 1, 1, 1, 1, 1]),
            Expected(10, 2, 3, [1, 1, 1, 1, 1, 0]),
            Expected(11, 2, 3, [1, 1, 1, 1, 1, 0], .approvalRequired),
            Expected(12, 2, 3, [1, 1, 2, 0, 1, 0]),  // refused: no longer awaiting, now denied
            Expected(13, 2, 3, [1, 1, 2, 0, 1, 0], .success),
        ]
        var state = RunState()
        for (index, event) in script.events.enumerated() {
            RunState.reduce(into: &state, event)
            #expect(Expected(state) == expected[index], "after event \(index)")
        }
        #expect(state.calls.map(\.revision) == [5, 2, 1])
    }

    @Test("what does not fit is recorded as an anomaly, never a crash")
    func anomalies() {
        var script = EventScript()
        script.add(.runStarted(Self.started), step: 0)
        script.add(.toolIntended(ToolIntended(callId: "ghost", tool: "lookup", arguments: [:], attempt: 1)), step: 1)
        script.add(
            .decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls([ToolCall(id: "c1", name: "lookup", arguments: [:])])))),
            step: 1)
        script.add(.toolIntended(ToolIntended(callId: "c1", tool: "lookup", arguments: [:], attempt: 1)), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "lookup", verdict: .deny)), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "lookup", verdict: .allow)), step: 1)
        script.add(.runStopped(RunStopped(reason: .success)), step: 1)
        script.add(.runStarted(Self.started), step: 1)
        let state = RunState(folding: script.events)
        #expect(state.anomalies.map(\.sequence) == [1, 3, 5, 7, 7])
        #expect(state.anomalies[1].message == "event 3 (tool_intended): tool \"lookup\" started for call \"c1\" without an allow verdict")
        #expect(state.calls[0].verdict?.verdict == .deny)
        #expect(state.start == Self.started)
    }

    @Test("a verdict, an intent or a result that names another tool than its call's is an anomaly, and applies all the same")
    func eventsNameTheirCallsTool() {
        var script = EventScript()
        script.add(.runStarted(Self.started), step: 0)
        script.add(
            .decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls([ToolCall(id: "c1", name: "lookup", arguments: [:])])))),
            step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "lookup", verdict: .allow)), step: 1)
        script.add(.toolIntended(ToolIntended(callId: "c1", tool: "delete", arguments: [:], attempt: 1)), step: 1)
        script.add(.toolCompleted(ToolCompleted(callId: "c1", tool: "delete", attempt: 1, status: .ok, durationUs: 5)), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "delete", verdict: .deny)), step: 1)
        let state = RunState(folding: script.events)
        #expect(
            state.anomalies.map(\.message) == [
                "event 3 (tool_intended): starts tool \"delete\" for call \"c1\", which proposed \"lookup\"",
                "event 4 (tool_completed): a result of tool \"delete\" for call \"c1\", which proposed \"lookup\"",
                "event 5 (verdict_given): a verdict on tool \"delete\" for call \"c1\", which proposed \"lookup\"",
                "event 5 (verdict_given): a second verdict for call \"c1\"",
            ])
        #expect(state.calls[0].attempts == 1 && state.calls[0].results.count == 1)
        #expect(state.calls[0].verdict?.verdict == .allow)
    }

    @Test("events pair with the newest call of their id, also after the calls were changed outside the fold")
    func callsFoundByIdAfterOutsideChanges() throws {
        func proposal(_ ids: [String]) -> EventPayload {
            .decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls(ids.map { ToolCall(id: $0, name: "lookup", arguments: [:]) }))))
        }
        var script = EventScript()
        script.add(.runStarted(Self.started), step: 0)
        script.add(proposal(["a", "b", "a"]), step: 1)
        var state = RunState(folding: script.events)
        #expect(state.anomalies.map(\.message) == ["event 1 (decision_made): proposes call id \"a\" a second time"])
        #expect(state.calls.map(\.id) == ["a", "b", "a"])

        // A reader that keeps memory flat drops settled calls (the catalog's indexer does).
        state.calls.removeFirst(1)
        #expect(state.call(id: "b") == state.calls[0])
        #expect(state.call(id: "a") == state.calls[1])
        for payload: EventPayload in [
            .verdictGiven(VerdictGiven(callId: "b", tool: "lookup", verdict: .allow)),
            .verdictGiven(VerdictGiven(callId: "a", tool: "lookup", verdict: .deny)),
            proposal(["c"]),
            .verdictGiven(VerdictGiven(callId: "c", tool: "lookup", verdict: .allow)),
        ] {
            RunState.reduce(
                into: &state, Event(runId: "r1", sequence: state.eventCount, step: 2, timeUs: 1, previousHash: "", payload: payload))
        }
        #expect(state.calls.map(\.id) == ["b", "a", "c"])
        #expect(state.calls.map { $0.verdict?.verdict } == [.allow, .deny, .allow])
        #expect(state.anomalies.count == 1)

        // A loaded snapshot is the same state, and it folds on the same way.
        // Parsed while the bytes are alive: a pointer taken out of `withUnsafeBytes` dangles (and
        // read freed memory now and then: "control character 0x0 inside a string").
        var loaded = try JSONWriter.encode(state.snapshotJSON).withUnsafeBytes { try RunState(snapshotText: $0) }
        #expect(loaded == state)
        let result = ToolCompleted(callId: "c", tool: "lookup", attempt: 1, status: .ok, durationUs: 1)
        for folded in [0, 1] {
            var target = folded == 0 ? state : loaded
            RunState.reduce(
                into: &target, Event(runId: "r1", sequence: 9, step: 2, timeUs: 2, previousHash: "", payload: .toolCompleted(result)))
            #expect(target.calls[2].results == [result])
            if folded == 1 { loaded = target } else { state = target }
        }
        #expect(loaded == state)
    }

    @Test("an approval after an approval_required stop resumes the run")
    func resumeAfterApproval() {
        var script = EventScript()
        script.add(.runStarted(Self.started), step: 0)
        script.add(
            .decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls([ToolCall(id: "c1", name: "refund", arguments: [:])])))),
            step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c1", tool: "refund", verdict: .approvalRequired)), step: 1)
        script.add(.runStopped(RunStopped(reason: .approvalRequired)), step: 1)
        var state = RunState(folding: script.events)
        #expect(state.callsAwaitingApproval.map(\.id) == ["c1"])
        #expect(state.calls[0].isPermitted == false)
        script.add(.approvalRecorded(ApprovalRecorded(callId: "c1", isGranted: true)), step: 1)
        script.add(.toolIntended(ToolIntended(callId: "c1", tool: "refund", arguments: [:], attempt: 1)), step: 1)
        state = RunState(folding: script.events)
        #expect(state.stop == nil)
        #expect(state.resumeCount == 1)
        #expect(state.anomalies.isEmpty)
        #expect(state.executedToolNames == ["refund"])
    }

    @Test("event lines round-trip for every kind, and an unknown version is refused")
    func eventLines() throws {
        var script = EventScript()
        script.add(.runStarted(Self.started), step: 0)
        script.add(.contentStored(ContentStored(bytes: [0xFF, 0x00], mediaType: "application/octet-stream")), step: 0)
        script.add(.contextBuilt(ContextBuilt(goal: "refund A-1", stateSummary: "-", tokenEstimate: 40)), step: 1)
        script.add(
            .decisionMade(DecisionMade(raw: "?", outcome: .invalid(InvalidDecision(kind: .unknownTool, message: "no tool x")))), step: 1)
        script.add(.verdictGiven(VerdictGiven(callId: "c", tool: "t", verdict: .approvalRequired)), step: 1)
        script.add(.approvalRecorded(ApprovalRecorded(callId: "c", isGranted: false, reason: "too much")), step: 1)
        script.add(.toolIntended(ToolIntended(callId: "c", tool: "t", arguments: ["id": "A-1"], attempt: 1)), step: 1)
        script.add(.toolCompleted(ToolCompleted(callId: "c", tool: "t", attempt: 1, status: .ok, output: .null, durationUs: 1)), step: 1)
        script.add(.stepEnded(StepEnded(stateDigest: "sha256:" + String(repeating: "ab", count: 32))), step: 1)
        script.add(.runStopped(RunStopped(reason: .budgetExhausted, limit: .maxSteps)), step: 1)
        // The reader finds a kind by its place in this list, and its payload's type by that place:
        // the order is the format document's, and a change to it is a change to the reader.
        #expect(
            EventPayload.runKinds.strings == [
                "run_started", "context_built", "decision_made", "verdict_given", "tool_intended", "tool_completed",
                "approval_recorded", "step_ended", "content_stored", "run_stopped", "run_forked", "user_turn",
            ])
        #expect(Set(script.events.map(\.kind)).count == 10, "every kind of a version 1 line")
        for event in script.events {
            #expect(try Event(line: event.encodedLine()) == event)
            // A kind written with an escape is the same kind (a reader finds a kind by its bytes
            // first); one byte more is a kind of its own, kept as unknown.
            let line = String(decoding: event.encodedLine(), as: UTF8.self)
            let escaped = event.kind.replacingOccurrences(of: "_", with: #"\u005f"#)
            #expect(line.contains(#""kind":"\#(event.kind)""#))
            let escapedLine = line.replacingOccurrences(of: #""kind":"\#(event.kind)""#, with: #""kind":"\#(escaped)""#)
            #expect(try Event(line: Array(escapedLine.utf8)) == event, "\(escapedLine)")
            // A reader that keeps no packet text knows an escaped `context_built` as well.
            if case .contextBuilt = event.payload {
                let lean = try escapedLine.utf8.withContiguousStorageIfAvailable {
                    try Event(line: UnsafeRawBufferPointer($0), runId: nil, previousHash: nil, keepsPacketText: false)
                }
                guard case .contextBuilt(let packet)? = lean?.payload else {
                    Issue.record("\(escapedLine) read as another kind")
                    continue
                }
                #expect(packet.goal.isEmpty && packet.tokenEstimate == 40)
            }
            let otherLine = line.replacingOccurrences(of: #""kind":"\#(event.kind)""#, with: #""kind":"\#(event.kind)s""#)
            #expect(try Event(line: Array(otherLine.utf8)).payload.kind == event.kind + "s")
            guard case .unknown = try Event(line: Array(otherLine.utf8)).payload else {
                Issue.record("\(otherLine) read as a known kind")
                continue
            }
        }
        var line = String(decoding: script.events[0].encodedLine(), as: UTF8.self)
        line = line.replacingOccurrences(of: "{\"v\":1,", with: "{\"v\":7,")
        #expect { _ = try Event(line: Array(line.utf8)) } throws: { ($0 as? TraceCoreError)?.code == .unsupportedVersion }
        let broken =
            #"{"v":1,"run":"r","seq":0,"step":0,"time_us":1,"kind":"verdict_given","prev":"","data":{"call_id":"c","tool":"t","verdict":"maybe"}}"#
        #expect {
            _ = try Event(line: Array(broken.utf8))
        } throws: { error in
            (error as? TraceCoreError)?.message == #"data.verdict is "maybe", which is not one of "allow", "deny", "approval_required""#
        }
        // A line the writer did not write (members in another order, one more member, white
        // space) is the same event, read the general way; a cut line names what is wrong.
        let written = String(decoding: script.events[1].encodedLine(), as: UTF8.self)
        let reordered = written.replacingOccurrences(of: #"{"v":1,"run":"#, with: #"{"x":[1],"run":"#)
            .replacingOccurrences(of: #","data":"#, with: #","v":1,"data":"#)
        for variant in [
            reordered, " " + written.replacingOccurrences(of: ",", with: " , "),
            written.replacingOccurrences(of: "}}", with: "},\"z\":null}"),
        ] {
            #expect(try Event(line: Array(variant.utf8)) == script.events[1], "\(variant)")
        }
        #expect {
            _ = try Event(line: Array(written.dropLast(3).utf8))
        } throws: { error in
            (error as? TraceCoreError)?.code == .invalidJSON && (error as? TraceCoreError)?.message.contains("is not closed") == true
        }
    }
}
