import Foundation
import TestSupport
import Testing
import TraceCore

/// `agent-eval init` and `agent-eval check`: from nothing to a project that passes, and every
/// problem of a project found without running it.
@Suite("init and check")
struct ProjectCommandTests {
    @Test("init writes a project that passes run and check as it is, records its first run, and never overwrites")
    func initProject() async throws {
        try await TemporaryDirectory.with { directory in
            let project = directory.path("shop-agent")
            let created = try await agentEval(["init", project])
            #expect(created.status == 0, "\(created.stderr)")
            #expect(created.stdoutText.contains("recorded the agent's first run: evals/recorded/first-run.jsonl.gz (stopped: success"))
            #expect(created.stdoutText.contains("  cd \(project)\n  agent-eval run evals/"))
            for file in [
                "agent.yaml", "model.yaml", "tools/order_status.sh", "evals/order-status-live.yaml", "evals/order-status-recorded.yaml",
                "evals/recorded/first-run.jsonl.gz", ".gitignore", ".github/workflows/agent-eval.yml",
            ] {
                #expect(FileManager.default.fileExists(atPath: project + "/" + file), "\(file) was not written")
            }
            #expect(FileManager.default.isExecutableFile(atPath: project + "/tools/order_status.sh"))
            // The recorded run is a real log: gzip reads it, and it verifies intact.
            #expect(
                try await Subprocess.run("/bin/sh", ["-c", "gzip -t evals/recorded/first-run.jsonl.gz"], in: URL(fileURLWithPath: project))
                    .status
                    == 0)
            #expect(
                try await agentEval(["log", "verify", "evals/recorded/first-run.jsonl.gz"], in: URL(fileURLWithPath: project)).status == 0)

            let run = try await agentEval(["run", "evals/", "--no-catalog"], in: URL(fileURLWithPath: project))
            #expect(run.status == 0, "\(run.stdoutText)\(run.stderr)")
            #expect(run.stdoutText.contains("3 cases, 3 passed, 0 failed"))
            // Cases and the agent in one tree: run takes only the cases.
            let everything = try await agentEval(["run", ".", "--no-catalog"], in: URL(fileURLWithPath: project))
            #expect(everything.status == 0, "\(everything.stderr)")
            #expect(everything.stdoutText.contains("3 cases, 3 passed"))
            let check = try await agentEval(["check"], in: URL(fileURLWithPath: project))
            #expect(check.status == 0, "\(check.stderr)")
            #expect(check.stdoutText.hasSuffix("5 files checked: no problems\n"))
            // What the team commits: the settings and the quarantine (CI's gate reads it), not the
            // local catalog or runs; git itself says so of the .gitignore init wrote.
            let quarantined = try await agentEval(
                ["quarantine", "add", "order-status-live", "--owner", "ana@example.com", "--reason", "flaky upstream"],
                in: URL(fileURLWithPath: project))
            #expect(quarantined.status == 0, "\(quarantined.stderr)")
            let git = try await Subprocess.run(
                "/bin/sh",
                [
                    "-c",
                    "git init -q . && touch .agent-eval/settings.yaml .agent-eval/catalog.sqlite && "
                        + "git status --porcelain --untracked-files=all .agent-eval runs",
                ], in: URL(fileURLWithPath: project))
            #expect(git.status == 0, "\(git.stderr)")
            #expect(git.stdoutText.split(separator: "\n").sorted() == ["?? .agent-eval/quarantine.yaml", "?? .agent-eval/settings.yaml"])

