// The log benchmark: write, read + fold, and the physical limits, on a synthetic corpus.
//
//   swift run -c release log-benchmark [--runs 1000] [--steps 20] [--repetitions 5] [--dir PATH]
//
// Prints medians of the repetitions. See docs/performance.md.
import CZlib
import Foundation
import TestSupport
import TraceCore
import TraceLog

struct Settings {
    var runs = 1000
    var steps = 20
    var repetitions = 5
    var directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-bench").path
    var bigRunSteps = 20_000
    var keepsFiles = false
    var level: Int32 = LogWriter.Options().compressionLevel
    /// Whether the writer redacts (`Redactor.standard`, every writer's default) or not.
    var redacts = true
    /// Sizes (MB of JSONL) of the single long logs read on their own.
    var sizes = [1, 100, 1000]
}

let usage = """
    usage: log-benchmark [--runs N] [--steps N] [--repetitions N] [--dir PATH] [--big-run-steps N] [--level 1-9] [--sizes MB,…] [--no-redact] [--keep]
      --runs N           runs in the corpus (1000)
      --steps N          steps per run (20)
      --repetitions N    repetitions; medians are reported (5; 3 at most for a long log of 500 MB or more)
      --dir PATH         where the logs are written (a temporary directory)
      --big-run-steps N  steps of the long run used for the memory figures (20000)
      --level 1-9        zlib level for writing (the writer's default)
      --sizes MB,…       one long log of each size (MB of JSONL) read on its own: MB/s and peak memory
                         (1,100,1000; "none" skips them)
      --no-redact        write without the redaction step every writer has by default (its cost, by difference)
      --keep             keep the written logs
    log-benchmark read-dir DIR   read + fold every log in DIR, then time each stage of reading alone
                                 (STAGES=0: the read + fold alone, for profilers)
    """

extension Settings {
    var redactor: Redactor? { redacts ? Redactor.standard : nil }
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        if argument == "--help" || argument == "-h" {
            print(usage)
            exit(0)
        }
        if argument == "--keep" {
            settings.keepsFiles = true
            continue
        }
        if argument == "--no-redact" {
            settings.redacts = false
            continue
        }
        let value = arguments.next() ?? ""
        switch argument {
        case "--runs": settings.runs = Int(value) ?? settings.runs
        case "--steps": settings.steps = Int(value) ?? settings.steps
        case "--repetitions": settings.repetitions = Int(value) ?? settings.repetitions
        case "--dir": settings.directory = value
        case "--level": settings.level = Int32(value) ?? settings.level
        case "--big-run-steps": settings.bigRunSteps = Int(value) ?? settings.bigRunSteps
        case "--sizes": settings.sizes = value == "none" ? [] : value.split(separator: ",").compactMap { Int($0) }
        default:
            FileHandle.standardError.write(
                Data(
                    "usage: log-benchmark [--runs N] [--steps N] [--repetitions N] [--dir PATH] [--big-run-steps N] [--level 1-9] [--sizes MB,…] [--keep]\n"
                        .utf8))
            exit(64)
        }
    }
    return settings
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
}

/// Writes every run to its own log; returns the paths and the seconds spent appending and
/// closing (creating the files is ext4's inode allocator, timed apart).
func writeCorpus(_ runs: [SyntheticCorpus.Run], to directory: String, options: LogWriter.Options) throws -> (
    paths: [String], seconds: Double, createSeconds: Double
) {
    try? FileManager.default.removeItem(atPath: directory)
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var paths: [String] = []
    var time = 1_795_000_000_000_000
    var total = 0.0
    var creating = 0.0
    for run in runs {
        let path = "\(directory)/\(run.runId).jsonl.gz"
        var writer: LogWriter?
        creating += try seconds { writer = try LogWriter.create(at: path, runId: run.runId, options: options) }
        guard let writer else { continue }
        total += try seconds {
            for (payload, step) in run.events {
                time += 1000
                try writer.append(payload, step: step, timeUs: time)
            }
            try writer.close()
        }
        paths.append(path)
    }
    return (paths, total, creating)
}

