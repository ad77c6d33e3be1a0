import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import Catalog

@Suite("A case's history across suite runs")
struct CaseHistoryTests {
    /// A case file over one log, checked and recorded as `agent-eval run` does: each suite run
    /// loads the case file as it is, checks the log as it is, and records the report with the
    /// commit given.
    struct RecordedSuite {
        let directory: TemporaryDirectory
        let catalog: Catalog
        var clock = 0

        init(in directory: TemporaryDirectory) throws {
            self.directory = directory
            catalog = try Catalog(path: directory.path("catalog.sqlite"))
        }

        /// Writes the case file: the log must stop with `stop`.
        func writeCase(stop: String) throws {
            try "caseId: refund\nlogs: current.jsonl.gz\nexpected:\n  stopReason: \(stop)\n".write(
                toFile: directory.path("refund.yaml"), atomically: true, encoding: .utf8)
        }

        /// Puts the fixture log `name` where the case reads its log.
        func useLog(_ name: String) throws {
            try? FileManager.default.removeItem(atPath: directory.path("current.jsonl.gz"))
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent(name).path, toPath: directory.path("current.jsonl.gz"))
        }

        /// Runs the suite on commit `commit` and records it; returns the case's outcome.
        mutating func run(commit: String?) async throws -> String {
            let (cases, errors) = EvalSuite.load(paths: [directory.path("refund.yaml")])
            #expect(errors.isEmpty)
            let results = await EvalRunner(options: EvalOptions(jobs: 1)).run(cases)
            clock += 1
            try catalog.record(
                EvalReport(results: results), info: SuiteRunInfo(startedAtUs: clock, gitCommit: commit, commandLine: "agent-eval run"))
            return try #require(results.first.map { EvalReport.outcome($0) })
        }
    }

    @Test("a quarantined case is ready to release once its last five recorded suite runs passed, and the report's JSON says so")
    func quarantinedCaseReadyToRelease() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.path("catalog.sqlite"))
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path,
                toPath: directory.path("current.jsonl.gz"))
            try """
            caseId: refund
            logs: current.jsonl.gz
            quarantine: {owner: alice, reason: "https://example.com/issues/1", until: 2999-12-31}
            expected:
              stopReason: success
            """.write(toFile: directory.path("refund.yaml"), atomically: true, encoding: .utf8)
            var histories: [SuiteHistory] = []
            for index in 1...QuarantineEntry.releaseStreak {
                let (cases, errors) = EvalSuite.load(paths: [directory.path("refund.yaml")])
                #expect(errors.isEmpty)
                let report = EvalReport(results: await EvalRunner(options: EvalOptions(jobs: 1)).run(cases))
                histories.append(
                    try catalog.recordSuite(
                        report, info: SuiteRunInfo(startedAtUs: index, gitCommit: "c1", commandLine: "agent-eval run"),
                        flakyHistory: index == 1))
            }
            // Four passing runs are not enough; the fifth is.
            #expect(histories.dropLast().allSatisfy { $0.readyToRelease.isEmpty })
            let last = try #require(histories.last)
            #expect(last.readyToRelease == [SuiteHistory.Release(caseId: "refund", streak: 5)])
            #expect(last.flaky == nil && last.problems.isEmpty)
            #expect(histories[0].flaky == [])
            #expect(last.lines == ["READY TO RELEASE: refund passed its last 5 suite runs (agent-eval quarantine release refund)"])
            let json = last.adding(to: ["cases": 1])
            #expect(json["ready_to_release"] == ["refund"])
            #expect(json["flaky_in_history"] == nil)
            #expect(histories[0].adding(to: ["cases": 1])["flaky_in_history"] == [])
        }
    }

    @Test("a case that passed, then failed twice after its file was edited on the same commit, is failing since the edit, not flaky")
    func editedCaseIsNotFlaky() async throws {
        try await TemporaryDirectory.with { directory in
            var suite = try RecordedSuite(in: directory)
            try suite.useLog("support-sample.jsonl.gz")
            try suite.writeCase(stop: "success")
            #expect(try await suite.run(commit: "c1") == "pass")
            try suite.writeCase(stop: "blocked")
            #expect(try await suite.run(commit: "c1") == "fail")
            #expect(try await suite.run(commit: "c1") == "fail")

            let history = try suite.catalog.history(caseId: "refund")
            #expect(history.entries.map(\.outcome) == ["fail", "fail", "pass"])
            let digests = history.entries.map(\.fileDigest)
            #expect(digests.allSatisfy { $0?.hasPrefix("sha256:") == true })
            #expect(digests[0] == digests[1] && digests[1] != digests[2])
            #expect(history.series.map { $0.map(\.suiteRunId) } == [[3, 2], [1]])
            #expect(!history.isFlaky)
            #expect(history.lastChange == "failing since suite run #2, where its case file changed")
        }
    }

    @Test("the same case file on the same commit passing and failing is flaky; a new commit starts a new series")
    func sameDefinitionAndCodeDisagreeing() async throws {
        try await TemporaryDirectory.with { directory in
            var suite = try RecordedSuite(in: directory)
            try suite.writeCase(stop: "success")
            try suite.useLog("support-sample.jsonl.gz")
            #expect(try await suite.run(commit: "c1") == "pass")
            // Another commit, and the agent's run no longer succeeds: a change, not flakiness.
            try suite.useLog("research-sample.jsonl.gz")
            #expect(try await suite.run(commit: "c2") == "fail")
            var history = try suite.catalog.history(caseId: "refund")
            #expect(history.series.count == 2)
            #expect(!history.isFlaky)
            #expect(history.lastChange == "failing since suite run #2, where the commit changed")
            // The same file and commit, and it passes again: flaky.
            try suite.useLog("support-sample.jsonl.gz")
            #expect(try await suite.run(commit: "c2") == "pass")
            history = try suite.catalog.history(caseId: "refund")
            #expect(history.series.map { $0.map(\.suiteRunId) } == [[3, 2], [1]])
            #expect(history.isFlaky)
            #expect(history.lastChange == nil)
            #expect(history.json["flaky"] == .bool(true))
            // Looking back over the newest suite run only, there is nothing to disagree with.
            #expect(try !suite.catalog.history(caseId: "refund", limit: 1).isFlaky)
        }
    }
}
