import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Catalog

/// Every log under Fixtures/ (samples and the bundled runs), copied into `directory`.
func copyFixtureLogs(into directory: TemporaryDirectory) throws -> [String] {
    let root = FixtureLogs.directory.deletingLastPathComponent()
    var copies: [String] = []
    for folder in ["samples", "runs"] {
        let source = root.appendingPathComponent(folder)
        for name in try FileManager.default.contentsOfDirectory(atPath: source.path).sorted() where name.hasSuffix(".jsonl.gz") {
            let copy = directory.path(name)
            try FileManager.default.copyItem(atPath: source.appendingPathComponent(name).path, toPath: copy)
            copies.append(copy)
        }
    }
    return copies
}

/// Writes a synthetic run of `steps` steps to `path`, in small members; stops after
/// `events` events (flushed, the member left open: a run still being written) when given.
/// The seed is `100 + index` unless given.
/// The seed is `100 + index` unless given.
@discardableResult
func writeSyntheticRun(
    to path: String, steps: Int, index: Int = 0, seed: UInt64? = nil, stopAfter events: Int? = nil, memberBound: Int = 4096,
    formatVersion: Int = Event.memberChainVersion
) throws -> LogWriter {
    var corpus = SyntheticCorpus(seed: seed ?? UInt64(100 + index))
    var run = corpus.run(index: index, steps: steps)
    if let events { run.events = Array(run.events.prefix(events)) }
    let writer = try LogWriter.create(at: path, runId: run.runId, options: .init(memberBound: memberBound, formatVersion: formatVersion))
    try SyntheticCorpus.record(run, into: writer, clock: SteppingClock())
    if events == nil { try writer.close() } else { try writer.flush(sync: true) }
    return writer
}

/// A synthetic run written a part at a time, as a run still going is: each part is flushed
/// (the member left open) and the rest recorded later, closing the log at the end.
struct GrowingLog {
    let run: SyntheticCorpus.Run
    let writer: LogWriter
    let recorder: RunRecorder

    /// `adjust` may change the run before any of it is written.
    init(at path: String, seed: UInt64, steps: Int, adjust: (inout SyntheticCorpus.Run) -> Void = { _ in }) throws {
        var corpus = SyntheticCorpus(seed: seed)
        var run = corpus.run(index: 0, steps: steps)
        adjust(&run)
        self.run = run
        writer = try LogWriter.create(at: path, runId: run.runId, options: .init(memberBound: 4096))
        let clock = SteppingClock()
        recorder = RunRecorder(writer: writer, clock: { clock.now() })
    }

    /// Records events `range` and flushes them.
    func record(_ range: Range<Int>) throws {
        try SyntheticCorpus.record(run.events[range], with: recorder)
        try writer.flush(sync: true)
    }

    /// Records the events from `start` on and closes the log.
    func finish(from start: Int) throws {
        try SyntheticCorpus.record(run.events.dropFirst(start), with: recorder)
        try writer.close()
    }
}

