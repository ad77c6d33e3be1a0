import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import AgentRuntime

/// An event the log writer refuses as too large for its readers (nothing of it written) stops
/// the run, recorded: the log stays whole and readable by a reader with the writer's limit.
@Suite("A refused event stops the run")
struct RefusedEventTests {
    @Test("a reply too large for a log line stops the run blocked with the writer's reason; the log verifies")
    func refusedReply() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("large.jsonl.gz")
            let limit = 1 << 20
            let agent = makeAgent(decisions: [answer(String(repeating: "x", count: 2 * limit))], tools: [])
            let writer = try LogWriter.create(
                at: path, runId: "run-large", options: LogWriter.Options(memberBound: 64 * 1024, readerMemberLimit: limit))
            let environment = RuntimeEnvironment.deterministic(runId: "run-large")
            let session = RunSession(
                agent: agent, environment: environment, recorder: RunRecorder(writer: writer, clock: environment.now), contents: [:])
            let outcome = try await session.drive(path: path) {
                try session.start(goal: "Say a lot.", actor: nil, route: nil)
                try await session.loop()
            }
            #expect(outcome.stop.reason == .blocked)
            let error = try #require(outcome.stop.error)
            #expect(error.hasPrefix("the run could not be recorded further: event seq"), "\(error)")
            #expect(error.contains("(decision_made)") && error.contains("so it is not written"), "\(error)")
            let events = try LogReader(path: path, options: .init(isStrict: true, memberContentLimit: limit)).readAll().events.map(\.event)
            #expect(!events.contains { $0.kind == "decision_made" })
            #expect(events.last?.kind == "run_stopped")
            #expect(RunState(folding: events) == outcome.state)
            #expect(try LogVerifier.verify(path: path, memberContentLimit: limit).isIntact)
        }
    }
}
