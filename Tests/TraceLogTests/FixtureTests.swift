import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@Suite("Fixture logs", .serialized)
struct FixtureTests {
    @Test("each fixture is exactly what the current code writes", arguments: FixtureLogs.all)
    func fixtureIsReproducible(fixture: FixtureLogs.Fixture) throws {
        let committed = FixtureLogs.directory.appendingPathComponent(fixture.logFileName)
        if FixtureLogs.isUpdating {
            try FileManager.default.createDirectory(at: FixtureLogs.directory, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(at: committed)
            try fixture.write(committed.path)
        }
        try TemporaryDirectory.with { directory in
            let fresh = directory.path(fixture.logFileName)
            try fixture.write(fresh)
            #expect(
                try readBytes(fresh) == readBytes(committed.path), "rewrite with AGENT_EVAL_UPDATE_FIXTURES=1 if the change is intended")
        }
    }

    @Test("each fixture folds to its expected state, and every recorded digest matches", arguments: FixtureLogs.all)
    func fixtureState(fixture: FixtureLogs.Fixture) throws {
        let log = FixtureLogs.directory.appendingPathComponent(fixture.logFileName).path
        let expectedURL = FixtureLogs.directory.appendingPathComponent(fixture.stateFileName)
        var state = RunState()
        var digestsChecked = 0
        let summary = try LogReader(path: log).forEachEvent { recorded in
            if case .stepEnded(let ended) = recorded.event.payload {
                #expect(ended.stateDigest == state.digest, "seq \(recorded.event.sequence)")
                digestsChecked += 1
            }
            RunState.reduce(into: &state, recorded.event)
        }
        #expect(digestsChecked >= 3)
        #expect(state.anomalies.isEmpty, "\(state.anomalies)")
        #expect((summary.tear != nil) == fixture.name.contains("-torn"))
        let rendered = JSONWriter.encodePretty(state.json)
        if FixtureLogs.isUpdating { try rendered.write(to: expectedURL, atomically: true, encoding: .utf8) }
        let expected = try String(contentsOf: expectedURL, encoding: .utf8)
        #expect(rendered == expected)
    }
}
