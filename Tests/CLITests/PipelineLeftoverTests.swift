import Foundation
import Pipelines
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// `pipeline resume` after `pipeline run` was killed with SIGKILL in the middle of command
/// tasks (issue 53, finding 5): a task whose completion is in the log never runs again, and a
/// command never runs beside a copy the earlier run left running — resume refuses while one
/// runs, or waits for it with --wait.
///
/// Each copy of a task takes an exclusive `flock` on the task's lock file, held by the copy and
/// everything it starts (they inherit the descriptor) until all of them have ended, and writes
/// `start <task> <pid> alone|overlap` to a marker file: `overlap` means another copy still held
/// the lock — two copies at once.
@Suite(
    "Pipelines resumed beside what the killed run left running", .ownThread,
    .enabled(if: Subprocess.which("flock") != nil, "needs flock(1)"))
struct PipelineLeftoverTests {
    /// A command task's script: lock, mark the start, work `seconds` (in a child process, as
    /// real commands do), mark the end, answer.
    static func writeTaskScript(in directory: TemporaryDirectory, seconds: String) throws -> String {
        let path = directory.path("task.sh")
        try """
        #!/bin/sh
        exec 9>>"\(directory.path("locks"))/$1.lock"
        if flock -n 9; then copies=alone; else copies=overlap; fi
        echo "start $1 $$ $copies" >> "\(directory.path("marker"))"
        cat > /dev/null
        sleep \(seconds)
        echo "end $1 $$" >> "\(directory.path("marker"))"
        echo "{\\"task\\": \\"$1\\"}"
        """.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(chmod(path, 0o755) == 0)
        try FileManager.default.createDirectory(atPath: directory.path("locks"), withIntermediateDirectories: true)
        return path
    }

    static func markerLines(_ directory: TemporaryDirectory) -> [Substring] {
        ((try? String(contentsOfFile: directory.path("marker"), encoding: .utf8)) ?? "").split(separator: "\n")
    }

    /// The pipeline's state as its log holds it now (a torn tail is read up to its last whole event).
    static func state(_ log: String) -> PipelineState {
        var events: [Event] = []
        _ = try? LogReader(path: log).forEachEvent { events.append($0.event) }
        return PipelineState(events: events)
    }

