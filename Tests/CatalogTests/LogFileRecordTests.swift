import EvalEngine
import Foundation
import Replay
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Catalog

/// One record per log file (catalog schema 13): the run's row, the fact cache's entry and the
/// step table refer to the file's record in `log_files` and keep the generation they were made at.
@Suite("One record per log file")
struct LogFileRecordTests {
    /// What refers to the record of `path`, by table: the generation each was made at.
    static func references(_ catalog: Catalog, _ path: String) throws -> [String: Int] {
        var found: [String: Int] = [:]
        for table in ["logs", "facts", "step_logs"] {
            let rows = try catalog.query(
                "SELECT x.generation FROM \(table) x JOIN log_files f ON f.file_id = x.file_id WHERE f.path = ?",
                arguments: [.text(path)]
            ).rows
            if let generation = rows.first?.first?.int { found[table] = generation }
        }
        return found
    }

    static func record(_ catalog: Catalog, _ path: String) throws -> [CatalogValue] {
        try catalog.query(
            "SELECT generation, size, mtime_ns FROM log_files WHERE path = ?", arguments: [.text(path)]
        ).rows.first ?? []
    }

    @Test(
        "the run's row, the facts and the step table share the file's one record; a new stamp on the same bytes is one update of it",
        arguments: CatalogStoreKind.allCases)
    func oneRecord(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let log = directory.path("a.jsonl.gz")
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path, toPath: log)
            let catalog = try Catalog(path: location)
            defer { try? catalog.close() }
            _ = try catalog.index(log: log)
            let cache = FactCache(catalog: catalog)
            _ = try cache.facts(for: log)
            cache.flush()
            #expect(try StepIndex.open(log: log, store: CatalogStepStore(catalog: catalog)).rebuilt)
            #expect(try catalog.query("SELECT COUNT(*) FROM log_files").rows == [[.integer(1)]])
            #expect(try Self.references(catalog, log) == ["logs": 1, "facts": 1, "step_logs": 1])

