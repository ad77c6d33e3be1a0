import EvalEngine
import Foundation
import Synchronization
import TestSupport
import Testing
import TraceCore
import TraceLog

/// The main job end to end in the library: load, run, compare, report, exit status.
@Suite("Eval sessions")
struct SessionTests {
    static let bundled = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("EvalCases").path
    static let failing = ExampleRuns.fixtures.appendingPathComponent("eval/failing").path

    func collect(_ session: EvalSession) async -> (finished: [EvalSession.Finished], report: EvalReport?) {
        var finished: [EvalSession.Finished] = []
        var report: EvalReport?
        for await update in session.run() {
            switch update {
            case .finished(let case_): finished.append(case_)
            case .completed(let completed): report = completed
            }
        }
        return (finished, report)
    }

    func plan(_ paths: [String], in directory: TemporaryDirectory, baseline: String? = nil, update: Bool = false, failOn: FailOn = .any)
        -> EvalSession.Plan
    {
        EvalSession.Plan(
            paths: paths, baselineDirectory: baseline, updatesBaseline: update, failOn: failOn,
            options: EvalOptions(
                jobs: 2, outputDirectory: directory.path("runs-\(UUID().uuidString)"), environment: .deterministic(runId: "r")))
    }

    @Test("the bundled cases: each case is yielded once with its index, then a report that exits 0")
    func bundled() async throws {
        try await TemporaryDirectory.with { directory in
            let session = try EvalSession(plan([Self.bundled], in: directory))
            let (finished, report) = await collect(session)
            #expect(finished.map(\.index).sorted() == Array(session.cases.indices))
            #expect(finished.map(\.done).sorted() == Array(1...session.cases.count))
            for case_ in finished { #expect(case_.result.id == session.cases[case_.index].id) }
            let completed = try #require(report)
            #expect(completed.results.map(\.id) == session.cases.map(\.id))
            #expect(
                completed.exitStatus == 0,
                "\(completed.results.filter { !$0.passed }.flatMap { completed.consoleLines(for: $0) }.joined(separator: "\n"))")
            #expect(finished.allSatisfy { $0.comparison == nil }, "no baseline was read")
        }
    }

    /// Keeps the batches of logs it is given.
    final class CollectingSink: FinishedLogSink {
        let batches = Mutex<[[String]]>([])
        func logsFinished(_ logs: [String]) async { batches.withLock { $0.append(logs) } }
    }

    @Test("the finished-log sink gets each live run's logs once, as soon as the run closed them, before the case is reported")
    func finishedLogs() async throws {
        try await TemporaryDirectory.with { directory in
            var plan = plan([Self.bundled], in: directory)
            plan.options.repeats = 2
            let sink = CollectingSink()
            plan.options.finishedLogs = sink
            let session = try EvalSession(plan)
            let reportedBefore = Mutex<[String: Bool]>([:])
            let report = await session.runToReport { finished in
                let logs = finished.result.writtenRunLogs
                let given = Set(sink.batches.withLock { $0.joined() })
                reportedBefore.withLock { $0[finished.result.id] = logs.allSatisfy(given.contains) }
            }
            let live = report.results.filter { !$0.writtenRunLogs.isEmpty }
            #expect(live.count >= 2, "the bundled cases include live ones")
            let given = sink.batches.withLock { Array($0.joined()) }
            #expect(given.sorted() == live.flatMap(\.writtenRunLogs).sorted(), "every log once")
            for result in live {
                #expect(result.writtenRunLogs.count == 2, "\(result.id): one log per repeat")
                #expect(reportedBefore.withLock { $0[result.id] } == true, "\(result.id) was reported before its logs were given")
                for log in result.writtenRunLogs {
                    let events = try LogReader(path: log).readAll().events
                    #expect(events.last?.event.kind == "run_stopped", "\(log) is closed")
                }
            }
        }
    }

