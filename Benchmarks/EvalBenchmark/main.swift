// The eval benchmark: `agent-eval run`'s work on 1,000 recorded runs of 20 steps with 3
// expectations each, against the same work by two Python scripts beside this file, in the same
// run: a plain one (eval_logs.py: gzip + json) and a fast one (eval_logs_fast.py: whole-member
// zlib + orjson, in the virtual environment `scripts/python_venv bench` makes), and Inspect AI's
// own reader on the same runs converted to its `.eval` format (eval_logs_inspect.py, with
// inspect-ai from `scripts/python_venv interop`; the conversion is not timed); then one job's
// time stage by stage (inflate, read, fold, digests) on the same logs. Inspect's files hold
// less than ours (no context packets, verdicts, intents or step ends), so the bytes on disk are
// also given for our logs cut to what the `.eval` files hold: a like-for-like ratio.
//
//   swift run -c release eval-benchmark [--runs 1000] [--steps 20] [--repetitions 5] [--jobs 2] [--dir PATH] [--stages-only] [--stage TEXT] [--keep]
//
// `--stages-only` skips the runner and the Python peers: the one-thread stages alone, for
// comparing two builds of the reader quickly. `--stage TEXT` (implies `--stages-only`) times
// only the stages whose names contain TEXT, e.g. `--stage LogFacts` under `perf record`;
// `--keep` leaves the corpus in `--dir` at the end.
//
// Prints medians of the repetitions; see docs/performance.md.
import BenchmarkSupport
import EvalEngine
import Foundation
import TestSupport
import TraceCore
import TraceLog

struct Settings {
    var runs = 1000
    var steps = 20
    var repetitions = 5
    var jobs = 2
    var directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-eval-bench").path
    var stagesOnly = false
    /// Only the stages whose names contain this (`--stage`).
    var stageFilter: String?
    /// Leave the corpus in `directory` at the end (`--keep`), to look at or measure by hand.
    var keepsCorpus = false
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        if argument == "--stages-only" || argument == "--keep" {
            if argument == "--keep" { settings.keepsCorpus = true } else { settings.stagesOnly = true }
            continue
        }
        let value = arguments.next() ?? ""
        switch argument {
        case "--runs": settings.runs = Int(value) ?? settings.runs
        case "--steps": settings.steps = Int(value) ?? settings.steps
        case "--repetitions": settings.repetitions = Int(value) ?? settings.repetitions
        case "--jobs": settings.jobs = Int(value) ?? settings.jobs
        case "--dir": settings.directory = value
        case "--stage" where !value.isEmpty:
            settings.stageFilter = value
            settings.stagesOnly = true
        default:
            FileHandle.standardError.write(
                Data(
                    "usage: eval-benchmark [--runs N] [--steps N] [--repetitions N] [--jobs N] [--dir PATH] [--stages-only] [--stage TEXT] [--keep]\n"
                        .utf8))
            exit(argument == "--help" ? 0 : 64)
        }
    }
    return settings
}

let settings = parseSettings()
let logs = settings.directory + "/logs"
try? FileManager.default.removeItem(atPath: settings.directory)
try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
defer { if !settings.keepsCorpus { try? FileManager.default.removeItem(atPath: settings.directory) } }

// The corpus: realistic event sizes, written by the real writer.
var corpus = SyntheticCorpus()
var jsonBytes = 0
var eventCount = 0
// The same runs in log format version 1 (every line linked), not read: the bytes on disk the
// version 3 format saves, measured in the same run.
let logsVersion1 = settings.directory + "/logs-v1"
try FileManager.default.createDirectory(atPath: logsVersion1, withIntermediateDirectories: true)
for index in 0..<settings.runs {
    let run = corpus.run(index: index, steps: settings.steps)
    for (directory, version) in [(logs, Event.memberChainVersion), (logsVersion1, 1)] {
        let clock = SteppingClock(startUs: 1_795_000_000_000_000 + index * 1_000_000_000, incrementUs: 1_000)
        try LogWriter.withWriter(
            creating: "\(directory)/\(run.runId).jsonl.gz", runId: run.runId, options: .init(formatVersion: version)
        ) { writer in
            // Real state digests at every step end: the runner checks them, as it does for any log.
            try SyntheticCorpus.record(run, into: writer, clock: clock)
            if version == Event.memberChainVersion {
                jsonBytes += writer.jsonlBytes
                eventCount += writer.nextSequence
            }
        }
    }
}

