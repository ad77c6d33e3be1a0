import AgentRuntime
import Foundation
import Synchronization
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

@Suite("Tool execution: policy first, write-ahead intents, concurrency, retries, timeouts", .ownThread)
struct ToolExecutionTests {
    @Test("a denied call never reaches its tool, and one needing approval does not either until approved")
    func deniedCallNeverRuns() async throws {
        let deletes = CallCounter()
        let refunds = CallCounter()
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(
                decisions: [calls(("delete", ["id": 1]), ("refund", ["id": 2])), answer("ok")],
                tools: [
                    try echoTool(deletes, name: "delete", sideEffect: .write), try echoTool(refunds, name: "refund", sideEffect: .write),
                ],
                policy: rulePolicy([
                    rule("no-delete", .deny, tools: ["delete"]), rule("refund-needs-human", .approvalRequired, tools: ["refund"]),
                ]))
            let (outcome, _, events) = try await record(agent, in: directory)
            #expect(deletes.value == 0)
            #expect(refunds.value == 0)
            #expect(outcome.stop.reason == .approvalRequired)
            // Every proposed call got exactly one verdict, before anything else happened to it.
            #expect(events.filter { $0.kind == "verdict_given" }.count == 2)
            #expect(!events.contains { $0.kind == "tool_intended" })

            let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "run-test"))
            let resumed = try await runtime.resume(
                log: directory.path("run.jsonl.gz"), approvals: [ApprovalRecorded(callId: "call-2", isGranted: true, approver: "lee")])
            #expect(refunds.value == 1)
            #expect(deletes.value == 0)
            #expect(resumed.stop.reason == .success)
            let folded = RunState(folding: try LogReader(path: directory.path("run.jsonl.gz")).readAll().events.map(\.event))
            #expect(folded == resumed.state)
            #expect(folded.anomalies.isEmpty)
        }
    }

    @Test("a refused approval becomes an observation; the tool is never run and the model goes on")
    func refusedApproval() async throws {
        let refunds = CallCounter()
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(
                decisions: [calls(("refund", [:])), answer("the refund was refused")],
                tools: [try echoTool(refunds, name: "refund", sideEffect: .write)],
                policy: rulePolicy([rule("refund-needs-human", .approvalRequired, tools: ["refund"])]))
            _ = try await record(agent, in: directory)
            let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "run-test"))
            let resumed = try await runtime.resume(
                log: directory.path("run.jsonl.gz"), approvals: [ApprovalRecorded(callId: "call-1", isGranted: false, reason: "too much")])
            #expect(refunds.value == 0)
            #expect(resumed.stop.reason == .success)
            #expect(resumed.state.call(id: "call-1")?.isDenied == true)
        }
    }

    @Test("resume refuses what it cannot do: a run not waiting, an unknown call, an undecided call")
    func resumeErrors() async throws {
        try await TemporaryDirectory.with { directory in
            let finished = makeAgent(decisions: [answer("hi")], tools: [try echoTool()])
            _ = try await record(finished, in: directory, name: "done.jsonl.gz")
            let runtime = AgentRuntime(agent: finished, environment: .deterministic(runId: "run-test"))
            await #expect(throws: RuntimeError.self) {
                try await runtime.resume(
                    log: directory.path("done.jsonl.gz"), approvals: [ApprovalRecorded(callId: "call-1", isGranted: true)])
            }
            let waiting = makeAgent(
                decisions: [calls(("a", [:]), ("b", [:])), answer("ok")], tools: [try echoTool(name: "a"), try echoTool(name: "b")],
                policy: rulePolicy([rule("human", .approvalRequired)]))
            _ = try await record(waiting, in: directory, name: "wait.jsonl.gz")
            let waitingRuntime = AgentRuntime(agent: waiting, environment: .deterministic(runId: "run-test"))
            do {
                _ = try await waitingRuntime.resume(
                    log: directory.path("wait.jsonl.gz"), approvals: [ApprovalRecorded(callId: "call-1", isGranted: true)])
                Issue.record("resumed with call-2 undecided")
            } catch let error as RuntimeError {
                #expect(error.code == .undecidedCalls)
                #expect(error.message.contains("call-2"))
            }
            do {
                _ = try await waitingRuntime.resume(
                    log: directory.path("wait.jsonl.gz"), approvals: [ApprovalRecorded(callId: "call-9", isGranted: true)])
                Issue.record("resumed with an unknown call")
            } catch let error as RuntimeError {
                #expect(error.message.contains("call-9"))
            }
            let other = makeAgent(decisions: [], tools: [try echoTool(name: "zzz")])
            do {
                _ = try await AgentRuntime(agent: other).resume(
                    log: directory.path("wait.jsonl.gz"), approvals: [ApprovalRecorded(callId: "call-1", isGranted: true)])
                Issue.record("resumed with another agent")
            } catch let error as RuntimeError {
                #expect(error.code == .agentMismatch)
            }
        }
    }

    @Test("concurrent calls finishing in random order are recorded in proposal order: the same log bytes run after run")
    func concurrentCallsAreDeterministic() async throws {
        let sleepy = try tool("sleepy") { request in
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...25)))
            return .ok(request.arguments)
        }
        let agent = makeAgent(
            decisions: [calls(("sleepy", ["n": 1]), ("sleepy", ["n": 2]), ("sleepy", ["n": 3]), ("sleepy", ["n": 4])), answer("done")],
            tools: [sleepy])
        try await TemporaryDirectory.with { directory in
            var logs: [Data] = []
            for run in 0..<5 {
                let (outcome, folded, _) = try await record(agent, in: directory, name: "run-\(run).jsonl.gz")
                #expect(outcome.state == folded)
                logs.append(try Data(contentsOf: URL(fileURLWithPath: directory.path("run-\(run).jsonl.gz"))))
            }
            #expect(Set(logs).count == 1)
        }
    }

    @Test("independent calls of one decision really run at the same time")
    func callsOverlap() async throws {
        // Each call waits (up to 20 s) until all three have started: run one after another,
        // they would never all be in at once.
        let running = Mutex((now: 0, peak: 0))
        let overlapping = try tool("wait") { _ in
            running.withLock {
                $0.now += 1
                $0.peak = max($0.peak, $0.now)
            }
            let deadline = ContinuousClock.now + .seconds(20)
            while running.withLock({ $0.peak }) < 3 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            running.withLock { $0.now -= 1 }
            return .ok(nil)
        }
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("wait", [:]), ("wait", [:]), ("wait", [:])), answer("ok")], tools: [overlapping])
            _ = try await record(agent, in: directory)
            #expect(running.withLock { $0.peak } == 3)
        }
    }

    @Test("the intent of each attempt is in the log before the tool starts")
    func intentIsDurableBeforeExecution() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            let seen = Mutex<[String]>([])
            let inspect = try tool("inspect") { request in
                // Read the log from the tool's side, while the run is still going.
                let events = try LogReader(path: path).readAll().events.map(\.event)
                let intended = events.contains {
                    if case .toolIntended(let intent) = $0.payload {
                        return intent.callId == request.callId && intent.attempt == request.attempt
                    }
                    return false
                }
                seen.withLock { $0.append("\(request.callId)#\(request.attempt):\(intended)") }
                return request.attempt == 1 ? .failure("again", isRetryable: true) : .ok(true)
            }
            let agent = makeAgent(decisions: [calls(("inspect", [:])), answer("ok")], tools: [inspect])
            var retrying = agent
            retrying.tools = ToolRegistry([
                try Tool(spec: inspect.spec, host: inspect.host, retry: RetryPolicy(maxAttempts: 2, backoffMs: 10))
            ])
            _ = try await AgentRuntime(agent: retrying, environment: .deterministic(runId: "r")).run(goal: "g", log: path)
            #expect(seen.withLock { $0 } == ["call-1#1:true", "call-1#2:true"])
        }
    }

    @Test("retryable failures are retried with growing backoff up to max_attempts; others are not retried")
    func retries() async throws {
        let waits = Mutex<[Int]>([])
        let attempts = CallCounter()
        let flaky = try Tool(
            spec: ToolSpec(name: "flaky", description: "", inputSchema: objectSchema, sideEffect: .read),
            host: ClosureToolHost(outcome: { _ in
                attempts.increment()
                return .failure("503", isRetryable: true)
            }), retry: RetryPolicy(maxAttempts: 4, backoffMs: 100, multiplier: 3))
        let hard = CallCounter()
        let broken = try tool("broken", retry: RetryPolicy(maxAttempts: 4)) { _ in
            hard.increment()
            return .failure("bad request")
        }
        var environment = RuntimeEnvironment.deterministic(runId: "r")
        environment.sleep = { milliseconds in waits.withLock { $0.append(milliseconds) } }
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("flaky", [:]), ("broken", [:])), answer("ok")], tools: [flaky, broken])
            let outcome = try await AgentRuntime(agent: agent, environment: environment).run(goal: "g", log: directory.path("r.jsonl.gz"))
            #expect(attempts.value == 4)
            #expect(hard.value == 1)
            #expect(waits.withLock { $0 } == [100, 300, 900])
            #expect(outcome.state.call(id: "call-1")?.results.map(\.attempt) == [1, 2, 3, 4])
            #expect(outcome.state.call(id: "call-1")?.results.allSatisfy { $0.isRetryable == true } == true)
        }
    }

    @Test("an in-process tool past its timeout is cancelled and recorded as a retryable failure, on the injected clock")
    func inProcessTimeout() async throws {
        let clock = ManualClock()
        let slow = try tool("slow", timeoutMs: 100) { _ in
            try await Task.sleep(for: .seconds(3_600))
            return .ok(nil)
        }
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("slow", [:])), answer("ok")], tools: [slow])
            async let recorded = record(agent, in: directory, monotonic: clock)
            await clock.waitForSleepers()
            clock.advance(by: .milliseconds(99))
            #expect(clock.sleeperCount == 1, "the deadline has not come yet")
            clock.advance(by: .milliseconds(1))
            let (outcome, _, _) = try await recorded
            let result = try #require(outcome.state.call(id: "call-1")?.lastResult)
            #expect(result.error == "slow did not finish within 100 ms and was cancelled")
            #expect(result.isRetryable == true)
            #expect(outcome.state.stopReason == .success)
        }
    }

    @Test("on the live clock, a tool past its deadline is cancelled by the watchdog and recorded as a retryable timeout")
    func liveClockTimeout() async throws {
        let cancelled = Mutex(false)
        let slow = try tool("slow", timeoutMs: 100) { _ in
            do {
                try await Task.sleep(for: .seconds(60))
            } catch {
                cancelled.withLock { $0 = true }
                throw error
            }
            return .ok("too late")
        }
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("slow", [:])), answer("ok")], tools: [slow])
            let (outcome, folded, _) = try await record(agent, in: directory, monotonic: ContinuousClock())
            #expect(cancelled.withLock { $0 }, "the deadline cancelled the tool's task")
            #expect(outcome.state == folded)
            let result = try #require(outcome.state.call(id: "call-1")?.lastResult)
            #expect(result.error == "slow did not finish within 100 ms and was cancelled")
            #expect(result.isRetryable == true)
            #expect(result.output == nil)
        }
    }

    @Test("a tool that blocks its thread past its deadline is recorded as the timeout it was, not as its late answer")
    func blockingToolTimesOut() async throws {
        let blocker = try tool("blocker", timeoutMs: 50) { _ in
            // Blocks the thread it runs on (the run loop's): no cancellation reaches it, and the
            // deadline's own task cannot run before it returns.
            usleep(300_000)
            return .ok("late")
        }
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("blocker", [:])), answer("ok")], tools: [blocker])
            let (outcome, _, _) = try await record(agent, in: directory, monotonic: ContinuousClock())
            let result = try #require(outcome.state.call(id: "call-1")?.lastResult)
            #expect(result.error == "blocker did not finish within 50 ms and was cancelled")
            #expect(result.output == nil)
            #expect(outcome.state.stopReason == .success)
        }
    }

    /// A host that reports its own timeouts, given time to do so.
    struct GracefulHost: ToolHost {
        var timeoutGraceMs: Int { 500 }
        func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
            try await Task.sleep(for: .seconds(3_600))
            return .ok(nil)
        }
    }

    @Test("the deadline includes the host's own grace period")
    func grace() async throws {
        let clock = ManualClock()
        let graceful = try Tool(
            spec: ToolSpec(name: "graceful", description: "", inputSchema: objectSchema, sideEffect: .read), host: GracefulHost(),
            timeoutMs: 100)
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("graceful", [:])), answer("ok")], tools: [graceful])
            async let recorded = record(agent, in: directory, monotonic: clock)
            await clock.waitForSleepers()
            clock.advance(by: .milliseconds(599))
            #expect(clock.sleeperCount == 1, "599 ms is within the timeout and the 500 ms grace")
            clock.advance(by: .milliseconds(1))
            let (outcome, _, _) = try await recorded
            #expect(outcome.state.call(id: "call-1")?.lastResult?.error == "graceful did not finish within 100 ms and was cancelled")
        }
    }

    @Test("a tool that answers before its deadline is not cut off, and its deadline is withdrawn")
    func answersInTime() async throws {
        let clock = ManualClock()
        let quick = try tool("quick", timeoutMs: 100) { _ in .ok("fast") }
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("quick", [:]), ("quick", ["n": 2])), answer("ok")], tools: [quick])
            let (outcome, _, _) = try await record(agent, in: directory, monotonic: clock)
            #expect(outcome.state.calls.map { $0.lastResult?.output } == ["fast", "fast"])
            #expect(clock.sleeperCount == 0)
        }
    }

    @Test("values nested deeper than a log may hold are recorded safely: an output as content, a reply as invalid, a schema refused")
    func deepValues() async throws {
        var deep: JSONValue = 1
        for _ in 0..<600 { deep = .array([deep]) }
        let value = deep
        let nested = try tool("nested") { _ in .ok(value) }
        var deepArguments: JSONValue = 1
        for _ in 0..<490 { deepArguments = ["a": deepArguments] }
        let reply = ModelReply(raw: #"{"tool_calls":[{"name":"nested","arguments":"# + JSONWriter.encodeString(deepArguments) + "}]}")
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(decisions: [calls(("nested", [:])), reply, answer("ok")], tools: [nested])
            let (outcome, folded, _) = try await record(agent, in: directory)
            #expect(outcome.state == folded)
            let result = try #require(outcome.state.call(id: "call-1")?.lastResult)
            #expect(result.output == nil)
            #expect(result.contentHash != nil, "kept as stored content")
            #expect(try LogVerifier.verify(path: directory.path("run.jsonl.gz")).isIntact)
            guard case .invalid(let invalid)? = outcome.state.decisions.dropFirst().first?.outcome else {
                Issue.record("the deep reply was not rejected")
                return
            }
            #expect(invalid.message.contains("nests deeper than"))
        }
        #expect(throws: SchemaError.self) {
            _ = try Tool(
                spec: ToolSpec(name: "t", description: "", inputSchema: ["type": "array", "items": deep], sideEffect: .read),
                host: ClosureToolHost { _ in .ok(nil) })
        }
    }

    @Test("a large output is stored once as content and referenced; the model still sees it in full")
    func largeOutputGoesToContent() async throws {
        let big = String(repeating: "lorem ipsum ", count: 1_000)
        let seen = Mutex<JSONValue?>(nil)
        let model = ClosureModel { request in
            if let observation = request.lastObservation {
                seen.withLock { $0 = observation.output }
                return answer("read it")
            }
            return calls(("page", [:]))
        }
        let page = try tool("page") { _ in .ok(["text": .string(big)]) }
        try await TemporaryDirectory.with { directory in
            var agent = makeAgent(tools: [page], context: ContextSettings(tokenBudget: 100_000, inlineOutputBytes: 1_000))
            agent.model = model
            let (outcome, _, events) = try await record(agent, in: directory)
            let result = try #require(outcome.state.call(id: "call-1")?.lastResult)
            #expect(result.output == nil)
            let hash = try #require(result.contentHash)
            #expect(events.contains { if case .contentStored(let c) = $0.payload { return c.hash == hash } else { return false } })
            #expect(seen.withLock { $0 }?["text"]?.stringValue == big)
        }
    }
}

/// A model written as a closure, for tests that react to what the model is shown.
struct ClosureModel: ModelClient {
    let body: @Sendable (ModelRequest) -> ModelReply
    init(_ body: @escaping @Sendable (ModelRequest) -> ModelReply) { self.body = body }
    var identity: ModelIdentity { ModelIdentity(provider: "test", name: "closure") }
    func reply(to request: ModelRequest) async throws -> ModelReply { body(request) }
}
