import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Replay

@Suite("Step tables")
struct StepIndexTests {
    @Test("step N through the step table equals the fold of the log up to that step's end, for every step", arguments: allFixtureLogs)
    func everyStepThroughTheTable(_ log: String) throws {
        let (index, rebuilt) = try StepIndex.open(log: log, store: nil)
        #expect(rebuilt)
        let events = try LogReader(path: log, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
        for position in 0..<index.stepCount {
            let record = try #require(index.record(at: position))
            let step = try #require(try index.replayStep(record.step))
            let prefix = events.filter { $0.sequence <= step.lastSequence }
            #expect(step.after == StateSummary(RunState(folding: prefix)), "step \(record.step)")
            #expect(
                step.events.map(\.event)
                    == events.filter {
                        $0.step == record.step && $0.sequence >= record.firstSequence && $0.sequence <= record.lastSequence
                    })
            #expect(step.digests.allSatisfy { $0.isMatch })
            // The full replay agrees on what the step holds.
            var full: ReplayStep?
            try Replayer(path: log).replay(until: record.step) { candidate, _ in
                if candidate.step == record.step { full = candidate }
                return true
            }
            #expect(full?.events.map(\.event.sequence) == step.events.map(\.event.sequence))
            #expect(full?.problems.map(\.kind) == step.problems.map(\.kind))
            #expect(full?.after == record.after)
        }
    }

    @Test("a delta packet whose base is members back is made whole through the step table, at every step")
    func deltaPacketsThroughTheTable() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("growing.jsonl.gz")
            let packets = try SampleRun.writeGrowingRun(to: log, steps: 150, options: LogWriter.Options(memberBound: 2048))
            let (index, _) = try StepIndex.open(log: log, store: nil)
            var startsBeforeTheStep = 0
            for position in 0..<index.stepCount {
                let record = try #require(index.record(at: position))
                if record.packetPosition.memberOffset < record.position.memberOffset { startsBeforeTheStep += 1 }
                let step = try #require(try index.replayStep(record.step))
                for recorded in step.events {
                    guard case .contextBuilt(let packet) = recorded.event.payload else { continue }
                    #expect(packet.delta == nil, "step \(record.step)")
                    #expect(packet == packets[record.step - 1], "step \(record.step)")
                }
            }
            // Most steps' packets build on a whole packet in an earlier member.
            #expect(startsBeforeTheStep > 100)
        }
    }

    @Test("a record reads back from its stored form as it was, and a stored form missing a field reads as none", arguments: allFixtureLogs)
    func storedForm(_ log: String) throws {
        let table = try StepTable.build(log: log)
        for record in table.records {
            let json = try JSONParser.parse(JSONWriter.encode(record.storedJSON))
            #expect(StepRecord(step: record.step, hasProblem: record.hasProblem, runId: table.runId, storedJSON: json) == record)
            guard case .object(var object) = json else { continue }
            object["after"] = nil
            #expect(StepRecord(step: record.step, hasProblem: record.hasProblem, runId: table.runId, storedJSON: .object(object)) == nil)
        }
    }
}
