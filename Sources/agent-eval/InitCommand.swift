import AgentRuntime
import ArgumentParser
import Foundation
import TraceCore

/// `agent-eval init`: a working project to start from.
struct InitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Write a small working project: an agent, its tools and model, two eval cases and a CI workflow.",
        discussion: """
            Writes into DIR (default: the current directory):
              agent.yaml                     an agent with a command tool (tools/order_status.sh), a fixture tool,
                                             a scripted model (model.yaml) and a policy rule
              evals/order-status-live.yaml   a case that runs the agent live (offline: the model is a script)
              evals/order-status-recorded.yaml
                                             a case over a recorded run, evals/recorded/first-run.jsonl.gz, which
                                             init records by running the agent once
              .gitignore                     keeps live runs' logs, reports and the catalog out of git
              .github/workflows/agent-eval.yml
                                             runs the cases in CI, fails on regressions, keeps the baseline

            Nothing is overwritten: if any of these files exists, init writes nothing and says which. The project \
            passes `agent-eval run evals/` as it is; change it from there.

            Examples:
              agent-eval init my-agent
              agent-eval init && agent-eval run evals/
            """)

    @Argument(help: "The project folder (made if missing; default: the current directory).")
    var directory = "."

    @Flag(help: "Print what was written as JSON.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    /// The input the recorded run and the live case use.
    static let firstInput = "Where is my order A-1001? Cancel it if it has not shipped."
    static let recordedLog = "evals/recorded/first-run.jsonl.gz"

    func run() async throws {
        let templates: String
        do {
            templates = try BundledFiles.templates() + "/init"
        } catch {
            throw diagnose(error)
        }
        let files = BundledFiles.files(under: templates)
        let targets = files.map { (source: templates + "/" + $0, relative: Self.projectPath(for: $0)) }
        let root = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        func destination(_ relative: String) -> String { root == "." ? relative : root + "/" + relative }

        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw diagnose(
                CommandError(
                    "not_a_folder", "\(root) is a file; init writes a project into a folder",
                    hint: "give a new folder's name: agent-eval init my-agent"))
        }
        let existing = (targets.map(\.relative) + [Self.recordedLog]).filter {
            FileManager.default.fileExists(atPath: destination($0))
        }
        guard existing.isEmpty else {
            throw diagnose(
                CommandError(
                    "would_overwrite",
                    "\(root == "." ? "this folder" : root) has \(existing.joined(separator: ", ")) already; init overwrites nothing",
                    hint: "run init in a new folder (agent-eval init my-agent), or move those files away"))
        }
        do {
            for target in targets {
                let path = destination(target.relative)
                let folder = (path as NSString).deletingLastPathComponent
                try FileManager.default.createDirectory(atPath: folder.isEmpty ? "." : folder, withIntermediateDirectories: true)
                let bytes = try Data(contentsOf: URL(fileURLWithPath: target.source))
                try bytes.write(to: URL(fileURLWithPath: path), options: .withoutOverwriting)
                // Scripts stay runnable: a tool's program must be executable.
                let permissions = bytes.starts(with: Array("#!".utf8)) ? 0o755 : 0o644
                try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
            }
            // `.agent-eval/` marks the project root: commands run from any folder below it keep
            // their catalog here (`Catalog.projectRoot`), not in that folder.
            try FileManager.default.createDirectory(atPath: destination(".agent-eval"), withIntermediateDirectories: true)
        } catch {
            throw diagnose(error)
        }

        // The recorded case checks a real run of the agent, recorded here by this code.
        let outcome: RunOutcome
        do {
            let agent = try AgentFile.load(path: destination("agent.yaml"))
            outcome = try await AgentRuntime(agent: agent).run(goal: Self.firstInput, log: destination(Self.recordedLog))
        } catch {
            diagnose(error)
            throw diagnose(
                CommandError(
                    "first_run_failed", "the project was written, but its first run could not be recorded; the recorded case needs it"))
        }

        let written = targets.map(\.relative) + [Self.recordedLog]
        let next: [(command: String, note: String?)] =
            (root == "." ? [] : [("cd \(ShellWords.quoted(root))", nil)]) + [
                ("agent-eval run evals/", "both cases pass"),
                ("agent-eval replay \(Self.recordedLog) --step 1", "what the agent saw and did"),
                ("agent-eval run evals/ --update-baseline", "keep a baseline: CI then fails on regressions"),
                ("edit .github/workflows/agent-eval.yml", "set AGENT_EVAL_REPO (a placeholder) to where your team gets agent-eval"),
            ]
        if json {
            printJSON([
                "directory": .string(root), "files": .array(written.sorted().map { .string($0) }),
                "recorded": ["log": .string(destination(Self.recordedLog)), "stop": .string(outcome.stop.reason.rawValue)],
                "next": .array(next.map { .string($0.command) }),
            ])
            return
        }
        if quiet { return }
        say("wrote \(written.count) files in \(root == "." ? "this folder" : root + "/"):")
        for file in written.sorted() { say("  \(file)") }
        say(
            "recorded the agent's first run: \(Self.recordedLog) (stopped: \(outcome.stop.reason.rawValue), \(counted(outcome.steps, "step")))"
        )
        say("")
        say("next:")
        let width = next.map(\.command.count).max() ?? 0
        for (command, note) in next {
            say("  " + command + (note.map { String(repeating: " ", count: width - command.count) + "   # " + $0 } ?? ""))
        }
    }

    /// A template's path in the project: `dot-` at the start of a name stands for `.` (SwiftPM
    /// leaves hidden files out of resources).
    static func projectPath(for template: String) -> String {
        template.split(separator: "/").map { $0.hasPrefix("dot-") ? "." + $0.dropFirst(4) : String($0) }.joined(separator: "/")
    }
}
