extension RunState {
    /// Folds one event into the state. Pure and total: it never throws and never traps;
    /// what does not fit is recorded in `anomalies`. Returns what it touched, for caches that
    /// follow the fold (the state digester).
    @discardableResult
    public static func reduce(into state: inout RunState, _ event: Event) -> FoldChange {
        var change = FoldChange()
        state.eventCount += 1
        if let runId = state.runId {
            if runId != event.runId {
                state.note(event, "belongs to run \"\(event.runId)\", not to \"\(runId)\"")
            }
        } else {
            state.runId = event.runId
        }
        state.lastEventAtUs = event.timeUs
        state.step = event.step

        if let stop = state.stop {
            if case .approvalRecorded = event.payload, stop.reason == .approvalRequired {
                // An approval resumes a run that stopped to ask for it.
                state.stop = nil
                state.resumeCount += 1
            } else if case .unknown = event.payload {
            } else {
                state.note(event, "\(event.kind) after the run stopped")
            }
        }

        switch event.payload {
        case .runStarted(let started):
            if state.start != nil {
                state.note(event, "a second run_started")
            } else {
                state.start = started
                state.startedAtUs = event.timeUs
                change.start = true
            }
        case .contextBuilt(let packet):
            state.contextPacketCount += 1
            state.lastTokenEstimate = packet.tokenEstimate
        case .decisionMade(let made):
            if case .invalid = made.outcome { state.counters.invalidDecisions += 1 }
            state.decisions.append(
                DecisionRecord(step: event.step, sequence: event.sequence, outcome: made.outcome, usage: made.usage, isAside: made.isAside))
            state.usage.modelCalls += 1
            if let usage = made.usage {
                // Each count is at most 2^53 − 1; their totals, over enough decisions, may not be:
                // a total that reaches the largest Int stays there (the fold never traps on a log).
                state.usage.inputTokens = state.usage.inputTokens.addingSaturating(usage.input)
                state.usage.outputTokens = state.usage.outputTokens.addingSaturating(usage.output)
            }
            state.usage.costUSD += made.costUSD ?? 0
            state.usage.modelLatencyUs = state.usage.modelLatencyUs.addingSaturating(made.latencyUs ?? 0)
            if case .valid(.toolCalls(let proposed)) = made.outcome {
                // The index is made fresh before it is extended: marked fresh after the appends
                // below, a stale one would keep positions from before a change (a trimmed list).
                state.freshenCallIds()
                for call in proposed {
                    // A reused id is an anomaly, but the call is kept: dropping it would hide a
                    // call from every trajectory check. Later events pair with the newest call
                    // of that id, as transcripts that reuse ids mean them to.
                    if state.indexOfCall(call.id) != nil {
                        state.note(event, Anomaly.reusedIdPrefix + call.id + Anomaly.reusedIdSuffix)
                    }
                    state.calls.append(
                        ToolCallRecord(id: call.id, tool: call.name, step: event.step, argumentsText: call.argumentsText))
                    state.callIds.positions[call.id] = state.calls.count - 1
                    state.callIds.isStale = false
                }
            }
        case .verdictGiven(let verdict):
            guard let index = state.callIndex(verdict.callId, for: event) else { break }
            state.checkTool(verdict.tool, of: index, for: event, "a verdict on tool")
            if state.calls[index].verdict != nil {
                state.note(event, "a second verdict for call \"\(verdict.callId)\"")
            } else {
                change.call = state.changeCall(at: index) { $0.verdict = verdict }
            }
        case .toolIntended(let intent):
            guard let index = state.callIndex(intent.callId, for: event) else { break }
            state.checkTool(intent.tool, of: index, for: event, "starts tool")
            // An imported run had no policy gate here: it records no verdicts (`source`).
            if !state.calls[index].isPermitted, state.start?.source == nil {
                state.note(event, "tool \"\(intent.tool)\" started for call \"\(intent.callId)\" without an allow verdict")
            }
            change.call = state.changeCall(at: index) { $0.attempts += 1 }
            state.usage.toolAttempts += 1
        case .toolCompleted(let result):
            guard let index = state.callIndex(result.callId, for: event) else { break }
            state.checkTool(result.tool, of: index, for: event, "a result of tool")
            if state.calls[index].results.count >= state.calls[index].attempts {
                state.note(event, "a result for call \"\(result.callId)\" with no tool_intended before it")
            }
            change.call = state.changeCall(at: index) { $0.results.append(result) }
            state.usage.toolTimeUs = state.usage.toolTimeUs.addingSaturating(result.durationUs)
        case .approvalRecorded(let approval):
            guard let index = state.callIndex(approval.callId, for: event) else { break }
            if state.calls[index].verdict?.verdict != .approvalRequired {
                state.note(event, "an approval for call \"\(approval.callId)\", which did not require one")
            }
            change.call = state.changeCall(at: index) { $0.approval = approval }
        case .stepEnded(let ended):
            state.stepsCompleted += 1
            state.lastStateDigest = ended.stateDigest
        case .contentStored(let content):
            state.contents.append(
                ContentReference(hash: content.hash, mediaType: content.mediaType, byteCount: content.byteCount))
        case .runStopped(let stopped):
            // A stop that says the user ended the conversation needs the turn that ended it so: a
            // record whose turns say otherwise contradicts itself, and no check may be graded on
            // it. (A record that holds no turn at all — an export without content, imported back —
            // says nothing of them.)
            if !state.userTurns.isEmpty, let said = UserTurn.Ending.allCases.first(where: { $0.stopReason == stopped.reason }) {
                let ending = state.userTurns.last { $0.turn.ends != nil }
                if ending?.turn.ends != said {
                    state.note(
                        event,
                        ending.map {
                            "the run stopped \(stopped.reason.rawValue), but user turn \($0.turn.turn) ended the conversation \($0.turn.ends?.rawValue ?? "")"
                        }
                            ?? "the run stopped \(stopped.reason.rawValue), which the user's ending of the conversation gives, but no user turn ended it"
                    )
                }
            }
            state.stop = stopped
        case .runForked(let forked):
            state.forked = forked
            for edit in forked.edits {
                switch edit.kind {
                case .result, .error:
                    guard let id = edit.callId else {
                        state.note(event, "a \(edit.kind.rawValue) edit names no call")
                        break
                    }
                    guard let index = state.callIndex(id, for: event) else { break }
                    guard let last = state.calls[index].results.last else {
                        // A recorded run's fork (its start has a `source`) edits a result before it
                        // comes: the gateway records the edited one when it does (docs/replay.md).
                        if state.start?.source == nil { state.note(event, "edits the result of call \"\(id)\", which has none") }
                        break
                    }
                    let replaced =
                        edit.kind == .result
                        ? ToolCompleted(
                            callId: id, tool: last.tool, attempt: last.attempt, status: .ok, output: edit.value ?? .null, durationUs: 0)
                        : ToolCompleted(
                            callId: id, tool: last.tool, attempt: last.attempt, status: .error, error: edit.text ?? "", durationUs: 0)
                    let touched = state.changeCall(at: index) { $0.results[$0.results.count - 1] = replaced }
                    change.call = min(change.call ?? touched, touched)
                case .input:
                    guard var start = state.start else { break }
                    start.goal = edit.text ?? start.goal
                    state.start = start
                    change.start = true
                case .decision, .approve, .deny, .toolFixture, .say:
                    break
                }
            }
        case .userTurn(let turn):
            // Turns are numbered 1, 2, 3… in the order said: a turn check (`turns.N`) and a fork
            // at a turn find a turn by its number, and two of one number would hide one of them.
            let expected = (state.userTurns.last?.turn.turn ?? 0) + 1
            if turn.turn != expected {
                state.note(event, "user turn \(turn.turn) where turn \(expected) comes next (turns are numbered 1, 2, 3… in order)")
            }
            // No one speaks after the user ended the conversation: `run_stopped` follows that turn.
            // (The turn right after it is the anomaly; looking at the last turn alone keeps a
            // long conversation's fold from searching its turns at each one.)
            if let ended = state.userTurns.last, ended.turn.ends != nil {
                state.note(
                    event,
                    "user turn \(turn.turn) after user turn \(ended.turn.turn) ended the conversation (\(ended.turn.ends?.rawValue ?? ""))")
            }
            state.userTurns.append(UserTurnRecord(step: event.step, sequence: event.sequence, turn: turn))
        case .pipeline:
            state.note(event, "\(event.kind) belongs in a pipeline log, not a run log")
        case .unknown:
            state.unknownEventCount += 1
        }
        return change
    }