/// The bytes of the files in `directory` whose names end in `suffix`.
func bytesOnDisk(_ directory: String, suffix: String) -> Int {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return names.filter { $0.hasSuffix(suffix) }.reduce(0) { total, name in
        total + ((try? FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? Int) ?? 0)
    }
}

/// What the version 3 logs in `directory` would take on disk holding only what
/// eval_logs_inspect.py gives Inspect's `.eval` files: each log's `run_started`,
/// `decision_made`, `tool_completed` and `run_stopped` lines as they are (envelope, `prev` and
/// all), as one gzip member at the writer's level. Without the context packets, verdicts,
/// intents and step ends (with their state digests), which the `.eval` files do not hold.
func bytesOfInspectsContent(_ directory: String) throws -> Int {
    let kept: Set<String> = ["run_started", "decision_made", "tool_completed", "run_stopped"]
    let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".jsonl.gz") }
    var total = 0
    for name in names {
        var subset: [UInt8] = []
        // Every member's lines (a log past the writer's member bound has several).
        _ = try LogReader(path: directory + "/" + name).forEachLine { line, recorded in
            guard kept.contains(recorded.event.payload.kind) else { return }
            subset.append(contentsOf: line)
            subset.append(0x0A)
        }
        total += try GzipData.compress(subset, level: LogWriter.Options().compressionLevel).count
    }
    return total
}

func printBytesPerEvent(_ name: String, _ bytes: Int, events: Int) {
    print(
        String(
            format: "%-46@ %6.1f bytes per event  (%.1f MB, %d events)", name as NSString, Double(bytes) / Double(events),
            Double(bytes) / 1e6, events))
}
let caseFile = settings.directory + "/bench.yaml"
try """
caseId: bench
logs: logs/*.jsonl.gz
expected:
  toolsCalled: [tool_1]
  toolsNotCalled: [tool_3]
  stopReason: success
""".write(toFile: caseFile, atomically: true, encoding: .utf8)
let (cases, errors) = EvalSuite.load(paths: [caseFile])
guard errors.isEmpty, cases.count == 1 else {
    FileHandle.standardError.write(Data("cannot load the benchmark case: \(errors)\n".utf8))
    exit(1)
}
let megabytes = Double(jsonBytes) / 1e6
print(
    "eval-benchmark: \(settings.runs) runs × \(settings.steps) steps, \(String(format: "%.1f", megabytes)) MB of JSON, "
        + "3 expectations, \(settings.repetitions) repetitions, --jobs \(settings.jobs)")

