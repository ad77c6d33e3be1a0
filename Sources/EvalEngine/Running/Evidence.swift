import TraceCore
import TraceLog

/// The rule every verdict goes through: **a pass needs evidence**. A run is graded only when the
/// harness saw it happen as the case assumes; otherwise it could not run (exit 2), or it fails
/// with a message that says what is missing — never a pass (docs/eval-cases.md, "Evidence").
///
/// Every kind of run reaches a verdict through `EvalRunner.check(log:…)`, which asks this type
/// first: recorded and imported logs, live runs of agent files, `command:` cases through the
/// gateway, and each task's child run of a pipeline. A new kind of run joins by being graded from
/// its log there, and a new fault joins the matrix in `EvidenceMatrixTests` (docs/architecture.md).
///
/// What it asks of a run, in order:
/// - the record can be trusted: its state digests match its fold, and the fold found nothing
///   that does not fit (`eval.digest_mismatch`, `eval.anomalous_run`);
/// - it is a run: at least one event (`log.no_event`);
/// - it finished, unless the case allows an unfinished run (`eval.unfinished_run`);
/// - nothing stopped it from outside: not a signal, not Ctrl-C (`eval.interrupted`);
/// - a conversation's simulated user could go on: a run its user's fault ended shows the
///   simulator, not the agent (`eval.simulator_fault`);
/// - its model answered: a run that the model's failure ended (down, an HTTP error, a reply that
///   does not parse, a request still unanswered when time ran out) shows the harness, not the
///   agent (`eval.model_failed`);
/// - and, short of "could not run", two gaps that make the run fail whatever else holds: no
///   valid model decision at all (the agent never acted), and a limit that cut the run short
///   where the case expects no stop reason and forbids something the run could still have done
///   (what it did not do later is unproven).
struct Evidence {
    /// Why the run cannot be graded at all.
    var cannotRun: DiagnosticRecord?
    /// Gaps that fail the run however its expectations come out.
    var gaps: [ExpectationFailure] = []
    /// What a result must show beside its verdict (an unfinished run checked as far as it went).
    var notes: [CheckNote] = []

    /// The expectation name evidence gaps are reported under.
    static let expectationName = "evidence"

