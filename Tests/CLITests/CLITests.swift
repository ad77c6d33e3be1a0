import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// The built `agent-eval` binary, run as a real subprocess.
/// Unless the test names its own, the catalog is one file in the temporary directory (shared
/// by the test run's processes, as CI shards share one), never the checkout's.
/// `queued: false` for a quick look taken while timing a process the test started itself
/// (see `Subprocess.run`).
func agentEval(
    _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:], queued: Bool = true
) async throws -> ProcessResult {
    var environment = environment
    if environment["AGENT_EVAL_CATALOG"] == nil { environment["AGENT_EVAL_CATALOG"] = testCatalogPath }
    return try await Subprocess.run(try agentEvalBinary(), arguments, in: directory, environment: environment, queued: queued)
}

/// The test run's catalog; the file and its WAL and shared-memory files are removed when the
/// test process exits.
let testCatalogPath: String = {
    atexit {
        for suffix in ["", "-wal", "-shm", "-journal", ".lock"] { try? FileManager.default.removeItem(atPath: testCatalogPath + suffix) }
    }
    return FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-tests-catalog-\(getpid()).sqlite").path
}()

/// Starts `agent-eval` without waiting for it (standard output discarded, standard error to a
/// file in `directory`, whose path is returned); `catalog` is its catalog (the tests' one by
/// default).
/// Its standard output goes to the file `output` when given, else nowhere.
func startAgentEval(
    _ arguments: [String], in directory: URL, catalog: String = testCatalogPath, output: String? = nil
) throws -> (Process, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try agentEvalBinary())
    process.arguments = arguments
    process.currentDirectoryURL = directory
    var environment = ProcessInfo.processInfo.environment
    environment["AGENT_EVAL_CATALOG"] = catalog
    process.environment = environment
    let errors = directory.appendingPathComponent("stderr-\(UUID().uuidString).txt").path
    _ = FileManager.default.createFile(atPath: errors, contents: nil)
    if let output {
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
    } else {
        process.standardOutput = FileHandle.nullDevice
    }
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
    try process.run()
    return (process, errors)
}

/// Waits (bounded, without spinning) for `process` to end.
func wait(for process: Process, seconds: Int = 120) async {
    var waited = 0
    while process.isRunning && waited < seconds * 20 {
        try? await Task.sleep(for: .milliseconds(50))
        waited += 1
    }
}

/// Sends `signal` to `process`, waits (bounded: `seconds`) for it to end, kills it if it has
/// not, and returns its exit status — -1 when even SIGKILL was not seen to end it within 10 s
/// (never `waitUntilExit`, which can wait for ever off the main thread).
func stopped(_ process: Process, with signal: Int32, seconds: Int = 60) async -> Int32 {
    kill(process.processIdentifier, signal)
    await wait(for: process, seconds: seconds)
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    await wait(for: process, seconds: 10)
    return process.isRunning ? -1 : process.terminationStatus
}

/// Where the test run built `agent-eval`.
func agentEvalBinary() throws -> String {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("agent-eval").path,
        Bundle.main.bundleURL.appendingPathComponent("agent-eval").path,
        Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("agent-eval").path,
    ]
    guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw CLITestError.binaryNotFound(candidates)
    }
    return binary
}

