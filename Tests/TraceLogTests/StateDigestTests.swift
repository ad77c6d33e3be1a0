import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@Suite("State digests")
struct StateDigestTests {
    @Test("a long-lived digester gives the from-scratch digest after every event of every fixture", arguments: FixtureLogs.all)
    func incrementalEqualsFromScratch(_ fixture: FixtureLogs.Fixture) throws {
        let path = FixtureLogs.directory.appendingPathComponent(fixture.logFileName).path
        let events = try LogReader(path: path).readAll().events.map(\.event)
        var digester = StateDigester()
        var tracking = StateDigester()
        var state = RunState()
        var seen: Set<String> = []
        for event in events {
            RunState.reduce(into: &state, event)
            tracking.track(event, in: state)
            let digest = digester.digest(of: state)
            #expect(digest == state.digest, "after seq \(event.sequence)")
            #expect(tracking.digest(of: state) == digest, "tracking, after seq \(event.sequence)")
            seen.insert(digest)
        }
        // Every event changes the state, so every digest differs.
        #expect(seen.count == events.count)
        // Going back to an earlier state of the run, and forward again, stays right.
        for cut in [0, 3, events.count / 2, events.count] {
            let earlier = RunState(folding: events.prefix(cut))
            #expect(digester.digest(of: earlier) == earlier.digest)
        }
        #expect(digester.digest(of: state) == state.digest)
    }

    @Test("the digest changes with a field deep inside an old call")
    func sensitive() throws {
        let path = FixtureLogs.directory.appendingPathComponent("support-refund.jsonl.gz").path
        let state = RunState(folding: try LogReader(path: path).readAll().events.map(\.event))
        var edited = state
        edited.calls[0].results[0].durationUs += 1
        #expect(edited.digest != state.digest)
    }
}
