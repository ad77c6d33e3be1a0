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
            let followed: Result<Replayer.Result, any Error> = Result {
                try follower.read(restarting: { restarted = true }) { step, ordinal, _ in
                    #expect(
                        full.indices.contains(ordinal) && full[ordinal].step == step.step,
                        "cut \(cut): step \(step.step) is the log's step \(ordinal)")
                    shown.take(step)
                }
            }
            #expect(!restarted || !succeeded, "cut \(cut): a log that only grew is never read again from its start once a read found it")
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
                #expect(read.state == whole.state, "cut \(cut): the state")
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
            #expect(result.state == expected.state)
            #expect(second.first == 0 && second.count == expected.stepsReplayed)
        }
    }
}
