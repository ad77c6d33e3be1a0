import Foundation
import TestSupport
import TestTags
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The folder the suite's enormous log is built in once per test process, removed at its exit.
private let hugeLogFolder = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-read-limit-\(getpid())").path

/// An intact log from elsewhere (scripts/huge_event_log.py, from the support-refund fixture) whose
/// decision at seq 4 holds `mib` MiB of reply, alone in gzip member 1: about 5 MB on disk for
/// 1023 MiB. Built once per size.
private func hugeLog(mib: Int) async throws -> String {
    try await HugeLogs.shared.log(mib: mib)
}

private actor HugeLogs {
    static let shared = HugeLogs()
    private var built: [Int: Task<String, any Error>] = [:]

    func log(mib: Int) async throws -> String {
        if let task = built[mib] { return try await task.value }
        let task = Task<String, any Error> {
            try FileManager.default.createDirectory(atPath: hugeLogFolder, withIntermediateDirectories: true)
            atexit { try? FileManager.default.removeItem(atPath: hugeLogFolder) }
            let path = "\(hugeLogFolder)/huge-\(mib).jsonl.gz"
            try? FileManager.default.removeItem(atPath: path)
            let made = try await Subprocess.run(
                "/usr/bin/env",
                [
                    "python3", repositoryRoot.appendingPathComponent("scripts/huge_event_log.py").path,
                    repositoryRoot.appendingPathComponent("Fixtures/runs/support-refund.jsonl.gz").path, path, "--mib", "\(mib)",
                ])
            guard made.status == 0 else { throw HugeLogError(message: "scripts/huge_event_log.py failed: \(made.stderr)") }
            return path
        }
        built[mib] = task
        return try await task.value
    }
}

private struct HugeLogError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A command over the enormous log, and what it must do with it.
struct BoundedReader: Sendable, CustomTestStringConvertible {
    var name: String
    /// The command line, with `LOG` for the log, `DIR` for the test's folder and `SUPPORT` for the
    /// support agent's folder.
    var arguments: [String]
    /// Its exit status: 2 (could not read it) for every command but `index`, which records the log
    /// as damaged and succeeds.
    var status: Int32 = 2
    var testDescription: String { name }

    static let all: [BoundedReader] = [
        BoundedReader(name: "log verify", arguments: ["log", "verify", "LOG"]),
        BoundedReader(name: "log cat", arguments: ["log", "cat", "LOG"]),
        BoundedReader(name: "log repair", arguments: ["log", "repair", "LOG"]),
        BoundedReader(name: "log upgrade", arguments: ["log", "upgrade", "LOG", "DIR/upgraded.jsonl.gz"]),
        BoundedReader(name: "replay", arguments: ["replay", "LOG"]),
        BoundedReader(name: "replay --step", arguments: ["replay", "LOG", "--step", "1"]),
        BoundedReader(name: "diff", arguments: ["diff", "LOG", "FIXTURE"]),
        BoundedReader(name: "view", arguments: ["view", "LOG", "-o", "DIR/page.html"]),
        BoundedReader(name: "fork", arguments: ["fork", "LOG", "--at", "1", "--agent", "SUPPORT/agent.yaml"]),
        BoundedReader(name: "rerun", arguments: ["rerun", "LOG", "--agent", "SUPPORT/agent.yaml"]),
        BoundedReader(name: "audit", arguments: ["audit", "--policy", "DIR/policy.yaml", "LOG"]),
        BoundedReader(name: "export otlp", arguments: ["export", "otlp", "LOG", "-o", "DIR/trace.json"]),
        BoundedReader(name: "export atif", arguments: ["export", "atif", "LOG", "--out", "DIR/atif"]),
        BoundedReader(name: "case from-log", arguments: ["case", "from-log", "LOG", "-o", "DIR/case.yaml"]),
        BoundedReader(name: "run", arguments: ["run", "DIR/huge.yaml", "--no-catalog"]),
        BoundedReader(name: "approve", arguments: ["approve", "LOG", "call-1"]),
        BoundedReader(name: "deny", arguments: ["deny", "LOG", "call-1"]),
        BoundedReader(name: "index", arguments: ["index", "LOG", "--catalog", "DIR/catalog.sqlite"], status: 0),
        BoundedReader(name: "catalog rebuild", arguments: ["catalog", "rebuild", "LOG", "--catalog", "DIR/rebuilt.sqlite"], status: 0),
    ]
}

