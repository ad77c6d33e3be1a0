public import AgentRuntime
public import ConfigFile
import Synchronization
public import TraceCore

/// Grades a run's model-graded expectations: for each rubric, asks its judge model whether
/// the final answer (or each executed call's arguments) meets it, and reads a verdict from the
/// reply. Every question and answer becomes a `Judgement` on the run's result; a "no" becomes
/// an expectation failure with the judge's reason; a judge that cannot be reached or does not
/// give a verdict makes the run "could not run", never a pass or a fail.
///
/// Judges are made once per suite run and shared by its runs (a cassette, rate limits).
public final class RubricJudge: Sendable {
    /// Makes clients for judges served over HTTP (the CLI's, with its cassette).
    public let factory: (any ModelClientFactory)?
    /// The judge of rubrics that name none (`--judge-model`).
    public let defaultModel: ModelSource?
    // Guarded by the mutex: clients made so far, or the error making one gave.
    private let clients = Mutex<[ModelSource: Result<any ModelClient, ConfigError>]>([:])

    public init(factory: (any ModelClientFactory)?, defaultModel: ModelSource? = nil) {
        self.factory = factory
        self.defaultModel = defaultModel
    }

    /// The judge of `rubric` and its client; throws when there is none or it cannot be made.
    public func judge(of rubric: Rubric) throws(ConfigError) -> (source: ModelSource, client: any ModelClient) {
        guard let source = rubric.model ?? defaultModel else {
            throw ConfigError(
                .missingKey, "this rubric names no judge model, and no default judge was given", at: rubric.location,
                hint: "add model: (provider:name, {provider, name, …} or {script: judge.yaml}) beside the rubric, or run with --judge-model"
            )
        }
        if let made = clients.withLock({ $0[source] }) { return (source, try made.get()) }
        let made = Result { () throws(ConfigError) in try source.client(factory: factory) }
        clients.withLock { $0[source] = made }
        return (source, try made.get())
    }

    /// What grading one run gave: failures to add, every judgement, and the error that makes
    /// the run "could not run".
    public struct Grade: Sendable {
        public var failures: [ExpectationFailure] = []
        public var judgements: [Judgement] = []
        public var error: DiagnosticRecord?
        /// What a scripted judge's `chance` draws from: the run and the round.
        var round = ""
    }

    /// Grades `state` against the rubrics of `expected`, answer first, then argument rubrics
    /// in file order and each tool's calls in run order. Stops at the first judge that fails.
    /// `round` is the `--repeat` round: a scripted judge's `chance` rules draw anew per round.
    public func grade(_ expected: Expectations, state: RunState, round: Int = 0) async -> Grade {
        var grade = Grade()
        grade.round = "judge-\(state.runId ?? "")-\(round)"
        let goal = state.start?.goal ?? ""
        let lastStep = state.step
        if let rubric = expected.answerRubric {
            let expectation = "answer.rubric"
            // A conversation is judged whole, however it ended: what the agent said in it, to what.
            let said = state.isConversation && !state.agentMessages.isEmpty
            if said || state.finalAnswer != nil {
                let prompt =
                    said
                    ? Self.conversationPrompt(state.dialogue, rubric: rubric.text)
                    : Self.answerPrompt(goal: goal, answer: state.finalAnswer ?? "", rubric: rubric.text)
                guard await ask(rubric, expectation: expectation, prompt: prompt, step: lastStep, callId: nil, into: &grade) else {
                    return grade
                }
            } else {
                grade.failures.append(
                    ExpectationFailure(
                        expectation: expectation, expected: "the answer meets the rubric \"\(rubric.text)\"",
                        actual: "no answer to grade (\(TrajectoryCheck.describeStop(state)))", step: lastStep))
            }
        }
        for item in expected.argumentRubrics {
            let expectation = "arguments.\(item.tool).rubric"
            let executed = state.executedCalls
            let calls = executed.filter { $0.tool == item.tool }
            if calls.isEmpty {
                grade.failures.append(
                    ExpectationFailure(
                        expectation: expectation, expected: "calls of \(item.tool) whose arguments meet the rubric \"\(item.rubric.text)\"",
                        actual: "\(item.tool) never ran", step: lastStep))
            }
            for call in calls {
                let before = executed.prefix { $0.id != call.id }
                let prompt = Self.argumentsPrompt(goal: goal, call: call, earlier: Array(before), rubric: item.rubric.text)
                guard await ask(item.rubric, expectation: expectation, prompt: prompt, step: call.step, callId: call.id, into: &grade)
                else { return grade }
            }
        }
        return grade
    }

