import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

/// The `run_started` of the runs these tests build.
let testRunStarted = EventPayload.runStarted(
    RunStarted(
        goal: "g", agent: AgentIdentity(name: "a", configDigest: "sha256:0"), model: ModelIdentity(provider: "p", name: "m"),
        policy: PolicyIdentity(name: "p"), tools: []))

/// Builds a run state with executed (and optionally denied) calls, through the real fold.
func trajectory(
    _ calls: [(tool: String, arguments: JSONValue, executed: Bool)], stop: RunStopped? = RunStopped(reason: .success),
    failing: Set<String> = []
) -> RunState {
    var events: [Event] = []
    func add(_ payload: EventPayload, step: Int) {
        events.append(
            Event(runId: "r", sequence: events.count, step: step, timeUs: 1_000 + events.count, previousHash: "", payload: payload))
    }
    add(testRunStarted, step: 0)
    for (index, call) in calls.enumerated() {
        let id = "call-\(index + 1)"
        let step = index + 1
        add(
            .decisionMade(
                DecisionMade(raw: "", outcome: .valid(.toolCalls([ToolCall(id: id, name: call.tool, arguments: call.arguments)])))),
            step: step)
        add(
            .verdictGiven(VerdictGiven(callId: id, tool: call.tool, verdict: call.executed ? .allow : .deny, reason: "no", rule: "r")),
            step: step)
        if call.executed {
            add(.toolIntended(ToolIntended(callId: id, tool: call.tool, arguments: call.arguments, attempt: 1)), step: step)
            add(
                .toolCompleted(
                    ToolCompleted(
                        callId: id, tool: call.tool, attempt: 1, status: failing.contains(call.tool) ? .error : .ok, output: nil,
                        error: failing.contains(call.tool) ? "down" : nil, durationUs: 5)), step: step)
        }
    }
    if let stop { add(.runStopped(stop), step: calls.count + 1) }
    return RunState(folding: events)
}

func run(_ tools: String...) -> RunState {
    trajectory(tools.map { ($0, [:], true) })
}

func sequence(_ mode: SequenceExpectation.Mode, _ tools: [String]) -> Expectations {
    var expected = Expectations()
    expected.sequence = SequenceExpectation(mode: mode, calls: tools.map { CallPattern(tool: $0) })
    return expected
}

func passes(_ expected: Expectations, _ state: RunState) -> Bool {
    TrajectoryCheck.check(expected, against: state).failures.isEmpty
}

@Suite("Sequence modes")
struct SequenceModeTests {
    @Test(
        "each mode against the same trajectories",
        arguments: [
            // (mode, expected, executed, passes)
            (SequenceExpectation.Mode.strict, ["a", "b"], ["a", "b"], true),
            (.strict, ["a", "b"], ["b", "a"], false),
            (.strict, ["a", "b"], ["a", "b", "c"], false),
            (.strict, ["a", "b"], ["a"], false),
            (.strict, [], [], true),
            (.strict, [], ["a"], false),
            (.unordered, ["a", "b"], ["b", "a"], true),
            (.unordered, ["a", "a", "b"], ["a", "b", "a"], true),
            (.unordered, ["a", "a"], ["a"], false),
            (.unordered, ["a"], ["a", "a"], false),
            (.superset, ["a", "b"], ["c", "b", "x", "a"], true),
            (.superset, ["a", "a"], ["a", "b"], false),
            (.superset, [], [], true),
            (.superset, ["a"], [], false),
            (.subset, ["a", "b", "c"], ["c", "a"], true),
            (.subset, ["a"], ["a", "a"], false),
            (.subset, ["a", "b"], [], true),
            (.inOrder, ["a", "c"], ["a", "b", "c"], true),
            (.inOrder, ["a", "c"], ["c", "a"], false),
            (.inOrder, ["a", "a"], ["a", "b", "a"], true),
            (.inOrder, ["a", "a"], ["a", "b"], false),
            (.inOrder, [], ["a"], true),
        ] as [(SequenceExpectation.Mode, [String], [String], Bool)])
    func modes(_ mode: SequenceExpectation.Mode, _ expected: [String], _ executed: [String], _ result: Bool) {
        let state = trajectory(executed.map { ($0, [:], true) })
        #expect(passes(sequence(mode, expected), state) == result)
    }

