import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// What the context builder records from step to step: what it left out says the same thing at
/// every later step, so a long run's packets differ only where the run changed and the log
/// writes them as small deltas.
@Suite("Context packets over a run")
struct ContextPacketTests {
    @Test("an omitted item reads the same in every later packet; duplicates name the next newer identical call")
    func omissionsAreStable() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Three identical calls, then calls whose results are new, on a budget that holds a few.
        var decisions = (0..<3).map { _ in calls(("echo", ["q": "same"])) }
        decisions += (0..<12).map { index in calls(("echo", ["q": .string("new \(index) " + String(repeating: "x", count: 60))])) }
        decisions.append(answer("done"))
        let agent = makeAgent(
            decisions: decisions, tools: [try echoTool()], limits: RunLimits(maxSteps: 30), context: ContextSettings(tokenBudget: 160))
        let (outcome, _, _) = try await record(agent, in: directory)
        #expect(outcome.stop.reason == .success)

        let path = directory.path("run.jsonl.gz")
        let events = try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
        let packets = events.compactMap { if case .contextBuilt(let packet) = $0.payload { packet } else { nil } }
        #expect(packets.count == 16)

        var firstSeen: [String: OmittedItem] = [:]
        for packet in packets {
            for item in packet.omitted {
                if let earlier = firstSeen[item.id] {
                    #expect(earlier == item, "\(item.id) changed from \(earlier) to \(item)")
                } else {
                    firstSeen[item.id] = item
                }
            }
        }
        // call-1 and call-2 repeat call-3: each names the next newer one.
        #expect(firstSeen["call-1"]?.detail == "same call and result as call-2")
        #expect(firstSeen["call-2"]?.detail == "same call and result as call-3")
        let budget = try #require(firstSeen.values.first { $0.reason == .budget })
        #expect(budget.detail?.hasSuffix("more than the budget of 160 had left") == true)

        // So the log holds them as deltas: most packet lines are version 2 and small.
        let lines = try await Subprocess.run(gzipPath, ["-dc", path]).stdoutText.split(separator: "\n").filter {
            $0.contains(#""kind":"context_built""#)
        }
        let deltas = lines.filter { $0.contains(#""base_seq":"#) }
        #expect(deltas.count >= 10)
    }

    @Test("someone watching a live run is told of every packet whole, as the log reads back")
    func observersSeeWholePackets() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var decisions = (0..<8).map { index in calls(("echo", ["q": .string("item \(index)")])) }
        decisions.append(answer("done"))
        let agent = makeAgent(decisions: decisions, tools: [try echoTool()], context: ContextSettings(tokenBudget: 120))
        let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "run-live"))
        let path = directory.path("live.jsonl.gz")
        var live: [ContextBuilt] = []
        for try await update in runtime.updates(goal: "Watch me.", log: path) {
            if case .event(let event) = update, case .contextBuilt(let packet) = event.payload { live.append(packet) }
        }
        let read = try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.compactMap {
            if case .contextBuilt(let packet) = $0.event.payload { packet } else { nil }
        }
        #expect(live.count == 9)
        #expect(live.allSatisfy { $0.delta == nil })
        #expect(live == read)
        let plain = try LogReader(path: path).readAll().events
        #expect(plain.contains { if case .contextBuilt(let packet) = $0.event.payload { packet.delta != nil } else { false } })
    }
}
