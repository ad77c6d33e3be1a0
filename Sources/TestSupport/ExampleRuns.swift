public import AgentRuntime
public import Foundation
import Synchronization
public import TraceCore

extension RuntimeEnvironment {
    /// A reproducible environment: a stepping clock, every measured duration recorded as the
    /// same 1.5 ms, no real waits for backoff, and the given run id. Two runs of the same
    /// script in it write the same log, byte for byte.
    public static func deterministic(runId: String, clock: SteppingClock = SteppingClock()) -> RuntimeEnvironment {
        RuntimeEnvironment(
            now: { clock.now() }, recordedDuration: { _ in 1_500 }, sleep: { _ in }, makeRunId: { runId })
    }

    /// This environment with run ids `<prefix>-1`, `<prefix>-2`, … in the order runs start: with
    /// one job, two suite runs of the same cases give their attempts the same ids, so a scripted
    /// rule's `chance` draws the same for them (adaptive against fixed repeats).
    public func sequentialRunIds(prefix: String) -> RuntimeEnvironment {
        let counter = Mutex(0)
        var environment = self
        environment.makeRunId = { "\(prefix)-\(counter.withLock { value in value += 1; return value })" }
        return environment
    }
}

extension ExampleRuns {
    /// A case file over the flaky fixture agent (`Fixtures/agents/flaky`: it answers well about
    /// 7 runs in 10), passing the gate when `minPassRate` of its attempts pass.
    public static func flakyCase(id: String = "flaky", minPassRate: Double = 0.5) -> String {
        """
        caseId: \(id)
        agent: \(fixtures.appendingPathComponent("agents/flaky/agent.yaml").path)
        input: Where is my refund?
        minPassRate: \(minPassRate)
        expected: {toolsCalled: [lookup_order], answer: {contains: rf-9}}
        """
    }
}

/// The example agents in `Fixtures/agents/`, and the runs of them checked in under
/// `Fixtures/runs/`.
public enum ExampleRuns {
    /// `Fixtures` in the package.
    public static var fixtures: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures")
    }

    public static func agentPath(_ name: String) -> String {
        fixtures.appendingPathComponent("agents/\(name)/agent.yaml").path
    }

    /// One example run: how to record it, from its agent file.
    public struct Example: Sendable, CustomStringConvertible {
        public let name: String
        public let agent: String
        /// Records the run at `path`; returns the live state the runtime ended with (after
        /// every resume).
        public let record: @Sendable (_ path: String) async throws -> RunState

        public var description: String { name }
        public var logFileName: String { "\(name).jsonl.gz" }
    }

    public static let support = Example(name: "support-refund", agent: "support") { path in
        let agent = try AgentFile.load(path: agentPath("support"))
        let clock = SteppingClock()
        let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "run-support-refund", clock: clock))
        let paused = try await runtime.run(goal: "Order A-1042 arrived broken. Refund me and close my account.", log: path)
        guard paused.stop.reason == .approvalRequired else { throw ExampleError("the support run stopped with \(paused.stop.reason)") }
        let resumed = try await runtime.resume(
            log: path, approvals: [ApprovalRecorded(callId: "call-3", isGranted: true, approver: "agent:maria")])
        return resumed.state
    }

    public static let research = Example(name: "research-budget", agent: "research") { path in
        let agent = try AgentFile.load(path: agentPath("research"))
        let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "run-research-budget"))
        return try await runtime.run(goal: "Is zstd faster than gzip, and by how much?", log: path).state
    }

    public static let all = [support, research]

    /// `Fixtures/runs` in the package.
    public static var directory: URL { fixtures.appendingPathComponent("runs") }
}

/// An example run that did not go as its script says.
public struct ExampleError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
