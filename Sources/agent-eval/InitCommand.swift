import AgentRuntime
import ArgumentParser
import EvalEngine
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

    func run() async throws {
        let project: ProjectTemplate.Project
        do {
            project = try await ProjectTemplate(templates: try BundledFiles.templates() + "/init").write(into: directory)
        } catch {
            throw diagnose(error)
        }
        let (root, outcome, recordedLog) = (project.root, project.firstRun, ProjectTemplate.recordedLog)
        let written = project.files
        let next: [(command: String, note: String?)] =
            (root == "." ? [] : [("cd \(ShellWords.quoted(root))", nil)]) + [
                ("agent-eval run evals/", "both cases pass"),
                ("agent-eval replay \(recordedLog) --step 1", "what the agent saw and did"),
                ("agent-eval run evals/ --update-baseline", "keep a baseline: CI then fails on regressions"),
                ("edit .github/workflows/agent-eval.yml", "set AGENT_EVAL_REPO (a placeholder) to where your team gets agent-eval"),
            ]
        if json {
            printJSON([
                "directory": .string(root), "files": .array(written.sorted().map { .string($0) }),
                "recorded": ["log": .string(project.path(recordedLog)), "stop": .string(outcome.stop.reason.rawValue)],
                "next": .array(next.map { .string($0.command) }),
            ])
            return
        }
        if quiet { return }
        say("wrote \(written.count) files in \(root == "." ? "this folder" : root + "/"):")
        for file in written.sorted() { say("  \(file)") }
        say(
            "recorded the agent's first run: \(recordedLog) (stopped: \(outcome.stop.reason.rawValue), \(counted(outcome.steps, "step")))"
        )
        say("")
        say("next:")
        let width = next.map(\.command.count).max() ?? 0
        for (command, note) in next {
            say("  " + command + (note.map { String(repeating: " ", count: width - command.count) + "   # " + $0 } ?? ""))
        }
    }
}
