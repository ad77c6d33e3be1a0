import ConfigFile
import Foundation
import Synchronization
import TestSupport
import Testing
import TraceCore

@testable import EvalEngine

/// Work that grows with a case file grows linearly: ten times the cases or the names costs
/// about ten times the CPU time, not a hundred. The ratios are of the measuring thread's CPU
/// time (`scalingRatio`), so tests running beside these do not stretch them; 25 leaves room
/// for noise and is far below the 100 of quadratic work.
@Suite("Scaling: checking grows linearly with cases and names")
struct ScalingTests {
    static let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
    static let n = 2_000
    static let bound = 25.0

    /// One case over the support run whose `toolsNotCalled` lists `count` tools the run never
    /// had (`t0`, `t1`…), in flow style on line 4.
    static func manyNames(_ count: Int) -> String {
        "caseId: many-names\nlogs: \(log)\nexpected:\n  toolsNotCalled: [\((0..<count).map { "t\($0)" }.joined(separator: ", "))]\n"
    }

    /// `count` cases over the support run, in one list.
    static func manyCases(_ count: Int) -> String {
        (0..<count).map { "- caseId: c\($0)\n  logs: \(log)\n  expected: {toolsNotCalled: [delete_customer]}\n" }.joined()
    }

    @Test("check reports every one of n and 10n misspelt tools at its column, in linear time")
    func checkNames() throws {
        try TemporaryDirectory.with { directory in
            var reported: [Int: [CheckReport.Problem]] = [:]
            let ratio = try scalingRatio(n: Self.n) { count in
                let path = directory.path("names-\(count).yaml")
                if !FileManager.default.fileExists(atPath: path) {
                    try Self.manyNames(count).write(toFile: path, atomically: true, encoding: .utf8)
                }
                reported[count] = ProjectCheck(options: ProjectCheck.Options()).check(paths: [path]).errors
            }
            for count in [Self.n, 10 * Self.n] {
                let errors = try #require(reported[count])
                #expect(errors.count == count)
                let last = #"case "many-names" names the tool "t\#(count - 1)", which none of its logs' runs had"#
                #expect(errors.last?.diagnostic.message == last)
                // `  toolsNotCalled: [` is 19 characters: t0 is at column 20, t1 at 24…
                #expect(errors.prefix(3).map { $0.diagnostic.place?.column } == [20, 24, 28])
                #expect(errors.allSatisfy { $0.diagnostic.place?.line == 4 })
            }
            #expect(ratio < Self.bound, "10x the names took \(ratio)x the CPU time")
        }
    }

    @Test("run's check of one recorded run against n and 10n toolsNotCalled names is linear")
    func runNames() throws {
        try TemporaryDirectory.with { directory in
            let facts = try LogFacts.read(Self.log)
            var unknown: [Int: DiagnosticRecord?] = [:]
            let ratio = try scalingRatio(n: Self.n) { count in
                let path = directory.path("names-\(count).yaml")
                try Self.manyNames(count).write(toFile: path, atomically: true, encoding: .utf8)
                let evalCase = try #require(try EvalCaseFile.load(path: path).first)
                // What the runner does for a recorded log: the trajectory check, then the
                // names none of the case's runs had.
                let run = EvalRunner.evaluate(facts.state, log: Self.log, repeatIndex: 0, case: evalCase, options: EvalOptions(), tear: nil)
                unknown[count] = EvalRunner.unknownTool(in: CaseResult(evalCase: evalCase, runs: [run]))
            }
            #expect(unknown[10 * Self.n]??.message.hasPrefix(#"case "many-names" names the tool "t0""#) == true)
            #expect(ratio < Self.bound, "10x the names took \(ratio)x the CPU time")
        }
    }

    @Test("the per-case work of a suite run (its cache keys) is linear in n and 10n cases of one file")
    func runCases() throws {
        try TemporaryDirectory.with { directory in
            var keys: [Int: [CheckKey?]] = [:]
            let ratio = try scalingRatio(n: Self.n) { count in
                let path = directory.path("cases-\(count).yaml")
                if !FileManager.default.fileExists(atPath: path) {
                    try Self.manyCases(count).write(toFile: path, atomically: true, encoding: .utf8)
                }
                let cases = try EvalCaseFile.load(path: path)
                keys[count] = CheckKey.keys(for: cases, options: EvalOptions())
            }
            let large = try #require(keys[10 * Self.n])
            #expect(large.allSatisfy { $0 != nil })
            #expect(Set(large.compactMap { $0?.digest }).count == 10 * Self.n, "each case has a key of its own")
            #expect(ratio < Self.bound, "10x the cases took \(ratio)x the CPU time")
        }
    }

    @Test("a suite of many cases over one recorded log reads that log once, not once per case")
    func sharedLogReadOnce() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("cases.yaml")
            try Self.manyCases(200).write(toFile: path, atomically: true, encoding: .utf8)
            let cases = try EvalCaseFile.load(path: path)
            let reader = CountingFactSource()
            var options = EvalOptions(jobs: 1)
            options.facts = reader
            let results = await EvalRunner(options: options).run(cases)
            #expect(results.count == 200)
            let passed = results.filter(\.passed).count
            #expect(passed == 200)
            #expect(reader.reads == 1)
        }
    }
}

/// Reads logs as `LogFactReader` does, counting the reads.
final class CountingFactSource: LogFactSource {
    private let count = Mutex(0)

    var reads: Int { count.withLock { $0 } }

    func facts(for log: String) throws -> LogFacts {
        count.withLock { $0 += 1 }
        return try LogFacts.read(log)
    }
}
