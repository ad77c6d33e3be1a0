import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Catalog

/// The catalog's index makes a log's facts in the read it makes anyway, so a log indexed when its
/// run closed it is not read again to be graded.
@Suite("A freshly written log is folded once")
struct FoldOnceTests {
    static var root: URL { ExampleRuns.fixtures.deletingLastPathComponent() }

    /// Every log of the fixtures that a check can read: the example runs, the samples (torn ones
    /// among them) and the conformance kit's valid logs.
    static func fixtureLogs() throws -> [String] {
        var logs: [String] = []
        for folder in ["Fixtures/runs", "Fixtures/samples", "Fixtures/conformance"] {
            let path = root.appendingPathComponent(folder).path
            for name in try FileManager.default.contentsOfDirectory(atPath: path).sorted() where name.hasSuffix(".jsonl.gz") {
                if folder.hasSuffix("conformance") && !name.hasPrefix("valid") { continue }
                logs.append(path + "/" + name)
            }
        }
        return logs
    }

    @Test("the facts the index keeps are, byte for byte, the facts a read of the log makes: state, tear, digest check, members")
    func indexedFactsEqualRead() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let logs = try Self.fixtureLogs()
            #expect(logs.count >= 8)
            var compared = 0
            for fixture in logs {
                // A copy: the catalog keys by path, and the fixtures stay untouched.
                let log = directory.path((fixture as NSString).lastPathComponent)
                try FileManager.default.copyItem(atPath: fixture, toPath: log)
                guard let read = try? LogFacts.read(log, storesOutputs: false) else { continue }
                let indexed = try catalog.index(log: log, keepsFacts: true)
                let stamp = try #require(FileStamp(path: log))
                let kept = try #require(
                    try FactCache(catalog: catalog).cached(Catalog.absolute(log), stamp: stamp), "\(fixture): \(indexed)")
                #expect(kept.cachedBytes == read.cachedBytes, "\(fixture)")
                #expect(kept.digestMismatch == read.digestMismatch && kept.tear == read.tear, "\(fixture)")
                compared += 1
            }
            #expect(compared >= 8, "the torn samples and the valid conformance logs are compared too")
            // An index over many logs (`agent-eval index`) keeps no facts: a log a suite checks
            // later is read then, once.
            let other = directory.path("bulk.jsonl.gz")
            try FileManager.default.copyItem(atPath: try #require(logs.first), toPath: other)
            _ = try catalog.index(paths: [other])
            let stamp = try #require(FileStamp(path: other))
            #expect(try FactCache(catalog: catalog).cached(Catalog.absolute(other), stamp: stamp) == nil)
        }
    }

    @Test("a torn log (a run still being written, or cut) has its facts made by the index too, tear and all")
    func tornLogFactsFromTheIndex() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let log = directory.path("torn.jsonl.gz")
            let torn = Self.root.appendingPathComponent("Fixtures/samples/research-sample-torn.jsonl.gz").path
            try FileManager.default.copyItem(atPath: torn, toPath: log)
            _ = try catalog.index(log: log, keepsFacts: true)
            let cache = FactCache(catalog: catalog)
            _ = try cache.facts(for: log)
            #expect(cache.usage == (cached: 1, read: 0), "the torn log's facts were made by the index")
        }
    }

    @Test("a live case graded with the catalog: its log is indexed when the run closes it, and graded from the facts that read made")
    func liveRunGradedFromTheIndexRead() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let (cases, errors) = EvalSuite.load(paths: [Self.root.appendingPathComponent("EvalCases/support/refund-live.yaml").path])
            #expect(errors.isEmpty)
            var options = EvalOptions(jobs: 1, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "r"))
            let cache = FactCache(catalog: catalog)
            options.facts = cache
            options.finishedLogs = IndexingSink(
                catalog: catalog, keepsFacts: true, failed: { log, error in Issue.record("\(log): \(error)") })
            let results = await EvalRunner(options: options).run(cases)
            #expect(results.first?.passed == true, "\(results.first.map { "\($0.runs.map(\.failures))" } ?? "")")
            #expect(cache.usage.read == 0, "the live log was not read again to be graded")
            #expect(cache.usage.cached == 1)
            let indexed = try catalog.query("SELECT COUNT(*) FROM logs").rows.first?[0].description
            #expect(indexed == "1")
        }
    }
}