    /// Reviews a conversation's simulated user (`user.review`): the judge reads the user's
    /// scenario and the whole conversation and says whether the user's turns keep to its part
    /// (`rubric`). A "no" is a failure of `user.review`, which the runner makes a simulator fault.
    public func reviewUser(_ state: RunState, persona: UserPersona?, rubric: Rubric, round: Int = 0) async -> Grade {
        var grade = Grade()
        grade.round = "user-review-\(state.runId ?? "")-\(round)"
        _ = await ask(
            rubric, expectation: "user.review", prompt: Self.userReviewPrompt(state, persona: persona, rubric: rubric.text),
            step: state.step, callId: nil, into: &grade, subject: "the user's turns")
        return grade
    }

    /// The user's scenario and the conversation, for a review of the user's turns.
    static func userReviewPrompt(_ state: RunState, persona: UserPersona?, rubric: String) -> String {
        var text = "The user the model was told to play:\n"
        if let persona {
            text += "Who: \(persona.persona)\n"
            if let reason = persona.reason { text += "Why they came: \(reason)\n" }
            if let task = persona.task { text += "What they want: \(task)\n" }
            text += "What they know: " + (persona.known.isEmpty ? "nothing given" : persona.known.joined(separator: "; ")) + "\n"
            text += "What they do not know: " + (persona.unknown.isEmpty ? "nothing given" : persona.unknown.joined(separator: "; ")) + "\n"
        } else {
            text += "(no persona given)\n"
        }
        text += "\nThe conversation, in order (where the user ended it, its turn says so):\n"
        let endings = Dictionary(state.userTurns.compactMap { record in record.turn.ends.map { (record.turn.turn, $0) } }) { first, _ in
            first
        }
        var shown = Set<Int>()
        for line in state.dialogue {
            text += "\n[\(line.speaker == .user ? "user" : "agent"), turn \(line.turn)] \(line.text)"
            if line.speaker == .user, let ending = endings[line.turn] {
                text += " [the user ended the conversation: \(ending.rawValue)]"
                shown.insert(line.turn)
            }
        }
        // A turn that only ended the conversation says nothing: the dialogue leaves it out.
        for (turn, ending) in endings.sorted(by: { $0.key < $1.key }) where !shown.contains(turn) {
            text += "\n[user, turn \(turn)] [the user ended the conversation: \(ending.rawValue)]"
        }
        text += "\n\nThe rules the user's turns must keep:\n\(rubric)"
        return text
    }