            // A second init into the same folder writes nothing and says why.
            let agentBefore = try Data(contentsOf: URL(fileURLWithPath: project + "/agent.yaml"))
            try "changed".write(toFile: project + "/model.yaml", atomically: true, encoding: .utf8)
            let again = try await agentEval(["init", project])
            #expect(again.status == 2)
            #expect(again.stderr.contains("agent.yaml, "))
            #expect(again.stderr.contains("init overwrites nothing"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: project + "/agent.yaml")) == agentBefore)
            #expect(try String(contentsOfFile: project + "/model.yaml", encoding: .utf8) == "changed")
            let onFile = try await agentEval(["init", project + "/agent.yaml"])
            #expect(onFile.status == 2)
            #expect(onFile.stderr.hasPrefix("error: \(project)/agent.yaml is a file; init writes a project into a folder"))
        }
    }

    @Test("init --external python writes a program agent whose cassette init records through the gateway: run passes offline")
    func initExternalPython() async throws {
        try await TemporaryDirectory.with { directory in
            let project = directory.path("py-agent")
            let created = try await agentEval(["init", "--external", "python", project, "--json"])
            #expect(created.status == 0, "\(created.stderr)")
            let summary = try JSONParser.parse(Array(created.stdout))
            #expect(summary["recorded"]?["stop"] == "success")
            #expect(summary["recorded"]?["requests"] == 2)
            for file in [
                "agents/order_agent.py", "evals/order-status-external.yaml", "cassettes/order-status/index.json", "runs/first-run.jsonl.gz",
                ".gitignore", ".github/workflows/agent-eval.yml",
            ] {
                #expect(FileManager.default.fileExists(atPath: project + "/" + file), "\(file) was not written")
            }
            #expect(!FileManager.default.fileExists(atPath: project + "/agent.yaml"), "no agent file: the agent is the program")
            let here = URL(fileURLWithPath: project)
            #expect(try await agentEval(["log", "verify", "runs/first-run.jsonl.gz"], in: here).status == 0)
            // Offline: no key, and the upstream a live call would go to is closed.
            let run = try await agentEval(
                ["run", "evals/", "--no-catalog", "--json"], in: here,
                environment: ["OPENAI_API_KEY": "", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"])
            #expect(run.status == 0, "\(run.stdoutText)\(run.stderr)")
            #expect(try JSONParser.parse(Array(run.stdout))["summary"]?["passed"] == 1)
            let check = try await agentEval(["check"], in: here)
            #expect(check.status == 0, "\(check.stdoutText)\(check.stderr)")

            let again = try await agentEval(["init", "--external", "python", project])
            #expect(again.status == 2)
            #expect(again.stderr.contains("init overwrites nothing"))
            let unknown = try await agentEval(["init", "--external", "cobol", directory.path("other")])
            #expect(unknown.status == 64)
            #expect(unknown.stderr.contains("--external takes python; got cobol"))
        }
    }

    @Test("check passes the bundled cases and the repository's own files")
    func bundledFiles() async throws {
        let cases = try await agentEval(["check", "EvalCases"], in: repositoryRoot)
        #expect(cases.status == 0, "\(cases.stderr)")
        #expect(cases.stdoutText.contains("EvalCases/support/refund-live.yaml: 1 case"))
        #expect(cases.stdoutText.contains("Fixtures/agents/support/agent.yaml: agent support-agent, 4 tools"))
        #expect(cases.stdoutText.hasSuffix("16 files checked: no problems\n"))
        let fixtures = try await agentEval(["check", "EvalCases", "Fixtures", "--quiet"], in: repositoryRoot)
        #expect(fixtures.status == 0, "\(fixtures.stderr)")
        #expect(fixtures.stdoutText.components(separatedBy: "\n").filter { !$0.isEmpty }.count == 1)
    }

    @Test("one verb checks a pipeline: check --verbose shows its outputs and tasks; pipeline check is a hidden older spelling")
    func pipelineCheck() async throws {
        let file = "Fixtures/pipelines/triage-recovery/pipeline.yaml"
        let checked = try await agentEval(["check", "--verbose", file], in: repositoryRoot)
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(
            checked.stdoutText == """
                \(file): pipeline triage-recovery, 5 tasks
                  outputs: report
                  fetch [command]
                  classify [command] ← fetch
                  classify_with_agent [agent] ← fetch (fallback for classify)
                  enrich [command] ← fetch
                  report [command] ← classify, enrich
                1 file checked: no problems

                """)
        let plain = try await agentEval(["check", file], in: repositoryRoot)
        #expect(plain.stdoutText == "\(file): pipeline triage-recovery, 5 tasks\n1 file checked: no problems\n")
        let older = try await agentEval(["pipeline", "check", file], in: repositoryRoot)
        #expect(older.status == 0 && older.stdoutText.hasSuffix("ok\n"), "\(older.stderr)")
        let help = try await agentEval(["pipeline", "--help"], in: repositoryRoot)
        #expect(!help.stdoutText.contains("  check "), "\(help.stdoutText)")
    }

    @Test("check reports every error of every file with file:line:column, and what ties the files together")
    func everyProblem() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            let files = [
                // Two errors in one agent file, and a model script with two errors of its own.
                "agent.yaml": "name: demo\nmodel: {script: demo.model.yaml}\ntools:\n  - name: lookup\n    description: d\n"
                    + "    fixture: [{output: {}}]\nlimits: {max_stepz: 3}\n",
                "demo.model.yaml": "decisions:\n  - {answer: hi, usage: {input: 1}}\n  - {anser: hi}\n",
                // A case whose agent cannot load, a recorded case with a typo'd tool and a missing log.
                "live.yaml": "caseId: live\nagent: agent.yaml\ninput: hi\nexpected: {toolsCalled: [lookup]}\n",
                "recorded.yaml": "caseId: recorded\nlogs: [\(log), gone-*.jsonl.gz]\nexpected: {toolsNotCalled: [refund_ordr]}\n",
                // A pipeline case naming a task its pipeline lacks.
                "pipe.yaml": "caseId: pipe\npipeline: \(repositoryRoot.path)/Fixtures/pipelines/release-notes/pipeline.yaml\n"
                    + "expected: {pipeline: {tasksRan: [colect]}}\n",
                // Data that is none of agent-eval's files: skipped in a folder.
                "data.json": "{\"rows\": [1, 2]}\n",
            ]
            for (name, text) in files { try text.write(toFile: directory.path(name), atomically: true, encoding: .utf8) }
            let result = try await agentEval(["check", "."], in: directory.url)
            #expect(result.status == 2)
            let stderr = result.stderr
            #expect(stderr.contains("error: tools[0] has no \"side_effect\"\n  --> agent.yaml:4:5"))
            #expect(stderr.contains("error: limits has no setting \"max_stepz\"\n  --> agent.yaml:7:10"))
            #expect(stderr.contains("error: usage has no \"output\"\n  --> demo.model.yaml:2:25"))
            #expect(stderr.contains("decisions[1] needs one of answer"))
            #expect(stderr.contains("error: case \"recorded\": no log matches gone-*.jsonl.gz\n  --> recorded.yaml:2:7"))
            #expect(stderr.contains("error: case \"recorded\" names the tool \"refund_ordr\", which none of its logs' runs had"))
            #expect(stderr.contains("hint: did you mean \"refund_order\"?"))
            #expect(stderr.contains("error: case \"pipe\" names the task \"colect\", which pipeline release-notes does not have"))
            #expect(stderr.contains("hint: did you mean \"collect\"?"))
            #expect(!stderr.contains("data.json"))
            // Each problem is listed under the file it is in, once.
            #expect(result.stdoutText.contains("agent.yaml: 2 problems\n"))
            #expect(result.stdoutText.contains("demo.model.yaml: 2 problems\n"))

            let json = try await agentEval(["check", ".", "--json"], in: directory.url)
            #expect(json.status == 2)
            let report = try JSONParser.parse(json.stdout)
            #expect(report["ok"] == false)
            let problems = report["files"]?.arrayValue?.flatMap { $0["problems"]?.arrayValue ?? [] } ?? []
            #expect(report["errors"] == .int(problems.count))
            #expect(problems.contains { $0["path"] == "agent.yaml" && $0["line"] == 7 && $0["code"] == "config.unknown_key" })
            #expect(report["files"]?.arrayValue?.contains { $0["path"] == "data.json" && $0["kind"] == "skipped" } == true)

            // A file named on the command line must be one agent-eval reads.
            let named = try await agentEval(["check", "data.json"], in: directory.url)
            #expect(named.status == 2)
            #expect(named.stderr.contains("this is not a file agent-eval reads"))
        }
    }

    @Test("check warns, at the reply's line, about scripted replies the agent would reject; --strict fails on them")
    func scriptedRepliesMeetTheAgent() async throws {
        try await TemporaryDirectory.with { directory in
            let files = [
                "agent.yaml": "name: demo\nmodel: {script: demo.model.yaml}\ntools:\n  - name: lookup\n    description: d\n"
                    + "    side_effect: read\n    input_schema: {type: object, required: [id], properties: {id: {type: string}}}\n"
                    + "    fixture: [{output: {}}]\n",
                // A misspelt tool, arguments the schema refuses, a good call, an answer, and a rule.
                "demo.model.yaml": "decisions:\n  - tool_calls: [{name: lookpu, arguments: {id: a}}]\n"
                    + "  - tool_calls: [{name: lookup, arguments: {id: 7}}]\n  - tool_calls: [{name: lookup, arguments: {id: a}}]\n"
                    + "  - answer: done\nrules:\n  - reply: {tool_calls: [{name: lookup}]}\n",
            ]
            for (name, text) in files { try text.write(toFile: directory.path(name), atomically: true, encoding: .utf8) }
            let result = try await agentEval(["check", "."], in: directory.url)
            #expect(result.status == 0, "warnings only: \(result.stderr)")
            let stderr = result.stderr
            #expect(
                stderr.contains(
                    "warning: decisions[0]: agent demo (agent.yaml) would reject this reply (unknown_tool): tool_calls[0] calls \"lookpu\", "
                        + "which is not a tool of this agent (tools: \"lookup\")\n  --> demo.model.yaml:2:5"), "\(stderr)")
            #expect(stderr.contains("arguments.id must be a string, found an integer (7)\n  --> demo.model.yaml:3:5"), "\(stderr)")
            #expect(stderr.contains("warning: rules[0].reply: agent demo (agent.yaml) would reject this reply (invalid_arguments)"))
            #expect(!stderr.contains("decisions[2]") && !stderr.contains("decisions[3]"))
            #expect(result.stdoutText.contains("demo.model.yaml: model script demo: 4 decisions, 1 rule, 3 problems\n"))
            let strict = try await agentEval(["check", ".", "--strict"], in: directory.url)
            #expect(strict.status == 2)
        }
    }
}

