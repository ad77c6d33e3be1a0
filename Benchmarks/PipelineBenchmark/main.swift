// The pipeline benchmark: the scheduler's own cost per task, and resume from a checkpoint.
//
//   swift run -c release pipeline-benchmark [--tasks 1000] [--width 50] [--repetitions 3] [--fsync]
//
// A DAG of `--tasks` instant command tasks (`echo 1`) in layers of `--width`, each task after
// layer 0 needing two tasks of the layer before it, run with one job. Every attempt records how
// long its child process took (spawn, run, read, validate); the scheduler's overhead per task is
// the wall time of the whole pipeline minus those durations, divided by the task count: building
// inputs, recording task_started and task_finished (both durable points), folding the state,
// deciding what runs next, and getting from an attempt's end back to the scheduler. (The state
// digest of a checkpoint is computed while the attempt runs, so it is not in this figure.)
//
// Resume: the same pipeline paused before its last task (the pause is requested when the
// last-but-one task starts), then resumed: the time from the resume call to the last task's
// start is opening the log, reading and folding ~2,000 events, checking the file, sealing and
// deciding. Prints medians of the repetitions; see docs/performance.md.
import AgentRuntime
import BenchmarkSupport
import Foundation
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct Settings {
    var tasks = 1000
    var width = 50
    var repetitions = 3
    var durability = Durability.standard
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        if argument == "--fsync" {
            settings.durability = Durability(sync: .durabilityPoints)
            continue
        }
        let value = arguments.next().flatMap { Int($0) }
        switch (argument, value) {
        case ("--tasks", let value?) where value >= 2: settings.tasks = value
        case ("--width", let value?) where value >= 1: settings.width = value
        case ("--repetitions", let value?) where value >= 1: settings.repetitions = value
        default:
            FileHandle.standardError.write(
                Data("usage: pipeline-benchmark [--tasks N] [--width N] [--repetitions N] [--fsync]\n".utf8))
            exit(argument == "--help" ? 0 : 64)
        }
    }
    return settings
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// The pipeline file: layers of `width` tasks; a task after the first layer needs two of the
/// layer before it.
func pipelineText(tasks: Int, width: Int) -> String {
    var text = "pipeline: bench\ntasks:\n"
    for index in 0..<tasks {
        let layer = index / width
        var line = "  - {id: t\(index), command: [echo, \"1\"]"
        if layer > 0 {
            let base = (layer - 1) * width
            let first = base + index % width
            let second = base + (index + 1) % width
            line += second == first ? ", inputs: {a: t\(first)}" : ", inputs: {a: t\(first), b: t\(second)}"
        }
        text += line + "}\n"
    }
    return text
}

/// The sum of the recorded child durations of `state`, in seconds.
func childSeconds(_ state: PipelineState) -> Double {
    Double(state.tasks.flatMap(\.attempts).compactMap(\.finished?.durationUs).reduce(0, +)) / 1e6
}

let settings = parseSettings()
let root = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-pipeline-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
defer { if ProcessInfo.processInfo.environment["AGENT_EVAL_BENCH_KEEP"] == nil { try? FileManager.default.removeItem(atPath: root) } }
let file = root + "/pipeline.yaml"
try pipelineText(tasks: settings.tasks, width: settings.width).write(toFile: file, atomically: true, encoding: .utf8)
let definition = try PipelineFile.load(path: file)
print(
    "pipeline-benchmark: \(settings.tasks) command tasks (echo 1) in layers of \(settings.width), --jobs 1, "
        + "durability: \(settings.durability), "
        + "\(settings.repetitions) repetitions")

var overheads: [Double] = []
var cpus: [Double] = []
var walls: [Double] = []
var childs: [Double] = []
var resumes: [Double] = []
var resumeEvents = 0
let clock = ContinuousClock()
for repetition in 0..<settings.repetitions {
    let runner = PipelineRunner(definition: definition, durability: settings.durability)
    let started = clock.now
    let cpuBefore = ProcessCPU.seconds()
    let outcome = try await runner.start(directory: "\(root)/run-\(repetition)", runId: "bench-\(repetition)", jobs: 1)
    let wall = seconds(started.duration(to: clock.now))
    cpus.append((ProcessCPU.seconds() - cpuBefore) / Double(settings.tasks) * 1e6)
    guard outcome.isSucceeded else { fatalError("the benchmark pipeline did not succeed: \(outcome.state.stop?.error ?? "")") }
    let child = childSeconds(outcome.state)
    walls.append(wall)
    childs.append(child)
    overheads.append((wall - child) / Double(settings.tasks) * 1e6)

    // Resume: pause when the last-but-one task finished, then time the resume to the last start.
    let directory = "\(root)/resume-\(repetition)"
    // Requested when the last-but-one task starts, the pause is seen at its commit.
    let startedCount = Atomic<Int>(0)
    let paused = try await runner.start(directory: directory, runId: "resume-\(repetition)", jobs: 1) { update in
        guard case .event(let event) = update, case .pipeline(.taskStarted) = event.payload else { return }
        if startedCount.add(1, ordering: .relaxed).newValue == settings.tasks - 1 {
            try? PipelineRunner.requestPause(directory: directory)
        }
    }
    guard paused.isPaused, paused.state.tasks.filter(\.isSettled).count == settings.tasks - 1 else {
        fatalError("the pipeline did not pause before its last task")
    }
    resumeEvents = paused.state.eventCount
    let resumeStarted = clock.now
    let firstStart = Mutex<Duration?>(nil)
    let resumed = try await runner.resume(log: paused.logPath, jobs: 1) { update in
        guard case .event(let event) = update, case .pipeline(.taskStarted) = event.payload else { return }
        firstStart.withLock { if $0 == nil { $0 = resumeStarted.duration(to: clock.now) } }
    }
    guard resumed.isSucceeded, let toStart = firstStart.withLock({ $0 }) else { fatalError("the resumed pipeline did not succeed") }
    resumes.append(seconds(toStart) * 1000)
    print(
        String(
            format:
                "  repetition %d: wall %.3f s, child processes %.3f s, overhead %.1f µs/task (scheduler CPU %.1f µs/task); resume to the next start %.1f ms",
            repetition + 1, wall, child, overheads.last ?? 0, cpus.last ?? 0, resumes.last ?? 0))
}
print(String(format: "median wall time:            %.3f s (%.0f tasks/s)", median(walls), Double(settings.tasks) / median(walls)))
print(
    String(format: "median child processes:      %.3f s (%.0f µs per task)", median(childs), median(childs) / Double(settings.tasks) * 1e6))
print(String(format: "median scheduler overhead:   %.1f µs per task (target ≤ 100)", median(overheads)))
print(
    String(
        format:
            "median CPU of this process:  %.1f µs per task (scheduler, and the threads that spawn and reap each child; the children excluded)",
        median(cpus)))
print(String(format: "median resume to next start: %.1f ms from a checkpoint of %d events", median(resumes), resumeEvents))