/// Starts `agent-eval arguments`, waits (bounded) until `started` holds, sends `signal`
/// (SIGINT by default), waits (bounded: 20 s) for the end, and kills it with SIGKILL if it has
/// not; returns the exit status (9 when it had to be killed) and standard error.
func interruptAgentEval(
    _ arguments: [String], in directory: TemporaryDirectory, what: String, signal: Int32 = SIGINT, until started: () throws -> Bool
) async throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try agentEvalBinary())
    process.arguments = arguments
    process.currentDirectoryURL = directory.url
    let errors = directory.path("stderr.txt")
    _ = FileManager.default.createFile(atPath: errors, contents: nil)
    // Standard output goes to stdout.txt in `directory`, for a test to read.
    _ = FileManager.default.createFile(atPath: directory.path("stdout.txt"), contents: nil)
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.path("stdout.txt")))
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
    try process.run()
    var waited = 0
    // Up to 60 s: a debug build among the suite's other tests can take a while to begin.
    while try !started(), waited < 1200 {
        try await Task.sleep(for: .milliseconds(50))
        waited += 1
    }
    #expect(try started(), "\(what) never started")
    kill(process.processIdentifier, signal)
    waited = 0
    await wait(for: process, seconds: 20)
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    await wait(for: process, seconds: 5)
    return (process.terminationStatus, (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")
}

enum CLITestError: Error {
    case binaryNotFound([String])
    case unexpected(String)
}

func fixture(_ name: String) -> String {
    FixtureLogs.directory.appendingPathComponent(name).path
}

@Suite("agent-eval log")
struct CLITests {
    @Test("log cat prints one summary line per event")
    func catSummaries() async throws {
        let result = try await agentEval(["log", "cat", fixture("support-sample.jsonl.gz")])
        #expect(result.status == 0)
        let lines = result.stdoutText.split(separator: "\n")
        #expect(lines.count == 27)
        #expect(lines.first?.hasPrefix("#0    step 0  2026-11-18T11:06:40.000Z  run_started") == true)
        #expect(lines.contains { $0.contains("DENY delete_customer (call-3) rule=no-deletes") })
        #expect(lines.last?.contains("run_stopped       success") == true)
    }

    @Test("log cat --json (and its old spelling --jsonl) prints the stored lines exactly, as zcat does")
    func catJSONL() async throws {
        let path = fixture("support-sample.jsonl.gz")
        let ours = try await agentEval(["log", "cat", "--json", path])
        let zcat = try await Subprocess.run(gzipPath, ["-dc", path])
        #expect(ours.status == 0)
        #expect(ours.stdout == zcat.stdout)
        #expect(try await agentEval(["log", "cat", "--jsonl", path]).stdout == zcat.stdout)
        let filtered = try await agentEval(["log", "cat", "--json", "--kind", "verdict_given", path])
        #expect(filtered.stdoutText.split(separator: "\n").count == 3)
        // A misspelt kind is a usage error whose list of kinds holds every kind --kind takes.
        let misspelt = try await agentEval(["log", "cat", "--kind", "nonsense", path])
        #expect(misspelt.status == 64 && misspelt.stderr.contains("run_forked, user_turn, pipeline_started"), "\(misspelt.stderr)")
    }

    @Test("log cat on a torn log prints the complete events and says where it was cut; one cut before its first event fails")
    func catTorn() async throws {
        let result = try await agentEval(["log", "cat", fixture("research-sample-torn.jsonl.gz")])
        #expect(result.status == 0)
        #expect(result.stdoutText.split(separator: "\n").count == 23)
        #expect(result.stderr.contains("note:"))
        #expect(result.stderr.contains("ends inside the gzip member that starts at byte 0"))
        #expect(result.stderr.contains("agent-eval log repair"))
        // Cut before its first event: no run, as verify says (exit 2), and nothing to seal, so no
        // repair is suggested.
        let cut = try await agentEval([
            "log", "cat", ExampleRuns.fixtures.appendingPathComponent("conformance/cut-before-the-first-event.jsonl.gz").path,
        ])
        #expect(cut.status == 2 && cut.stdout.isEmpty)
        #expect(cut.stderr.contains("error: no event could be read") && !cut.stderr.contains("log repair"), "\(cut.stderr)")
    }

    @Test("log verify: 0 for intact, 1 with the problems for damaged, 2 for unreadable")
    func verifyExitCodes() async throws {
        let intact = try await agentEval(["log", "verify", fixture("support-sample.jsonl.gz")])
        #expect(intact.status == 0)
        #expect(
            intact.stdoutText.contains(
                "intact — version 2, 2 gzip members, 27 events, seq 0 to 26, hash chain unbroken, 4 state digests checked"))

        // An event edited and the chain computed again: the chain holds, the digests do not, and that is no intact log.
        let editedPath = repositoryRoot.appendingPathComponent("Fixtures/conformance/edited-with-chain-recomputed.jsonl.gz").path
        let edited = try await agentEval(["log", "verify", editedPath])
        #expect(edited.status == 1, "\(edited.stdoutText)")
        #expect(
            edited.stdoutText.contains("EDITED — the hash chain holds, but the state digests recorded at seq 21, seq 25"),
            "\(edited.stdoutText)")
        let editedJSON = try JSONParser.parse(try await agentEval(["log", "verify", "--json", editedPath]).stdout)
        #expect(editedJSON["digest_mismatches"] == [21, 25] && editedJSON["intact"] == true, "the chain is intact; the record is not")

        let torn = try await agentEval(["log", "verify", fixture("research-sample-torn.jsonl.gz")])
        #expect(torn.status == 1)
        #expect(torn.stdoutText.contains("[torn_tail] member at byte 0, seq 23"))

        let missing = try await agentEval(["log", "verify", "/nonexistent/run.jsonl.gz"])
        #expect(missing.status == 2)
        #expect(
            missing.stderr.hasPrefix("error: cannot open the log for reading: No such file or directory\n  --> /nonexistent/run.jsonl.gz"))

        try await TemporaryDirectory.with { directory in
            let plain = directory.path("plain.jsonl")
            try Data("{}\n".utf8).write(to: URL(fileURLWithPath: plain))
            let notGzip = try await agentEval(["log", "verify", plain])
            #expect(notGzip.status == 2)
            #expect(notGzip.stderr.contains("error: the file is not a gzip-compressed log"))
            #expect(notGzip.stderr.contains("hint: agent-eval logs are gzip-compressed JSONL"))
            // gzip of a log's text, as the gzip tool writes it (its header names the file): gzip,
            // and a damaged log (no log member carries a name), not a file that is no gzip.
            let text = try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", fixture("support-sample.jsonl.gz")])
            try Data(text.stdout).write(to: URL(fileURLWithPath: directory.path("text.jsonl")))
            #expect(try await Subprocess.run("/usr/bin/env", ["gzip", directory.path("text.jsonl")]).status == 0)
            let named = try await agentEval(["log", "verify", directory.path("text.jsonl.gz")])
            #expect(named.status == 1, "\(named.stdoutText)\(named.stderr)")
            #expect(
                named.stdoutText.contains("[corrupt_member]") && named.stdoutText.contains("gzip FILE keeps the file's name"),
                "\(named.stdoutText)")

            // Damage: verify is the full report, so it sends the reader nowhere else for one.
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: fixture("support-sample.jsonl.gz"))))
            bytes[bytes.count / 3] ^= 0x40
            let damagedPath = directory.path("damaged.jsonl.gz")
            try Data(bytes).write(to: URL(fileURLWithPath: damagedPath))
            let damaged = try await agentEval(["log", "verify", damagedPath])
            #expect(damaged.status == 1)
            #expect(damaged.stdoutText.contains("[corrupt_member] member at byte 0, seq 0"))
            #expect(!damaged.stdoutText.contains("agent-eval log verify"))
        }
    }

    @Test("log verify tells a complete log from one that ends cleanly but unfinished, and from a torn one")
    func verifyEndings() async throws {
        try await TemporaryDirectory.with { directory in
            let reader = LogReader(path: fixture("support-sample.jsonl.gz"), options: LogReader.Options(resolvesContextPackets: true))
            let events = try reader.readAll().events.map(\.event)
            let path = directory.path("open.jsonl.gz")
            // The same run id: its states, and so the digests its step ends recorded, are the sample's.
            try LogWriter.withWriter(creating: path, runId: events[0].runId) { writer in
                for event in events.prefix(10) { try writer.append(event.payload, step: event.step, timeUs: event.timeUs) }
            }
            let open = try await agentEval(["log", "verify", path])
            #expect(open.status == 0)
            #expect(open.stdoutText.contains("unfinished: the log ends cleanly, but with context_built, not run_stopped"))
            var endings: [JSONValue?] = []
            for log in [path, fixture("support-sample.jsonl.gz"), fixture("research-sample-torn.jsonl.gz")] {
                endings.append(try JSONParser.parse(try await agentEval(["log", "verify", "--json", log]).stdout)["ending"])
            }
            #expect(endings == ["unfinished", "complete", "torn"])
        }
    }

    @Test("log verify --json reports members and problems for machines")
    func verifyJSON() async throws {
        let result = try await agentEval(["log", "verify", "--json", fixture("research-sample-torn.jsonl.gz")])
        #expect(result.status == 1)
        let report = try JSONParser.parse(result.stdout)
        #expect(report["intact"] == false)
        #expect(report["event_count"] == 23)
        #expect(report["problems"]?.arrayValue?.first?["code"] == "torn_tail")
        #expect(report["problems"]?.arrayValue?.first?["seq"] == 23)
    }

    @Test("log repair seals a torn copy; gzip -t then passes; a second repair has nothing to do")
    func repairTorn() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("torn.jsonl.gz")
            try FileManager.default.copyItem(atPath: fixture("research-sample-torn.jsonl.gz"), toPath: path)
            #expect(try await Subprocess.run(gzipPath, ["-t", path]).status != 0)
            let repaired = try await agentEval(["log", "repair", path])
            #expect(repaired.status == 0)
            #expect(repaired.stdoutText.contains("sealed"))
            #expect(repaired.stdoutText.contains("the last event is now seq 22"))
            #expect(try await Subprocess.run(gzipPath, ["-t", path]).status == 0)
            #expect(try await agentEval(["log", "verify", path]).status == 0)
            let again = try await agentEval(["log", "repair", "--json", path])
            #expect(again.status == 0)
            #expect(try JSONParser.parse(again.stdout)["sealed"] == false)
        }
    }

    @Test("log upgrade writes a version 3 copy and reads it back; 0 for a version 3 log, 1 for a torn one, 2 for a path taken")
    func upgrade() async throws {
        try await TemporaryDirectory.with { directory in
            let new = directory.path("new.jsonl.gz")
            let upgraded = try await agentEval(["log", "upgrade", "--json", fixture("support-sample.jsonl.gz"), new])
            #expect(upgraded.status == 0, "\(upgraded.stderr)")
            let report = try JSONParser.parse(upgraded.stdout)
            #expect(report["upgraded"] == true && report["version"] == 3 && report["source_version"] == 2)
            #expect(report["events"] == 27)
            #expect((report["bytes"]?.intValue ?? .max) < (report["source_bytes"]?.intValue ?? 0))
            #expect(try await agentEval(["log", "verify", new]).status == 0)
            #expect(try await Subprocess.run(gzipPath, ["-t", new]).status == 0)

            let again = try await agentEval(["log", "upgrade", new, directory.path("again.jsonl.gz")])
            #expect(again.status == 0)
            #expect(again.stdoutText.contains("version 3 already"))
            #expect(!FileManager.default.fileExists(atPath: directory.path("again.jsonl.gz")))

            let torn = try await agentEval(["log", "upgrade", fixture("research-sample-torn.jsonl.gz"), directory.path("torn.jsonl.gz")])
            #expect(torn.status == 1)
            #expect(torn.stderr.contains("a torn log is not upgraded"))
            #expect(torn.stderr.contains("hint: upgrade leaves OLD as it is: copy it, seal the copy (agent-eval log repair COPY)"))

            let taken = try await agentEval(["log", "upgrade", fixture("research-sample.jsonl.gz"), new])
            #expect(taken.status == 2)
            #expect(taken.stderr.contains("exists already: upgrade writes a new file and never overwrites one"))
        }
    }

    @Test("log repair refuses a corrupt middle with exit 1 and an explanation")
    func repairRefuses() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("corrupt.jsonl.gz")
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: fixture("support-sample.jsonl.gz"))))
            bytes[200] ^= 0x04
            bytes.removeLast(3)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let result = try await agentEval(["log", "repair", path])
            #expect(result.status == 1)
            #expect(result.stderr.contains("error: repair only seals a torn tail, and this log has other damage"))
            #expect(result.stderr.contains("--> \(path) (gzip member at byte 0, seq 0)"))
            #expect(result.stderr.contains("hint: inspect it with `agent-eval log verify"))
            #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        }
    }

    @Test("usage errors exit 64 and --help explains with an example")
    func usage() async throws {
        let bad = try await agentEval(["log", "verify"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("Missing expected argument '<file>'"))
        let help = try await agentEval(["log", "repair", "--help"])
        #expect(help.status == 0)
        #expect(help.stdoutText.contains("Example:"))
        #expect(help.stdoutText.contains("Repair refuses anything but a torn tail"))
    }
}
