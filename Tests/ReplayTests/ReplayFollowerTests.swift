import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Replay

@Suite("Following a log as it grows")
struct ReplayFollowerTests {
    /// What a caller of a follower holds: the steps by number, each replaced when it comes again.
    struct Shown {
        var steps: [Int: ReplayStep] = [:]
        var order: [Int] = []

        mutating func take(_ step: ReplayStep) {
            if steps[step.step] == nil { order.append(step.step) }
            steps[step.step] = step
        }
    }

    /// Appends `bytes` to the file at `path` (the same file, as a writer grows it).
    static func append(_ bytes: ArraySlice<UInt8>, to path: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    /// Grows a copy of `source` in `cuts` pieces (cut anywhere: inside members, inside lines, as
    /// a writer's flushes leave it) and, after each, checks that the follower's read gives what a
    /// replay of the whole file as it is gives: the same steps, state, checks and tear, or the
    /// same error. Returns the follower and how many reads failed before one succeeded (a read
    /// from the start that fails keeps nothing to go on from: the next begins at the start too).
    static func follow(_ source: String, as path: String, cuts: Int) throws -> (follower: ReplayFollower, failedFirst: Int) {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        FileManager.default.createFile(atPath: path, contents: nil)
        var follower = ReplayFollower(path: path)
        var shown = Shown()
        var written = 0
        var failedFirst = 0
        var succeeded = false
        for cut in 1...cuts {
            let end = cut == cuts ? bytes.count : bytes.count * cut / cuts
            try append(bytes[written..<end], to: path)
            written = end
            var full: [ReplayStep] = []
            let expected: Result<Replayer.Result, any Error> = Result {
                try Replayer(path: path).replay { step, _ in
                    full.append(step)
                    return true
                }
            }
            var restarted = false
            let settledBefore = follower.settles
            let followed: Result<Replayer.Result, any Error> = Result {
                try follower.read(restarting: { restarted = true }) { step, ordinal, _ in
                    #expect(
                        full.indices.contains(ordinal) && full[ordinal].step == step.step,
                        "cut \(cut): step \(step.step) is the log's step \(ordinal)")
                    shown.take(step)
                }
            }
            // Once, a settling fold that met an event naming a call it dropped folds the log again whole.
            #expect(
                !restarted || !succeeded || (settledBefore && !follower.settles),
                "cut \(cut): a log that only grew is never read again from its start once a read found it")
            if case .success = followed { succeeded = true } else if !succeeded { failedFirst += 1 }
            switch (expected, followed) {
            case (.success(let whole), .success(let read)):
                #expect(shown.order == full.map(\.step), "cut \(cut)")
                for step in full {
                    let held = shown.steps[step.step]
                    #expect(held?.events == step.events, "cut \(cut), step \(step.step): the same events, packets made whole")
                    #expect(held?.after == step.after && held?.before == step.before, "cut \(cut), step \(step.step)")
                    #expect(held?.digests == step.digests && held?.problems == step.problems, "cut \(cut), step \(step.step)")
                }
                Self.expectOpenPart(read, of: whole, "cut \(cut)")
                #expect(read.digestsChecked == whole.digestsChecked && read.digestMismatches == whole.digestMismatches, "cut \(cut)")
                #expect(read.stepsReplayed == whole.stepsReplayed && read.endIsSigned == whole.endIsSigned, "cut \(cut)")
                #expect(read.read.tear == whole.read.tear, "cut \(cut): the tear")
            case (.failure(let wholeError), .failure(let error)):
                let code = (error as? LogError)?.code
                #expect(code != nil && code == (wholeError as? LogError)?.code, "cut \(cut): \(error) against \(wholeError)")
            default:
                Issue.record("cut \(cut): the follower gave \(followed), a replay of the whole log \(expected)")
            }
        }
        return (follower, failedFirst)
    }

    /// That `part` (a follower's read, whose fold settles) holds the open part of `whole`'s state
    /// (a replay's): the state with the front of its lists dropped, what was dropped counted and
    /// tallied, the same counts and per-tool summary.
    static func expectOpenPart(_ part: Replayer.Result, of whole: Replayer.Result, _ comment: Comment) {
        let settled = part.settled
        var open = whole.state
        open.calls.removeFirst(min(settled.calls, open.calls.count))
        open.decisions.removeFirst(min(settled.decisions, open.decisions.count))
        open.contents.removeFirst(min(settled.contents, open.contents.count))
        open.anomalies.removeFirst(min(settled.anomalies, open.anomalies.count))
        #expect(part.state == open, "\(comment): the state's open part")
        #expect(settled.calls + part.state.calls.count == whole.state.calls.count, "\(comment): calls")
        #expect(settled.decisions + part.state.decisions.count == whole.state.decisions.count, "\(comment): decisions")
        #expect(StateSummary(part.state, settled: settled) == StateSummary(whole.state), "\(comment): the counts")
        #expect(ToolSummary.tools(of: part.state, settled: settled) == ToolSummary.tools(of: whole.state), "\(comment): per tool")
        #expect(part.tailMembers.map(\.key) == whole.tailMembers.map(\.key))
        #expect(
            zip(part.tailMembers, whole.tailMembers).allSatisfy { $0.value == $1.value }, "\(comment): run id, final state, verification")
    }

    @Test(
        "a growing log read piece by piece gives, after each piece, what a replay of the whole log gives; delta packets made whole across members"
    )
    func growingLogWithDeltaPackets() throws {
        try TemporaryDirectory.with { directory in
            let source = directory.path("source.jsonl.gz")
            _ = try SampleRun.writeGrowingRun(to: source, steps: 120, options: LogWriter.Options(memberBound: 2048))
            let (follower, failedFirst) = try Self.follow(source, as: directory.path("followed.jsonl.gz"), cuts: 45)
            #expect(follower.readsFromStart == 1 + failedFirst, "only the first read that found an event begins at the start")
        }
    }

    @Test("a long log whose outputs the fold keeps in the log, followed as it grows, has the state a replay has", .timeLimit(.minutes(5)))
    func longLogWithStoredOutputs() throws {
        try TemporaryDirectory.with { directory in
            let source = directory.path("source.jsonl.gz")
            var corpus = SyntheticCorpus(seed: 3)
            try corpus.writeLongRun(to: source, jsonBytes: 30 << 20)
            #expect((FileStamp(path: source)?.size ?? 0) > StoredOutputs.minimumLogBytes)
            let (follower, failedFirst) = try Self.follow(source, as: directory.path("followed.jsonl.gz"), cuts: 4)
            #expect(follower.readsFromStart == 1 + failedFirst)
        }
    }

    /// Records a run of `steps` synthetic steps through a `RunRecorder` (every digest real), with
    /// `extra(step)`'s events before each step's end, in small members.
    static func writeRun(to path: String, steps: Int, extra: (Int) -> [(payload: EventPayload, step: Int)] = { _ in [] }) throws {
        var corpus = SyntheticCorpus(seed: 7)
        let clock = SteppingClock()
        try LogWriter.withWriter(creating: path, runId: "run-settled", options: LogWriter.Options(memberBound: 8192)) { writer in
            let recorder = RunRecorder(writer: writer, clock: { clock.now() })
            try SyntheticCorpus.record([(.runStarted(corpus.start(steps: steps)), 0)], with: recorder)
            for step in 1...steps {
                var events = corpus.step(step)
                events.insert(contentsOf: extra(step), at: events.count - 1)
                try SyntheticCorpus.record(events, with: recorder)
            }
            try SyntheticCorpus.record([(.runStopped(corpus.stop()), steps)], with: recorder)
        }
    }

    @Test("a long run's follower holds its open part, not the run, and checks every digest as a replay does")
    func settlesALongRun() throws {
        try TemporaryDirectory.with { directory in
            let source = directory.path("source.jsonl.gz")
            try Self.writeRun(to: source, steps: 400)
            let (follower, failedFirst) = try Self.follow(source, as: directory.path("followed.jsonl.gz"), cuts: 9)
            #expect(follower.readsFromStart == 1 + failedFirst && follower.settles)
            var again = follower
            let read = try again.read { _, _, _ in }
            #expect(read.settled.calls > 300 && read.settled.decisions > 300, "\(read.settled.calls) calls settled")
            // A step adds a decision and a call: at most a step's worth past the threshold is held.
            #expect(read.state.calls.count + read.state.decisions.count < ReplayFold.settlesFrom + 2)
            #expect(read.digestsChecked == 400 && read.digestMismatches.isEmpty)
        }
    }

    @Test("a digest recorded wrong after the follower settled is found as a replay finds it")
    func mismatchAfterSettling() throws {
        try TemporaryDirectory.with { directory in
            let source = directory.path("source.jsonl.gz")
            var corpus = SyntheticCorpus(seed: 8)
            var events: [(payload: EventPayload, step: Int)] = [(.runStarted(corpus.start(steps: 300)), 0)]
            for step in 1...300 { events += corpus.step(step) }
            // Step 250's digest is not its state's: what an edit before it leaves.
            try DigestedLog.write(
                events, to: source, runId: "run-edited", options: LogWriter.Options(memberBound: 8192), wrongDigestAt: 250)
            _ = try Self.follow(source, as: directory.path("followed.jsonl.gz"), cuts: 5)
            var follower = ReplayFollower(path: source)
            let read = try follower.read { _, _, _ in }
            #expect(read.settled.calls > 200)
            #expect(
                read.digestMismatches.map(\.sequence) == [try Replayer(path: source).replay { _, _ in true }.digestMismatches[0].sequence])
            #expect(read.digestMismatches.count == 1)
        }
    }

    @Test(
        "an event naming a call the follower settled (an id proposed again, a late attempt) makes it fold the log again whole, as a replay does",
        arguments: ["reused id", "late attempt", "user turn"])
    func eventNamingASettledCall(_ kind: String) throws {
        try TemporaryDirectory.with { directory in
            let source = directory.path("source.jsonl.gz")
            try Self.writeRun(to: source, steps: 160) { step in
                guard step == 120 else { return [] }
                switch kind {
                case "reused id":
                    let call = ToolCall(id: "call-5", name: "tool_2", arguments: ["id": "ord-1"])
                    return [(.decisionMade(DecisionMade(raw: "{}", outcome: .valid(.toolCalls([call])))), step)]
                case "late attempt":
                    return [
                        (.toolIntended(ToolIntended(callId: "call-3", tool: "tool_0", arguments: ["id": "ord-1"], attempt: 2)), step),
                        (
                            .toolCompleted(
                                ToolCompleted(callId: "call-3", tool: "tool_0", attempt: 2, status: .ok, output: "again", durationUs: 5)),
                            step
                        ),
                    ]
                default:
                    return [(.userTurn(UserTurn(turn: 2, text: "and one more thing", source: .script)), step)]
                }
            }
            let (follower, _) = try Self.follow(source, as: directory.path("followed.jsonl.gz"), cuts: 6)
            #expect(!follower.settles, "the follower keeps the whole state from then on")
            var fresh = ReplayFollower(path: source)
            let read = try fresh.read { _, _, _ in }
            let whole = try Replayer(path: source).replay { _, _ in true }
            #expect(read.settled.isEmpty && read.state == whole.state)
            #expect(fresh.readsFromStart == 2, "one settling read, then one that keeps all")
        }
    }

    @Test("the k-th duration of two sorted lists (dropped calls', held calls') is the merged list's, ties and empty lists included")
    func elementOfTwoSortedLists() {
        var generator = SeededGenerator(seed: 11)
        for _ in 0..<500 {
            let a = (0..<Int.random(in: 0...40, using: &generator)).map { _ in Int.random(in: 0...20, using: &generator) }.sorted()
            let b = (0..<Int.random(in: 0...8, using: &generator)).map { _ in Int.random(in: 0...20, using: &generator) }.sorted()
            let merged = (a + b).sorted()
            for k in merged.indices {
                #expect(ToolSummary.element(k, of: a, b) == merged[k], "\(k) of \(a) and \(b)")
                #expect(ToolSummary.element(k, of: b, a) == merged[k], "\(k) of \(b) and \(a)")
            }
        }
    }

    @Test("every fixture log read by a follower gives what a replay gives", arguments: allFixtureLogs)
    func fixtureLogs(_ log: String) throws {
        try TemporaryDirectory.with { directory in
            _ = try Self.follow(log, as: directory.path("followed.jsonl.gz"), cuts: 3)
        }
    }

    @Test("a log put in the place of the one followed is read from its start, and its steps come from the first")
    func replacedLog() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            _ = try SampleRun.writeGrowingRun(to: path, steps: 30, options: LogWriter.Options(memberBound: 2048))
            var follower = ReplayFollower(path: path)
            var first: [Int] = []
            try follower.read { step, _, _ in first.append(step.step) }
            // Another run written beside it and moved over it (another file at the path).
            let other = directory.path("other.jsonl.gz")
            var corpus = SyntheticCorpus(seed: 4)
            try corpus.writeLongRun(to: other, events: 50)
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.moveItem(atPath: other, toPath: path)
            var second: [Int] = []
            var restarted = false
            let result = try follower.read(restarting: { restarted = true }) { step, _, _ in second.append(step.step) }
            #expect(restarted, "the caller is told that the steps come again from the first")
            let expected = try Replayer(path: path).replay { _, _ in true }
            #expect(follower.readsFromStart == 2)
            Self.expectOpenPart(result, of: expected, "the log put in its place")
            #expect(second.first == 0 && second.count == expected.stepsReplayed)
        }
    }
}