if !settings.stagesOnly {
    var ours: [Double] = []
    var oursCPU: [Double] = []
    for _ in 0..<settings.repetitions {
        let started = ContinuousClock.now
        let cpuStarted = ProcessCPU.seconds()
        let results = await EvalRunner(options: EvalOptions(jobs: settings.jobs)).run(cases)
        ours.append(seconds(ContinuousClock.now - started))
        oursCPU.append(ProcessCPU.seconds() - cpuStarted)
        guard results.first?.runs.count == settings.runs, results.first?.passed == true else {
            FileHandle.standardError.write(Data("the benchmark case did not pass on every run\n".utf8))
            exit(1)
        }
    }

    // The Python peers, each run the same number of times in one interpreter (their own timing).
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let repository = here.deletingLastPathComponent().deletingLastPathComponent()
    /// The median wall and CPU seconds of a Python peer's repetitions (its own timing).
    var pythonCPU: [String: Double] = [:]
    func pythonSeconds(_ python: String, _ script: String, directory: String = logs) throws -> Double {
        let result = try Subprocess.runBlocking(python, [here.appendingPathComponent(script).path, directory, "\(settings.repetitions)"])
        let times = result.stdoutText.split(separator: "\n").compactMap { line -> (wall: Double, cpu: Double)? in
            let fields = line.split(separator: " ")
            guard fields.count == 6, Int(fields[1]) == settings.runs, let wall = Double(fields[2]), let cpu = Double(fields[5]) else {
                return nil
            }
            return (wall, cpu)
        }
        guard times.count == settings.repetitions else {
            FileHandle.standardError.write(Data("\(script) failed: \(result.stdoutText)\(result.stderr)\n".utf8))
            exit(1)
        }
        pythonCPU[script] = median(times.map(\.cpu))
        return median(times.map(\.wall))
    }
    let plainPython = try pythonSeconds(Subprocess.which("python3") ?? "/usr/bin/python3", "eval_logs.py")
    // The faster peer needs orjson from PyPI, in a virtual environment the script makes once.
    let venv = try Subprocess.runBlocking("/bin/bash", [repository.appendingPathComponent("scripts/python_venv").path, "bench"])
    let fastPython =
        venv.status == 0
        ? try pythonSeconds(venv.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) + "/bin/python", "eval_logs_fast.py") : nil

    // Inspect AI reads its own format: the same runs as `.eval` logs, one sample each.
    let interop = try Subprocess.runBlocking("/bin/bash", [repository.appendingPathComponent("scripts/python_venv").path, "interop"])
    var inspectPython: Double?
    var inspectProblem = interop.stderr
    if interop.status == 0 {
        let python = interop.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) + "/bin/python"
        let converted = settings.directory + "/inspect"
        print("converting the \(settings.runs) runs to Inspect's .eval format (not timed)…")
        let conversion = try Subprocess.runBlocking(
            python, [here.appendingPathComponent("eval_logs_inspect.py").path, "convert", logs, converted])
        if conversion.status == 0 {
            inspectPython = try pythonSeconds(python, "eval_logs_inspect.py", directory: converted)
        } else {
            inspectProblem = conversion.stderr
        }
    }

    let ourMedian = median(ours)
    // On disk, per event of the corpus (the same runs in each format).
    let ourBytes = bytesOnDisk(logs, suffix: ".jsonl.gz")
    printBytesPerEvent("on disk, log format version 3:", ourBytes, events: eventCount)
    printBytesPerEvent("on disk, log format version 1:", bytesOnDisk(logsVersion1, suffix: ".jsonl.gz"), events: eventCount)
    // Inspect's files hold less than ours: the same content in our format, for a like-for-like ratio.
    let sameContentBytes = try bytesOfInspectsContent(logs)
    printBytesPerEvent("version 3, only what the .eval files hold:", sameContentBytes, events: eventCount)
    if inspectPython != nil {
        let inspectBytes = bytesOnDisk(settings.directory + "/inspect", suffix: ".eval")
        printBytesPerEvent("on disk, Inspect AI's .eval:", inspectBytes, events: eventCount)
        print(String(format: "ratio: %.2fx Inspect AI's bytes on disk (target <= 1)", Double(ourBytes) / Double(inspectBytes)))
        print(
            String(
                format: "ratio: %.2fx Inspect AI's bytes for the same content (only what the .eval files hold)",
                Double(sameContentBytes) / Double(inspectBytes)))
    }
    func line(_ name: String, _ time: Double) {
        print(
            String(
                format: "%-46@ %.3f s  %5.0f runs/s  %6.1f MB/s of JSON", name as NSString, time, Double(settings.runs) / time,
                megabytes / time))
    }
    line("agent-eval run (EvalRunner, --jobs \(settings.jobs)):", ourMedian)
    line("python3 gzip + json (one process):", plainPython)
    if let fastPython {
        line("python3 whole-member zlib + orjson:", fastPython)
    } else {
        print("python3 whole-member zlib + orjson: not run (scripts/python_venv bench failed: \(venv.stderr))")
    }
    if let inspectPython {
        line("Inspect AI read_eval_log, same runs as .eval:", inspectPython)
    } else {
        print("Inspect AI read_eval_log: not run (\(inspectProblem.trimmingCharacters(in: .whitespacesAndNewlines)))")
    }
    // Issue 51's targets per core: 2.5x the plain script, 1.5x the orjson one (times the jobs).
    let cores = Double(min(settings.jobs, ProcessInfo.processInfo.activeProcessorCount))
    print(String(format: "ratio: %.2fx the plain Python script (target >= %.1fx: 2.5x per job)", plainPython / ourMedian, 2.5 * cores))
    if let fastPython {
        print(String(format: "ratio: %.2fx the orjson Python script (target >= %.1fx: 1.5x per job)", fastPython / ourMedian, 1.5 * cores))
    }
    if let inspectPython { print(String(format: "ratio: %.2fx Inspect AI's reader", inspectPython / ourMedian)) }
    // The same, in CPU time: runs per CPU-second, which a busy machine changes least.
    let ourCPU = median(oursCPU)
    print(String(format: "CPU time: agent-eval run %.3f s (%.0f runs per CPU-second)", ourCPU, Double(settings.runs) / ourCPU))
    for (script, name) in [
        ("eval_logs.py", "the plain Python script"), ("eval_logs_fast.py", "the orjson Python script"),
        ("eval_logs_inspect.py", "Inspect AI's reader"),
    ] {
        guard let cpu = pythonCPU[script] else { continue }
        print(
            String(
                format: "CPU time: %@ %.3f s (%.0f runs per CPU-second); ratio %.2fx", name as NSString, cpu, Double(settings.runs) / cpu,
                cpu / ourCPU))
    }
}

