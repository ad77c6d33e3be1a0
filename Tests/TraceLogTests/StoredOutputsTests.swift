import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@Suite("Outputs held as references into the log")
struct StoredOutputsTests {
    /// The step whose call fails: in the log's third member (the first member's outputs stay
    /// in memory), and the index of that call.
    static let failingStep = 8
    static let failingCall = failingStep - 1

    /// Writes a run of `steps` synthetic steps in members of 16 KiB (a few steps each), whose
    /// call at `failingStep` fails and is tried again at step `retryStep` (with a short output),
    /// long after its first output went back to the log: the digest of that step must read it
    /// back. A `retryStep` before `failingStep` leaves the call failed.
    static func writeRun(at path: String, steps: Int = 60, retryStep: Int = 40) throws -> RunState {
        var corpus = SyntheticCorpus(seed: 7)
        var options = LogWriter.Options()
        options.memberBound = 16 * 1024
        let clock = SteppingClock()
        return try LogWriter.withWriter(creating: path, runId: "stored-outputs", options: options) { writer in
            let recorder = RunRecorder(writer: writer, clock: { clock.now() })
            let callId = "call-\(failingStep)"
            let tool = "tool_\(failingStep % 3)"
            let failure = ToolCompleted(
                callId: callId, tool: tool, attempt: 1, status: .error,
                output: ["partial": .string(String(repeating: "rows so far; ", count: 40))], error: "timed out", isRetryable: true,
                durationUs: 5_000)
            try recorder.record(.runStarted(corpus.start(steps: steps)))
            for step in 1...steps {
                recorder.step = step
                var events = corpus.step(step)
                if step == failingStep,
                    let index = events.firstIndex(where: { if case .toolCompleted = $0.payload { true } else { false } })
                {
                    events[index].payload = .toolCompleted(failure)
                }
                if step == retryStep, retryStep > failingStep {
                    let arguments = recorder.state.calls[failingCall].arguments
                    events.insert(
                        (.toolIntended(ToolIntended(callId: callId, tool: tool, arguments: arguments, attempt: 2)), step),
                        at: events.count - 1)
                    events.insert(
                        (
                            .toolCompleted(
                                ToolCompleted(
                                    callId: callId, tool: tool, attempt: 2, status: .ok,
                                    output: ["rows": .array((0..<3).map { .string("row \($0)") })],
                                    durationUs: 7_000)), step
                        ), at: events.count - 1)
                }
                try SyntheticCorpus.record(events, with: recorder)
            }
            try recorder.record(.runStopped(corpus.stop()))
            return recorder.state
        }
    }

    /// Folds `path` with its outputs stored whatever its size (`minimumLogBytes`), checking
    /// every recorded digest on the way.
    static func foldStoring(_ path: String, minimumLogBytes: Int = 0) throws -> (state: RunState, stored: StoredOutputs, mismatches: Int) {
        var state = RunState()
        var digester = StateDigester()
        var stored = StoredOutputs(log: path, minimumLogBytes: minimumLogBytes)
        var mismatches = 0
        _ = try LogReader(path: path).forEachEvent { recorded in
            if case .stepEnded(let ended) = recorded.event.payload, digester.digest(of: state) != ended.stateDigest { mismatches += 1 }
            let change = RunState.reduce(into: &state, recorded.event)
            digester.track(change)
            stored.folded(recorded, change: change, into: &state)
        }
        return (state, stored, mismatches)
    }

    static func storedOutputs(_ state: RunState) -> [JSONText] {
        state.calls.flatMap { $0.results.compactMap(\.outputText) }.filter(\.isStored)
    }