    @Test("pairing is an optimal assignment, not first fit: a general pattern does not steal the only call a specific one fits")
    func optimalPairing() {
        // Expected: any refund first in the list, then the refund of A-1. Executed: refund A-1,
        // refund B-2. First fit would pair "any refund" with A-1 and leave nothing for "A-1".
        var expected = Expectations()
        expected.sequence = SequenceExpectation(
            mode: .unordered,
            calls: [
                CallPattern(tool: "refund"),
                CallPattern(tool: "refund", arguments: ArgumentMatcher(mode: .superset, expected: ["order": "A-1"])),
            ])
        let state = trajectory([("refund", ["order": "A-1"], true), ("refund", ["order": "B-2"], true)])
        #expect(passes(expected, state))
        var superset = expected
        superset.sequence?.mode = .superset
        #expect(passes(superset, state))
        // Subset pairs each executed call with an expected one, again optimally.
        var subset = expected
        subset.sequence?.mode = .subset
        #expect(passes(subset, state))
    }

    @Test("denied calls are not part of the executed sequence")
    func deniedCallsAreSkipped() {
        let state = trajectory([("a", [:], true), ("rm", [:], false), ("b", [:], true)])
        #expect(passes(sequence(.strict, ["a", "b"]), state))
    }

    @Test("the failure names the call and step where the sequence went wrong")
    func failureLocation() throws {
        let state = run("a", "x", "b")
        let failure = try #require(TrajectoryCheck.check(sequence(.strict, ["a", "b"]), against: state).failures.first)
        #expect(failure.expectation == "sequence")
        #expect(failure.step == 2)
        #expect(failure.callId == "call-2")
        #expect(failure.actual == "call 2 (call-2) does not match b: x instead")
    }
}

@Suite("Argument matchers")
struct ArgumentMatcherTests {
    static let actual: JSONValue = ["order": "A-1", "amount": 4999, "meta": ["request_id": "r-9", "channel": "chat"]]

    @Test(
        "each mode, with the same meaning whichever way a sequence compares",
        arguments: [
            (ArgumentMatcher(mode: .exact, expected: actual), true),
            (ArgumentMatcher(mode: .exact, expected: ["order": "A-1", "amount": 4999]), false),
            (
                ArgumentMatcher(
                    mode: .exact, expected: ["order": "A-1", "amount": 4999.0, "meta": ["channel": "chat"]], ignoredKeys: ["request_id"]),
                true
            ),
            (ArgumentMatcher(mode: .superset, expected: ["order": "A-1"]), true),
            (ArgumentMatcher(mode: .superset, expected: ["meta": ["channel": "chat"]]), true),
            (ArgumentMatcher(mode: .superset, expected: ["order": "B-2"]), false),
            (ArgumentMatcher(mode: .superset, expected: ["missing": 1]), false),
            (
                ArgumentMatcher(
                    mode: .subset,
                    expected: ["order": "A-1", "amount": 4999, "meta": ["request_id": "r-9", "channel": "chat"], "extra": true]), true
            ),
            (ArgumentMatcher(mode: .subset, expected: ["order": "A-1"]), false),
            (ArgumentMatcher(mode: .subset, expected: ["order": "A-1", "amount": 4999, "meta": [:]], ignoredKeys: ["meta"]), true),
            (ArgumentMatcher(mode: .ignore, expected: ["anything": 1]), true),
            (ArgumentMatcher(mode: .ignore, paths: [("amount", .range(min: 1, max: 5000))]), true),
            (ArgumentMatcher(mode: .ignore, paths: [("amount", .range(min: nil, max: 1000))]), false),
            (ArgumentMatcher(mode: .ignore, paths: [("order", .regex("^A-[0-9]+$"))]), true),
            (ArgumentMatcher(mode: .ignore, paths: [("meta.channel", .oneOf(["chat", "mail"]))]), true),
            (ArgumentMatcher(mode: .ignore, paths: [("meta.request_id", .exists(false))]), false),
            (ArgumentMatcher(mode: .exact, expected: ["order": "A-1", "amount": 4999, "meta": [:]], ignoredKeys: ["meta.*"]), true),
        ] as [(ArgumentMatcher, Bool)])
    func modes(_ matcher: ArgumentMatcher, _ result: Bool) {
        #expect((matcher.mismatch(Self.actual) == nil) == result)
    }