@Suite("Every reader of a log keeps one bound: a member over it stops the read with an error naming the log, member and event")
struct ReadLimitCommandTests {
    @Test(
        "each command over an intact log holding one 1023 MiB event stops at that member, says how to raise the limit, and stays under 200 MB",
        arguments: BoundedReader.all)
    func enormousEvent(_ reader: BoundedReader) async throws {
        let log = try await hugeLog(mib: 1023)
        try await TemporaryDirectory.with { directory in
            try "policy:\n  default: allow\n".write(toFile: directory.path("policy.yaml"), atomically: true, encoding: .utf8)
            try "caseId: huge\nlogs: \(log)\nexpected:\n  toolsCalled: [lookup_order]\n".write(
                toFile: directory.path("huge.yaml"), atomically: true, encoding: .utf8)
            let arguments = reader.arguments.map {
                $0.replacingOccurrences(of: "LOG", with: log).replacingOccurrences(of: "DIR", with: directory.url.path)
                    .replacingOccurrences(of: "SUPPORT", with: repositoryRoot.appendingPathComponent("Fixtures/agents/support").path)
                    .replacingOccurrences(of: "FIXTURE", with: fixture("support-sample.jsonl.gz"))
            }
            let environment = ["NO_COLOR": "1", "AGENT_EVAL_CATALOG": directory.path("default-catalog.sqlite")]
            let measured = try await PeakMemory.run(try agentEvalBinary(), arguments, in: directory.url.path, environment: environment)
            let output = measured.result.stdoutText + measured.result.stderr
            #expect(measured.result.status == reader.status, "\(output)")
            #expect(output.contains("gzip member 1 holds more than 64 MiB (67108864 bytes) of events"), "\(output)")
            if reader.status == 0 {
                #expect(output.contains("damaged"), "\(output)")
            } else {
                // The log, the member and the first event in it; then how to raise the limit.
                let place = try Regex(NSRegularExpression.escapedPattern(for: log) + #" \(gzip member at byte [0-9]+, seq 4\)"#)
                #expect(output.contains(place), "\(output)")
                #expect(output.contains("--max-member-mib N (up to 1024) or maxMemberMib: N in .agent-eval/settings.yaml"), "\(output)")
            }
            #expect(measured.peakResidentBytes < 200 << 20, "\(reader.name): peak resident memory \(measured.peakResidentBytes >> 20) MiB")

            // The command takes --max-member-mib: a log of 8 MiB, within the default, stops at 2.
            let small = try await hugeLog(mib: 8)
            let lowered = try await agentEval(
                arguments.map { $0 == log ? small : $0 } + ["--max-member-mib", "2"], in: directory.url, environment: environment)
            #expect(lowered.status == reader.status, "\(lowered.stdoutText)\(lowered.stderr)")
            #expect(
                (lowered.stdoutText + lowered.stderr).contains("gzip member 1 holds more than 2 MiB (2097152 bytes) of events"),
                "\(lowered.stdoutText)\(lowered.stderr)")
        }
    }

    @Test(
        "the limit is raised by --max-member-mib, else by maxMemberMib in .agent-eval/settings.yaml; a bad setting is an error at its line")
    func raisingTheLimit() async throws {
        let log = try await hugeLog(mib: 8)
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path(".agent-eval"), withIntermediateDirectories: true)
            let settings = directory.path(".agent-eval/settings.yaml")
            let verify = { (extra: [String]) in try await agentEval(["log", "verify", log] + extra, in: directory.url) }

            // 8 MiB is within the default.
            #expect(try await verify([]).status == 0)
            let option = try await verify(["--max-member-mib", "4"])
            #expect(option.status == 2 && option.stderr.contains("holds more than 4 MiB (4194304 bytes) of events"), "\(option.stderr)")
            #expect(option.stderr.contains("the limit is 4 MiB a member"), "\(option.stderr)")

            try "maxMemberMib: 4\n".write(toFile: settings, atomically: true, encoding: .utf8)
            let setting = try await verify([])
            #expect(setting.status == 2 && setting.stderr.contains("holds more than 4 MiB"), "\(setting.stderr)")
            // The option wins over the setting.
            let both = try await verify(["--max-member-mib", "16"])
            #expect(both.status == 0 && both.stdoutText.contains("intact"), "\(both.stderr)")

            try "maxMemberMib: 2048\n".write(toFile: settings, atomically: true, encoding: .utf8)
            let tooHigh = try await verify([])
            #expect(tooHigh.status == 2, "\(tooHigh.stderr)")
            #expect(tooHigh.stderr.contains("settings.yaml:1:15") && tooHigh.stderr.contains("between 1 and 1024"), "\(tooHigh.stderr)")
            try "maxMembrMib: 16\n".write(toFile: settings, atomically: true, encoding: .utf8)
            let misspelt = try await verify([])
            #expect(misspelt.status == 2 && misspelt.stderr.contains("did you mean \"maxMemberMib\"?"), "\(misspelt.stderr)")

            let outOfRange = try await verify(["--max-member-mib", "0"])
            #expect(outOfRange.status == 64 && outOfRange.stderr.contains("between 1 and 1024"), "\(outOfRange.stderr)")
        }
    }
}
