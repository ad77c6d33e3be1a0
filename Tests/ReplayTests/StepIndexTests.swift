import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Replay

@Suite("The step index")
struct StepIndexTests {
    @Test("step N through the index equals the fold of the log up to that step's end, for every step", arguments: allFixtureLogs)
    func everyStepThroughTheIndex(_ log: String) throws {
        try TemporaryDirectory.with { directory in
            let (index, rebuilt) = try StepIndex.open(log: log, cacheDirectory: directory.url.path)
            #expect(rebuilt)
            #expect(try StepIndex.open(log: log, cacheDirectory: directory.url.path).rebuilt == false)
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
            }
        }
    }

    @Test("a delta packet whose base is members back is made whole through the index, at every step")
    func deltaPacketsThroughTheIndex() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("growing.jsonl.gz")
            let packets = try SampleRun.writeGrowingRun(to: log, steps: 150, options: LogWriter.Options(memberBound: 2048))
            let (index, _) = try StepIndex.open(log: log, cacheDirectory: directory.path("cache"))
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

    @Test("a stale index is rebuilt when the log changes; without a cache directory the index lives in memory")
    func staleIndex() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("run.jsonl.gz")
            let agent = try AgentFile.load(path: ExampleRuns.agentPath("support"))
            let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "r"))
            _ = try await runtime.run(goal: "Order A-1042 arrived broken.", log: log)
            let cache = directory.path("cache")
            let first = try StepIndex.open(log: log, cacheDirectory: cache).index
            let stepsBefore = first.stepCount
            _ = try await runtime.resume(log: log, approvals: [ApprovalRecorded(callId: "call-3", isGranted: true)])
            let (second, rebuilt) = try StepIndex.open(log: log, cacheDirectory: cache)
            #expect(rebuilt)
            #expect(second.stepCount > stepsBefore)
            let memory = try StepIndex.open(log: log, cacheDirectory: nil)
            #expect(memory.index.indexPath == nil)
            #expect(memory.index.stepCount == second.stepCount)
        }
    }

    @Test("an index is read by field name: another order of fields and of enum values reads the same; a missing field rebuilds it")
    func fieldsByName() throws {
        try TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            let cache = directory.url.path
            let (index, _) = try StepIndex.open(log: log, cacheDirectory: cache)
            let expected = (0..<index.stepCount).compactMap { index.record(at: $0) }
            #expect(expected.last?.after.stopReason != nil)
            let path = try #require(index.indexPath)
            var info = stat()
            #expect(stat(log, &info) == 0)
            let size = Int(info.st_size)
            let mtime = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
            let built = try StepIndex.build(log: log)

            // As a writer with another field order and other enum orders would have written it.
            try StepIndex.write(
                built, to: path, size: size, mtime: mtime, fields: StepIndex.Field.all.reversed(),
                enumNames: StepIndex.Field.enumNames.map { ($0.key, $0.value.reversed()) })
            let (reordered, rebuilt) = try StepIndex.open(log: log, cacheDirectory: cache)
            #expect(!rebuilt)
            #expect((0..<reordered.stepCount).compactMap { reordered.record(at: $0) } == expected)

            // An index without a field this version reads is rebuilt, not misread.
            try StepIndex.write(built, to: path, size: size, mtime: mtime, fields: StepIndex.Field.all.filter { $0.name != "limit" })
            #expect(try StepIndex.open(log: log, cacheDirectory: cache).rebuilt)
            #expect(try StepIndex.open(log: log, cacheDirectory: cache).rebuilt == false)
        }
    }

    @Test("planted links in the cache never make the index overwrite another file")
    func plantedLinks() throws {
        try TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            let victim = directory.path("victim.txt")
            try "precious".write(toFile: victim, atomically: true, encoding: .utf8)

            // A link where the index file goes: replaced by the index, the target untouched.
            let cache = directory.path("cache")
            let first = try StepIndex.open(log: log, cacheDirectory: cache).index
            let indexPath = try #require(first.indexPath)
            try FileManager.default.removeItem(atPath: indexPath)
            try FileManager.default.createSymbolicLink(atPath: indexPath, withDestinationPath: victim)
            let (rebuilt, wasRebuilt) = try StepIndex.open(log: log, cacheDirectory: cache)
            #expect(wasRebuilt)
            #expect(rebuilt.stepCount == first.stepCount)
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")

            // The index folder itself a link to somewhere else: no file is written there; the
            // index lives in memory.
            let elsewhere = directory.path("elsewhere")
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
            let linkedCache = directory.path("linked-cache")
            try FileManager.default.createDirectory(atPath: linkedCache, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: linkedCache + "/index", withDestinationPath: elsewhere)
            let (memory, _) = try StepIndex.open(log: log, cacheDirectory: linkedCache)
            #expect(memory.indexPath == nil)
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        }
    }
}