    @Test("a mismatch says which key and how")
    func messages() {
        #expect(ArgumentMatcher(mode: .superset, expected: ["order": "B-2"]).mismatch(Self.actual) == #"order is "A-1", expected "B-2""#)
        #expect(
            ArgumentMatcher(mode: .exact, expected: ["order": "A-1"]).mismatch(["order": "A-1", "x": 1]) == "x is 1, which was not expected"
        )
        #expect(
            ArgumentMatcher(mode: .subset, expected: ["order": "A-1"]).mismatch(Self.actual) == "amount is 4999, which was not expected")
        #expect(
            ArgumentMatcher(mode: .ignore, paths: [("amount", .range(min: nil, max: 10))]).mismatch(Self.actual)
                == "amount is 4999, above the maximum 10")
        // A check written among the expected arguments is a literal there: the message says where it goes.
        #expect(
            ArgumentMatcher(mode: .superset, expected: ["order": ["regex": "^A-"]]).mismatch(Self.actual)
                == #"order is "A-1", expected {"regex":"^A-"} — a literal value here; a check like this goes under paths: "#
                + #"(paths: {order: {"regex":"^A-"}})"#)
        #expect(
            ArgumentMatcher(mode: .superset, expected: ["note": ["exists": false]]).mismatch(Self.actual)
                == #"note is missing, expected {"exists":false} — a literal value here; a check like this goes under paths: "#
                + #"(paths: {note: {"exists":false}})"#)
        // An object that is not only check keys is an ordinary expected value.
        #expect(
            ArgumentMatcher(mode: .superset, expected: ["order": ["regex": "x", "other": 1]]).mismatch(Self.actual)
                == #"order is "A-1", expected {"other":1,"regex":"x"}"#)
    }

    @Test("every executed call of a tool must match; repeated and parallel calls are each checked")
    func everyCallIsChecked() {
        let state = trajectory([("refund", ["amount": 10], true), ("refund", ["amount": 99_999], true)])
        var expected = Expectations()
        expected.arguments = [("refund", ArgumentMatcher(mode: .ignore, paths: [("amount", .range(min: nil, max: 100))]))]
        let failures = TrajectoryCheck.check(expected, against: state).failures
        #expect(failures.count == 1)
        #expect(failures.first?.callId == "call-2")
        #expect(failures.first?.step == 2)
    }
}

@Suite("The core expectations")
struct CoreExpectationTests {
    @Test("toolsNotCalled fails on an executed call, and by default only notes a denied attempt")
    func notCalled() {
        let state = trajectory([("lookup", [:], true), ("delete", [:], false)])
        var expected = Expectations()
        expected.toolsNotCalled = ["delete"]
        let (failures, notes) = TrajectoryCheck.check(expected, against: state)
        #expect(failures.isEmpty)
        #expect(notes.map(\.message) == ["delete was proposed as call-2 at step 2 and did not run: denied by rule r (no)"])
        expected.countsDeniedAttempts = true
        #expect(TrajectoryCheck.check(expected, against: state).failures.map(\.step) == [2])
        let executed = trajectory([("delete", [:], true)])
        expected.countsDeniedAttempts = false
        #expect(TrajectoryCheck.check(expected, against: executed).failures.first?.actual == "delete ran as call-1 at step 1 with {}")
    }