@Suite("--quiet and --verbose")
struct OutputLevelTests {
    @Test("run -v lists every run with its notes and what each judge said; exec -q prints only the log; init -q prints nothing")
    func levels() async throws {
        try await TemporaryDirectory.with { directory in
            let verbose = try await agentEval(
                ["run", "EvalCases/support/refund-answer-judged.yaml", "--no-catalog", "--verbose"], in: repositoryRoot)
            #expect(verbose.status == 0, "\(verbose.stderr)")
            #expect(
                verbose.stdoutText.components(separatedBy: "\n").prefix(3) == [
                    "✔ support-refund-answer-judged  (1 log)", "    Fixtures/runs/support-refund.jsonl.gz",
                    "      judge ✔ answer.rubric by scripted:support-judge: The answer names the refund id.",
                ])
            let plain = try await agentEval(["run", "EvalCases/support/refund-answer-judged.yaml", "--no-catalog"], in: repositoryRoot)
            #expect(!plain.stdoutText.contains("judge ✔"))
            #expect(try await agentEval(["run", "EvalCases/", "-q", "-v"], in: repositoryRoot).status == 64)

            let exec = try await agentEval(
                ["exec", "--agent", ExampleRuns.agentPath("support"), "--input", "Where is A-1042?", "--out", directory.path("runs"), "-q"])
            #expect(exec.status == 1, "the support agent stops for an approval: \(exec.stderr)")
            let path = exec.stdoutText.trimmingCharacters(in: .newlines)
            #expect(!path.contains("\n") && path.hasPrefix(directory.path("runs")) && FileManager.default.fileExists(atPath: path))

            let initialized = try await agentEval(["init", directory.path("project"), "--quiet"])
            #expect(initialized.status == 0, "\(initialized.stderr)")
            #expect(initialized.stdoutText.isEmpty)
            #expect(FileManager.default.fileExists(atPath: directory.path("project/agent.yaml")))
        }
    }
}