    /// What `facts` (the fold of `log`) prove for `evalCase`.
    static func of(_ facts: LogFacts, log: String, case evalCase: EvalCase) -> Evidence {
        let state = facts.state
        var evidence = Evidence()
        func cannotRun(_ code: EvalError.Code, _ message: String, at sequence: Int? = nil, hint: String) -> Evidence {
            evidence.cannotRun = DiagnosticRecord(
                EvalError(code, message, location: SourceLocation(path: log, sequence: sequence), hint: hint))
            return evidence
        }
        if let distrust = facts.distrust(log: log, allowsReusedCallIds: evalCase.allowsReusedCallIds) {
            evidence.cannotRun = DiagnosticRecord(distrust)
            return evidence
        }
        if state.eventCount == 0 {
            // No event is no run, whatever the case allows: there is nothing to check, and an
            // expectation such as toolsNotCalled would hold vacuously.
            evidence.cannotRun = DiagnosticRecord(LogError.noEvent(in: log, tear: facts.tear))
            return evidence
        }
        var unfinished: String?
        if let tear = facts.tear {
            unfinished = "the log is torn: \(tear)"
        } else if state.stop == nil {
            unfinished = "the log ends at seq \(state.eventCount - 1) without run_stopped"
        }
        if let unfinished {
            guard evalCase.allowsUnfinished else {
                return cannotRun(
                    .unfinishedRun, "the run did not finish (\(unfinished)); a run that did not finish cannot show what it did not do",
                    hint: "set allowUnfinished: true on the case to check what the run recorded so far")
            }
            evidence.notes.append(
                CheckNote(message: "the run did not finish (\(unfinished)): checked over what it recorded", step: state.step))
        }
        let last = state.eventCount - 1
        if let stop = state.stop, stop.isInterruption {
            return cannotRun(
                .interrupted,
                "the run was stopped from outside at step \(state.step) (\(stop.error ?? "interrupted")): it shows where it was "
                    + "stopped, not what the agent would have done",
                at: last, hint: "run the case again to its end")
        }
        if let stop = state.stop, stop.isModelFailure {
            let error = stop.error ?? ""
            // A cassette that has no answer is the model not answering too, with another remedy.
            let isMiss = error.contains("has no recording of")
            return cannotRun(
                isMiss ? .cassetteMiss : .modelFailed,
                "the agent's model did not answer, so the run shows the harness, not the agent: \(error)",
                at: last,
                hint: Self.isDamagedRecording(error)
                    ? Self.damagedRecordingHint(evalCase)
                    : isMiss
                        ? "look: \(EvalReport.replayCommand(log: log, step: state.step)); if the change is intended, record again with the "
                            + "model reachable: agent-eval run \(ShellWords.quoted(evalCase.location.path)) --record new"
                        : error.contains(RunStopped.replyNotCapturedPhrase)
                            ? "the trace holds no reply content: turn on the instrumentation's content capture "
                                + "(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true) and collect or import the run again"
                            : "check that the model endpoint is up and answers (upstream:, --base-url, the API key), or replay it from a cassette"
            )
        }
        if let stop = state.stop, stop.isSimulatorFault {
            let error = stop.error ?? ""
            let isMiss = error.contains("has no recording of")
            return cannotRun(
                isMiss ? .cassetteMiss : .simulatorFault,
                "the conversation's simulated user could not go on at user turn \(state.userTurns.count + 1) (step \(state.step)), "
                    + "so the run shows the simulator, not the agent: \(error)",
                at: last,
                hint: Self.isDamagedRecording(error)
                    ? Self.damagedRecordingHint(evalCase)
                    : isMiss
                        ? "the user's requests follow the agent's replies: look at \(EvalReport.replayCommand(log: log, step: state.step)); "
                            + "if the change is intended, record again with the models reachable: agent-eval run "
                            + "\(ShellWords.quoted(evalCase.location.path)) --record new"
                        : "check the case's user\(evalCase.user.map { " (\($0.location))" } ?? ""): its script (a line for every turn, "
                            + "ending with end: user_stop) or its model; the replay shows what the agent said: "
                            + EvalReport.replayCommand(log: log, step: state.step))
        }
        let expected = evalCase.expected
        let valid = state.decisions.count - state.counters.invalidDecisions
        if valid == 0, !(expected.stopReason == .invalidDecision && state.stopReason == .invalidDecision) {
            let what =
                state.decisions.isEmpty
                ? "no model decision was recorded"
                : "every one of the \(counted(state.decisions.count, "model reply", plural: "model replies")) was rejected as a decision"
            evidence.gaps.append(
                ExpectationFailure(
                    expectation: expectationName, expected: "a run in which the agent's model answered at least once",
                    actual: "\(what); the run stopped \(Self.stopText(state.stop)): nothing it did or did not do came from the agent",
                    step: state.step))
        }
        // A limit, a failed tool that stopped the run, a wait for an approval no one gave, or the
        // program's abnormal end (a crash, a signal, a failing exit status) cut the run short: a
        // case that forbids what it could still have done has no evidence.
        if let stop = state.stop, let cut = cutShort(stop), expected.stopReason == nil, expected.limit == nil,
            forbidsWhatItCouldStillDo(expected, state: state, answeredCurrentTurn: stop.reason == .maxTurns)
        {
            evidence.gaps.append(
                ExpectationFailure(
                    expectation: expectationName,
                    expected: "a run that ended on its own (the case expects no stopReason, so no limit, failed tool or wait)",
                    actual: "the run was cut short \(cut) at step \(state.step)" + (stop.error.map { " (\($0))" } ?? "")
                        + ": what it would have done after is unproven"
                        + (stop.reason == .approvalRequired
                            ? "; answer the wait (the case's approve: or deny:), or expect stopReason: approval_required"
                            : stop.reason == .toolFailure || stop.reason == .invalidDecision
                                ? "; expect stopReason: \(stop.reason.rawValue) if the stop is what the case checks" : ""),
                    step: state.step))
        }
        // A recorded log that is not signed cannot prove its end: a copy cut right after an
        // earlier stop (its last gzip member dropped) reads as a whole run, and what it lost may
        // be exactly what the case says never happened. Said beside the verdict, not failed.
        // A signature does not prove that nothing followed a stop the run could be resumed from
        // (a wait for approval): such a log's end is unproven, signed or not.
        if case .recorded = evalCase.source, !expected.toolsNotCalled.isEmpty,
            !facts.endIsSigned || state.stopReason == .approvalRequired
        {
            let why =
                facts.endIsSigned
                ? "it ends where the run waited for approval, and a resumption that followed could have been cut off with its last "
                    + "gzip member"
                : "it is not signed, so a copy cut after an earlier stop would read the same"
            evidence.notes.append(
                CheckNote(
                    message: "the log's end is unproven: \(why); toolsNotCalled holds for what the log shows "
                        + "(docs/log-format.md, 3 and 8a)",
                    step: nil))
        }
        return evidence
    }