    @Test("toolsCalled counts executed calls only, and says when the tool was only proposed")
    func called() {
        var expected = Expectations()
        expected.toolsCalled = ["delete"]
        let failures = TrajectoryCheck.check(expected, against: trajectory([("delete", [:], false)])).failures
        #expect(failures.first?.actual == "delete was proposed (call-1, step 1) but never ran: denied by rule r (no)")
    }

    @Test("an empty trajectory: no calls, no stop")
    func emptyTrajectory() {
        let state = trajectory([], stop: nil)
        var expected = Expectations()
        expected.toolsNotCalled = ["x"]
        #expect(passes(expected, state))
        expected.stopReason = .success
        #expect(
            TrajectoryCheck.check(expected, against: state).failures.first?.actual
                == "the run has not stopped (the log ends without run_stopped)")
        var counts = Expectations()
        counts.callCounts = [("x", CountRange(min: 0, max: 0))]
        #expect(passes(counts, state))
    }

    @Test("toolsAllowed: only the tools listed run, each as often as it likes; the first other call is named")
    func allowedTools() {
        let state = run("lookup", "refund", "lookup", "notify")
        var expected = Expectations()
        expected.toolsAllowed = ["lookup", "refund", "notify"]
        #expect(passes(expected, state))
        expected.toolsAllowed = ["lookup"]
        let failure = TrajectoryCheck.check(expected, against: state).failures.first
        #expect(failure?.expectation == "toolsAllowed")
        #expect(failure?.actual == "notify, refund ran too: first as call-2 at step 2 (2 calls in all)")
        #expect(failure?.callId == "call-2" && failure?.step == 2)
        // A tool that was proposed and denied did not run: it is no breach.
        #expect(passes(expected, trajectory([("lookup", [:], true), ("refund", [:], false)])))
    }

    @Test("notSequence: an order that must not occur, other calls between or not")
    func forbiddenOrder() {
        let state = run("lookup", "refund", "note", "lookup")
        var expected = Expectations()
        expected.notSequence = ["refund", "lookup"]
        let failure = TrajectoryCheck.check(expected, against: state).failures.first
        #expect(failure?.actual == "they ran in that order: refund (call-2, step 2), lookup (call-4, step 4)")
        #expect(failure?.step == 4 && failure?.callId == "call-4")
        expected.notSequence = ["note", "refund"]
        #expect(passes(expected, state))
        expected.notSequence = ["lookup", "lookup"]
        #expect(!passes(expected, state))
        expected.notSequence = ["refund", "refund"]
        #expect(passes(expected, state))
    }

    @Test("failedResults counts the tool results that failed, against an exact number or a range")
    func failedResults() {
        let state = trajectory([("lookup", [:], true), ("refund", [:], true), ("refund", [:], true)], failing: ["refund"])
        var expected = Expectations()
        expected.failedResults = CountRange(min: 2, max: 2)
        #expect(passes(expected, state))
        expected.failedResults = CountRange(min: 0, max: 1)
        let failure = TrajectoryCheck.check(expected, against: state).failures.first
        #expect(failure?.expected == "at most 1 failed tool results")
        #expect(failure?.actual == "2: call-2 refund (error), call-3 refund (error)")
        expected.failedResults = CountRange(min: 0, max: 0)
        #expect(passes(expected, run("lookup")))
    }

    @Test("arguments per call: the Nth call of a tool against the Nth matcher; a list longer than the calls fails; minToolCalls")
    func argumentsByCall() {
        let state = trajectory([("refund", ["id": "A"], true), ("lookup", [:], true), ("refund", ["id": "B"], true)])
        var expected = Expectations()
        expected.argumentsByCall = [
            ("refund", [ArgumentMatcher(mode: .superset, expected: ["id": "A"]), ArgumentMatcher(mode: .superset, expected: ["id": "B"])])
        ]
        #expect(passes(expected, state))
        expected.argumentsByCall = [
            ("refund", [ArgumentMatcher(mode: .superset, expected: ["id": "B"]), ArgumentMatcher(mode: .superset, expected: [:])])
        ]
        let wrong = TrajectoryCheck.check(expected, against: state).failures
        #expect(wrong.map(\.expectation) == ["arguments.refund[1]"] && wrong.first?.callId == "call-1", "\(wrong)")
        expected.argumentsByCall = [("refund", Array(repeating: ArgumentMatcher(mode: .superset, expected: [:]), count: 3))]
        let short = TrajectoryCheck.check(expected, against: state).failures
        #expect(short.map(\.expectation) == ["arguments.refund[3]"] && short.first?.actual == "refund ran 2 times", "\(short)")
        var least = Expectations()
        least.minToolCalls = 3
        #expect(passes(least, state))
        least.minToolCalls = 4
        #expect(TrajectoryCheck.check(least, against: state).failures.first?.actual == "3 tool calls")
    }

    @Test("answer.similarTo: word overlap (ROUGE-1 F) with a reference answer, at a least score")
    func similarAnswers() {
        #expect(AnswerSimilarity.rouge1("Refunded 25 EUR for order A-1042.", "refunded 25 eur for order a-1042") == 1)
        #expect(AnswerSimilarity.rouge1("the cat sat", "the cat sat down") == 2 * 1 * 0.75 / 1.75)
        #expect(AnswerSimilarity.rouge1("nothing alike", "entirely different") == 0)
        // No words on a side is no overlap: 👎 is not like 👍, nor "" like "".
        #expect(AnswerSimilarity.rouge1("👎", "👍") == 0)
        #expect(AnswerSimilarity.rouge1("", "") == 0)
        var expected = Expectations()
        expected.answerSimilarTo = ("Refunded 25 EUR for order A-1042.", 0.8)
        var state = trajectory([], stop: RunStopped(reason: .success, answer: "I refunded 25 EUR for order A-1042."))
        #expect(passes(expected, state))
        state = trajectory([], stop: RunStopped(reason: .success, answer: "Your order is on its way."))
        let failure = TrajectoryCheck.check(expected, against: state).failures.first
        #expect(failure?.expectation == "answer.similarTo" && failure?.actual.hasPrefix("0.") == true, "\(String(describing: failure))")
        // No final answer fails it, even at min 0.
        expected.answerSimilarTo = ("anything", 0)
        #expect(!passes(expected, trajectory([], stop: RunStopped(reason: .blocked, error: "no"))))
    }

    @Test("call-count bounds and budgets")
    func bounds() {
        let state = run("a", "a", "b")
        var expected = Expectations()
        expected.callCounts = [("a", CountRange(min: 1, max: 2)), ("b", CountRange(min: 1, max: 1))]
        #expect(passes(expected, state))
        expected.callCounts = [("a", CountRange(min: 3))]
        #expect(TrajectoryCheck.check(expected, against: state).failures.first?.expected == "at least 3 calls of a")
        var budget = Expectations()
        budget.maxToolCalls = 2
        #expect(TrajectoryCheck.check(budget, against: state).failures.first?.callId == "call-3")
        budget.maxToolCalls = nil
        budget.maxSteps = 3
        #expect(passes(budget, state))
    }

    @Test("maxTokens: the replies' counted usage against the limit; a reply that recorded no usage leaves a total under it unproven")
    func tokenBudget() throws {
        func state(_ usages: [TokenUsage?]) -> RunState {
            let payloads =
                [testRunStarted]
                + usages.map { EventPayload.decisionMade(DecisionMade(raw: "", outcome: .valid(.answer("ok")), usage: $0)) }
            return RunState(
                folding: payloads.enumerated().map { index, payload in
                    Event(runId: "r", sequence: index, step: index, timeUs: 1_000 + index, previousHash: "", payload: payload)
                })
        }
        var expected = Expectations()
        expected.maxTokens = 100
        #expect(passes(expected, state([TokenUsage(input: 40, output: 10), TokenUsage(input: 30, output: 5)])))
        let over = try #require(TrajectoryCheck.check(expected, against: state([TokenUsage(input: 90, output: 20)])).failures.first)
        #expect(over.actual == "110 tokens (90 in, 20 out)")
        // The second reply (a stream without include_usage) counted nothing: 50 tokens proves nothing.
        let unproven = try #require(
            TrajectoryCheck.check(expected, against: state([TokenUsage(input: 40, output: 10), nil])).failures.first)
        #expect(unproven.expectation == "maxTokens" && unproven.step == 2)
        #expect(unproven.actual.contains("50 tokens counted, but 1 of 2 model replies recorded no token usage"), "\(unproven.actual)")
        // Over the limit already, the missing count cannot bring it back under: the usual failure.
        let still = try #require(
            TrajectoryCheck.check(expected, against: state([TokenUsage(input: 200, output: 1), nil])).failures.first)
        #expect(still.actual == "201 tokens (200 in, 1 out)")
    }
}