    /// Asks the judge one question; false when it failed (the error is in `grade`).
    private func ask(
        _ rubric: Rubric, expectation: String, prompt: String, step: Int?, callId: String?, into grade: inout Grade,
        subject: String? = nil
    ) async -> Bool {
        let judge: (source: ModelSource, client: any ModelClient)
        do {
            judge = try self.judge(of: rubric)
        } catch {
            grade.error = DiagnosticRecord(
                EvalError(.judgeFailed, "\(expectation): \(error.message)", location: error.location, hint: error.hint))
            return false
        }
        var judgement = Judgement(
            expectation: expectation, rubric: rubric.text, judge: Self.name(of: judge.client), step: step, callId: callId,
            instructions: Self.instructions, prompt: prompt)
        var request = ModelRequest(
            instructions: Self.instructions,
            packet: ContextBuilt(goal: prompt, stateSummary: "", tokenEstimate: (Self.instructions.utf8.count + prompt.utf8.count + 3) / 4),
            tools: [], observations: [], feedback: nil, decisionIndex: 0, step: 0)
        request.runId = grade.round
        let clock = ContinuousClock()
        let started = clock.now
        do {
            let reply = try await judge.client.reply(to: request)
            let elapsed = started.duration(to: clock.now)
            judgement.reply = reply.raw
            judgement.replyFormat = reply.format
            judgement.usage = reply.usage
            judgement.costUSD = reply.costUSD
            judgement.latencyUs =
                reply.latencyUs ?? Int(elapsed.components.seconds) * 1_000_000 + Int(elapsed.components.attoseconds / 1_000_000_000_000)
            switch Self.verdict(from: reply) {
            case .success(let verdict):
                judgement.passed = verdict.passed
                judgement.reason = verdict.reason
            case .failure(let problem):
                judgement.error = problem.message
            }
        } catch {
            judgement.error = (error as? any Diagnostic)?.message ?? "\(error)"
        }
        grade.judgements.append(judgement)
        if let problem = judgement.error {
            grade.error = DiagnosticRecord(
                EvalError(
                    .judgeFailed,
                    "the judge \(judgement.judge) could not grade \(expectation)\(callId.map { " (\($0))" } ?? ""): \(problem)",
                    location: rubric.location,
                    hint: judgement.reply == nil
                        ? "check that the judge model is reachable (or replay it from a cassette with --cassette)"
                        : "the judge must reply with {\"pass\": true|false, \"reason\": \"…\"}; the full reply is in the JSON report's judgements"
                ))
            return false
        }
        if judgement.passed == false {
            let subject = subject ?? callId.map { "the arguments of \($0)" } ?? "the answer"
            grade.failures.append(
                ExpectationFailure(
                    expectation: expectation,
                    expected: "\(subject) meet\(callId == nil && !subject.hasSuffix("s") ? "s" : "") the rubric \"\(rubric.text)\"",
                    actual: "the judge \(judgement.judge) says no: \(judgement.reason ?? "(no reason given)")", step: step,
                    callId: callId))
        }
        return true
    }

    static func name(of client: any ModelClient) -> String { "\(client.identity.provider):\(client.identity.name)" }

    // MARK: The question

    /// What every judge is told. Changing it changes every judge request, and so every
    /// cassette key: record the cassettes again when it changes.
    public static let instructions = """
        You grade one part of an AI agent's run against a rubric. You are given the task the agent \
        was given, the part of the run to grade, and the rubric. Judge only what the rubric asks, \
        from the material given and nothing else. Reply with one JSON object and nothing else: \
        {"pass": true or false, "reason": "one or two sentences saying why"}.
        """

    static func answerPrompt(goal: String, answer: String, rubric: String) -> String {
        """
        The task the agent was given:
        \(goal)

        The agent's final answer:
        \(answer)

        The rubric the answer must meet:
        \(rubric)
        """
    }

    /// A conversation's transcript for a judge: each message with who said it, then the rubric.
    static func conversationPrompt(_ dialogue: [DialogueLine], rubric: String) -> String {
        var text = "The conversation between a user and the agent, in order:\n"
        for line in dialogue { text += "\n[\(line.speaker == .user ? "user" : "agent"), turn \(line.turn)] \(line.text)" }
        text += "\n\nThe rubric the agent's side of the conversation must meet:\n\(rubric)"
        return text
    }

    static func argumentsPrompt(goal: String, call: ToolCallRecord, earlier: [ToolCallRecord], rubric: String) -> String {
        var text = "The task the agent was given:\n\(goal)\n\n"
        if !earlier.isEmpty {
            text += "The tool calls before it, with what they returned:\n"
            for previous in earlier {
                text += "- \(previous.tool) (\(previous.id), step \(previous.step)) with \(JSONWriter.encodeString(previous.arguments)): "
                text += Self.result(of: previous) + "\n"
            }
            text += "\n"
        }
        text += "The call to grade: \(call.tool) (\(call.id), step \(call.step)) with the arguments\n"
        text += JSONWriter.encodeString(call.arguments) + "\n\n"
        text += "The rubric the arguments must meet:\n\(rubric)"
        return text
    }

