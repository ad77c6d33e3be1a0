import AgentRuntime
import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import Interop
import ModelClients
import TraceCore
import TraceLog

/// `agent-eval export atif`: runs as ATIF trajectories, one JSON file each.
struct ExportATIFCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "atif",
        abstract: "Export runs as ATIF v1.8 trajectories (the Agent Trajectory Interchange Format), one JSON file per run.",
        discussion: """
            Each run becomes DIR/<log name>.atif.json: the goal as the first user step, an agent step per model \
            decision with its tool calls, their results as the step's observation, its tokens and cost as \
            metrics, and the run's totals as final_metrics. The stop reason and limit, which ATIF has no field \
            for, go under extra.agent_eval; `agent-eval import atif` reads them back, so import → export → import \
            gives the same trajectory and stop (docs/interop.md, "ATIF").

            Exit codes: 0 every run written; 2 a log could not be read (the others are still written), or a \
            file exists already (--force replaces it); 64 usage error.

            Examples:
              agent-eval export atif runs/ --out atif/
            """
    )

    @Argument(help: "The logs to export: files, directories (searched for *.jsonl.gz) or globs.")
    var logs: [String]

    @Option(help: ArgumentHelp("The directory to write the trajectories to (created when missing).", valueName: "dir"))
    var out: String

    @Flag(help: "Replace trajectory files that exist already.")
    var force = false

    func validate() throws {
        if logs.isEmpty { throw ValidationError("give the logs to export") }
    }

    @OptionGroup var limits: LogReadLimits

    func run() throws {
        let paths = try findLogsOrFail(logs)
        do {
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        } catch {
            throw diagnose(
                ImportError(.writeFailed, "cannot create \(out): \(FileProblem.reason(of: error))", hint: "choose another --out"))
        }
        var written = 0
        var failed = 0
        var names = Set<String>()
        for path in paths {
            do {
                let trajectory = try ATIFExporter().trajectory(log: path)
                // Named as the log is: runs may share an id (copies of one log), logs may not share a name in one folder.
                let stem = (path as NSString).lastPathComponent.replacingOccurrences(of: ".jsonl.gz", with: "")
                // Two logs of one name (in two folders): the second gets a number.
                var name = RuntimeEnvironment.fileNameComponent(stem) + ".atif.json"
                var number = 2
                while !names.insert(name).inserted {
                    name = RuntimeEnvironment.fileNameComponent(stem) + "-\(number).atif.json"
                    number += 1
                }
                let file = (out as NSString).appendingPathComponent(name)
                if FileManager.default.fileExists(atPath: file), !force {
                    throw ImportError(.outputExists, "\(file) exists already", hint: "pass --force to replace it, or choose another --out")
                }
                try ReportFile.write(JSONWriter.encodePretty(trajectory) + "\n", to: file)
                written += 1
            } catch {
                failed += 1
                diagnose(error as? any Diagnostic ?? ImportError(.writeFailed, "\(path): \(FileProblem.reason(of: error))"))
            }
        }
        say(
            "wrote \(counted(written, "trajectory", plural: "trajectories")) to \(displayPath(out))"
                + (failed > 0 ? ", \(failed) failed" : ""))
        if failed > 0 { throw Exit.unusable }
    }
}