/// One gzip -6 stream per run of exactly the JSONL our writer wrote, in process (zlib level 6
/// is what gzip -6 does), as the size to beat.
func gzipSixSize(of path: String) throws -> Int {
    var text: [UInt8] = []
    _ = try LogReader(path: path).forEachLine { line, _ in
        text.append(contentsOf: line)
        text.append(0x0A)
    }
    var stream = z_stream()
    deflateInit2_(&stream, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
    defer { deflateEnd(&stream) }
    var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(text.count))) + 64)
    let written = text.withUnsafeMutableBufferPointer { input in
        output.withUnsafeMutableBufferPointer { out -> Int in
            stream.next_in = input.baseAddress
            stream.avail_in = uInt(input.count)
            stream.next_out = out.baseAddress
            stream.avail_out = uInt(out.count)
            deflate(&stream, Z_FINISH)
            return out.count - Int(stream.avail_out)
        }
    }
    return written
}

/// Reads and folds one log as the project's folds do: a long log's outputs go back to the log
/// (`StoredOutputs`, for logs of 4 MiB or more).
func readAndFold(_ path: String) throws -> (events: Int, bytes: Int) {
    var state = RunState()
    var stored = StoredOutputs(log: path)
    let summary = try LogReader(path: path, options: .init(keepsPacketText: false)).forEachEvent { recorded in
        let change = RunState.reduce(into: &state, recorded.event)
        stored.folded(recorded, change: change, into: &state)
    }
    precondition(state.stopReason != nil || summary.eventCount == 0)
    return (summary.eventCount, summary.decompressedBytes)
}

/// Peak resident memory (VmHWM) of this process, in KiB.
func peakResidentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
    return -1
}