    /// Gives the call at `index` the verdict a policy audit found for it (`agent-eval audit`, a
    /// case's `policy:`), when the run recorded none: the counters follow, as for the fold's own
    /// changes. Not an event — no log says it — so a state changed this way is never digested
    /// or written back. Returns false, changing nothing, when the call has a verdict already.
    @discardableResult
    public mutating func assumeVerdict(_ verdict: VerdictGiven, forCallAt index: Int) -> Bool {
        guard calls.indices.contains(index), calls[index].verdict == nil else { return false }
        _ = changeCall(at: index) { $0.verdict = verdict }
        return true
    }

    /// Changes one call, keeping its revision and the counters in step with it.
    private mutating func changeCall(at index: Int, _ body: (inout ToolCallRecord) -> Void) -> Int {
        let wasFresh = !callIds.isStale
        // `calls` has an observer, so its element's access is one to all of `self`: the
        // counters (integers alone) go through a copy.
        var counted = counters
        RunState.change(&calls[index], counting: &counted, body)
        counters = counted
        callIds.isStale = !wasFresh
        return index
    }

    /// `changeCall` on the record in place: its shares are read through the `inout` access.
    /// Read as `calls[index]`, each share copied the whole record out of the list first (a
    /// retain of each field, and a release after), twice for every event that changes a call.
    private static func change(
        _ call: inout ToolCallRecord, counting counters: inout RunCounters, _ body: (inout ToolCallRecord) -> Void
    ) {
        let before = RunCounters.CallShare(call)
        body(&call)
        call.revision += 1
        counters.update(from: before, to: RunCounters.CallShare(call))
    }