@Suite("pass@k and pass^k")
struct PassEstimatorTests {
    @Test(
        "against hand-computed values",
        arguments: [
            // n, c, k, pass^k = C(c,k)/C(n,k), pass@k = 1 - C(n-c,k)/C(n,k)
            (5, 5, 3, 1.0, 1.0),
            (5, 0, 1, 0.0, 0.0),
            (5, 3, 1, 0.6, 0.6),
            (5, 3, 2, 0.3, 0.9),  // C(3,2)/C(5,2) = 3/10; 1 - C(2,2)/10 = 0.9
            (5, 3, 3, 0.1, 1.0),  // 1/10; C(2,3) = 0
            (10, 7, 4, 35.0 / 210.0, 1.0),  // C(7,4)=35, C(10,4)=210; C(3,4)=0
            (4, 2, 2, 1.0 / 6.0, 5.0 / 6.0),
        ] as [(Int, Int, Int, Double, Double)])
    func estimators(_ n: Int, _ c: Int, _ k: Int, _ hat: Double, _ at: Double) {
        #expect(abs(PassEstimator.passHatK(n: n, c: c, k: k) - hat) < 1e-12)
        #expect(abs(PassEstimator.passAtK(n: n, c: c, k: k) - at) < 1e-12)
    }
}

@Suite("Parallel calls")
struct ParallelCallTests {
    /// One decision proposing three calls at once (they run concurrently), then an answer.
    static let state: RunState = {
        var events: [Event] = []
        func add(_ payload: EventPayload, step: Int) {
            events.append(Event(runId: "r", sequence: events.count, step: step, timeUs: events.count, previousHash: "", payload: payload))
        }
        add(testRunStarted, step: 0)
        let calls = [
            ToolCall(id: "call-1", name: "fetch", arguments: ["url": "https://a"]),
            ToolCall(id: "call-2", name: "fetch", arguments: ["url": "https://b"]),
            ToolCall(id: "call-3", name: "search", arguments: ["q": "x"]),
        ]
        add(.decisionMade(DecisionMade(raw: "", outcome: .valid(.toolCalls(calls)))), step: 1)
        for call in calls { add(.verdictGiven(VerdictGiven(callId: call.id, tool: call.name, verdict: .allow)), step: 1) }
        for call in calls {
            add(.toolIntended(ToolIntended(callId: call.id, tool: call.name, arguments: call.arguments, attempt: 1)), step: 1)
        }
        for call in calls {
            add(.toolCompleted(ToolCompleted(callId: call.id, tool: call.name, attempt: 1, status: .ok, durationUs: 1)), step: 1)
        }
        add(.runStopped(RunStopped(reason: .success, answer: "done")), step: 2)
        return RunState(folding: events)
    }()