    @Test("kill -9 of pipeline run after each task start, then resume: no two copies at once, no completed task run again")
    func killedMidTask() async throws {
        try await TemporaryDirectory.with { directory in
            let script = try Self.writeTaskScript(in: directory, seconds: "1")
            let file = directory.path("steps.yaml")
            try """
            pipeline: steps
            jobs: 2
            outputs: [d]
            tasks:
              - {id: a, command: [\(script), a]}
              - {id: b, command: [\(script), b]}
              - {id: c, command: [\(script), c], inputs: {a: a, b: b}}
              - {id: d, command: [\(script), d], inputs: {c: c}}
            """.write(toFile: file, atomically: true, encoding: .utf8)
            // Killed right after the first, second, third and fourth start: mid-task, unless the
            // machine is so loaded that the kill came after the pipeline's end (then the trial
            // has nothing to resume, and is counted out).
            var killedMidRun = 0
            for trial in 1...4 {
                let id = "trial-\(trial)"
                let runDirectory = directory.path("runs/steps-\(id)")
                let startsBefore = Self.markerLines(directory).count { $0.hasPrefix("start") }
                let (process, _) = try startAgentEval(
                    ["pipeline", "run", file, "--out", directory.path("runs"), "--run-id", id], in: directory.url)
                let started = await eventually { Self.markerLines(directory).count { $0.hasPrefix("start") } >= startsBefore + trial }
                #expect(started, "trial \(trial): the tasks never started")
                kill(process.processIdentifier, SIGKILL)
                await wait(for: process)
                let log = runDirectory + "/pipeline.jsonl.gz"
                if Self.state(log).stop != nil { continue }
                killedMidRun += 1
                let completed = Set(Self.state(log).tasks.filter { $0.status == .succeeded }.map(\.id))
                let atResume = Self.markerLines(directory).count
                var resumed = try await agentEval(["pipeline", "resume", runDirectory])
                if resumed.status == 2 {
                    // A process of the killed run still works: resume says so and starts nothing.
                    #expect(resumed.stderr.contains("from the earlier run is still running as pid"), "\(resumed.stderr)")
                    #expect(resumed.stderr.contains("--wait"), "\(resumed.stderr)")
                    resumed = try await agentEval(["pipeline", "resume", runDirectory, "--wait"])
                }
                #expect(resumed.status == 0, "trial \(trial): \(resumed.stdoutText)\(resumed.stderr)")
                #expect(Self.state(log).stop?.status == .succeeded, "trial \(trial)")
                let lines = Self.markerLines(directory)
                #expect(
                    !lines.contains { $0.hasSuffix("overlap") }, "trial \(trial): two copies at once:\n\(lines.joined(separator: "\n"))")
                for line in lines[atResume...] where line.hasPrefix("start") {
                    let task = String(line.split(separator: " ")[1])
                    #expect(!completed.contains(task), "trial \(trial): \(task) completed before the kill and ran again")
                }
            }
            #expect(killedMidRun >= 1, "every kill came after the pipeline's end: nothing was tested")
        }
    }

    @Test("resume refuses (exit 2, naming the pid) while a process of the killed run's command runs; --wait waits for it")
    func refusesThenWaits() async throws {
        try await TemporaryDirectory.with { directory in
            let holder = directory.path("holder.pid")
            defer { if let pid = pid(in: holder), isRunning(pid) { kill(pid, SIGKILL) } }
            // The first copy leaves a process in its group that holds the lock for ten minutes.
            let script = directory.path("slow.sh")
            try """
            #!/bin/sh
            exec 9>>"\(directory.path("lock"))"
            if flock -n 9; then copies=alone; else copies=overlap; fi
            echo "start $$ $copies" >> "\(directory.path("marker"))"
            cat > /dev/null
            if [ ! -e "\(directory.path("first"))" ]; then
              : > "\(directory.path("first"))"
              sleep 600 &
              echo $! > "\(holder).tmp"; mv "\(holder).tmp" "\(holder)"
              wait
            fi
            echo '{"done": true}'
            """.write(toFile: script, atomically: true, encoding: .utf8)
            #expect(chmod(script, 0o755) == 0)
            let file = directory.path("slow.yaml")
            try "pipeline: slow\noutputs: [slow]\ntasks:\n  - {id: slow, command: [\(script)]}\n".write(
                toFile: file, atomically: true, encoding: .utf8)
            let runDirectory = directory.path("runs/slow-one")
            let (process, _) = try startAgentEval(
                ["pipeline", "run", file, "--out", directory.path("runs"), "--run-id", "one"], in: directory.url)
            #expect(await eventually { pid(in: holder) != nil }, "the task never started")
            kill(process.processIdentifier, SIGKILL)
            await wait(for: process)
            let holderPid = try #require(pid(in: holder))

            let refused = try await agentEval(["pipeline", "resume", runDirectory])
            #expect(refused.status == 2, "\(refused.stdoutText)\(refused.stderr)")
            #expect(
                refused.stderr.contains("task slow's command from the earlier run is still running as pid \(holderPid)"),
                "\(refused.stderr)")
            #expect(refused.stderr.contains("pipeline resume \(runDirectory) --wait"), "\(refused.stderr)")
            #expect(refused.stderr.contains("kill -- -"), "\(refused.stderr)")
            #expect(Self.markerLines(directory).count == 1, "resume started a second copy")

            let (waiting, errors) = try startAgentEval(["pipeline", "resume", runDirectory, "--wait"], in: directory.url)
            let said = await eventually { ((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "").contains("waiting for task slow") }
            #expect(said, "resume --wait never said what it waits for")
            #expect(Self.markerLines(directory).count == 1, "resume --wait started a second copy before the first ended")
            kill(holderPid, SIGKILL)
            await wait(for: waiting)
            #expect(waiting.terminationStatus == 0, "\((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")")
            let lines = Self.markerLines(directory)
            #expect(lines.count == 2)
            #expect(!lines.contains { $0.hasSuffix("overlap") }, "\(lines)")
            #expect(Self.state(runDirectory + "/pipeline.jsonl.gz").stop?.status == .succeeded)
        }
    }
}