/// Runs this program again to read one file, so the peak is that read's alone; with `folds`
/// the events are also folded into a state (which holds every call and result).
func readerPeakKiB(_ path: String, folds: Bool) throws -> Int {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = [folds ? "peak-rss-fold" : "peak-rss", path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Int(String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

if CommandLine.arguments.count == 3 && CommandLine.arguments[1].hasPrefix("peak-rss") {
    if CommandLine.arguments[1] == "peak-rss-fold" {
        _ = try readAndFold(CommandLine.arguments[2])
    } else {
        var events = 0
        _ = try LogReader(path: CommandLine.arguments[2]).forEachEvent { _ in events += 1 }
        precondition(events > 0)
    }
    print(peakResidentKiB())
    exit(0)
}

// `log-benchmark read-dir DIR`: only read + fold every log in DIR, for profilers.
if CommandLine.arguments.count == 3 && CommandLine.arguments[1] == "read-dir" {
    let directory = CommandLine.arguments[2]
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
        FileHandle.standardError.write(Data("log-benchmark read-dir: cannot list \(directory) (write one with --keep --dir PATH)\n".utf8))
        exit(66)
    }
    let files = names.filter { $0.hasSuffix(".jsonl.gz") }.sorted().map { "\(directory)/\($0)" }
    var rates: [Double] = []
    var bytes = 0
    for _ in 0..<7 {
        bytes = 0
        let elapsed = try seconds { for file in files { bytes += try readAndFold(file).bytes } }
        rates.append(Double(bytes) / 1e6 / elapsed)
    }
    print("\(files.count) logs, \(bytes / 1_000_000) MB of JSONL, median \(Int(median(rates))) MB/s of 7, best \(Int(rates.max() ?? 0))")
    // Where the time goes: the same files decompressed to lines once, then each stage alone
    // (skipped with STAGES=0, for profiling the whole read).
    if ProcessInfo.processInfo.environment["STAGES"] == "0" { exit(0) }
    var lines: [[UInt8]] = []
    // Where each log's lines start: the fold stage folds each log into a state of its own.
    var firstLines: Set<Int> = []
    for file in files {
        firstLines.insert(lines.count)
        _ = try LogReader(path: file).forEachLine { line, _ in lines.append(Array(line)) }
    }
    let stages = [
        "sha-256 of lines (two at a time, as the reader hashes them)", "JSON parse to a tree", "event decode (parse + typed payload)",
        "event decode + fold",
    ]
    for (index, name) in stages.enumerated() {
        var stageRates: [Double] = []
        for _ in 0..<5 {
            var state = RunState()
            let start = ContinuousClock.now
            for (position, line) in lines.enumerated() {
                if firstLines.contains(position) { state = RunState() }
                switch index {
                case 0:
                    if position % 2 == 1 { continue }
                    if position + 1 < lines.count {
                        _ = line.withUnsafeBytes { first in lines[position + 1].withUnsafeBytes { ContentHash.sha256HexPair(first, $0) } }
                    } else {
                        _ = ContentHash.sha256Hex(line)
                    }
                case 1: _ = try JSONParser.parse(line)
                case 2: _ = try Event(line: line)
                default: RunState.reduce(into: &state, try Event(line: line))
                }
            }
            let elapsed = ContinuousClock.now - start
            stageRates.append(Double(bytes) / 1e6 / (Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds)))
        }
        print("  \(name): best \(Int(stageRates.max() ?? 0)) MB/s")
    }
    exit(0)
}

let settings = parseSettings()
print("generating \(settings.runs) runs x \(settings.steps) steps …")
var corpus = SyntheticCorpus()
let runs = (0..<settings.runs).map { corpus.run(index: $0, steps: settings.steps) }
let eventCount = runs.reduce(0) { $0 + $1.events.count }

// Write at the default policy and with a flush after every event.
var writeTimes: [Double] = []
var createTimes: [Double] = []
var writeEveryTimes: [Double] = []
var paths: [String] = []
var everyPaths: [String] = []
var signedTimes: [Double] = []
var signedPaths: [String] = []
// Signing: an Ed25519 signature at every member close and run end (docs/log-format.md, "Signed logs").
let keyPath = settings.directory + "-key"
try? FileManager.default.removeItem(atPath: keyPath)
try? FileManager.default.removeItem(atPath: keyPath + ".pub")
try LogSigner.generateKeyFiles(at: keyPath)
let signer = try LogSigner(keyFile: keyPath)
defer {
    try? FileManager.default.removeItem(atPath: keyPath)
    try? FileManager.default.removeItem(atPath: keyPath + ".pub")
}
for repetition in 0..<settings.repetitions {
    print("write, repetition \(repetition + 1)/\(settings.repetitions)")
    let standard = try writeCorpus(
        runs, to: settings.directory + "/standard", options: .init(compressionLevel: settings.level, redactor: settings.redactor))
    paths = standard.paths
    writeTimes.append(standard.seconds)
    createTimes.append(standard.createSeconds)
    let every = try writeCorpus(
        runs, to: settings.directory + "/every-event",
        options: .init(durability: .init(flush: .everyEvent), compressionLevel: settings.level, redactor: settings.redactor))
    everyPaths = every.paths
    writeEveryTimes.append(every.seconds)
    let signed = try writeCorpus(
        runs, to: settings.directory + "/signed",
        options: .init(compressionLevel: settings.level, signer: signer, redactor: settings.redactor))
    signedPaths = signed.paths
    signedTimes.append(signed.seconds)
}
// The writer's work before zlib: encoding each event and hashing its line.
var encodeTimes: [Double] = []
for _ in 0..<settings.repetitions {
    encodeTimes.append(
        seconds {
            var writer = JSONWriter(capacity: 4096)
            var hashes = 0
            for run in runs {
                for (sequence, (payload, step)) in run.events.enumerated() {
                    writer.removeAll()
                    Event(runId: run.runId, sequence: sequence, step: step, timeUs: 0, previousHash: ContentHash.genesis, payload: payload)
                        .encode(into: &writer)
                    hashes &+= writer.withUnsafeBytes { ContentHash.sha256Hex($0) }.utf8.count
                }
            }
            precondition(hashes > 0)
        })
}
// The writer's physical limit: zlib alone on the very lines the writer wrote (read back from
// its logs, hash chain and times included), with the sync flushes and member ends it made
// (durability points; the members as they are in the files); no encoding, hashing or files.
var lineSets: [[(line: [UInt8], flushes: Bool, ends: Bool)]] = []
for path in paths {
    var lines: [(line: [UInt8], flushes: Bool, ends: Bool)] = []
    var members: [Int] = []
    _ = try LogReader(path: path).forEachLine { line, recorded in
        lines.append((Array(line) + [0x0A], recorded.event.payload.isDurabilityPoint, false))
        members.append(recorded.location.memberIndex)
    }
    for index in lines.indices where index + 1 == lines.count || members[index + 1] != members[index] { lines[index].ends = true }
    lineSets.append(lines)
}
var ceilingTimes: [Double] = []
/// What the limit's zlib produced, to compare with the writer's files (the same deflate work
/// gives the same size, give or take the gzip headers' bytes).
var ceilingBytes = 0
for _ in 0..<settings.repetitions {
    ceilingBytes = 0
    ceilingTimes.append(
        seconds {
            var stream = z_stream()
            deflateInit2_(&stream, settings.level, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
            var output = [UInt8](repeating: 0, count: 1 << 20)
            output.withUnsafeMutableBufferPointer { out in
                for lines in lineSets {
                    for entry in lines {
                        entry.line.withUnsafeBufferPointer { input in
                            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                            stream.avail_in = uInt(input.count)
                            stream.next_out = out.baseAddress
                            stream.avail_out = uInt(out.count)
                            deflate(&stream, entry.ends ? Z_FINISH : entry.flushes ? Z_SYNC_FLUSH : Z_NO_FLUSH)
                            ceilingBytes += out.count - Int(stream.avail_out)
                        }
                        if entry.ends { deflateReset(&stream) }
                    }
                }
            }
            deflateEnd(&stream)
        })
}
// fsync at durability points: on a sample of runs, since every fsync waits for the disk.
let syncSample = Array(runs.prefix(max(1, settings.runs / 20)))
let syncSampleEvents = syncSample.reduce(0) { $0 + $1.events.count }
var syncTimes: [Double] = []
for _ in 0..<settings.repetitions {
    syncTimes.append(
        try writeCorpus(
            syncSample, to: settings.directory + "/fsync",
            options: .init(
                durability: .init(flush: .durabilityPoints, sync: .durabilityPoints), compressionLevel: settings.level,
                redactor: settings.redactor)
        ).seconds)
}
let compressed = paths.reduce(0) { $0 + fileSize($1) }
let compressedEvery = everyPaths.reduce(0) { $0 + fileSize($1) }
let gzipSix = try paths.reduce(0) { $0 + (try gzipSixSize(of: $1)) }

// Read + fold, inflate only, and the system gzip -dc, on the same files.
var readTimes: [Double] = []
var inflateTimes: [Double] = []
var zlibInflateTimes: [Double] = []
let inflateLimit = InflateLimit()
var gzipTimes: [Double] = []
var jsonBytes = 0
for repetition in 0..<settings.repetitions {
    print("read, repetition \(repetition + 1)/\(settings.repetitions)")
    readTimes.append(try seconds { jsonBytes = try paths.reduce(0) { $0 + (try readAndFold($1)).bytes } })
    inflateTimes.append(try seconds { _ = try paths.reduce(0) { $0 + (try inflateLimit.libdeflate($1)) } })
    zlibInflateTimes.append(try seconds { _ = try paths.reduce(0) { $0 + (try inflateLimit.zlib($1)) } })
    gzipTimes.append(
        try seconds {
            for batch in stride(from: 0, to: paths.count, by: 200) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "gzip -dc \"$@\" > /dev/null", "sh"] + paths[batch..<min(batch + 200, paths.count)]
                try process.run()
                process.waitUntilExit()
            }
        })
}

