import Catalog
// The replay benchmark: how long showing step N of a 100,000-event log takes, through the
// log's step table in the catalog, against a full replay of the same log.
//
//   swift run -c release replay-benchmark [--events 100000] [--samples 200]
//
// Prints medians; see docs/performance.md.
import Foundation
import Replay
import TestSupport
import TraceCore
import TraceLog

var events = 100_000
var samples = 200
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    let value = arguments.next().flatMap { Int($0) }
    switch (argument, value) {
    case ("--events", let value?): events = value
    case ("--samples", let value?): samples = value
    default:
        FileHandle.standardError.write(Data("usage: replay-benchmark [--events N] [--samples N]\n".utf8))
        exit(argument == "--help" ? 0 : 64)
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-replay-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
let log = directory + "/big.jsonl.gz"

// A long run: the synthetic corpus writes 6 events per step plus start and stop, with real
// digests, so the index build checks them all as replay does.
var corpus = SyntheticCorpus()
let state = try corpus.writeLongRun(to: log, events: events)
let size = (try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
print("replay-benchmark: \(state.eventCount) events, \(state.step) steps, \(size / 1024) KiB compressed, release build")

// The catalog keeps the step table. This log is longer than `index` holds whole, so the first
// `replay --step` makes the table (one full replay, every digest checked) and keeps it.
let catalogPath = directory + "/catalog.sqlite"
let buildStart = ContinuousClock.now
let (first, made) = try StepIndex.open(log: log, store: CatalogStepStore(catalog: try Catalog(path: catalogPath)))
let buildTime = milliseconds(ContinuousClock.now - buildStart)
precondition(made)
let builtTable = try StepTable.build(log: log)
print(String(format: "step table made and kept in the catalog (one full replay): %.0f ms, %d steps", buildTime, first.stepCount))

var fullTimes: [Double] = []
for _ in 0..<3 {
    let start = ContinuousClock.now
    _ = try Replayer(path: log).replay { _, _ in true }
    fullTimes.append(milliseconds(ContinuousClock.now - start))
}

var generator = SeededGenerator(seed: 7)
var stepTimes: [Double] = []
for _ in 0..<samples {
    let step = builtTable.records[Int(generator.next() % UInt64(builtTable.records.count))].step
    let start = ContinuousClock.now
    // What `agent-eval replay --step N` does after parsing its options: open the catalog file,
    // find the log's step table and the step's record, inflate its member, decode the step,
    // render it.
    let store = CatalogStepStore(path: catalogPath)
    let (index, rebuilt) = try StepIndex.open(log: log, store: store)
    guard !rebuilt, let shown = try index.replayStep(step) else {
        FileHandle.standardError.write(Data("step \(step) could not be shown from the catalog's step table\n".utf8))
        exit(1)
    }
    let lines = StepRenderer().lines(for: shown)
    stepTimes.append(milliseconds(ContinuousClock.now - start))
    precondition(!lines.isEmpty)
}
print(String(format: "full replay of the log: %.0f ms (median of 3)", median(fullTimes)))
print(
    String(
        format: "show step N through the step table: %.2f ms median, %.2f ms at the 90th percentile (%d random steps); target < 2 ms",
        median(stepTimes), stepTimes.sorted()[stepTimes.count * 9 / 10], samples))
