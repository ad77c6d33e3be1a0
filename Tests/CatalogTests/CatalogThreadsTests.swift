import Foundation
import TestSupport
import Testing

@testable import Catalog
@testable import TraceLog

/// Async code never waits for the catalog on the cooperative pool (docs/architecture.md,
/// "Blocking work").
@Suite("The catalog's work is done on its own threads")
struct CatalogThreadsTests {
    @Test("opening and asking the catalog from async code runs on the catalog's threads, and its errors come back as they were")
    func workRunsOnTheCatalogThreads() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try await Catalog.opening(path: directory.path("catalog.sqlite"))
            // The name Foundation gives and the one the system keeps (a thread that started
            // before Foundation noted it kept its maker's, a Dispatch worker's, now and then).
            let names = try await catalog.work { _ in
                let system = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                return [Thread.current.name ?? "", system.trimmingCharacters(in: .newlines)]
            }
            let expected = WorkerThreads<Int>.threadName("agent-eval catalog")
            #expect(names[0] == expected && expected.hasPrefix("agent-eval"), "\(names)")
            #if os(Linux)
                #expect(names[1] == expected, "\(names)")
            #endif
            let refused: CatalogError? = await {
                do throws(CatalogError) {
                    _ = try await catalog.work { catalog throws(CatalogError) in try catalog.query("DELETE FROM logs") }
                    return nil
                } catch {
                    return error
                }
            }()
            #expect(refused?.code == .readOnly, "\(String(describing: refused))")
            let sink = IndexingSink(catalog: catalog) { log, error in Issue.record("\(log): \(error)") }
            let log = directory.path("run.jsonl.gz")
            try writeSyntheticRun(to: log, steps: 3, seed: 1)
            await sink.logsFinished([log])
            #expect(try catalog.query("SELECT COUNT(*) FROM logs").rows.first?[0] == .integer(1))
        }
    }
}