/// Each run's set of tools as the catalog keeps it (path, then the set's text), checked against
/// the set its calls rows show: `deriveToolSets` makes that one from the calls, and must find
/// nothing to change.
func expectToolSetsFollowCalls(_ catalog: Catalog, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws {
    let sql = "SELECT l.path, s.tools FROM logs l LEFT JOIN tool_sets s ON s.set_id = l.tool_set ORDER BY l.path"
    let kept = try catalog.query(sql).rows
    try catalog.deriveToolSets()
    #expect(try catalog.query(sql).rows == kept, sourceLocation: sourceLocation)
    #expect(!kept.contains { $0[1] == .null }, "a run without a set of tools", sourceLocation: sourceLocation)
}

/// Every row of `table` without the columns that say when it was written.
/// The rows of `table`, ordered, without the columns that differ between two catalogs of the
/// same logs (row ids, times, and generations: how often a catalog saw a file change). `logs`
/// comes with the identity of its file's record (`log_files`), as what the row was read from.
func rows(
    _ catalog: Catalog, _ table: String, except: Set<String> = ["indexed_at_us", "log_id", "file_id", "generation", "tool_set"]
) throws -> [[String]] {
    // A run's set of tools by its tools: the ids are each catalog's own.
    let source =
        table == "logs"
        ? "(SELECT l.*, f.size, f.mtime_ns, f.tail_offset, f.tail_end, f.tail_hash, f.content_hash, s.tools AS tool_set_tools "
            + "FROM logs l LEFT JOIN log_files f ON f.file_id = l.file_id AND f.generation = l.generation "
            + "LEFT JOIN tool_sets s ON s.set_id = l.tool_set) AS joined" : table
    let result = try catalog.query("SELECT * FROM \(source) ORDER BY 1, 2")
    let keep = result.columns.indices.filter { !except.contains(result.columns[$0]) }
    return result.rows.map { row in keep.map { row[$0].description } }
}

@Suite("The catalog indexes logs")
struct CatalogIndexTests {
    @Test("a snapshot of a folded state loads back equal, digest and all, for every fixture log")
    func snapshotRoundTrip() throws {
        try TemporaryDirectory.with { directory in
            for log in try copyFixtureLogs(into: directory) {
                let facts = try LogFacts.read(log)
                let text = JSONWriter.encode(facts.state.snapshotJSON)
                let loaded = try text.withUnsafeBytes { try RunState(snapshotText: $0) }
                #expect(loaded == facts.state, "\(log)")
                #expect(loaded.digest == facts.state.digest)
                #expect(loaded.counters == facts.state.counters)
                #expect(loaded.start == facts.state.start)
                // Written straight to bytes, the snapshot and the cache's form are what the
                // trees encode to: entries made before (from the trees) read the same.
                var snapshot = JSONWriter(capacity: 0)
                facts.state.writeSnapshot(to: &snapshot)
                #expect(snapshot.bytes == text, "\(log)")
                var mismatched = facts
                mismatched.digestMismatch = LogFacts.DigestMismatch(sequence: 5, step: 2)
                for variant in [facts, mismatched] {
                    var object = ObjectBuilder()
                    object.set("state", variant.state.snapshotJSON)
                    object.set("tear", variant.tear)
                    if let mismatch = variant.digestMismatch {
                        var inner = ObjectBuilder()
                        inner.set("seq", mismatch.sequence)
                        inner.set("step", mismatch.step)
                        object.set("digest_mismatch", inner.json)
                    }
                    object.set("last_complete_member", variant.lastCompleteMemberOffset)
                    #expect(variant.cachedBytes == JSONWriter.encode(object.json), "\(log)")
                }
            }
        }
    }

    @Test("a snapshot keeps what the state form leaves out: the tool servers, and each tool's server")
    func snapshotKeepsToolServers() throws {
        var start = SampleRun.supportStart()
        start.toolServers = [ToolServerIdentity(name: "clock", serverName: "mcp-time", serverVersion: "1.0", protocolVersion: "2025-06-18")]
        start.tools[0].server = "clock"
        let state = RunState(folding: [
            Event(runId: "r", sequence: 0, step: 0, timeUs: 1, previousHash: ContentHash.genesis, payload: .runStarted(start))
        ])
        let text = JSONWriter.encode(state.snapshotJSON)
        let loaded = try text.withUnsafeBytes { try RunState(snapshotText: $0) }
        #expect(loaded.start == start)
        #expect(loaded == state)
        // The digest and the state form still leave them out.
        #expect(loaded.digest == state.digest)
        #expect(state.json["start"]?["tool_servers"] == nil)
    }

    @Test("indexing the fixture logs gives one row per log and per proposed call, with the fold's numbers")
    func indexesFixtures() throws {
        try TemporaryDirectory.with { directory in
            let logs = try copyFixtureLogs(into: directory)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let summary = try catalog.index(paths: [directory.url.path])
            #expect(summary.logs.count == logs.count)
            #expect(summary.count(.added) == logs.count)
            for log in logs {
                let state = try LogFacts.read(log).state
                let row = try catalog.query(
                    "SELECT status, run_id, agent, stop_reason, tool_calls, executed_calls, input_tokens, events FROM logs WHERE path = ?",
                    arguments: [.text(Catalog.absolute(log))])
                #expect(row.rows.count == 1)
                let values = row.rows[0].map(\.description)
                #expect(values[0] == (log.contains("torn") ? "torn" : "intact"))
                #expect(values[1] == state.runId)
                #expect(values[2] == state.start?.agent.name)
                #expect(values[3] == (state.stop?.reason.rawValue ?? "NULL"))
                #expect(values[4] == "\(state.calls.count)")
                #expect(values[5] == "\(state.counters.executedCalls)")
                #expect(values[6] == "\(state.usage.inputTokens)")
                #expect(values[7] == "\(state.eventCount)")
                let tools = try catalog.query(
                    "SELECT tool FROM calls JOIN logs USING (log_id) WHERE path = ? ORDER BY ordinal",
                    arguments: [.text(Catalog.absolute(log))])
                #expect(tools.rows.map { $0[0].description } == state.calls.map(\.tool))
            }
        }
    }

    @Test(
        "an unchanged log is not read again; a changed one is read from the start; a deleted one is marked vanished",
        arguments: CatalogStoreKind.allCases)
    func incremental(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let log = directory.path("logs/a.jsonl.gz")
            try FileManager.default.createDirectory(atPath: directory.path("logs"), withIntermediateDirectories: true)
            try writeSyntheticRun(to: log, steps: 5)
            let catalog = try Catalog(path: location)
            let first = try catalog.index(log: log)
            #expect(first.change == .added)
            #expect(first.eventsRead > 0)
            let second = try catalog.index(log: log)
            #expect(second.change == .unchanged)
            #expect(second.eventsRead == 0)

            // Another run written over it: not the same prefix.
            try FileManager.default.removeItem(atPath: log)
            try writeSyntheticRun(to: log, steps: 3, index: 1)
            let third = try catalog.index(log: log)
            #expect(third.change == .reindexed)
            #expect(try rows(catalog, "calls").count == 3)

            try FileManager.default.removeItem(atPath: log)
            let summary = try catalog.index(paths: [directory.path("logs")].map { $0 + "/" })
            #expect(summary.logs.map(\.change) == [.vanished])
            #expect(try catalog.query("SELECT status FROM logs").rows.map { $0[0].description } == ["vanished"])
        }
    }

    @Test(
        "a log that grew is read from where the last read stopped, and ends with the rows of a full read",
        arguments: CatalogStoreKind.allCases)
    func grownLog(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            // A log grown and indexed in `location`'s catalog against a fresh read into a SQLite file.
            let log = directory.path("a.jsonl.gz")
            let growing = try GrowingLog(at: log, seed: 100, steps: 30)
            let run = growing.run
            try growing.record(0..<100)
            let catalog = try Catalog(path: location)
            let partial = try catalog.index(log: log)
            #expect(partial.status == .torn)
            #expect(partial.eventsRead == 100)

            try growing.finish(from: 100)

            let grown = try catalog.index(log: log)
            #expect(grown.change == .grew)
            #expect(grown.eventsRead < run.events.count)
            #expect(grown.status == .intact)

            let fresh = try Catalog(path: directory.path("fresh.sqlite"))
            _ = try fresh.index(log: log)
            #expect(try rows(catalog, "logs") == rows(fresh, "logs"))
            #expect(try rows(catalog, "calls") == rows(fresh, "calls"))
        }
    }

    @Test(
        "logs read on other threads while the store writes give exactly the rows of indexing one log at a time, batch after batch",
        arguments: CatalogStoreKind.allCases)
    func pipelinedIndexMatchesOneByOne(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            // Pipelined into `location`'s catalog, one by one into a SQLite file.
            let fixtures = try copyFixtureLogs(into: directory)
            // More logs than one transaction takes, so batches are read while others are written.
            for index in 0..<(Catalog.logsPerTransaction + 10) {
                try writeSyntheticRun(to: directory.path("small-\(index).jsonl.gz"), steps: 3, index: index)
            }
            // More calls than a read outside the transaction may hold: read inside it.
            try writeSyntheticRun(to: directory.path("long.jsonl.gz"), steps: Catalog.callsHeldInMemory + 40)
            // A run still being written (torn), which grows later.
            let open = try GrowingLog(at: directory.path("open.jsonl.gz"), seed: 7, steps: 20)
            try open.record(0..<50)
            // A damaged one.
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: fixtures[0])))
            for index in (bytes.count / 2)..<(bytes.count / 2 + 16) { bytes[index] ^= 0xFF }
            try Data(bytes).write(to: URL(fileURLWithPath: directory.path("damaged.jsonl.gz")))

            let pipelined = try Catalog(path: location)
            let oneByOne = try Catalog(path: directory.path("one-by-one.sqlite"))
            func indexBothWays() throws -> IndexSummary {
                let summary = try pipelined.index(paths: [directory.url.path], jobs: 3)
                for path in try Catalog.findLogs([directory.url.path]) { _ = try oneByOne.index(log: path) }
                #expect(try rows(pipelined, "logs") == rows(oneByOne, "logs"))
                #expect(try rows(pipelined, "calls") == rows(oneByOne, "calls"))
                try expectToolSetsFollowCalls(pipelined)
                return summary
            }
            let first = try indexBothWays()
            #expect(first.logs.count == fixtures.count + Catalog.logsPerTransaction + 13)
            #expect(Set(first.logs.map(\.status)) == [.intact, .torn, .damaged])
            #expect(try pipelined.query("SELECT tool_calls FROM logs WHERE path LIKE '%/long.jsonl.gz'").rows.first?.first?.int ?? 0 > 512)
            // Its calls and decisions were dropped from the state as it was read: still every step counted.
            #expect(
                try pipelined.query("SELECT steps, executed_calls FROM logs WHERE path LIKE '%/long.jsonl.gz'").rows
                    == [[.integer(Int64(Catalog.callsHeldInMemory + 40)), .integer(Int64(Catalog.callsHeldInMemory + 40))]])

            try open.finish(from: 50)
            let second = try indexBothWays()
            #expect(second.logs.filter { $0.change != .unchanged }.map(\.change) == [.grew])
        }
    }

    @Test(
        "a log appended to while it is indexed keeps a resume point at the last member read: the next read goes on from there and counts as a fresh read does"
    )
    func appendedWhileRead() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("growing.jsonl.gz")
            let growing = try GrowingLog(at: log, seed: 13, steps: Catalog.callsHeldInMemory + 80)
            let cut = growing.run.events.count - 200
            try growing.record(0..<cut)
            let stamp = try #require(FileStamp(path: log))
            func key(_ row: CallRow) -> String { "\(row.ordinal) \(row.callId) \(row.tool) \(row.attempts) \(row.status ?? "-")" }
            // The rest of the run is written while the read is under way: when the read first
            // hands its settled calls over.
            var spilled: [String] = []
            var appended = false
            var first = LogIndexer(path: log) { rows in
                spilled += rows.map(key)
                rows.removeAll()
                if !appended {
                    appended = true
                    // All but the run's end: it is still being written.
                    try growing.record(cut..<(growing.run.events.count - 10))
                }
            }
            try first.read(from: nil, storedTailOffset: 0)
            let row = first.finish(stampBefore: stamp, now: 0)
            #expect(appended && row.size == -1, "the file changed while it was read: no identity")
            let saved = try #require(row.resume, "a log that only grew while it was read keeps where to go on from")
            let point = try saved.withUnsafeBytes { try JSONScanner.scan($0) { try ResumePoint(from: &$0) } }
            // The start of the last member the read reached (it may have read what was appended).
            #expect(point.position.memberOffset > 0 && point.position.memberOffset < (FileStamp(path: log)?.size ?? 0))
            #expect(point.callBase > 0, "the calls written out before it stay")

            // The next read goes on from the point over the grown log, as the catalog's would.
            let firstSpills = spilled.count
            var second = LogIndexer(path: log) { rows in
                spilled += rows.map(key)
                rows.removeAll()
            }
            let grown = try #require(FileStamp(path: log))
            try second.read(from: point, storedTailOffset: row.tailOffset)
            let resumed = second.finish(stampBefore: grown, now: 0)
            var whole = LogIndexer(path: log) { rows in rows.removeAll() }
            try whole.read(from: nil, storedTailOffset: 0)
            let fresh = whole.finish(stampBefore: grown, now: 0)
            for (name, a, b) in [
                ("events", resumed.events, fresh.events), ("steps", resumed.steps, fresh.steps),
                ("tool calls", resumed.toolCalls, fresh.toolCalls), ("executed", resumed.executedCalls, fresh.executedCalls),
                ("input tokens", resumed.inputTokens, fresh.inputTokens),
            ] {
                #expect(a == b, "\(name): \(a) read on, \(b) read whole")
            }
            #expect(resumed.status == fresh.status && resumed.stopReason == nil && resumed.executedTools == fresh.executedTools)
            #expect(resumed.size == grown.size, "read steadily this time: the file's identity")
            // The calls rows, as the catalog keeps them (it deletes those from the point's call
            // on before reading on): the first read's before the point, then the second's.
            let kept = spilled.prefix { (Int($0.split(separator: " ")[0]) ?? 0) < point.callBase }
            #expect(kept.count == point.callBase)
            let secondRows = spilled.dropFirst(firstSpills) + second.rows.map(key)
            var all: [String] = []
            var reference = LogIndexer(path: log) { rows in
                all += rows.map(key)
                rows.removeAll()
            }
            try reference.read(from: nil, storedTailOffset: 0)
            _ = reference.finish(stampBefore: grown, now: 0)
            all += reference.rows.map(key)
            #expect(Array(kept) + Array(secondRows) == all)
        }
    }

    @Test("a log read outside the write transaction is written as read only while its row is the one it was read against")
    func preparedReadsAreNeverStale() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("a.jsonl.gz")
            let path = Catalog.absolute(log)
            let growing = try GrowingLog(at: log, seed: 11, steps: 30)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            func write(_ prepared: PreparedLog) throws -> IndexedLog {
                try catalog.write { db in
                    let pending = PendingCallRows()
                    let indexed = try catalog.index(absolute: path, in: db, pending: pending, prepared: prepared)
                    try pending.write(to: db)
                    return indexed
                }
            }
            try growing.record(0..<40)
            _ = try catalog.index(log: log)
            // Against the row it has now, the log is unchanged: nothing is read.
            let indexed = try catalog.read { db in try StoredLog.fetch(db, path: path) }
            let unchanged = Catalog.prepare(absolute: path, known: indexed)
            #expect(unchanged.unchanged?.change == .unchanged && unchanged.prepared == nil)

            // Read against the row as it is: written as read (a marked count shows it was not read again).
            try growing.record(40..<70)
            let known = try catalog.read { db in try StoredLog.fetch(db, path: path) }
            var current = try #require(Catalog.prepare(absolute: path, known: known).prepared)
            #expect(current.indexed.change == .grew)
            current.row.events = 123_456
            #expect(try write(current).change == .grew)
            #expect(try catalog.query("SELECT events FROM logs").rows.first?.first?.int == 123_456)

            // Read against a row another indexer has replaced since (and the log grew again): read again.
            try growing.record(70..<100)
            let older = try catalog.read { db in try StoredLog.fetch(db, path: path) }
            try growing.record(100..<130)
            var stale = try #require(Catalog.prepare(absolute: path, known: older).prepared)
            stale.row.events = 654_321
            _ = try catalog.index(log: log)
            try growing.finish(from: 130)
            let reread = try write(stale)
            #expect(reread.change == .grew)
            #expect(try catalog.query("SELECT events FROM logs").rows.first?.first?.int == growing.run.events.count)

            let fresh = try Catalog(path: directory.path("fresh.sqlite"))
            _ = try fresh.index(log: log)
            #expect(try rows(catalog, "logs") == rows(fresh, "logs"))
            #expect(try rows(catalog, "calls") == rows(fresh, "calls"))
        }
    }
}