    @Test("a fold that lets outputs go back to the log has the state, digests and snapshot of one that keeps them")
    func sameStateAsInMemory() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            let written = try Self.writeRun(at: path)
            #expect(try memberOffsets(path).count > 10)
            let (state, stored, mismatches) = try Self.foldStoring(path)
            // Every step's digest matched, the retried call's included (its first output was
            // read back for it).
            #expect(mismatches == 0)
            let held = Self.storedOutputs(state)
            #expect(held.count > 40, "outputs of the members before the last step end go back to the log")
            let store = try #require(stored.store)
            #expect(store.memberReads >= 1)
            #expect(state.calls[Self.failingCall].results.count == 2)
            #expect(state.calls[Self.failingCall].results[0].outputText?.isStored == true)
            // The same value however it is held: equality, the digest, the snapshot's JSON.
            let inMemory = RunState(folding: try LogReader(path: path).readAll().events.map(\.event))
            #expect(state == inMemory)
            #expect(state == written)
            #expect(state.digest == inMemory.digest)
            #expect(JSONWriter.encode(state.json) == JSONWriter.encode(inMemory.json))
            #expect(state.calls[Self.failingCall].results[0].output == inMemory.calls[Self.failingCall].results[0].output)
            #expect(store.failure == nil)
        }
    }

    @Test("outputs read back a member at a time: reading every output of a long fold inflates each member about once")
    func readsBackAMemberAtATime() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            _ = try Self.writeRun(at: path)
            let (state, stored, _) = try Self.foldStoring(path)
            let store = try #require(stored.store)
            let readsDuringFold = store.memberReads
            let held = Self.storedOutputs(state)
            let inMemory = RunState(folding: try LogReader(path: path).readAll().events.map(\.event))
            let expected = inMemory.calls.flatMap { $0.results.compactMap(\.outputText) }
            let all = state.calls.flatMap { $0.results.compactMap(\.outputText) }
            #expect(all.map(\.bytes) == expected.map(\.bytes))
            #expect(held.count > 40)
            // Call by call, each member is read back once, and one more time for the retried
            // first call, whose second output lies in a later member than its first.
            let memberCount = try memberOffsets(path).count
            #expect(store.memberReads - readsDuringFold <= memberCount + 1)
        }
    }

    @Test("an output whose log changed in place reads as a sentence that says so, and the store keeps the error")
    func changedLogIsReported() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            _ = try Self.writeRun(at: path)
            let (state, stored, _) = try Self.foldStoring(path)
            guard let first = state.calls[Self.failingCall].results[0].outputText, first.isStored else {
                Issue.record("the first output was not stored")
                return
            }
            // Damage every member but the first in place, after the fold read them.
            let offsets = try memberOffsets(path)
            var bytes = try readBytes(path)
            for (start, end) in zip(offsets.dropFirst(), offsets.dropFirst(2) + [bytes.count]) { bytes[(start + end) / 2] ^= 0x40 }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.seek(toOffset: 0)
            try handle.write(contentsOf: bytes)
            try handle.close()
            #expect(first.string.contains("could not be read back from \(path)"))
            let failure = try #require(stored.store?.failure)
            #expect(failure.path == path)
            #expect(failure.hint?.contains("verify the log") == true)
            #expect(failure.hint?.contains("agent-eval") == false, "library hints name no command")
        }
    }

    @Test("a log replaced since the fold is not read for its outputs")
    func replacedLogIsNotRead() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            _ = try Self.writeRun(at: path)
            let (state, stored, _) = try Self.foldStoring(path)
            // Another log of the same shape, moved over the first: same offsets, other file.
            let other = directory.path("other.jsonl.gz")
            _ = try Self.writeRun(at: other)
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.moveItem(atPath: other, toPath: path)
            let first = try #require(state.calls[Self.failingCall].results[0].outputText)
            #expect(first.string.contains("could not be read back"))
            #expect(stored.store?.failure?.message.contains("replaced or removed") == true)
        }
    }

    @Test("small logs keep their outputs in memory; short outputs are never stored")
    func thresholds() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            _ = try Self.writeRun(at: path, steps: 12, retryStep: 10)
            // Under the log size: no store, every output in memory, the same state.
            let small = try Self.foldStoring(path, minimumLogBytes: StoredOutputs.minimumLogBytes)
            #expect(small.stored.store == nil)
            #expect(Self.storedOutputs(small.state).isEmpty)
            let (state, stored, _) = try Self.foldStoring(path)
            #expect(stored.store != nil)
            #expect(state == small.state)
            let outputs = state.calls.flatMap { $0.results.compactMap(\.outputText) }
            #expect(outputs.contains { $0.isStored })
            for text in outputs where text.isStored { #expect(text.count >= StoredOutputs.minimumOutputBytes) }
            // The retry's short output stays in memory.
            let short = try #require(state.calls[Self.failingCall].results.last?.outputText)
            #expect(short.count < StoredOutputs.minimumOutputBytes)
            #expect(!short.isStored)
            // A log whose events fit its first member (the stop begins a member of its own in
            // version 3): the first member's outputs stay, so nothing of it goes back.
            let single = directory.path("single.jsonl.gz")
            _ = try Self.writeRun(at: single, steps: 2, retryStep: 0)
            #expect(try memberOffsets(single).count == 2)
            let one = try Self.foldStoring(single)
            #expect(one.state.calls.flatMap { $0.results.compactMap(\.outputText) }.allSatisfy { !$0.isStored })
        }
    }
}
