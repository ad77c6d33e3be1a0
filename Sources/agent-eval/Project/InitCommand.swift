import AgentRuntime
import ArgumentParser
import EvalEngine
import Foundation
import Recording
import TraceCore
import Workflows

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

            With --external python, the agent is a program instead (docs/record.md, "Command cases"):
              agents/order_agent.py          an order-status agent on the OpenAI Chat Completions API, two tools,
                                             Python's standard library only (put your own agent in its place)
              evals/order-status-external.yaml
                                             a command case: runs the agent through the recording model gateway
              cassettes/order-status/        the model's answers, recorded by running the agent once through the
                                             gateway, so the case runs offline (record your model's instead, with
                                             OPENAI_API_KEY set: agent-eval run evals/ --record all)
              runs/first-run.jsonl.gz        that first run's log
              .gitignore, .github/workflows/agent-eval.yml
                                             as above
            It needs python3.

            Nothing is overwritten: if any of these files exists, init writes nothing and says which. The project \
            passes `agent-eval run evals/` as it is; change it from there.

            Examples:
              agent-eval init my-agent
              agent-eval init && agent-eval run evals/
              agent-eval init --external python my-agent
            """)

    @Option(
        help: ArgumentHelp(
            "Make the agent a program in this language, run through the recording gateway, instead of an agent file.",
            valueName: "python"))
    var external: String?

    @Argument(help: "The project folder (made if missing; default: the current directory).")
    var directory = "."

    @Flag(help: "Print what was written as JSON.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    func validate() throws {
        if let external, ExternalProject.templates[external] == nil {
            throw ValidationError("--external takes python; got \(external)")
        }
    }

    func run() async throws {
        if let external {
            try await runExternal(language: external)
            return
        }
        let project: ProjectTemplate.Project
        do {
            let templates = try BundledFiles.templates()
            project = try await ProjectTemplate(templates: [templates + "/init-common", templates + "/init"]).write(into: directory)
        } catch {
            throw diagnose(error)
        }
        guard let outcome = project.firstRun else { return }
        let (root, recordedLog) = (project.root, ProjectTemplate.recordedLog)
        let written = project.files
        let next: [(command: String, note: String?)] =
            (root == "." ? [] : [("cd \(ShellWords.quoted(root))", nil)]) + [
                ("agent-eval run evals/", "the three cases pass"),
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
        sayNext(next)
    }

    func sayNext(_ next: [(command: String, note: String?)]) {
        say("")
        say("next:")
        let width = next.map(\.command.count).max() ?? 0
        for (command, note) in next {
            say("  " + command + (note.map { String(repeating: " ", count: width - command.count) + "   # " + $0 } ?? ""))
        }
    }

    /// `--external LANGUAGE`: the agent is a program, recorded once through the gateway into the
    /// cassette its case replays (`ExternalProject`).
    func runExternal(language: String) async throws {
        let (project, outcome, written): (ProjectTemplate.Project, CommandRecording.Outcome, [String])
        do {
            (project, outcome, written) = try await ExternalProject.write(
                into: directory, language: language, templates: try BundledFiles.templates())
        } catch {
            throw diagnose(error)
        }
        let root = project.root
        let next: [(command: String, note: String?)] =
            (root == "." ? [] : [("cd \(ShellWords.quoted(root))", nil)]) + [
                ("agent-eval run evals/", "the case passes offline: the model's answers come from the cassette"),
                ("agent-eval replay \(ExternalProject.firstRunLog) --step 1", "what the agent sent and what it was told"),
                ("OPENAI_API_KEY=... agent-eval run evals/ --record all", "record your model's answers instead"),
                ("edit .github/workflows/agent-eval.yml", "set AGENT_EVAL_REPO (a placeholder) to where your team gets agent-eval"),
            ]
        if json {
            printJSON([
                "directory": .string(root), "files": .array(written.map { .string($0) }),
                "recorded": [
                    "log": .string(project.path(ExternalProject.firstRunLog)), "stop": .string(outcome.stop.reason.rawValue),
                    "requests": .int(outcome.requests), "cassette": .string(project.path(ExternalProject.cassette)),
                ],
                "next": .array(next.map { .string($0.command) }),
            ])
            return
        }
        if quiet { return }
        say("wrote \(written.count) files in \(root == "." ? "this folder" : root + "/"):")
        for file in written { say("  \(file)") }
        say(
            "ran agents/order_agent.py once through the recording gateway (\(outcome.stop.reason.rawValue)): "
                + "\(counted(outcome.requests, "model answer")) recorded into \(ExternalProject.cassette)")
        sayNext(next)
    }
}
