import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct PipelineShowCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show a pipeline run from its log: each task's status, attempts and child runs, with digest checks.",
        discussion: """
            Rebuilds the pipeline state from the log alone and checks every recorded state digest. Each agent \
            attempt lists the command that replays its child run step by step.

            Each child log is verified too: one that is missing, unreadable or not intact is listed.

            Exit codes: 0 shown, every digest matches and every child log is intact; 1 a digest differs, the log has \
            anomalies or a child log is missing or damaged; 2 unreadable.
            """)

    @Argument(help: "The pipeline run's directory, or its pipeline.jsonl.gz.")
    var target: String

    @Flag(help: "Print the state as JSON.")
    var json = false

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let replay: PipelineReplay
        let run: PipelineTarget
        do {
            run = try PipelineTarget(target)
            replay = try PipelineReplay(log: run.log)
        } catch {
            throw diagnose(error)
        }
        let childProblems: [String]
        if json {
            let document = replay.json(log: run.log)
            childProblems = document["child_log_problems"]?.arrayValue?.compactMap(\.stringValue) ?? []
            printJSON(document)
        } else {
            for line in PipelineView.lines(replay.state, directory: run.directory) { say(line) }
            say(replay.mismatches.isEmpty ? "digests: \(replay.checkedDigests) checked, all match" : "DIGESTS DIFFER:")
            for mismatch in replay.mismatches + replay.state.anomalies { say("  \(mismatch)") }
            childProblems = replay.childLogProblems(log: run.log)
            if !childProblems.isEmpty { say("CHILD LOGS:") }
            for problem in childProblems { say("  \(problem)") }
        }
        throw replay.mismatches.isEmpty && replay.state.anomalies.isEmpty && childProblems.isEmpty ? Exit.success : Exit.failure
    }
}
