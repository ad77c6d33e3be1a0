// The viewer benchmark: how long making the HTML page of a long run takes (replay, the page's
// JSON, compression), and how large the page is.
//
//   swift run -c release viewer-benchmark [--events 100000] [--runs 3] [--keep DIR]
//
// --keep DIR leaves the log and the page there (for opening the page in a browser; the browser
// test, Tests/CLITests/ViewerBrowserTests.swift, measures how long Chromium takes to open it).
// Prints medians; see docs/viewer.md, "Size limits".
import Foundation
import TestSupport
import TraceCore
import TraceLog
import Viewer

var events = 100_000
var runs = 3
var keep: String?
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    let value = arguments.next()
    switch (argument, value, value.flatMap { Int($0) }) {
    case ("--events", _, let number?): events = number
    case ("--runs", _, let number?): runs = number
    case ("--keep", let value?, _): keep = value
    default:
        FileHandle.standardError.write(Data("usage: viewer-benchmark [--events N] [--runs N] [--keep DIR]\n".utf8))
        exit(argument == "--help" ? 0 : 64)
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

let directory = keep ?? FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-viewer-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { if keep == nil { try? FileManager.default.removeItem(atPath: directory) } }
let log = directory + "/long.jsonl.gz"
try? FileManager.default.removeItem(atPath: log)
var corpus = SyntheticCorpus()
let state = try corpus.writeLongRun(to: log, events: events)
let logSize = (try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
print("viewer-benchmark: \(state.eventCount) events, \(state.step) steps, log \(logSize / 1024) KiB, release build")

let assetsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/Viewer/Assets")
    .standardizedFileURL.path
let assets = try ViewerAssets.load(from: assetsFolder)
var replayTimes: [Double] = []
var renderTimes: [Double] = []
var page: [UInt8] = []
var jsonBytes = 0
for _ in 0..<runs {
    let start = ContinuousClock.now
    let view = try RunView.make(log: log)
    let replayed = ContinuousClock.now
    let html = view.page
    page = try html.render(with: assets)
    renderTimes.append(milliseconds(ContinuousClock.now - replayed))
    replayTimes.append(milliseconds(replayed - start))
    jsonBytes = JSONWriter.encode(html.data).count
}
let pagePath = directory + "/long.html"
try Data(page).write(to: URL(fileURLWithPath: pagePath))
print(String(format: "replay into the page's data: %.0f ms (median of %d)", median(replayTimes), runs))
print(
    String(
        format: "page (JSON %.1f MB, compressed and inlined): %.0f ms (median of %d)", Double(jsonBytes) / 1_048_576, median(renderTimes),
        runs))
print(
    String(
        format: "page size: %.1f MB (%.1f bytes per event)", Double(page.count) / 1_048_576, Double(page.count) / Double(state.eventCount)))
if keep != nil { print("page: \(pagePath)") }