    /// What a pipeline's own log proves, beside what each task's child run proves when a case
    /// checks it (`of(_:log:case:)`): an attempt stopped from outside, or one whose agent's model
    /// did not answer, makes pipeline-level expectations unprovable (a task that failed for its
    /// model would make `tasksNotRun` or a fallback pass on the harness's account).
    static func ofPipeline(_ state: PipelineState, log: String) -> DiagnosticRecord? {
        for task in state.tasks {
            for (index, attempt) in task.currentAttempts.enumerated() {
                guard let finished = attempt.finished, finished.status == .failed else { continue }
                let error = finished.error ?? ""
                let place = SourceLocation(path: log)
                // An attempt stopped from outside that a later attempt took up (a resume's retry)
                // left nothing unproven: the later one shows what the task did.
                if finished.errorClass == .interrupted, index == task.currentAttempts.count - 1 {
                    return DiagnosticRecord(
                        EvalError(
                            .interrupted,
                            "task \(task.id) attempt \(attempt.attempt) was stopped from outside (\(error)): the pipeline "
                                + "shows where it was stopped, not what it would have done", location: place,
                            hint: "resume it (agent-eval pipeline resume) or run the case again"))
                }
                if error.contains(RunStopped.modelFailurePrefix) {
                    return DiagnosticRecord(
                        EvalError(
                            .modelFailed, "task \(task.id) attempt \(attempt.attempt): the agent's model did not answer (\(error))",
                            location: place,
                            hint: "check that the model endpoint is up and answers, or replay it from a cassette"))
                }
                if finished.isHarnessFault {
                    // Whatever recovery followed (a retry, a fallback, a skip) was the machine's
                    // doing, not the task's: the pipeline's route proves nothing of its design.
                    return DiagnosticRecord(
                        EvalError(
                            .commandFailed,
                            "task \(task.id) attempt \(attempt.attempt): \(error)", location: place,
                            hint:
                                "install what the task runs (the command, its validation command, the agent's MCP servers) and run the case again"
                        ))
                }
            }
        }
        return nil
    }

    /// Whether the case forbids something the run could still have done had no limit stopped
    /// it: a `toolsNotCalled` tool the run has, an order `notSequence` forbids, an allow-list.
    /// (What it must have done fails on its own when the limit came first.)
    /// A conversation's `turns` count for the turn the run was cut in and the ones after it; with
    /// `answeredCurrentTurn` (`max_turns`: the stop came after the agent answered the last turn)
    /// only for the ones after it, which a run that stopped there never had.
    static func forbidsWhatItCouldStillDo(_ expected: Expectations, state: RunState, answeredCurrentTurn: Bool = false) -> Bool {
        let available = Set(state.start?.tools.map(\.name) ?? [])
        let firstOpen = state.turn(ofStep: state.step) + (answeredCurrentTurn ? 1 : 0)
        return expected.toolsNotCalled.contains(where: available.contains) || !expected.notSequence.isEmpty
            || expected.toolsAllowed != nil
            || expected.turns.contains { $0.turn >= firstOpen && forbidsWhatItCouldStillDo($0.expected, state: state) }
    }

    /// Whether a model's failure was a cassette's recording that cannot be replayed (damaged,
    /// edited, another request's): the cassette's errors name the recording's file.
    static func isDamagedRecording(_ error: String) -> Bool {
        error.contains("the recording ") && error.contains(".json.gz ")
    }

    static func damagedRecordingHint(_ evalCase: EvalCase) -> String {
        "a recording of the case's cassette is damaged or edited: restore the cassette from version control, or record it again "
            + "with the models reachable: agent-eval run \(ShellWords.quoted(evalCase.location.path)) --record all"
    }

    /// How `stop` cut a run short, or nil when the run ended on its own (or the policy ended it:
    /// a denial is the gate's verdict on what the agent tried, and the case may check it).
    static func cutShort(_ stop: RunStopped) -> String? {
        if stop.isAbnormalCommandEnd { return "when its program ended abnormally" }
        if stop.isRuntimeFault { return "by a fault of the runtime" }
        switch stop.reason {
        case .budgetExhausted: return "by \(stop.limit?.rawValue ?? "a limit")"
        case .maxTurns: return "by \(stop.limit?.rawValue ?? "maxTurns")"
        case .toolFailure: return "by a failed tool"
        case .invalidDecision: return "by model replies that were no valid decision (on_invalid_decision)"
        case .approvalRequired: return "waiting for an approval no one gave"
        default: return nil
        }
    }

    static func stopText(_ stop: RunStopped?) -> String {
        guard let stop else { return "nowhere (no run_stopped)" }
        return stop.reason.rawValue + (stop.error.map { ": \($0)" } ?? "")
    }
}

extension LogFacts {
    /// Why the record these facts fold (of `log`) cannot be trusted for anything graded or drafted
    /// from it: a state digest its events do not rebuild (an edited log), or events that do not
    /// fit together (anomalies; calls that reuse an id only without `allowsReusedCallIds`). Nil
    /// when it can.
    public func distrust(log: String, allowsReusedCallIds: Bool = false) -> EvalError? {
        if let mismatch = digestMismatch {
            return EvalError(
                .digestMismatch,
                "the state digest recorded at seq \(mismatch.sequence) (step \(mismatch.step)) differs from the state the log folds to: "
                    + "the log was edited or written by a different fold, so its trajectory cannot be trusted",
                location: SourceLocation(path: log, sequence: mismatch.sequence),
                hint: "replay the log to that step to see the recorded and the rebuilt state")
        }
        if let anomaly = state.anomalies.first(where: { !allowsReusedCallIds || $0.reusedCallId == nil }) {
            return EvalError(
                .anomalousRun,
                "the log does not fit together (\(state.anomalies.count) anomal\(state.anomalies.count == 1 ? "y" : "ies")): \(anomaly.message)",
                location: SourceLocation(path: log),
                hint: "replay the log to see every anomaly; a case cannot be graded on a record that contradicts itself")
        }
        return nil
    }
}