    @Test("with a baseline: known failures do not fail --fail-on regression but fail --fail-on failure; a regression fails both")
    func baselines() async throws {
        try await TemporaryDirectory.with { directory in
            let baseline = directory.path("baseline")
            let writer = try EvalSession(plan([Self.failing], in: directory, baseline: baseline, update: true))
            let (_, written) = await collect(writer)
            #expect(try writer.writeBaselineIfAsked(from: try #require(written))?.directory == baseline)
            #expect(written?.exitStatus == 1)

            let known = await collect(try EvalSession(plan([Self.failing], in: directory, baseline: baseline, failOn: .regression)))
            #expect(known.finished.map { $0.comparison?.status } == Array(repeating: .knownFailure, count: known.finished.count))
            #expect(known.report?.exitStatus == 0)
            let failures = await collect(try EvalSession(plan([Self.failing], in: directory, baseline: baseline, failOn: .failure)))
            #expect(failures.report?.exitStatus == 1)

            // The baseline says one case passed: failing now is a regression.
            let id = try #require(known.report?.results.first?.id)
            let file = try #require(
                FileManager.default.contentsOfDirectory(atPath: baseline).first { $0.hasPrefix(id) }.map { baseline + "/" + $0 })
            let text = try String(contentsOfFile: file, encoding: .utf8)
            try text.replacingOccurrences(of: #""outcome": "fail""#, with: #""outcome": "pass""#)
                .replacingOccurrences(of: #""pass_rate": 0.0"#, with: #""pass_rate": 1.0"#)
                .write(toFile: file, atomically: true, encoding: .utf8)
            let after = await collect(try EvalSession(plan([Self.failing], in: directory, baseline: baseline, failOn: .regression)))
            let regressed = after.report.map { report in report.results.filter { report.comparisons[$0.id]?.status == .regressed } }
            #expect(regressed?.map(\.id) == [id])
            #expect(after.report?.exitStatus == 1)
        }
    }

    @Test("every shard of a suite reports the whole selection's identity and its own shard; an unsharded run is shard 1/1")
    func suiteIdentity() async throws {
        try await TemporaryDirectory.with { directory in
            let whole = try EvalSession(plan([Self.bundled], in: directory))
            var sharded = plan([Self.bundled], in: directory)
            sharded.shard = EvalSession.Shard("2/3")
            let shard = try EvalSession(sharded)
            #expect(!shard.cases.isEmpty && shard.cases.count < whole.cases.count)
            #expect(shard.suite == whole.suite)
            #expect(whole.suite == SuiteIdentity(caseIds: whole.cases.map(\.id).reversed()), "the order of the ids does not count")
            #expect(whole.suite.caseCount == whole.cases.count)
            var filtered = plan([Self.bundled], in: directory)
            filtered.filters = ["support-*"]
            #expect(try EvalSession(filtered).suite.caseCount < whole.suite.caseCount, "--filter selects another suite")

            let shardReport = try #require(await collect(shard).report).json
            #expect(shardReport["shard"] == ["count": 3, "index": 2])
            #expect(shardReport["suite"] == ["cases": .int(whole.cases.count), "digest": .string(whole.suite.digest)])
            #expect(try #require(await collect(whole).report).json["shard"] == ["count": 1, "index": 1])
        }
    }

    @Test("a suite's digest is the SHA-256 of its case ids sorted, one a line, as `LC_ALL=C sort | sha256sum` gives")
    func suiteDigest() {
        // printf 'a\nb\n' | sha256sum
        #expect(
            SuiteIdentity(caseIds: ["b", "a"])
                == SuiteIdentity(caseCount: 2, digest: "sha256:911169ddaaf146aff539f58c26c489af3b892dff0fe283c1c264c65ae5aa59a2"))
    }

    @Test("every broken case file is reported before anything runs; an empty selection is an error")
    func loadFailures() throws {
        try TemporaryDirectory.with { directory in
            try "caseId: a\nexpected: {toolsCalled: [x]\n".write(toFile: directory.path("a.yaml"), atomically: true, encoding: .utf8)
            try "caseId: b\nexpectd: {}\n".write(toFile: directory.path("b.yaml"), atomically: true, encoding: .utf8)
            #expect {
                _ = try EvalSession(plan([directory.url.path], in: directory))
            } throws: { error in
                guard let failure = error as? EvalSession.LoadFailure else { return false }
                // a.yaml does not parse; b.yaml has an unknown key and no expected: every one reported.
                return failure.inCaseFiles && failure.errors.count == 4
                    && failure.errors.allSatisfy { $0.place?.path.hasSuffix(".yaml") == true }
            }
            var filtered = plan([Self.bundled], in: directory)
            filtered.filters = ["no-such-case"]
            #expect {
                _ = try EvalSession(filtered)
            } throws: { error in
                (error as? EvalSession.LoadFailure)?.errors.map(\.diagnosticCode) == ["eval.no_cases"]
            }
        }
    }
}