    @Test("calls of one decision are in proposal order; unordered and subset modes pair each with its own pattern")
    func parallel() {
        func fetch(_ url: String) -> CallPattern {
            CallPattern(tool: "fetch", arguments: ArgumentMatcher(mode: .superset, expected: ["url": .string(url)]))
        }
        var expected = Expectations()
        expected.sequence = SequenceExpectation(
            mode: .strict, calls: [fetch("https://a"), fetch("https://b"), CallPattern(tool: "search")])
        #expect(passes(expected, Self.state))
        expected.sequence = SequenceExpectation(
            mode: .unordered, calls: [CallPattern(tool: "search"), fetch("https://b"), fetch("https://a")])
        #expect(passes(expected, Self.state))
        expected.sequence = SequenceExpectation(mode: .superset, calls: [fetch("https://b"), fetch("https://b")])
        #expect(!passes(expected, Self.state))
        expected.sequence = nil
        expected.callCounts = [("fetch", CountRange(min: 2, max: 2))]
        expected.arguments = [("fetch", ArgumentMatcher(mode: .ignore, paths: [("url", .regex("^https://"))]))]
        expected.maxSteps = 1
        #expect(passes(expected, Self.state))
    }
}

@Suite("Strict batches and mode synonyms")
struct StrictBatchTests {
    /// A run whose decisions propose the given batches of calls, all executed.
    func batches(_ batches: [[String]]) -> RunState {
        var events: [Event] = []
        func add(_ payload: EventPayload, step: Int) {
            events.append(
                Event(runId: "r", sequence: events.count, step: step, timeUs: 1_000 + events.count, previousHash: "", payload: payload))
        }
        add(testRunStarted, step: 0)
        var number = 0
        for (index, batch) in batches.enumerated() {
            let calls = batch.map { tool -> ToolCall in
                number += 1
                return ToolCall(id: "c\(number)", name: tool, arguments: [:])
            }
            add(.decisionMade(DecisionMade(raw: "", outcome: .valid(.toolCalls(calls)))), step: index + 1)
            for call in calls {
                add(.verdictGiven(VerdictGiven(callId: call.id, tool: call.name, verdict: .allow)), step: index + 1)
                add(.toolIntended(ToolIntended(callId: call.id, tool: call.name, arguments: [:], attempt: 1)), step: index + 1)
                add(
                    .toolCompleted(ToolCompleted(callId: call.id, tool: call.name, attempt: 1, status: .ok, output: nil, durationUs: 1)),
                    step: index + 1)
            }
        }
        add(.runStopped(RunStopped(reason: .success)), step: batches.count + 1)
        return RunState(folding: events)
    }