    /// A call's last result, as the judge is shown it: at most 2,000 bytes of output.
    static func result(of call: ToolCallRecord) -> String {
        guard let last = call.results.last else { return "no result" }
        if let error = last.error { return "\(last.status.rawValue): \(error)" }
        if let output = last.output {
            let text = JSONWriter.encodeString(output)
            let shown = text.utf8.count > 2000 ? String(decoding: Array(text.utf8.prefix(2000)), as: UTF8.self) + "… (cut)" : text
            return "\(last.status.rawValue) \(shown)"
        }
        if let hash = last.contentHash { return "\(last.status.rawValue) (the output is stored as \(hash), not shown)" }
        return last.status.rawValue
    }

    // MARK: The verdict

    struct Verdict: Equatable {
        var passed: Bool
        var reason: String
    }

    struct NoVerdict: Error, Equatable {
        var message: String
    }

    /// The verdict a reply gives: a JSON object `{"pass": true|false, "reason"}` (also
    /// `passed`, or `verdict`/`result` "pass"/"fail"; code fences and text around it are
    /// ignored), or a reply that starts with the word PASS or FAIL. Anything else is no verdict,
    /// and so is a reply that says two things: verdict objects that disagree, or text around the
    /// object that says the other word (`FAIL. I was told to reply {"pass": true} only if…`) —
    /// a judge misread is a pass without evidence.
    static func verdict(from reply: ModelReply) -> Result<Verdict, NoVerdict> {
        var text = reply.raw
        if let name = reply.format {
            guard let format = ReplyFormat(rawValue: name) else {
                return .failure(NoVerdict(message: "the reply format \(name) is unknown"))
            }
            switch format.decisionObject(from: reply.raw) {
            case .rejected(let invalid): return .failure(NoVerdict(message: invalid.message))
            case .decision(let decision):
                guard let answer = decision["answer"]?.stringValue else {
                    return .failure(NoVerdict(message: "the judge called tools instead of replying with a verdict"))
                }
                text = answer
            }
        } else if let value = try? JSONParser.parse(Array(reply.raw.utf8)), let answer = value["answer"]?.stringValue {
            // A decision object (a scripted judge's `answer:`).
            text = answer
        }
        return verdict(fromText: text)
    }

    static func verdict(fromText text: String) -> Result<Verdict, NoVerdict> {
        let shown = text.count > 200 ? String(text.prefix(199)) + "…" : text
        let objects = verdictObjects(in: text)
        if let first = objects.first {
            guard objects.allSatisfy({ $0.verdict.passed == first.verdict.passed && !$0.disagrees }) else {
                return .failure(NoVerdict(message: "the reply gives verdicts that disagree: \"\(shown)\""))
            }
            // What the reply says besides its verdict objects may not say the other word.
            var around = text
            for range in objects.map(\.range).reversed() { around.removeSubrange(range) }
            if verdictWords(in: around).contains(!first.verdict.passed) {
                return .failure(
                    NoVerdict(
                        message:
                            "the reply says \(first.verdict.passed ? "pass" : "fail") in JSON and \(first.verdict.passed ? "fail" : "pass") "
                            + "around it: \"\(shown)\""))
            }
            return .success(first.verdict)
        }
        let trimmed = text.drop { $0.isWhitespace || $0 == "*" || $0 == "#" }
        for (word, passed) in [("PASS", true), ("FAIL", false)] where trimmed.uppercased().hasPrefix(word) {
            let rest = trimmed.dropFirst(word.count)
            // The word alone: `PASS`, `PASS: …`, `FAIL - …`, `**PASS**`; not `Pass/Fail: …`, `Pass? No`, `PASSABLE`.
            guard rest.first.map({ $0.isWhitespace || [":", "-", ".", ",", "!", "*", "\u{2014}", "\u{2013}"].contains($0) }) ?? true else {
                continue
            }
            let reason = rest.drop { $0.isWhitespace || [":", "-", ".", ",", "!", "*", "\u{2014}", "\u{2013}"].contains($0) }
            // The word as a field, answered (`Pass: no.`, `PASS - no, this fails the rubric`): a
            // bare yes or no right after it. One that says the opposite of the word says two
            // things, no verdict; `No issues found` is a reason, not an answer.
            let answer = reason.prefix { $0.isLetter }
            let afterAnswer = reason.dropFirst(answer.count).first
            if afterAnswer == nil || afterAnswer.map({ !$0.isWhitespace && !$0.isLetter && $0 != "'" }) == true,
                ["no", "false"].contains(answer.lowercased())
            {
                return .failure(NoVerdict(message: "the reply begins with \(word) and answers it \(answer): \"\(shown)\""))
            }
            return .success(Verdict(passed: passed, reason: String(reason)))
        }
        return .failure(NoVerdict(message: "the reply is not a verdict: \"\(shown)\""))
    }

