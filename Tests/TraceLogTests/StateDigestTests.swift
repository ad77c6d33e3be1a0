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
            tracking.track(RunState.reduce(into: &state, event))
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
        let path = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
        let state = RunState(folding: try LogReader(path: path).readAll().events.map(\.event))
        var edited = state
        edited.calls[0].results[0].durationUs += 1
        #expect(edited.digest != state.digest)
    }

    @Test("the counters the fold keeps equal a recount of the lists after every event of every fixture", arguments: FixtureLogs.all)
    func countersMatchRecount(_ fixture: FixtureLogs.Fixture) throws {
        let path = FixtureLogs.directory.appendingPathComponent(fixture.logFileName).path
        var state = RunState()
        for recorded in try LogReader(path: path).readAll().events {
            RunState.reduce(into: &state, recorded.event)
            var recount = RunCounters()
            recount.invalidDecisions = state.decisions.count { if case .invalid = $0.outcome { true } else { false } }
            recount.executedCalls = state.calls.count { $0.attempts > 0 }
            recount.deniedCalls = state.calls.count { $0.verdict?.verdict == .deny || $0.approval?.isGranted == false }
            recount.callsAwaitingApproval = state.calls.count { $0.verdict?.verdict == .approvalRequired && $0.approval == nil }
            recount.failedAttempts = state.calls.reduce(0) { $0 + $1.results.count { $0.status != .ok } }
            recount.failedCalls = state.calls.count { $0.attempts > 0 && $0.results.last?.status != .ok }
            #expect(state.counters == recount, "\(fixture) after seq \(recorded.event.sequence)")
        }
    }

    @Test(
        "the digest covers every member of the state's JSON: it equals the view written from that JSON by the spec's rule",
        arguments: FixtureLogs.all)
    func coversEveryMember(_ fixture: FixtureLogs.Fixture) throws {
        let path = FixtureLogs.directory.appendingPathComponent(fixture.logFileName).path
        let events = try LogReader(path: path).readAll().events.map(\.event)
        for cut in [1, events.count / 2, events.count] {
            let state = RunState(folding: events.prefix(cut))
            guard case .object(let members) = state.json else {
                Issue.record("the state's JSON is not an object")
                return
            }
            // docs/log-format.md: lists become {count, chain}, the start its sha256, the rest as is.
            var view: [(String, JSONValue)] = []
            for member in members {
                switch (member.key, member.value) {
                case ("start", let start):
                    view.append((member.key, .string(ContentHash.sha256(JSONWriter.encode(start)))))
                case (_, .array(let elements)):
                    var chain = String(repeating: "0", count: 64)
                    for element in elements {
                        chain = ContentHash.sha256Hex(Array((chain + "\n").utf8) + JSONWriter.encode(element))
                    }
                    view.append((member.key, ["count": .int(elements.count), "chain": .string(chain)]))
                default:
                    view.append((member.key, member.value))
                }
            }
            #expect(state.digest == ContentHash.sha256(JSONWriter.encode(.object(JSONObject(view)))), "\(fixture) after \(cut) events")
            var digester = StateDigester()
            #expect(digester.view(of: state) == .object(JSONObject(view)))
        }
    }

    @Test("members a newer writer adds to event data are outside the state and its digest")
    func newerMembersIgnored() throws {
        let path = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
        let lines = try LogReader(path: path).readAll().events.prefix(3)
        var plain = RunState()
        var extended = RunState()
        for recorded in lines {
            RunState.reduce(into: &plain, recorded.event)
            var text = String(decoding: recorded.event.encodedLine(), as: UTF8.self)
            text = text.replacingOccurrences(of: #""data":{"#, with: #""data":{"added_by_a_newer_writer":[1,2.0],"#)
            RunState.reduce(into: &extended, try Event(line: Array(text.utf8)))
        }
        #expect(extended == plain)
        #expect(extended.digest == plain.digest)
    }
}
