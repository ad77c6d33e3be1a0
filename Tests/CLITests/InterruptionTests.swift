import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

#if canImport(Glibc)
    import Glibc
#endif

/// SIGINT and SIGTERM stop long commands promptly, with 130 and 143 (exit codes, not deaths by
/// signal), in the phases that only read and check as well as while cases run.
@Suite("Interruption of long commands", .ownThread)
struct InterruptionTests {
    static let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    /// `count` cases over the support run, in one list.
    static func writeCases(_ count: Int, to path: String) throws {
        let text = (0..<count).map { "- caseId: c\($0)\n  logs: \(log)\n  expected: {toolsNotCalled: [delete_customer]}\n" }.joined()
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// The CPU time `pid` has used so far, from /proc (nil where there is none).
    static func cpuSeconds(of pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 13,
            let user = Double(fields[11]), let system = Double(fields[12])
        else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test(
        "check of a 100,000-case file stops at once on SIGTERM (143) and SIGINT (130); with --json, its error document says so",
        arguments: [(SIGTERM, Int32(143), false), (SIGINT, Int32(130), false), (SIGTERM, Int32(143), true)])
    func checkStops(signal: Int32, status: Int32, json: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let cases = directory.path("cases.yaml")
            try Self.writeCases(100_000, to: cases)
            let output = directory.path("stdout.json")
            let (process, errors) = try startAgentEval(["check", cases] + (json ? ["--json"] : []), in: directory.url, output: output)
            // Started: it has read and is checking the file (a debug build takes seconds more).
            let started = ContinuousClock.now
            while process.isRunning, (Self.cpuSeconds(of: process.processIdentifier) ?? 0.5) < 0.3,
                ContinuousClock.now - started < .seconds(60)
            {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(process.isRunning, "check ended before the signal: the input is too small to interrupt")
            let sent = ContinuousClock.now
            kill(process.processIdentifier, signal)
            await wait(for: process, seconds: 20)
            let took = ContinuousClock.now - sent
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            await wait(for: process, seconds: 5)
            #expect(process.terminationReason == .exit, "ended by the signal itself, not by the handler")
            #expect(process.terminationStatus == status)
            #expect(took < .seconds(10), "it took \(took) to stop")
            let text = try String(contentsOfFile: errors, encoding: .utf8)
            #expect(text.contains("interrupted by \(signal == SIGINT ? "SIGINT" : "SIGTERM")"), "\(text)")
            guard json else { return }
            let printed = try Data(contentsOf: URL(fileURLWithPath: output))
            // One document, the error one: what a script reading --json output can rely on.
            let document = try JSONParser.parse(Array(printed))
            #expect(document["schema"]?.stringValue == "agent-eval/error")
            #expect(document["exit_code"]?.intValue == Int(status))
            #expect(document["error"]?["code"]?.stringValue == "cli.interrupted")
            #expect(document["error"]?["message"]?.stringValue?.contains("interrupted by SIGTERM") == true, "\(document)")
        }
    }

    @Test(
        "run over 50,000 recorded cases: SIGTERM while they are checked starts no other case, writes the report of what ran, 143", .atScale,
        .tags(.scale))
    func runStops() async throws {
        try await TemporaryDirectory.with { directory in
            let count = 50_000
            try Self.writeCases(count, to: directory.path("cases.yaml"))
            let report = directory.path("report.json")
            let (status, errors) = try await interruptAgentEval(
                ["run", directory.path("cases.yaml"), "--no-catalog", "--out", directory.path("runs"), "--json-out", report],
                in: directory, what: "the checking of cases", signal: SIGTERM
            ) {
                // The first case's line: the cases are being checked.
                ((try? String(contentsOfFile: directory.path("stdout.txt"), encoding: .utf8)) ?? "").contains("✔ c0")
            }
            #expect(status == 143)
            #expect(errors.contains("no case was started after"), "\(errors)")
            let json = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: report))))
            let results = try #require(json["cases"]?.arrayValue)
            #expect(results.count == count)
            let interrupted = results.filter { $0["diagnostic"]?["code"]?.stringValue == "eval.interrupted" }.count
            let passed = results.filter { $0["outcome"]?.stringValue == "pass" }.count
            #expect(passed > 0 && interrupted > 0 && passed + interrupted == count, "passed \(passed), interrupted \(interrupted)")
        }
    }
}
