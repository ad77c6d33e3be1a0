public import TraceCore

/// One question put to a judge model and its answer, kept with the run's result (the JSON
/// report's `judgements`, the catalog's `eval_results.judgements`): what it was asked, what it
/// replied, and the verdict read from the reply.
public struct Judgement: Sendable, Hashable {
    /// The expectation graded: `answer.rubric` or `arguments.<tool>.rubric`.
    public var expectation: String
    public var rubric: String
    /// The judge, as `provider:name` (`scripted:<name>` for a scripted judge).
    public var judge: String
    /// The step and call graded (argument rubrics), or the step the answer came at.
    public var step: Int?
    public var callId: String?
    /// The judge's instructions and the text it was asked to grade: the request, provider-neutral.
    public var instructions: String
    public var prompt: String
    /// The judge's raw reply (the provider's assembled message), and how it is read.
    public var reply: String?
    public var replyFormat: String?
    /// The verdict; nil when the judge gave none (then `error` says why).
    public var passed: Bool?
    public var reason: String?
    public var usage: TokenUsage?
    public var costUSD: Double?
    public var latencyUs: Int?
    /// Why there is no verdict: the model could not be reached, or its reply is not one.
    public var error: String?

    public init(
        expectation: String, rubric: String, judge: String, step: Int? = nil, callId: String? = nil, instructions: String,
        prompt: String
    ) {
        self.expectation = expectation
        self.rubric = rubric
        self.judge = judge
        self.step = step
        self.callId = callId
        self.instructions = instructions
        self.prompt = prompt
    }

    /// `{expectation, rubric, judge, step?, call_id?, request: {instructions, prompt}, reply?,
    /// reply_format?, passed?, reason?, usage?, cost_usd?, latency_us?, error?}`
    /// (docs/eval-results.md).
    public var json: JSONValue {
        var request = ObjectBuilder()
        request.set("instructions", instructions)
        request.set("prompt", prompt)
        var object = ObjectBuilder()
        object.set("expectation", expectation)
        object.set("rubric", rubric)
        object.set("judge", judge)
        object.set("step", step)
        object.set("call_id", callId)
        object.set("request", request.json)
        object.set("reply", reply)
        object.set("reply_format", replyFormat)
        object.set("passed", passed)
        object.set("reason", reason)
        object.set("usage", usage.map { ["input": .int($0.input), "output": .int($0.output)] as JSONValue })
        object.set("cost_usd", costUSD)
        object.set("latency_us", latencyUs)
        object.set("error", error)
        return object.json
    }
}

/// The judge gave different verdicts on the same thing across rounds (`--repeat` on recorded
/// logs): reported like flakiness.
public struct JudgeDisagreement: Sendable, Hashable {
    public var log: String
    public var expectation: String
    public var callId: String?
    public var passed: Int
    public var rounds: Int

    public init(log: String, expectation: String, callId: String?, passed: Int, rounds: Int) {
        self.log = log
        self.expectation = expectation
        self.callId = callId
        self.passed = passed
        self.rounds = rounds
    }

    public var message: String {
        "the judge disagreed on \(expectation)\(callId.map { " (\($0))" } ?? "") of \(log): it passed \(passed) of \(rounds) rounds"
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("log", log)
        object.set("expectation", expectation)
        object.set("call_id", callId)
        object.set("passed", passed)
        object.set("rounds", rounds)
        return object.json
    }
}