    /// Holds the output of `calls[call].results[result]` as `text`: the same value, kept
    /// elsewhere (a long log's fold lets outputs go back to the log, `StoredOutputs`). Nothing
    /// else changes, not the call's revision nor the digest. Returns false, changing nothing,
    /// when there is no such output or `text` is not of its size.
    @discardableResult
    public mutating func holdOutput(ofCall call: Int, result: Int, as text: JSONText) -> Bool {
        guard calls.indices.contains(call), calls[call].results.indices.contains(result),
            calls[call].results[result].outputText?.count == text.count
        else { return false }
        let wasFresh = !callIds.isStale
        calls[call].results[result].outputText = text
        callIds.isStale = !wasFresh
        return true
    }

    private mutating func note(_ event: Event, _ message: String) {
        anomalies.append(Anomaly(sequence: event.sequence, message: "event \(event.sequence) (\(event.kind)): \(message)"))
    }

    /// An event that names a call names the tool the call proposed; one that names another is
    /// an anomaly (an edited or miswritten log: an intent to start a tool the checks never saw
    /// proposed), and the event applies all the same.
    private mutating func checkTool(_ tool: String, of index: Int, for event: Event, _ what: String) {
        guard tool != calls[index].tool else { return }
        note(event, "\(what) \"\(tool)\" for call \"\(calls[index].id)\", which proposed \"\(calls[index].tool)\"")
    }

    /// The index of the newest call with this id.
    func callIndex(_ id: String) -> Int? {
        callIds.isStale ? calls.lastIndex { $0.id == id } : callIds.positions[id]
    }

    /// `callIndex`, rebuilding the id index first when a change from outside the fold left it
    /// stale: constant time per event however long the run.
    private mutating func indexOfCall(_ id: String) -> Int? {
        // Most events name the newest call (a step's verdict, intent and result follow its
        // decision): one comparison instead of hashing the id.
        if let newest = calls.indices.last, calls[newest].id == id { return newest }
        freshenCallIds()
        return callIds.positions[id]
    }

    /// Rebuilds the id index when a change from outside the fold left it stale.
    mutating func freshenCallIds() {
        guard callIds.isStale else { return }
        callIds.positions = Dictionary(calls.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { max($0, $1) })
        callIds.isStale = false
    }

    private mutating func callIndex(_ id: String, for event: Event) -> Int? {
        if let index = indexOfCall(id) { return index }
        note(event, "names call \"\(id)\", which no decision proposed")
        return nil
    }
}

/// What folding one event changed, beyond appending to the state's lists.
public struct FoldChange: Sendable, Hashable {
    /// The index in `RunState.calls` of an existing call the event changed.
    public var call: Int?
    /// Whether the event set the run's start.
    public var start = false

    public init(call: Int? = nil, start: Bool = false) {
        self.call = call
        self.start = start
    }
}