// Peak memory of the reader: a normal run against one 1,000 times longer.
print("memory: writing a run of \(settings.bigRunSteps) steps …")
let bigRun = corpus.run(index: -1, steps: settings.bigRunSteps)
let bigPaths = try writeCorpus([bigRun], to: settings.directory + "/big", options: .init()).paths
let smallPeak = try readerPeakKiB(paths[0], folds: false)
let bigPeak = try readerPeakKiB(bigPaths[0], folds: false)
let smallFoldPeak = try readerPeakKiB(paths[0], folds: true)
let bigFoldPeak = try readerPeakKiB(bigPaths[0], folds: true)

let mb = 1_000_000.0
let writeSeconds = median(writeTimes)
let writeEverySeconds = median(writeEveryTimes)
let readSeconds = median(readTimes)
let inflateSeconds = median(inflateTimes)
let gzipSeconds = median(gzipTimes)
let readMBs = Double(jsonBytes) / mb / readSeconds
let inflateMBs = Double(jsonBytes) / mb / inflateSeconds
func format(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

print(
    """

    corpus: \(settings.runs) runs x \(settings.steps) steps = \(eventCount) events, \(format(Double(jsonBytes) / mb)) MB of JSONL \
    (\(jsonBytes / eventCount) B/event); medians of \(settings.repetitions) repetitions, release build

    write, default policy (flush at durability points, no fsync):
      \(format(Double(eventCount) / writeSeconds / 1000)) k events/s, \(format(Double(jsonBytes) / mb / writeSeconds)) MB/s of JSONL
      \(format(Double(compressed) / Double(eventCount))) compressed bytes/event; size = \(format(Double(compressed) / Double(gzipSix), 3)) x one gzip -6 stream per run (\(format(Double(gzipSix) / Double(eventCount))) B/event)
      zlib alone at level \(settings.level) with the same flushes (the physical limit): \(format(Double(eventCount) / median(ceilingTimes) / 1000)) k events/s; writer / limit = \(format(median(ceilingTimes) / writeSeconds, 2))
      (the limit compresses the lines read back from the writer's logs: \(ceilingBytes) bytes out, the logs \(compressed))
      (creating the \(settings.runs) files, timed apart: \(format(median(createTimes) * 1e6 / Double(settings.runs), 0)) µs each)
      encoding + hashing alone: \(format(Double(eventCount) / median(encodeTimes) / 1000)) k events/s
    write, fsync at durability points (\(syncSample.count) runs):
      \(format(Double(syncSampleEvents) / median(syncTimes) / 1000)) k events/s, same bytes as the default
    write, signed (an Ed25519 signature at every member close and run end):
      \(format(Double(eventCount) / median(signedTimes) / 1000)) k events/s; signed / unsigned time = \(format(median(signedTimes) / writeSeconds, 2)); \
    +\(format(Double(signedPaths.reduce(0) { $0 + fileSize($1) } - paths.reduce(0) { $0 + fileSize($1) }) / Double(settings.runs), 0)) bytes per run
    write, flush after every event:
      \(format(Double(eventCount) / writeEverySeconds / 1000)) k events/s, \(format(Double(compressedEvery) / Double(eventCount))) compressed bytes/event (+\(format(Double(compressedEvery - compressed) / Double(eventCount))) B/event over the default)

    read + fold (verifying sequence and hash chain): \(format(Double(eventCount) / readSeconds / 1000)) k events/s, \(format(readMBs)) MB/s of JSONL
    inflate only (libdeflate, whole members, in process; the physical limit): \(format(inflateMBs)) MB/s
    inflate only (zlib, streaming, in process): \(format(Double(jsonBytes) / mb / median(zlibInflateTimes))) MB/s; read + fold / zlib inflate = \(format(readMBs * median(zlibInflateTimes) * mb / Double(jsonBytes), 2))
    system gzip -dc: \(format(Double(jsonBytes) / mb / gzipSeconds)) MB/s
    read + fold / inflate only = \(format(readMBs / inflateMBs, 2))

    peak resident memory, reading only: \(smallPeak / 1024) MiB on a \(settings.steps)-step run (\(fileSize(paths[0]) / 1024) KiB), \
    \(bigPeak / 1024) MiB on a \(settings.bigRunSteps)-step run (\(fileSize(bigPaths[0]) / 1024 / 1024) MiB, \(bigRun.events.count) events)
    peak resident memory, reading + folding (the state keeps every call and result): \(smallFoldPeak / 1024) MiB and \(bigFoldPeak / 1024) MiB
    """)

// Long logs read on their own: speed and peak memory as a log grows from 1 MB to 1 GB.
if !settings.sizes.isEmpty {
    // Each repetition reads the log and then inflates it alone, so both see the machine alike; a
    // 1 GB log takes seconds a read, so it gets 3 repetitions at most.
    func repetitions(_ size: Int) -> Int { size >= 500 ? min(settings.repetitions, 3) : settings.repetitions }
    print("\none long log per size, read on its own (medians of \(settings.sizes.map { String(repetitions($0)) }.joined(separator: "/"))):")
    let sizesDirectory = settings.directory + "/sizes"
    try FileManager.default.createDirectory(atPath: sizesDirectory, withIntermediateDirectories: true)
    for size in settings.sizes {
        let path = "\(sizesDirectory)/\(size)mb.jsonl.gz"
        try? FileManager.default.removeItem(atPath: path)
        var sizeCorpus = SyntheticCorpus(seed: UInt64(size))
        try sizeCorpus.writeLongRun(to: path, jsonBytes: size * 1_000_000)
        var reads: [Double] = []
        var limits: [Double] = []
        var bytes = 0
        for _ in 0..<repetitions(size) {
            reads.append(try seconds { bytes = try readAndFold(path).bytes })
            limits.append(try seconds { _ = try inflateLimit.libdeflate(path) })
        }
        let readPeak = try readerPeakKiB(path, folds: false)
        let foldPeak = try readerPeakKiB(path, folds: true)
        print(
            "  \(format(Double(bytes) / mb)) MB of JSONL (\(format(Double(fileSize(path)) / mb)) MB gzip): read + fold "
                + "\(format(Double(bytes) / mb / median(reads))) MB/s, libdeflate alone \(format(Double(bytes) / mb / median(limits))) MB/s "
                + "(\(format(median(limits) / median(reads), 2))); peak memory \(readPeak / 1024) MiB reading, \(foldPeak / 1024) MiB reading + folding"
        )
        if !settings.keepsFiles { try? FileManager.default.removeItem(atPath: path) }
    }
}
if !settings.keepsFiles { try? FileManager.default.removeItem(atPath: settings.directory) }
