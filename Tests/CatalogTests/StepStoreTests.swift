import AgentRuntime
import Foundation
import Replay
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Catalog

@Suite("Step tables in the catalog")
struct StepStoreTests {
    @Test("index makes no step table; the first replay of a log makes one equal to a full replay's and keeps it; the next reads it")
    func replayKeepsStepTables() throws {
        try TemporaryDirectory.with { directory in
            let logs = try copyFixtureLogs(into: directory)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            _ = try catalog.index(paths: logs, jobs: 2)
            #expect(try catalog.read { db in try db.value("SELECT COUNT(*) FROM step_logs", as: Int.self) } == 0)
            let store = CatalogStepStore(catalog: catalog)
            for log in logs {
                let expected = try StepTable.build(log: log)
                #expect(try StepIndex.open(log: log, store: store).rebuilt, "\(log): the first replay makes the table")
                let (index, rebuilt) = try StepIndex.open(log: log, store: store)
                #expect(!rebuilt, "\(log): the kept table was used")
                #expect(index.runId == expected.runId)
                #expect(index.digestsChecked == expected.digestsChecked && index.digestMismatches == expected.digestMismatches)
                #expect((0..<index.stepCount).compactMap { index.record(at: $0) } == expected.records, "\(log)")
                for (position, record) in expected.records.enumerated() {
                    #expect(index.position(ofStep: record.step) == expected.position(ofStep: record.step))
                    #expect(try index.replayStep(record.step)?.after == record.after)
                    let next = expected.problem(after: position).map { expected.records[$0].step }
                    #expect(index.nextProblem(after: record.step) == next)
                }
            }
        }
    }

    @Test("a step's packet comes whole through the catalog's table too, when its base is members back (versions 1 and 3)")
    func deltaPacketsThroughTheCatalog() throws {
        try TemporaryDirectory.with { directory in
            for version in [1, 3] {
                let log = directory.path("growing-\(version).jsonl.gz")
                let packets = try SampleRun.writeGrowingRun(
                    to: log, steps: 60, options: LogWriter.Options(memberBound: 2048, formatVersion: version))
                let catalog = try Catalog(path: directory.path("catalog-\(version).sqlite"))
                _ = try StepIndex.open(log: log, store: CatalogStepStore(catalog: catalog))
                let (index, rebuilt) = try StepIndex.open(log: log, store: CatalogStepStore(catalog: catalog))
                #expect(!rebuilt, "the kept table is used")
                for position in 0..<index.stepCount {
                    let record = try #require(index.record(at: position))
                    for recorded in try #require(try index.replayStep(record.step)).events {
                        guard case .contextBuilt(let packet) = recorded.event.payload else { continue }
                        #expect(packet.delta == nil, "version \(version), step \(record.step)")
                        #expect(packet == packets[record.step - 1], "version \(version), step \(record.step)")
                    }
                }
            }
        }
    }

    @Test("a log longer than index holds whole (its settled calls written out) gets its table from the first replay")
    func longLogs() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("long.jsonl.gz")
            try writeSyntheticRun(to: log, steps: 700)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let indexed = try catalog.index(log: log)
            #expect(indexed.status == .intact)
            let store = CatalogStepStore(catalog: catalog)
            let (index, rebuilt) = try StepIndex.open(log: log, store: store)
            #expect(rebuilt, "the first replay makes the table")
            #expect((0..<index.stepCount).compactMap { index.record(at: $0) } == (try StepTable.build(log: log)).records)
            #expect(try StepIndex.open(log: log, store: store).rebuilt == false)
        }
    }

    @Test("replay makes and keeps a table the catalog lacks; a log that changed, or a table of another format, is made again")
    func staleTables() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("run.jsonl.gz")
            let agent = try AgentFile.load(path: ExampleRuns.agentPath("support"))
            let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "r"))
            _ = try await runtime.run(goal: "Order A-1042 arrived broken.", log: log)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let store = CatalogStepStore(catalog: catalog)
            let (first, made) = try StepIndex.open(log: log, store: store)
            #expect(made)
            #expect(try StepIndex.open(log: log, store: store).rebuilt == false)

            // The run resumed: the log grew, its kept table no longer fits.
            _ = try await runtime.resume(log: log, approvals: [ApprovalRecorded(callId: "call-3", isGranted: true)])
            let (second, rebuilt) = try StepIndex.open(log: log, store: store)
            #expect(rebuilt)
            #expect(second.stepCount > first.stepCount)
            #expect(try StepIndex.open(log: log, store: store).rebuilt == false)

            // index drops the table of a log that changed since it last read it; here it reads
            // the log for the first time, and a table that fits the file stays.
            _ = try catalog.index(log: log)
            #expect(try StepIndex.open(log: log, store: store).rebuilt == false)
            try catalog.write { db in try db.execute("UPDATE step_logs SET format = format + 1") }
            #expect(try StepIndex.open(log: log, store: store).rebuilt, "a table of another format is not read")
            #expect(try StepIndex.open(log: log, store: store).rebuilt == false)
            let rows = try catalog.read { db in try db.value("SELECT COUNT(*) FROM steps", as: Int.self) ?? 0 }
            #expect(rows == second.stepCount, "the table made again replaced the old one")
        }
    }

    @Test("a catalog that cannot be written leaves replay working from a table made in memory")
    func readOnlyCatalog() throws {
        try TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            let path = directory.path("catalog.sqlite")
            _ = try Catalog(path: path)
            let store = CatalogStepStore(catalog: try Catalog(path: path, readOnly: true))
            let (index, rebuilt) = try StepIndex.open(log: log, store: store)
            #expect(rebuilt)
            #expect(index.stepCount == (try StepTable.build(log: log)).records.count)
            #expect(try StepIndex.open(log: log, store: store).rebuilt, "nothing was kept")
        }
    }
}