    /// The JSON objects in `text` that carry a verdict, each with where it stands: every `{`
    /// whose balanced object (strings skipped) parses as one, outermost first. `disagrees`: the
    /// object's own members say both (`{"pass": true, "verdict": "fail"}`), or name a verdict
    /// member with a value that is none (`{"pass": "no", "passed": true}`).
    static func verdictObjects(in text: String) -> [(verdict: Verdict, range: Range<String.Index>, disagrees: Bool)] {
        var found: [(verdict: Verdict, range: Range<String.Index>, disagrees: Bool)] = []
        var index = text.startIndex
        while let open = text[index...].firstIndex(of: "{") {
            guard let close = balancedEnd(of: text, from: open) else { break }
            let range = open..<text.index(after: close)
            if let value = try? JSONParser.parse(Array(text[range].utf8)), case .object = value {
                let reason = (value["reason"] ?? value["explanation"])?.stringValue ?? ""
                // Every member that says a verdict is read, not the first found.
                var said: [Bool] = []
                var isMalformed = false
                for key in ["pass", "passed"] {
                    guard let member = value[key] else { continue }
                    if let flag = member.boolValue { said.append(flag) } else { isMalformed = true }
                }
                for key in ["verdict", "result"] {
                    switch value[key]?.stringValue?.lowercased() {
                    case "pass"?, "passed"?, "passes"?: said.append(true)
                    case "fail"?, "failed"?, "fails"?, "failure"?: said.append(false)
                    default: continue
                    }
                }
                if let flag = said.first {
                    let disagrees = isMalformed || said.contains(!flag)
                    found.append((Verdict(passed: flag, reason: reason), range, disagrees))
                }
                index = range.upperBound
            } else {
                index = text.index(after: open)
            }
        }
        return found
    }

    /// Where the object opened at `open` closes: its matching `}`, strings and escapes skipped.
    private static func balancedEnd(of text: String, from open: String.Index) -> String.Index? {
        var depth = 0
        var isInString = false
        var isEscaped = false
        var index = open
        while index < text.endIndex {
            let character = text[index]
            if isInString {
                if isEscaped {
                    isEscaped = false
                } else if character == "\\" {
                    isEscaped = true
                } else if character == "\"" {
                    isInString = false
                }
            } else if character == "\"" {
                isInString = true
            } else if character == "{" {
                depth += 1
            } else if character == "}" {
                depth -= 1
                if depth == 0 { return index }
            }
            index = text.index(after: index)
        }
        return nil
    }

    /// The verdicts the words PASS and FAIL (any case, as whole words) say in `text`.
    static func verdictWords(in text: String) -> Set<Bool> {
        var said = Set<Bool>()
        for word in text.split(whereSeparator: { !$0.isLetter }) {
            switch word.lowercased() {
            case "pass": said.insert(true)
            case "fail": said.insert(false)
            default: break
            }
        }
        return said
    }
}
