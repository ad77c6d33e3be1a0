import Foundation
import Interop
import TestSupport
import TraceCore
import TraceLog

/// Writes `text` to `directory/name` and returns the path.
func write(_ text: String, to directory: String, _ name: String) throws -> String {
    let path = (directory as NSString).appendingPathComponent(name)
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// Imports `inputs` into a new directory; returns the outcome and the folded state of each log.
func importRuns(_ inputs: [String], format: ImportFormat = .auto, episodesPath: String? = nil) async throws -> (
    outcome: ImportOutcome, states: [RunState]
) {
    let out = try TemporaryDirectory("agent-eval-interop-out")
    defer { out.remove() }
    let outcome = Importer.importRuns(
        from: inputs, options: ImportOptions(format: format, episodesPath: episodesPath), writer: ImportWriter(directory: out.url.path))
    var states: [RunState] = []
    for log in outcome.runs.compactMap(\.log) { states.append(try await fold(log)) }
    return (outcome, states)
}

/// The state a log folds to, after checking that it reads without a problem and that real
/// `gzip -t` accepts it.
func fold(_ log: String) async throws -> RunState {
    var state = RunState()
    let summary = try LogReader(path: log, options: LogReader.Options(isStrict: true)).forEachEvent {
        RunState.reduce(into: &state, $0.event)
    }
    guard summary.tear == nil else { throw ImportTestError("\(log) is torn") }
    let gzip = try await Subprocess.run(gzipPath, ["-t", log])
    guard gzip.status == 0 else { throw ImportTestError("gzip -t \(log) failed: \(gzip.stderr)") }
    return state
}

/// A run's trajectory as the issue defines it for a round trip: executed calls (tool, arguments)
/// in order, and the stop reason and limit.
struct Trajectory: Equatable, CustomStringConvertible {
    var calls: [String]
    var stop: String

    init(_ state: RunState) {
        calls = state.executedCalls.map { "\($0.tool)(\(JSONWriter.encodeString($0.arguments)))" }
        stop = (state.stop?.reason.rawValue ?? "none") + (state.stop?.limit.map { "/\($0.rawValue)" } ?? "")
    }

    var description: String { calls.joined(separator: ", ") + " → " + stop }
}

struct ImportTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs a repository script in the interop Python environment; fails with its error output.
func runPython(_ script: String, _ arguments: [String]) async throws {
    let command = try await PythonEnvironment.interop.script(script, arguments)
    let result = try await Subprocess.run(command[0], Array(command.dropFirst()))
    guard result.status == 0 else { throw ImportTestError("\(script) exited \(result.status): \(result.stderr)") }
}
