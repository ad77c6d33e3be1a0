import Catalog
import EvalEngine
import Foundation
import ModelClients
import TestSupport
import Testing
import TraceCore
import Workflows

/// `agent-eval run`'s job as a library: what the command only prints.
@Suite("A suite run end to end: history, report files, baseline")
struct SuiteRunTests {
    static var bundled: String { ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("EvalCases").path }

    func request(_ directory: TemporaryDirectory) -> SuiteRun.Request {
        SuiteRun.Request(
            paths: [Self.bundled],
            options: EvalOptions(jobs: 2, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "r")))
    }

    @Test("the bundled cases pass; the suite run is recorded in the catalog, the report files and the baseline are written")
    func recordsAndWrites() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            var request = request(directory)
            (request.jsonOut, request.junit, request.markdown) = (directory.path("r.json"), directory.path("r.xml"), directory.path("r.md"))
            (request.baseline, request.updatesBaseline) = (directory.path("baseline"), true)
            request.flakyHistory = true
            var notices: [String] = []
            let suite = try await SuiteRun(request, catalog: catalog, exporter: nil, shelf: CassetteShelf()) { notices.append($0) }
            #expect(suite.session.cases.count >= 10)
            let report = await suite.runCases { _ in }
            let outcome = await suite.finish(
                report, interruptedBy: nil, notice: { notices.append($0) }, warning: { notices.append("\($0)") })
            #expect(outcome.writeFailure == nil)
            #expect(outcome.report.exitStatus == 0, "\(outcome.report.summaryLine)")
            #expect(notices.isEmpty, "\(notices)")
            for file in ["r.json", "r.xml", "r.md"] { #expect(FileManager.default.fileExists(atPath: directory.path(file)), "\(file)") }
            let written = try #require(outcome.baselineWritten)
            #expect(written.directory == directory.path("baseline") && written.update.written.count == suite.session.cases.count)
            let suiteRuns = try catalog.query("SELECT COUNT(*) FROM suite_runs").rows.first?[0].description
            #expect(suiteRuns == "1")
            #expect(outcome.history.flaky?.isEmpty == true, "--history with one clean run: nothing flaky, and it is said")
            #expect(outcome.json["flaky_in_history"] == [], "the history is added to the report")

            // The next run compares with that baseline (its live runs write new logs elsewhere).
            var again = self.request(directory)
            again.options.outputDirectory = directory.path("runs-2")
            again.baseline = directory.path("baseline")
            again.failOn = .regression
            let second = try await SuiteRun(again, catalog: nil, exporter: nil, shelf: CassetteShelf()) { _ in }
            #expect(second.session.hasBaseline)
            let secondReport = await second.runCases { _ in }
            #expect(secondReport.exitStatus == 0, "\(secondReport.summaryLine)")
            #expect(secondReport.hasBaseline)
        }
    }

    @Test("an interrupted run writes no baseline, and says why; its reports are still written")
    func interruptedWritesNoBaseline() async throws {
        try await TemporaryDirectory.with { directory in
            var request = request(directory)
            request.filters = ["support-*"]
            (request.baseline, request.updatesBaseline, request.jsonOut) = (directory.path("baseline"), true, directory.path("r.json"))
            let suite = try await SuiteRun(request, catalog: nil, exporter: nil, shelf: CassetteShelf()) { _ in }
            let report = await suite.runCases { _ in }
            let outcome = await suite.finish(report, interruptedBy: 2, notice: { _ in }, warning: { _ in })
            #expect(outcome.baselineRefusal == .interrupted && outcome.baselineWritten == nil)
            #expect(!FileManager.default.fileExists(atPath: directory.path("baseline")))
            #expect(outcome.report.interruptedBy == 2)
            #expect(FileManager.default.fileExists(atPath: directory.path("r.json")))
        }
    }

    @Test("before anything runs: a missing baseline directory, a branch with no suite run, no catalog, --record without a cassette")
    func refusesBeforeRunning() async throws {
        try await TemporaryDirectory.with { directory in
            func code(_ request: SuiteRun.Request, catalog: Catalog? = nil) async -> EvalError.Code? {
                do {
                    _ = try await SuiteRun(request, catalog: catalog, exporter: nil, shelf: CassetteShelf()) { _ in }
                    return nil
                } catch let error as EvalError {
                    return error.code
                } catch {
                    return nil
                }
            }
            var missing = request(directory)
            missing.baseline = directory.path("nowhere")
            #expect(await code(missing) == .missingBaseline)
            var branch = request(directory)
            branch.baselineBranch = "main"
            #expect(await code(branch) == .noCatalog)
            let empty = try Catalog(path: directory.path("catalog.sqlite"))
            #expect(await code(branch, catalog: empty) == .noBaseRun)
            var recording = request(directory)
            recording.recordMode = .all
            #expect(await code(recording) == .recordNeedsCassette)
            #expect(!FileManager.default.fileExists(atPath: directory.path("runs")), "nothing ran")
        }
    }
}