            // A checkout's new modification time: the record takes it; nothing else is written,
            // and everything made from the file still holds.
            let later = Date().addingTimeInterval(3600)
            try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: log)
            let stamp = try #require(FileStamp(path: log))
            let touched = try catalog.index(log: log)
            #expect(touched.change == .unchanged && touched.eventsRead == 0)
            #expect(try Self.record(catalog, log) == [.integer(1), .integer(Int64(stamp.size)), .integer(Int64(stamp.mtimeNs))])
            #expect(try Self.references(catalog, log) == ["logs": 1, "facts": 1, "step_logs": 1])
            let again = FactCache(catalog: catalog)
            #expect(try again.facts(for: log) == (try LogFacts.read(log)))
            #expect(again.usage == (1, 0))
            #expect(try !StepIndex.open(log: log, store: CatalogStepStore(catalog: catalog)).rebuilt)
            #expect(try catalog.check().stale.isEmpty)
        }
    }

    @Test(
        "a reader that finds other bytes starts a new generation: what was made from the old bytes stops holding at once",
        arguments: CatalogStoreKind.allCases)
    func newGeneration(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let log = directory.path("a.jsonl.gz")
            let growing = try GrowingLog(at: log, seed: 7, steps: 20)
            try growing.record(0..<60)
            let catalog = try Catalog(path: location)
            defer { try? catalog.close() }
            #expect(try catalog.index(log: log).status == .torn)
            #expect(try StepIndex.open(log: log, store: CatalogStepStore(catalog: catalog)).rebuilt)
            #expect(try Self.references(catalog, log) == ["logs": 1, "step_logs": 1])
            let tornStamp = try #require(FileStamp(path: log))
            let early = (
                identity: try #require(try LogFacts.read(log).identity(log, stamp: tornStamp)),
                hash: try #require(LogFingerprint.contentHash(log, length: tornStamp.size))
            )

            // The run goes on; the fact cache is the first to read the grown log. Its facts are
            // of generation 2, and the step table of generation 1 is gone with the old bytes.
            try growing.finish(from: 60)
            let cache = FactCache(catalog: catalog)
            let facts = try cache.facts(for: log)
            #expect(cache.usage == (0, 1))
            cache.flush()
            #expect(try Self.references(catalog, log) == ["logs": 1, "facts": 2])
            #expect(try catalog.query("SELECT COUNT(*) FROM steps").rows == [[.integer(0)]])
            // The run's row was made from the older bytes: stale, and read again from its start
            // (its resume point is of the older generation), to the rows of a fresh read.
            #expect(try catalog.check().stale.map(\.reason) == [.changed])
            let reread = try catalog.index(log: log)
            #expect(reread.change == .reindexed && reread.status == .intact)
            #expect(try Self.references(catalog, log) == ["logs": 2, "facts": 2])
            let fresh = try Catalog(path: directory.path("fresh.sqlite"))
            _ = try fresh.index(log: log)
            #expect(try rows(catalog, "logs") == rows(fresh, "logs"))
            #expect(try rows(catalog, "calls") == rows(fresh, "calls"))
            // The facts the cache wrote still hold: the index found the bytes they were read from.
            let again = FactCache(catalog: catalog)
            #expect(try again.facts(for: log) == facts)
            #expect(again.usage == (1, 0))

            // An entry read from the older bytes, written only now (a batch waits before it is
            // written), does not replace the newer record or its facts.
            try catalog.write { db in
                try FactCache.write(FactCache.Entry(path: log, identity: early.identity, blob: [1], contentHash: early.hash), in: db)
            }
            #expect(try Self.record(catalog, log).first == .integer(2))
            #expect(try Self.references(catalog, log) == ["logs": 2, "facts": 2])
            let last = FactCache(catalog: catalog)
            #expect(try last.facts(for: log) == facts)
            #expect(last.usage == (1, 0))
        }
    }

    @Test("a step table made after a checkout's new stamp, before index saw it, keeps the generation: the run's row and facts still hold")
    func stepTableAfterACheckout() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("a.jsonl.gz")
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path, toPath: log)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            _ = try catalog.index(log: log)
            let cache = FactCache(catalog: catalog)
            _ = try cache.facts(for: log)
            cache.flush()
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(3600)], ofItemAtPath: log)
            #expect(try StepIndex.open(log: log, store: CatalogStepStore(catalog: catalog)).rebuilt)
            #expect(try Self.references(catalog, log) == ["logs": 1, "facts": 1, "step_logs": 1])
            let stamp = try #require(FileStamp(path: log))
            #expect(try Self.record(catalog, log) == [.integer(1), .integer(Int64(stamp.size)), .integer(Int64(stamp.mtimeNs))])
            #expect(try catalog.index(log: log).change == .unchanged)
        }
    }

    @Test("push leaves the target's row alone for a source row of an older generation, and stays idempotent")
    func pushOfAnOlderRow() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("a.jsonl.gz")
            let growing = try GrowingLog(at: log, seed: 3, steps: 10)
            try growing.record(0..<30)
            let source = try Catalog(path: directory.path("source.sqlite"))
            let target = try Catalog(path: directory.path("target.sqlite"))
            _ = try source.index(log: log)
            #expect(try source.push(to: target).logs == 1)
            // The run goes on; on the source, the fact cache reads it first: its row is now of
            // an older generation than the file's record.
            try growing.finish(from: 30)
            let cache = FactCache(catalog: source)
            _ = try cache.facts(for: log)
            cache.flush()
            #expect(try Self.references(source, log) == ["logs": 1, "facts": 2])
            let before = try rows(target, "logs")
            for _ in 0..<2 {
                let pushed = try source.push(to: target)
                #expect(pushed.logs == 0 && pushed.logsKnown == 1)
            }
            #expect(try rows(target, "logs") == before)
        }
    }

    @Test(
        "a catalog of schema 12 with rows is migrated to one record per file: identities, facts and results carried, nothing read again",
        arguments: CatalogStoreKind.allCases)
    func migratesVersion12(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            // Two logs: `a` as `index` left it, `b` as version 12 left every run's row (marked to
            // be read again, size -1) with the fact cache's entry made since.
            let (a, b) = (directory.path("a.jsonl.gz"), directory.path("b.jsonl.gz"))
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path, toPath: a)
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("research-sample.jsonl.gz").path, toPath: b)
            // The rows a version 12 catalog held for them: made by this build in a scratch
            // catalog, then laid out as version 12 had them (the identity in each table).
            let scratch = try Catalog(path: directory.path("scratch.sqlite"))
            let cache = FactCache(catalog: scratch)
            for log in [a, b] {
                _ = try scratch.index(log: log)
                _ = try cache.facts(for: log)
            }
            cache.flush()
            let runs = try scratch.query(
                """
                SELECT l.path, f.size, f.mtime_ns, f.tail_offset, f.tail_end, f.tail_hash, l.status, l.run_id, l.events, l.steps,
                    l.tool_calls, f.content_hash, x.extractor_version, x.facts
                FROM logs l JOIN log_files f ON f.file_id = l.file_id JOIN facts x ON x.file_id = f.file_id ORDER BY l.path
                """
            ).rows
            try #require(runs.count == 2)
            func literal(_ value: CatalogValue) -> String {
                switch value {
                case .text(let text): return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
                case .blob(let bytes):
                    let hex = bytes.map { String(format: "%02x", $0) }.joined()
                    return store == .sqlite ? "X'\(hex)'" : "'\\x\(hex)'::bytea"
                default: return value.description
                }
            }
            var rows = ""
            for (number, run) in runs.enumerated() {
                let v = run.map(literal)
                let (size, hash) = number == 0 ? (v[1], v[11]) : ("-1", "NULL")
                rows += """
                    INSERT INTO logs (log_id, path, size, mtime_ns, tail_offset, tail_end, tail_hash, status, run_id, events, steps,
                        decisions, invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens,
                        cost_usd, anomalies, indexed_at_us, content_hash)
                    VALUES (\(7 + number), \(v[0]), \(size), \(v[2]), \(v[3]), \(v[4]), \(v[5]), \(v[6]), \(v[7]), \(v[8]), \(v[9]), 0, 0,
                        \(v[10]), 0, 0, 0, 0, 0, 0, 0, 0, \(hash));
                    INSERT INTO facts (path, extractor_version, size, mtime_ns, tail_offset, tail_end, tail_hash, facts, content_hash)
                    VALUES (\(v[0]), \(v[12]), \(v[1]), \(v[2]), \(v[3]), \(v[4]), \(v[5]), \(v[13]), \(v[11]));
                    INSERT INTO check_results (path, case_key, result) VALUES (\(v[0]), 'sha256:key', '{}');
                    INSERT INTO step_logs (path, format, size, mtime_ns, tail_offset, tail_end, tail_hash, run_id, steps, digests_checked,
                        digest_mismatches)
                    VALUES (\(v[0]), 1, \(v[1]), \(v[2]), \(v[3]), \(v[4]), \(v[5]), \(v[7]), 0, 0, 0);

                    """
            }
            try scratch.close()
            try await store.makeCatalog(at: location, version: 12, rows: rows)

            let catalog = try Catalog(path: location)
            defer { try? catalog.close() }
            // `a`'s record is its row's identity; `b`'s the facts' (its row said only "read me
            // again"), a generation on, so the row is read again and the facts kept.
            #expect(
                try catalog.query("SELECT path, generation, size, tail_hash, content_hash FROM log_files ORDER BY path").rows
                    == [
                        [runs[0][0], .integer(1), runs[0][1], runs[0][5], runs[0][11]],
                        [runs[1][0], .integer(2), runs[1][1], runs[1][5], runs[1][11]],
                    ])
            #expect(try Self.references(catalog, a) == ["logs": 1, "facts": 1])
            #expect(try Self.references(catalog, b) == ["logs": 1, "facts": 2])
            #expect(
                try catalog.query("SELECT generation, result FROM check_results ORDER BY generation").rows == [
                    [.integer(1), .text("{}")], [.integer(2), .text("{}")],
                ])
            #expect(try catalog.query("SELECT COUNT(*) FROM step_logs").rows == [[.integer(0)]])
            // `a`'s identity came along: it is not read again. `b` is, once.
            let indexed = try catalog.index(paths: [a, b])
            #expect(indexed.logs.map(\.change) == [.unchanged, .reindexed])
            #expect(try Self.references(catalog, b) == ["logs": 2, "facts": 2])
            // Both logs' facts are the cache's.
            let facts = FactCache(catalog: catalog)
            for log in [a, b] { #expect(try facts.facts(for: log) == (try LogFacts.read(log))) }
            #expect(facts.usage == (2, 0))
            #expect(
                try catalog.runs(RunQuery()).map(\.contentHash).sorted { ($0 ?? "") < ($1 ?? "") }
                    == runs.map { $0[11].description }.sorted())
        }
    }
}
