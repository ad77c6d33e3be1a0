import AgentRuntime
import Foundation
import Replay
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// Every fixture log: the log-format fixtures and the example runs.
let allFixtureLogs: [String] =
    FixtureLogs.all.map { FixtureLogs.directory.appendingPathComponent($0.logFileName).path }
    + ExampleRuns.all.map { ExampleRuns.directory.appendingPathComponent($0.logFileName).path }

@Suite("Replay")
struct ReplayTests {
    @Test("replaying each fixture reproduces every recorded digest and the final state", arguments: allFixtureLogs)
    func fixturesReplay(_ log: String) throws {
        var steps: [Int] = []
        let result = try Replayer(path: log).replay { step, _ in
            steps.append(step.step)
            return true
        }
        #expect(result.digestsChecked > 0)
        #expect(result.digestMismatches.isEmpty)
        let folded = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
        #expect(result.state == folded)
        #expect(steps == Array(Set(steps)).sorted())
    }

    @Test("replaying a long log holds its outputs in the log and rebuilds the same state, digests and all", .atScale, .tags(.scale))
    func longLogOutputsStayInTheLog() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("long.jsonl.gz")
            var corpus = SyntheticCorpus(seed: 11)
            let written = try corpus.writeLongRun(to: log, events: 28_000)
            // Past the size from which a fold lets outputs go back to the log.
            let size = try #require(try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int)
            try #require(size >= StoredOutputs.minimumLogBytes)
            let result = try Replayer(path: log).replay { _, _ in true }
            #expect(result.digestMismatches.isEmpty)
            #expect(result.digestsChecked == written.stepsCompleted)
            let outputs = result.state.calls.flatMap { $0.results.compactMap(\.outputText) }
            #expect(outputs.filter(\.isStored).count > outputs.count * 9 / 10)
            #expect(result.state == written)
            #expect(result.state.digest == written.digest)
        }
    }

    @Test("a torn log replays up to the tear and says where it was cut")
    func tornLog() throws {
        let log = FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path
        let result = try Replayer(path: log).replay { _, _ in true }
        #expect(result.read.tear != nil)
        #expect(result.state.eventCount == 23)
        #expect(result.digestMismatches.isEmpty)
    }

    @Test("a log with no event to replay is an error, never a replay of nothing: 0 bytes, or cut before its first event")
    func nothingToReplay() async throws {
        try await TemporaryDirectory.with { directory in
            let empty = directory.path("empty.jsonl.gz")
            #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
            #expect { try Replayer(path: empty).replay { _, _ in true } } throws: { ($0 as? LogError)?.code == .empty }
            // Cut with head(1) inside the first event's deflate data.
            let cut = directory.path("cut.jsonl.gz")
            let source = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            let head = try await Subprocess.run("/usr/bin/env", ["head", "-c", "64", source])
            #expect(FileManager.default.createFile(atPath: cut, contents: Data(head.stdout)))
            var steps = 0
            #expect {
                try Replayer(path: cut).replay { _, _ in
                    steps += 1
                    return true
                }
            } throws: { error in
                guard let error = error as? LogError else { return false }
                return error.code == .noEvent && error.memberOffset == 0
                    && error.message.hasPrefix("no event could be read: the file (64 bytes)")
            }
            #expect(steps == 0)
        }
    }

    @Test("a corrupt log stops the replay at the damage, naming the member")
    func corruptLog() throws {
        try TemporaryDirectory.with { directory in
            let source = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz")
            var bytes = [UInt8](try Data(contentsOf: source))
            bytes[40] ^= 0x10
            let log = directory.path("bad.jsonl.gz")
            try Data(bytes).write(to: URL(fileURLWithPath: log))
            var replayed = 0
            #expect(throws: LogError.self) {
                try Replayer(path: log).replay { _, _ in
                    replayed += 1
                    return true
                }
            }
            do {
                try Replayer(path: log).replay { _, _ in true }
            } catch let error as LogError {
                #expect(error.code == .corruptMember)
                #expect(error.memberOffset == 0)
                #expect(error.hint?.contains("verify") == true)
                #expect(error.hint?.contains("agent-eval") == false, "library hints name no command")
            }
        }
    }
}

@Suite("The step renderer on a narrow screen")
struct StepRendererWidthTests {
    @Test("full mode wraps a long line at the width, losing nothing; the short mode cuts it with an ellipsis")
    func wrapsInFull() {
        let line = "call-1 lookup_order " + String(repeating: "x", count: 50) + "\nsecond line"
        let wrapped = StepRenderer.wrap(line, to: 20)
        #expect(wrapped.allSatisfy { $0.count <= 20 }, "\(wrapped)")
        #expect(wrapped.map { $0.hasPrefix("  ") ? String($0.dropFirst(2)) : $0 }.joined() == line.replacingOccurrences(of: "\n", with: ""))
        #expect(StepRenderer.cut(line, to: 20).count == 20 && StepRenderer.cut(line, to: 20).hasSuffix("…"))
    }
}