// Where one job's time goes: the same logs, one thread, each stage adding to the one before.
let paths = try FileManager.default.contentsOfDirectory(atPath: logs).sorted().map { "\(logs)/\($0)" }
func stage(_ name: String, _ body: (String) throws -> Void) throws {
    if let filter = settings.stageFilter, !name.contains(filter) { return }
    var times: [Double] = []
    for _ in 0..<settings.repetitions {
        times.append(try seconds { for path in paths { try body(path) } })
    }
    let time = median(times)
    print(String(format: "  %-58@ %6.1f µs/run  %6.1f MB/s", name as NSString, time / Double(paths.count) * 1e6, megabytes / time))
}
print("one thread, stage by stage (medians):")
let limit = InflateLimit()
try stage("inflate alone (libdeflate, whole members; the limit)") { path in _ = try limit.libdeflate(path) }
try stage("inflate alone (zlib, streaming)") { path in _ = try limit.zlib(path) }
try stage("read: inflate, hash chain, decode every event") { path in
    _ = try LogReader(path: path).forEachEvent { _ in }
}
// The same runs as version 1 logs (every line hashed for its link): what version 3 saves.
let pathsVersion1 = paths.map { logsVersion1 + "/" + ($0 as NSString).lastPathComponent }
var version1Index = 0
try stage("read, the same runs as version 1 logs") { _ in
    _ = try LogReader(path: pathsVersion1[version1Index % pathsVersion1.count]).forEachEvent { _ in }
    version1Index += 1
}
try stage("inflate alone, the same runs as version 1 logs") { _ in
    _ = try limit.libdeflate(pathsVersion1[version1Index % pathsVersion1.count])
    version1Index += 1
}
try stage("read + fold") { path in
    var state = RunState()
    _ = try LogReader(path: path).forEachEvent { RunState.reduce(into: &state, $0.event) }
}
try stage("read + fold + check every state digest (LogFacts.read)") { path in _ = try LogFacts.read(path) }
// The whole runner, one job: `LogFacts.read` of every log, then the case's checks, the verdicts
// and the results. What it takes past the stage above is the runner's own work (a stage of its
// own so that `--stage` and scripts/instruction_ab.py can time and count it alone).
let runnerStage = "agent-eval run --jobs 1 (EvalRunner: read, check, results)"
if settings.stageFilter.map({ runnerStage.contains($0) }) ?? true {
    var times: [Double] = []
    for _ in 0..<settings.repetitions {
        let started = ContinuousClock.now
        let results = await EvalRunner(options: EvalOptions(jobs: 1)).run(cases)
        times.append(seconds(ContinuousClock.now - started))
        guard results.first?.runs.count == paths.count, results.first?.passed == true else {
            FileHandle.standardError.write(Data("the benchmark case did not pass on every run\n".utf8))
            exit(1)
        }
    }
    let time = median(times)
    print(String(format: "  %-58@ %6.1f µs/run  %6.1f MB/s", runnerStage as NSString, time / Double(paths.count) * 1e6, megabytes / time))
}
// Where the reader's time goes past inflating: the same runs' text inflated beforehand, in
// memory, so that each stage below is CPU work alone. Each is timed on its own (they do not
// add up): hashing the text once (what the member chain costs), splitting it into lines and
// checking each is well-formed JSON without making anything (the speed of a scan), decoding
// every event the way a fold-only reader does, then folding, then checking every digest.
let textStages = (
    hash: "text in memory: SHA-256 of all of it", scan: "text in memory: split, check each line is JSON (a scan)",
    decode: "text in memory: split, decode every event", fold: "text in memory: split, decode, fold",
    digests: "text in memory: split, decode, fold, every state digest"
)
let texts: [String: [UInt8]] = try {
    let names = [textStages.hash, textStages.scan, textStages.decode, textStages.fold, textStages.digests]
    guard names.contains(where: { name in settings.stageFilter.map { name.contains($0) } ?? true }) else { return [:] }
    var texts: [String: [UInt8]] = [:]
    for path in paths {
        var all: [UInt8] = []
        _ = try LogReader(path: path).forEachLine { line, _ in
            all.append(contentsOf: line)
            all.append(0x0A)
        }
        texts[path] = all
    }
    return texts
}()
func eachLine(_ path: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    try texts[path, default: []].withUnsafeBytes { buffer in
        guard let base = buffer.baseAddress else { return }
        var start = 0
        while start < buffer.count, let newline = memchr(base + start, 0x0A, buffer.count - start) {
            let end = base.distance(to: UnsafeRawPointer(newline))
            try body(UnsafeRawBufferPointer(rebasing: buffer[start..<end]))
            start = end + 1
        }
    }
}
func decodeForFold(_ line: UnsafeRawBufferPointer) throws -> Event {
    try Event(line: line, runId: nil, previousHash: nil, keepsPacketText: false)
}
try stage(textStages.hash) { path in _ = ContentHash.sha256Hex(texts[path, default: []]) }
try stage(textStages.scan) { path in
    try eachLine(path) { line in try JSONScanner.scan(line) { try $0.skipValue() } }
}
try stage(textStages.decode) { path in try eachLine(path) { _ = try decodeForFold($0) } }
try stage(textStages.fold) { path in
    var state = RunState()
    try eachLine(path) { RunState.reduce(into: &state, try decodeForFold($0)) }
}
try stage(textStages.digests) { path in
    var state = RunState()
    var digester = StateDigester()
    try eachLine(path) { line in
        let event = try decodeForFold(line)
        if case .stepEnded = event.payload { _ = digester.digest(of: state) }
        digester.track(RunState.reduce(into: &state, event))
    }
}
