import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Catalog

@Suite("The catalog's cache, rebuild, queries and bad files")
struct CatalogStoreTests {
    @Test("the fact cache answers for an unchanged log, and never for a changed one, even with its size and mtime restored")
    func factCacheIsNeverStale() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("a.jsonl.gz")
            try writeSyntheticRun(to: log, steps: 6, seed: 1)
            let cache = FactCache(catalog: try Catalog(path: directory.path("catalog.sqlite")))
            let first = try cache.facts(for: log)
            let second = try cache.facts(for: log)
            #expect(cache.usage == (1, 1))
            #expect(second == first)

            // The last member's bytes changed in place: the same size, the modification time put back.
            let attributes = try FileManager.default.attributesOfItem(atPath: log)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: log))
            for index in (bytes.count - 40)..<(bytes.count - 30) { bytes[index] ^= 0x5A }
            try bytes.write(to: URL(fileURLWithPath: log))
            try FileManager.default.setAttributes([.modificationDate: attributes[.modificationDate] as Any], ofItemAtPath: log)
            #expect(try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int == attributes[.size] as? Int)
            // The cache sees the change and reads the log: what a direct read gives, error or facts.
            let afterChange = Result { try cache.facts(for: log) }
            #expect(cache.usage == (1, 2))
            switch (afterChange, Result { try LogFacts.read(log) }) {
            case (.success(let cached), .success(let read)): #expect(cached == read)
            case (.failure(let cached), .failure(let read)): #expect("\(cached)" == "\(read)")
            default: Issue.record("the cache and a direct read disagree about the changed log")
            }

            // Another run written over it.
            try FileManager.default.removeItem(atPath: log)
            try writeSyntheticRun(to: log, steps: 6, index: 1, seed: 1)
            let third = try cache.facts(for: log)
            #expect(cache.usage == (1, 3))
            #expect(third == (try LogFacts.read(log)))
            #expect(third.state.runId != first.state.runId)

            // What a cache holds reaches the catalog when it is flushed (the runner does at the
            // end of a suite run); another cache then finds it there.
            cache.flush()
            // Entries of another extractor version are not used.
            let fresh = FactCache(catalog: cache.catalog)
            _ = try fresh.facts(for: log)
            #expect(fresh.usage == (1, 0))
            try cache.catalog.close()
            let changed = try Catalog(path: directory.path("catalog.sqlite"))
            try await setExtractorVersion(0, in: directory.path("catalog.sqlite"))
            let afterBump = FactCache(catalog: changed)
            #expect(try afterBump.facts(for: log) == third)
            #expect(afterBump.usage == (0, 1))
        }
    }

    @Test("the identity's tail checksum is zlib's CRC-32 and Adler-32 of the range, and every flipped bit changes it")
    func tailChecksumCoversEveryByte() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("a.jsonl.gz")
            try writeSyntheticRun(to: log, steps: 6, seed: 3)
            let facts = try LogFacts.read(log)
            let start = try #require(facts.lastCompleteMemberOffset)
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: log)))
            let hash = try #require(LogFingerprint.hash(log, from: start, to: bytes.count))
            // Python's zlib is another implementation of the same two checksums.
            let python = try await Subprocess.run(
                "/usr/bin/env",
                [
                    "python3", "-c",
                    "import sys, zlib; b = open(sys.argv[1], 'rb').read()[int(sys.argv[2]):]; print('%08x%08x' % (zlib.crc32(b), zlib.adler32(b)))",
                    log, "\(start)",
                ])
            #expect(python.status == 0, "python3 is needed for this check: \(python.stderr)")
            #expect(hash == python.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(LogFingerprint.hash(log, from: start, to: bytes.count + 1) == nil, "a range past the end cannot be read")

            // CRC-32 detects every single-bit error: a bit flipped anywhere in the member changes it.
            let copy = directory.path("b.jsonl.gz")
            var unchanged = 0
            for offset in start..<bytes.count {
                var changed = bytes
                changed[offset] ^= UInt8(1 << (offset % 8))
                try Data(changed).write(to: URL(fileURLWithPath: copy))
                if LogFingerprint.hash(copy, from: start, to: bytes.count) == hash { unchanged += 1 }
            }
            #expect(unchanged == 0)
        }
    }

    @Test("the identity covers the last complete member's last 4 KiB, trailer included, or all of a shorter member")
    func identityRange() throws {
        try TemporaryDirectory.with { directory in
            let big = directory.path("big.jsonl.gz")
            // Version 1: a version 3 log's last member holds its stop alone, and this one's must be long.
            try writeSyntheticRun(to: big, steps: 40, seed: 5, memberBound: 1 << 20, formatVersion: 1)
            let small = directory.path("small.jsonl.gz")
            try writeSyntheticRun(to: small, steps: 6, seed: 6, memberBound: 512)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            _ = try catalog.index(paths: [big, small])
            let cache = FactCache(catalog: catalog)
            for log in [big, small] { _ = try cache.facts(for: log) }
            cache.flush()
            // One record per file, which the run's row and the facts entry both refer to.
            for table in ["logs", "facts"] {
                let stored = try catalog.query(
                    """
                    SELECT f.path, f.size, f.tail_offset, f.tail_end FROM log_files f JOIN \(table) x ON x.file_id = f.file_id
                        AND x.generation = f.generation ORDER BY f.path
                    """
                ).rows
                #expect(stored.count == 2)
                for row in stored {
                    let path = row[0].description
                    let size = try #require(Int(row[1].description))
                    let (offset, end) = (try #require(Int(row[2].description)), try #require(Int(row[3].description)))
                    let member = try #require(try LogFacts.read(path).lastCompleteMemberOffset)
                    #expect(end == size, "\(table) \(path): the range ends with the last member's trailer")
                    if path == big {
                        #expect(size - member > 2 * LogFingerprint.tailBytes, "the big log's last member should be long")
                        #expect(offset == end - LogFingerprint.tailBytes, "\(table)")
                    } else {
                        #expect(size - member < LogFingerprint.tailBytes, "the small log's last member should be short")
                        #expect(offset == member, "\(table)")
                    }
                }
            }
            // A last member rewritten with other events: its trailer (the CRC-32 of its content)
            // changes, even where the length and modification time are put back.
            let attributes = try FileManager.default.attributesOfItem(atPath: big)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: big))
            bytes[bytes.count - 8] ^= 0x01
            try bytes.write(to: URL(fileURLWithPath: big))
            try FileManager.default.setAttributes([.modificationDate: attributes[.modificationDate] as Any], ofItemAtPath: big)
            let again = try catalog.index(paths: [big])
            #expect(again.logs.map(\.change) == [.reindexed])
        }
    }

    @Test(
        "a check result is reused only for the same log, case file and options, and equals a fresh check",
        arguments: CatalogStoreKind.allCases)
    func checkResultsAreNeverStale(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let log = directory.path("a.jsonl.gz")
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path, toPath: log)
            let caseFile = directory.path("case.yaml")
            func writeCase(_ stop: String) throws {
                try "caseId: c\nlogs: a.jsonl.gz\nexpected:\n  toolsCalled: [lookup_order]\n  stopReason: \(stop)\n".write(
                    toFile: caseFile, atomically: true, encoding: .utf8)
            }
            let cache = FactCache(catalog: try Catalog(path: location))
            func check(_ options: EvalOptions = EvalOptions(jobs: 1)) async throws -> (cached: RunResult, fresh: RunResult) {
                let cases = EvalSuite.load(paths: [caseFile]).cases
                var cached = options
                cached.facts = cache
                let viaCache = try #require(await EvalRunner(options: cached).run(cases).first?.runs.first)
                let fresh = try #require(await EvalRunner(options: options).run(cases).first?.runs.first)
                return (viaCache, fresh)
            }
            func same(_ pair: (cached: RunResult, fresh: RunResult)) -> Bool {
                pair.cached.failures == pair.fresh.failures && pair.cached.notes == pair.fresh.notes
                    && pair.cached.summary == pair.fresh.summary && pair.cached.error == nil && pair.cached.logPath == pair.fresh.logPath
            }

            try writeCase("blocked")
            let first = try await check()
            #expect(!first.cached.failures.isEmpty && same(first))
            #expect(cache.usage == (0, 1) && cache.reusedResults == 0)
            let second = try await check()
            #expect(same(second))
            #expect(cache.usage == (0, 1) && cache.reusedResults == 1, "the second check is answered without the facts")
            // And by another process (a new cache over the same file).
            let again = FactCache(catalog: cache.catalog)
            var options = EvalOptions(jobs: 1)
            options.facts = again
            let third = try #require(await EvalRunner(options: options).run(EvalSuite.load(paths: [caseFile]).cases).first?.runs.first)
            #expect(same((third, first.fresh)))
            #expect(again.usage == (0, 0) && again.reusedResults == 1)

            // The case file changed: the facts are reused, the check is made again.
            try writeCase("success")
            let edited = try await check()
            #expect(edited.cached.failures.isEmpty && same(edited))
            #expect(cache.usage == (1, 1) && cache.reusedResults == 1)
            // An option that changes a check.
            var counting = EvalOptions(jobs: 1)
            counting.countsDeniedAttempts = true
            #expect(same(try await check(counting)))
            #expect(cache.usage == (2, 1) && cache.reusedResults == 1)

            // Another log in the same place: read again, checked again.
            try FileManager.default.removeItem(atPath: log)
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("research-sample.jsonl.gz").path, toPath: log)
            let other = try await check()
            #expect(same(other))
            #expect(other.cached.summary != edited.cached.summary)
            #expect(cache.usage == (2, 2) && cache.reusedResults == 1)
            let rows = try cache.catalog.query("SELECT COUNT(*) FROM check_results").rows.first?.first
            #expect(rows == .integer(1), "results made from the replaced facts went with them")
        }
    }

    @Test(
        "a suite over more logs than one write holds stores every log's facts and result, and reuses them all next time",
        arguments: CatalogStoreKind.allCases)
    func factCacheWritesInBatches(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, catalogPath in
            let count = FactCache.logsPerWrite * 2 + 5
            for index in 0..<count { try writeSyntheticRun(to: directory.path("logs/run-\(index).jsonl.gz"), steps: 3, index: index) }
            let caseFile = directory.path("case.yaml")
            try "caseId: c\nlogs: logs/*.jsonl.gz\nexpected:\n  stopReason: success\n".write(
                toFile: caseFile, atomically: true, encoding: .utf8)
            func suite() async throws -> (FactCache, CaseResult) {
                let cache = FactCache(catalog: try Catalog(path: catalogPath))
                var options = EvalOptions(jobs: 2)
                options.facts = cache
                let result = try #require(await EvalRunner(options: options).run(EvalSuite.load(paths: [caseFile]).cases).first)
                return (cache, result)
            }
            let (first, firstResult) = try await suite()
            #expect(firstResult.runs.count == count && firstResult.passed)
            #expect(first.usage == (0, count))
            #expect(try first.catalog.query("SELECT COUNT(*) FROM facts").rows.first?.first?.description == "\(count)")
            #expect(try first.catalog.query("SELECT COUNT(*) FROM check_results").rows.first?.first?.description == "\(count)")
            try first.catalog.close()
            let (second, secondResult) = try await suite()
            #expect(second.reusedResults == count && second.usage == (0, 0))
            #expect(secondResult.runs.map(\.logPath) == firstResult.runs.map(\.logPath))
        }
    }

    @Test("a state as large as a batch may hold is written at once, not kept in memory for later", arguments: CatalogStoreKind.allCases)
    func factCacheBoundsWhatItHolds(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let log = directory.path("a.jsonl.gz")
            try writeSyntheticRun(to: log, steps: 6, seed: 4)
            let catalog = try Catalog(path: location)
            let stateBytes = try LogFacts.read(log).cachedBytes.count
            // Below the bound it waits for the batch (or the flush)...
            let roomy = FactCache(catalog: catalog, bytesPerWrite: stateBytes + 1)
            _ = try roomy.facts(for: log)
            #expect(try catalog.query("SELECT COUNT(*) FROM facts").rows.first?.first?.description == "0")
            // ... at it, it is written with the read that made it.
            let tight = FactCache(catalog: catalog, bytesPerWrite: stateBytes)
            _ = try tight.facts(for: log)
            #expect(try catalog.query("SELECT COUNT(*) FROM facts").rows.first?.first?.description == "1")
            let another = FactCache(catalog: catalog)
            _ = try another.facts(for: log)
            #expect(another.usage == (1, 0))
        }
    }

    @Test("a torn log's facts come back with its tear, and a grown log is read again", arguments: CatalogStoreKind.allCases)
    func factCacheTornAndGrown(store: CatalogStoreKind) async throws {
        try await store.withCatalog { directory, location in
            let log = directory.path("a.jsonl.gz")
            var corpus = SyntheticCorpus(seed: 7)
            let run = corpus.run(index: 0, steps: 8)
            let writer = try LogWriter.create(at: log, runId: run.runId, options: .init(memberBound: 4096))
            let recorder = RunRecorder(writer: writer, clock: { SteppingClock().now() })
            try SyntheticCorpus.record(run.events.prefix(20), with: recorder)
            try writer.flush(sync: true)
            let cache = FactCache(catalog: try Catalog(path: location))
            let torn = try cache.facts(for: log)
            #expect(torn.tear != nil)
            #expect(try cache.facts(for: log) == torn)
            try SyntheticCorpus.record(run.events.dropFirst(20), with: recorder)
            try writer.close()
            let whole = try cache.facts(for: log)
            #expect(whole.tear == nil)
            #expect(whole.state.isStopped)
            #expect(cache.usage == (1, 2))
        }
    }

    @Test("a run's steps in the catalog are its model's decisions, not the steps a proxy's verdicts and approval waits end")
    func stepsAreDecisions() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("proxied.jsonl.gz")
            let writer = try LogWriter.create(at: log, runId: "run-proxied")
            let clock = SteppingClock()
            let recorder = RunRecorder(writer: writer, clock: { clock.now() })
            try recorder.record(
                .runStarted(
                    RunStarted(
                        goal: "Refund A-1042.",
                        agent: AgentIdentity(name: "support", version: "1", configDigest: ContentHash.sha256(Array("support".utf8))),
                        model: ModelIdentity(provider: "openai", name: "gpt"), policy: PolicyIdentity(name: "p"), tools: [],
                        limits: RunLimits())))
            let refund = ToolCall(id: "c-1", name: "refund_order", arguments: ["order_id": "A-1042"])
            try recorder.record(.decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls([refund])))))
            // The proxy's gate: the verdict and the wait for a person end a step, the intent
            // another, the result a third.
            try recorder.record(
                .verdictGiven(VerdictGiven(callId: "c-1", tool: "refund_order", verdict: .approvalRequired, rule: "refunds")))
            try recorder.endStep()
            try recorder.record(.approvalRecorded(ApprovalRecorded(callId: "c-1", isGranted: true, approver: "ana", reason: nil)))
            try recorder.record(.toolIntended(ToolIntended(callId: "c-1", tool: "refund_order", arguments: refund.arguments, attempt: 1)))
            try recorder.endStep()
            try recorder.record(
                .toolCompleted(ToolCompleted(callId: "c-1", tool: "refund_order", attempt: 1, status: .ok, output: [:], durationUs: 5)))
            try recorder.endStep()
            try recorder.record(.decisionMade(DecisionMade(raw: "a", outcome: .valid(.answer("Refunded.")))))
            try recorder.record(.runStopped(RunStopped(reason: .success, answer: "Refunded.")))
            try recorder.endStep()
            try writer.close()

            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            _ = try catalog.index(paths: [log])
            let run = try #require(try catalog.runs(RunQuery()).first)
            #expect(run.steps == 2, "two decisions of the model, whatever the proxy recorded between")
        }
    }

    @Test("catalog rebuild gives exactly the rows incremental indexing gave, and keeps the suite runs")
    func rebuildMatchesIncremental() throws {
        try TemporaryDirectory.with { directory in
            _ = try copyFixtureLogs(into: directory)
            let grown = directory.path("grown.jsonl.gz")
            var corpus = SyntheticCorpus(seed: 3)
            let run = corpus.run(index: 0, steps: 12)
            let writer = try LogWriter.create(at: grown, runId: run.runId, options: .init(memberBound: 2048))
            let recorder = RunRecorder(writer: writer, clock: { SteppingClock().now() })
            try SyntheticCorpus.record(run.events.prefix(30), with: recorder)
            try writer.flush(sync: true)
            let path = directory.path("catalog.sqlite")
            let catalog = try Catalog(path: path)
            _ = try catalog.index(paths: [directory.url.path])
            try SyntheticCorpus.record(run.events.dropFirst(30), with: recorder)
            try writer.close()
            let second = try catalog.index(paths: [directory.url.path])
            #expect(second.logs.map(\.change).contains(.grew))
            let report: JSONValue = [
                "summary": ["cases": 1, "passed": 1, "failed": 0, "errors": 0, "duration_ms": 3], "k": 1,
                "cases": [
                    ["case_id": "c", "source": "recorded", "outcome": "pass", "pass_rate": 1, "stability": "stable_pass", "runs": []]
                ],
            ]
            try catalog.recordSuite(report: report, info: SuiteRunInfo(startedAtUs: 1, commandLine: "agent-eval run"))
            let logs = try rows(catalog, "logs")
            let calls = try rows(catalog, "calls")
            try catalog.close()

            let rebuilt = try Catalog.rebuild(at: path)
            #expect(rebuilt.suiteRuns == 1)
            let after = try Catalog(path: path)
            #expect(try rows(after, "logs") == logs)
            #expect(try rows(after, "calls") == calls)
            #expect(try after.history(caseId: "c").entries.count == 1)
        }
    }

    @Test("a suite run recorded from its report gives exactly the rows its results JSON gives")
    func recordingFromTheReportMatchesItsJSON() async throws {
        try await TemporaryDirectory.with { directory in
            let (cases, errors) = EvalSuite.load(paths: [
                ExampleRuns.fixtures.appendingPathComponent("eval/failing").path,
                ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("EvalCases/support").path,
            ])
            #expect(errors.isEmpty)
            let options = EvalOptions(jobs: 2, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "r"))
            var results = await EvalRunner(options: options).run(cases)
            // A case that could not run, beside passing, failing, judged and live ones.
            results.append(
                CaseResult(
                    evalCase: EvalCase(
                        id: "broken", source: .recorded(patterns: []), expected: Expectations(), location: SourceLocation(path: "b.yaml")),
                    runs: [], error: DiagnosticRecord(code: "eval.missing_path", message: "no log matches \"x\"")))
            let comparisons = Dictionary(uniqueKeysWithValues: results.map { ($0.id, BaselineComparison.compare($0, with: nil)) })
            let report = EvalReport(
                results: results, comparisons: comparisons, hasBaseline: true, k: 2, durationSeconds: 1.2345)
            let kinds = Set(results.map { EvalReport.outcome($0) })
            #expect(kinds == ["pass", "fail", "error"], "the suite should hold every outcome")
            #expect(results.contains { $0.runs.contains { !$0.failures.isEmpty } })
            #expect(results.contains { $0.runs.contains { !$0.judgements.isEmpty } })

            let info = SuiteRunInfo(startedAtUs: 7, gitCommit: "abc", gitBranch: "main", commandLine: "agent-eval run x", shard: "1/2")
            let typed = try Catalog(path: directory.path("typed.sqlite"))
            try typed.record(report, info: info)
            let fromJSON = try Catalog(path: directory.path("json.sqlite"))
            try fromJSON.recordSuite(report: report.json, info: info)
            for table in ["suite_runs", "case_results", "eval_results"] {
                let recorded = try rows(typed, table)
                #expect(!recorded.isEmpty)
                #expect(recorded == (try rows(fromJSON, table)), "\(table)")
            }
        }
    }

    @Test("a recorded suite run indexes the run logs its live cases wrote, a pipeline's child runs too, never a pipeline log")
    func recordIndexesRunLogsOnly() async throws {
        try await TemporaryDirectory.with { directory in
            let bundled = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("EvalCases").path
            let (cases, errors) = EvalSuite.load(paths: [bundled])
            #expect(errors.isEmpty)
            let options = EvalOptions(jobs: 2, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "r"))
            let results = await EvalRunner(options: options).run(cases)
            #expect(results.contains { $0.evalCase.isLive && $0.evalCase.expected.pipeline != nil }, "the suite has a live pipeline")
            let report = EvalReport(results: results, comparisons: [:], hasBaseline: false, k: 1, durationSeconds: 1)
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            try catalog.record(report, info: SuiteRunInfo(startedAtUs: 7, gitCommit: nil, gitBranch: nil, commandLine: "agent-eval run"))
            let indexed = try catalog.query("SELECT path FROM logs ORDER BY path").rows.map { $0[0].description }
            let written = results.flatMap(\.writtenRunLogs).sorted()
            #expect(written.contains { $0.contains("/tasks/") }, "a pipeline's child run logs are among them")
            #expect(indexed == written)
            #expect(!indexed.contains { $0.hasSuffix("pipeline.jsonl.gz") })
        }
    }

    @Test("a file that is not a catalog, a damaged one and one from a newer agent-eval give clear errors and stay as they were")
    func badCatalogFiles() async throws {
        try await TemporaryDirectory.with { directory in
            func expectError(_ path: String, _ code: CatalogError.Code, _ words: String) throws {
                let before = try Data(contentsOf: URL(fileURLWithPath: path))
                #expect {
                    _ = try Catalog(path: path)
                } throws: { error in
                    guard let error = error as? CatalogError else { return false }
                    return error.code == code && error.message.contains(words) && error.place?.path == path
                }
                #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file was changed")
            }
            let text = directory.path("text.sqlite")
            try Data("not a database at all, just some text that is long enough\n".utf8).write(to: URL(fileURLWithPath: text))
            try expectError(text, .notACatalog, "is not a SQLite database")

            let newer = directory.path("newer.sqlite")
            _ = try await Subprocess.run("/usr/bin/env", ["sqlite3", newer, "PRAGMA user_version = 99; CREATE TABLE logs (x);"])
            try expectError(newer, .newerSchema, "schema version 99")

            let foreign = directory.path("foreign.sqlite")
            _ = try await Subprocess.run("/usr/bin/env", ["sqlite3", foreign, "CREATE TABLE people (name TEXT);"])
            try expectError(foreign, .notACatalog, "not an agent-eval catalog")

            // A real catalog with its pages overwritten in the middle.
            let damaged = directory.path("damaged.sqlite")
            let catalog = try Catalog(path: damaged)
            _ = try copyFixtureLogs(into: directory)
            _ = try catalog.index(paths: [directory.url.path])
            try catalog.checkpoint()
            try catalog.close()
            // Every page but the first (the schema) overwritten.
            var bytes = try Data(contentsOf: URL(fileURLWithPath: damaged))
            for index in 4096..<bytes.count { bytes[index] = 0xA5 }
            try bytes.write(to: URL(fileURLWithPath: damaged))
            let opened = Result { () throws -> Int in
                let catalog = try Catalog(path: damaged)
                return try catalog.query("SELECT COUNT(*) FROM calls WHERE tool <> ''").rows.count
            }
            if case .failure(let error) = opened {
                let error = try #require(error as? CatalogError)
                #expect([.corrupt, .notACatalog].contains(error.code), "\(error)")
            } else {
                Issue.record("a catalog with overwritten pages was read without an error")
            }
        }
    }

    @Test("the documented queries use their indexes (EXPLAIN QUERY PLAN), in both shapes of the runs query")
    func queryPlans() throws {
        try TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            _ = try catalog.index(paths: [FixtureLogs.directory.path])
            // A call filter: newest first from the index, probing each run's calls, no sort; the
            // tool not wanted is the run's set of tools, not a probe.
            var common = RunQuery()
            common.tools = ["lookup_order"]
            common.notTools = ["refund_order"]
            common.approval = .granted
            let newest = try catalog.plan(common).joined(separator: "\n")
            #expect(newest.contains("SCAN logs USING INDEX logs_by_start"), "\(newest)")
            #expect(newest.contains("SEARCH c USING"), "\(newest)")
            #expect(!newest.contains("TEMP B-TREE"), "\(newest)")
            // Without call filters, the sets of tools alone: few runs qualify, so they are found
            // through `logs_by_tool_set` and sorted; walked newest first, no index on the set.
            var sets = RunQuery()
            sets.tools = ["lookup_order"]
            sets.notTools = ["delete_customer"]
            let driven = try catalog.plan(sets).joined(separator: "\n")
            #expect(driven.contains("USING INDEX logs_by_tool_set (tool_set=?)"), "\(driven)")
            #expect(!driven.contains("calls"), "\(driven)")
            let walked = try catalog.plan(sets, shape: .newestFirst).joined(separator: "\n")
            #expect(walked.contains("SCAN logs USING INDEX logs_by_start") && !walked.contains("logs_by_tool_set"), "\(walked)")
            #expect(!walked.contains("calls") && !walked.contains("TEMP B-TREE"), "\(walked)")
            for plan in [newest, driven, walked] { #expect(!plan.contains("SCAN calls") && !plan.contains("SCAN c"), "\(plan)") }
            // The shapes give the same rows, in the same order.
            let found = try catalog.runs(sets, shape: .newestFirst).map(\.path)
            #expect(!found.isEmpty)
            #expect(try catalog.runs(sets, shape: .drivenByToolSets).map(\.path) == found)
            #expect(try catalog.runs(sets, shape: .drivenBy(tool: "lookup_order")).map(\.path) == found)
            #expect(try catalog.runs(sets).map(\.path) == found)
            #expect(
                try catalog.runs(common, shape: .drivenBy(tool: "lookup_order")).map(\.path)
                    == catalog.runs(common, shape: .newestFirst).map(\.path))
            // A tool no run executed: no set qualifies, and nothing is read.
            var none = RunQuery()
            none.tools = ["delete_customer"]
            none.notTools = ["lookup_order"]
            #expect(try catalog.read { db in try none.toolSets(in: db) } == [])
            #expect(try catalog.runs(none).isEmpty)
            let history = try catalog.query(
                "EXPLAIN QUERY PLAN SELECT * FROM case_history WHERE case_id = 'x' ORDER BY started_at_us DESC LIMIT 10")
            let detail = history.rows.map { $0[3].description }.joined(separator: "\n")
            #expect(detail.contains("case_results_by_case") || detail.contains("PRIMARY KEY"), "\(detail)")
            #expect(!detail.contains("SCAN r"), "\(detail)")
            // A suite's kept results: a case's rows by their index, each identity from its file's
            // record, never a row of the cached state blobs.
            let kept = try catalog.query("EXPLAIN QUERY PLAN " + FactCache.keptResultsSQL.replacingOccurrences(of: "?", with: "1"))
            let keptPlan = kept.rows.map { $0[3].description }.joined(separator: "\n")
            #expect(keptPlan.contains("check_results_by_case (case_key=?)"), "\(keptPlan)")
            #expect(keptPlan.contains("SEARCH f USING INTEGER PRIMARY KEY"), "\(keptPlan)")
            #expect(!keptPlan.contains("facts"), "the rows holding the cached states are not read: \(keptPlan)")
        }
    }

    @Test("sql refuses statements that would change the catalog")
    func readOnlyQueries() throws {
        try TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            for statement in [
                "DELETE FROM logs", "DROP TABLE calls", "INSERT INTO facts VALUES (1, 1, 1, x'00')",
                "PRAGMA user_version = 99",
            ] {
                #expect(throws: CatalogError.self, "\(statement)") { _ = try catalog.query(statement) }
            }
            #expect(try catalog.query("PRAGMA user_version").rows.first?.first == .integer(Int64(CatalogSchema.version)))
        }
    }

    @Test("a statement with a mistake in it says what, and names the tables and views instead of blaming the file")
    func badStatements() throws {
        try TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            for (statement, detail) in [
                ("SELECT * FROM runs", "no such table: runs"), ("SELECT missing FROM logs", "no such column: missing"),
                ("SELEC 1", #"near "SELEC": syntax error"#),
            ] {
                let error = try #require(throws: CatalogError.self) { _ = try catalog.query(statement) }
                #expect(error.code == .queryFailed)
                #expect(error.message == "the statement cannot run: \(detail)")
                #expect(error.location == nil)
                #expect(error.hint?.contains("logs, run_calls, step_logs, steps, suite_runs") == true, "\(error.hint ?? "")")
            }
        }
    }

    @Test("a catalog of an older schema version is migrated in place, keeping its rows")
    func migratesOlderVersions() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("old.sqlite")
            // A version 1 file, as the first release wrote it, with one indexed run.
            let first = try Catalog(path: directory.path("source.sqlite"))
            _ = try first.index(paths: [FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path])
            try first.close()
            // The rows as version 1 had them: the identity in the run's row (version 13 moved it
            // to `log_files`), without the columns later versions added.
            _ = try await Subprocess.run(
                "/usr/bin/env",
                [
                    "sqlite3", directory.path("source.sqlite"),
                    """
                    CREATE TABLE v1 AS SELECT l.log_id, l.path, f.size, f.mtime_ns, f.tail_offset, f.tail_end, f.tail_hash, l.status,
                        l.problem, l.run_id, l.agent, l.agent_version, l.model, l.input, l.started_at_us, l.ended_at_us, l.stop_reason,
                        l.stop_limit, l.events, l.steps, l.decisions, l.invalid_decisions, l.tool_calls, l.executed_calls,
                        l.denied_calls, l.failed_calls, l.input_tokens, l.output_tokens, l.cost_usd, l.anomalies, l.indexed_at_us,
                        l.resume
                    FROM logs l JOIN log_files f ON f.file_id = l.file_id;
                    """,
                ])
            let dump = try await Subprocess.run("/usr/bin/env", ["sqlite3", directory.path("source.sqlite"), ".dump v1 calls"])
            let version1 = CatalogSchema.migrations[0] + "\nPRAGMA user_version = 1;\n"
            _ = try await Subprocess.run("/usr/bin/env", ["sqlite3", path, version1])
            let rows = dump.stdoutText.split(separator: "\n").filter { $0.hasPrefix("INSERT INTO") }
                .map { $0.replacingOccurrences(of: "INSERT INTO v1 ", with: "INSERT INTO logs ") }.joined(separator: "\n")
            let loaded = try await Subprocess.run("/usr/bin/env", ["sqlite3", path, rows])
            #expect(loaded.status == 0, "\(loaded.stderr)")

            let catalog = try Catalog(path: path)
            #expect(try catalog.query("PRAGMA user_version").rows.first?.first == .integer(Int64(CatalogSchema.version)))
            // Version 6 replaced the two indexes on calls (`calls_by_tool`, and version 2's
            // `calls_by_log_tool`) with one.
            let indexes = try catalog.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'calls' ORDER BY name")
            #expect(indexes.rows.map { $0.first?.description } == ["calls_by_tool_log"])
            // Version 5 dropped the index that made recording a suite run cost more as history grew.
            let byLog = try catalog.query("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'eval_results_by_log'")
            #expect(byLog.rows.isEmpty)
            var query = RunQuery()
            query.tools = ["refund_order"]
            #expect(try catalog.runs(query).count == 1)
            // Version 13 gave the log's file one record, which the run's row refers to.
            let log = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
            let files = try catalog.query("SELECT f.path, f.generation FROM log_files f JOIN logs l ON l.file_id = f.file_id").rows
            #expect(files == [[.text(log), .integer(1)]])
            // Version 12 counts a run's steps as its model's decisions: every log is read again.
            let again = try catalog.index(paths: [log])
            #expect(again.logs.map(\.change) == [.reindexed])
            #expect(try catalog.index(paths: [log]).logs.map(\.change) == [.unchanged])
        }
    }

    @Test("a damaged log is indexed with its status and problem, keeping what came before the damage")
    func damagedLog() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("a.jsonl.gz")
            try writeSyntheticRun(to: log, steps: 10, memberBound: 2048)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: log))
            let middle = bytes.count / 2
            for index in middle..<(middle + 64) { bytes[index] ^= 0xFF }
            try bytes.write(to: URL(fileURLWithPath: log))
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            let indexed = try catalog.index(log: log)
            #expect(indexed.status == .damaged)
            #expect(indexed.problem?.contains("byte") == true)
            #expect(indexed.eventsRead > 0)
            #expect(try catalog.index(log: log).change == .unchanged)
            var query = RunQuery()
            query.statuses = [.damaged]
            #expect(try catalog.runs(query).map(\.path) == [Catalog.absolute(log)])
        }
    }
}

/// Sets every fact cache entry's extractor version, as another agent-eval would have written it.
func setExtractorVersion(_ version: Int, in path: String) async throws {
    let result = try await Subprocess.run("/usr/bin/env", ["sqlite3", path, "UPDATE facts SET extractor_version = \(version);"])
    try #require(result.status == 0, "\(result.stderr)")
}