    @Test("strict compares calls proposed together as a set, and keeps the order between decisions")
    func batchAsSet() {
        let state = batches([["a", "b"], ["c"]])
        #expect(passes(sequence(.strict, ["b", "a", "c"]), state))
        #expect(passes(sequence(.strict, ["a", "b", "c"]), state))
        #expect(!passes(sequence(.strict, ["c", "a", "b"]), state))
        #expect(!passes(sequence(.strict, ["a", "c", "b"]), state))
        #expect(!passes(sequence(.strict, ["a", "a", "c"]), state))
        #expect(!passes(sequence(.strict, ["b", "a"]), state))
        let failure = TrajectoryCheck.check(sequence(.strict, ["a", "x", "c"]), against: state).failures.first
        #expect(failure?.actual.contains("compared as a set") == true)
    }

    @Test("case files accept the spelled-out synonyms of superset and subset")
    func synonyms() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("case.yaml")
        try """
        caseId: synonyms
        logs: run.jsonl.gz
        expected:
          sequence:
            mode: includes_expected
            calls:
              - tool: refund
                arguments: {mode: within_expected, match: {order: A-1, amount: 5}}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let loaded = try EvalCaseFile.load(path: path)
        let sequence = try #require(loaded.first?.expected.sequence)
        #expect(sequence.mode == .superset)
        #expect(sequence.calls.first?.arguments?.mode == .subset)
    }
}
