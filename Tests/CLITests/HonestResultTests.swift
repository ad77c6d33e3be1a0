import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// Each of these once gave a pass, "no problems" or exit 0 that was not true, or an answer that
/// pointed nowhere: they pin the honest answer.
@Suite("Honest results")
struct HonestResultTests {
    @Test("a project made by init works from its folder, from above it and from below it: its command tool runs and succeeds")
    func commandToolsFromEveryFolder() async throws {
        try await TemporaryDirectory.with { directory in
            // `init my-agent` from the parent: the first run's tool call must have succeeded.
            let created = try await agentEval(["init", "my-agent"], in: directory.url)
            #expect(created.status == 0, "\(created.stderr)")
            let first = RunState(
                folding: try LogReader(path: directory.path("my-agent/evals/recorded/first-run.jsonl.gz")).readAll().events.map(\.event))
            #expect(first.calls.map(\.tool) == ["order_status"])
            #expect(first.calls.first?.hasSucceeded == true, "\(first.calls.first?.lastResult?.error ?? "")")

            let project = directory.url.appendingPathComponent("my-agent")
            let evals = project.appendingPathComponent("evals")
            for (folder, agent, cases) in [
                (directory.url, "my-agent/agent.yaml", "my-agent/evals/"), (project, "agent.yaml", "evals/"), (evals, "../agent.yaml", "."),
            ] {
                let exec = try await agentEval(
                    ["exec", agent, "--input", "Where is my order A-1001?", "--out", directory.path("runs"), "--json", "--no-catalog"],
                    in: folder)
                #expect(exec.status == 0, "from \(folder.path): \(exec.stderr)")
                let log = try #require(try JSONParser.parse(exec.stdout)["log"]?.stringValue)
                let state = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
                #expect(state.calls.first?.hasSucceeded == true, "from \(folder.path): \(state.calls.first?.lastResult?.error ?? "")")
                let run = try await agentEval(["run", cases, "--no-catalog"], in: folder)
                #expect(run.status == 0, "from \(folder.path): \(run.stdoutText)\(run.stderr)")
                #expect(run.stdoutText.contains("3 cases, 3 passed, 0 failed"))
                #expect(!run.stdoutText.contains("warning:"), "\(run.stdoutText)")
                let check = try await agentEval(["check", cases], in: folder)
                #expect(check.status == 0, "from \(folder.path): \(check.stderr)")
            }
            // A program that is not there is an error when the file is read, naming the line.
            let agentText = try String(contentsOf: project.appendingPathComponent("agent.yaml"), encoding: .utf8)
            try agentText.replacingOccurrences(of: "tools/order_status.sh", with: "tools/gone.sh").write(
                to: project.appendingPathComponent("broken.agent.yaml"), atomically: true, encoding: .utf8)
            let broken = try await agentEval(["check", "my-agent/broken.agent.yaml"], in: directory.url)
            #expect(broken.status == 2)
            #expect(
                broken.stderr.contains("tool \"order_status\" command: tools/gone.sh does not exist or is not executable"),
                "\(broken.stderr)")
            #expect(broken.stderr.contains("--> my-agent/broken.agent.yaml:27:14"), "\(broken.stderr)")
        }
    }

    @Test("toolsCalled passes a tool whose every attempt failed only with a warning; toolsSucceeded fails it")
    func failedToolIsNotASuccess() async throws {
        try await TemporaryDirectory.with { directory in
            let files = [
                "agent.yaml": """
                name: flaky
                model: {script: flaky.model.yaml}
                tools:
                  - {name: fetch, description: Fails., side_effect: read, command: [/bin/sh, -c, "echo 'no route to host' >&2; exit 3"]}
                policy: {default: allow}
                """,
                "flaky.model.yaml": "decisions:\n  - tool_calls: [{name: fetch, arguments: {}}]\n  - answer: done\n",
                "called.yaml": "caseId: called\nagent: agent.yaml\ninput: go\nexpected: {toolsCalled: [fetch], stopReason: success}\n",
                "succeeded.yaml": "caseId: succeeded\nagent: agent.yaml\ninput: go\nexpected: {toolsSucceeded: [fetch]}\n",
            ]
            for (name, text) in files { try text.write(toFile: directory.path(name), atomically: true, encoding: .utf8) }
            let called = try await agentEval(["run", "called.yaml", "--no-catalog", "--json-out", "called.json"], in: directory.url)
            #expect(called.status == 0, "\(called.stdoutText)\(called.stderr)")
            #expect(
                called.stdoutText.contains(
                    "warning: fetch was called, but every attempt failed (call-1 at step 1, 1 attempt: /bin/sh exited with status 3: no route to host)"
                ), "\(called.stdoutText)")
            let report = try JSONParser.parse(try Data(contentsOf: directory.url.appendingPathComponent("called.json")))
            let warnings = report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["warnings"]?.arrayValue ?? []
            #expect(warnings.count == 1 && warnings.first?.stringValue?.hasPrefix("fetch was called, but every attempt failed") == true)

            let succeeded = try await agentEval(["run", "succeeded.yaml", "--no-catalog"], in: directory.url)
            #expect(succeeded.status == 1, "\(succeeded.stdoutText)")
            #expect(succeeded.stdoutText.contains("✘ toolsSucceeded: expected fetch is called and succeeds"))
            #expect(succeeded.stdoutText.contains("happened: fetch ran, but every attempt failed: call-1 at step 1"))
            // check knows the key, and a misspelt tool in it like any other.
            try "caseId: typo\nagent: agent.yaml\ninput: go\nexpected:\n  toolsSucceeded: [fecth]\n".write(
                toFile: directory.path("typo.yaml"), atomically: true, encoding: .utf8)
            let typo = try await agentEval(["check", "typo.yaml"], in: directory.url)
            #expect(typo.status == 2)
            #expect(
                typo.stderr.contains("names the tool \"fecth\", which agent flaky (agent.yaml) does not have\n  --> typo.yaml:5:20"),
                "\(typo.stderr)")
        }
    }

    @Test("check refuses what run refuses: two cases with one caseId")
    func checkMakesRunsChecks() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            for name in ["a", "b"] {
                try "caseId: same\nlogs: [\(log)]\nexpected: {stopReason: success}\n".write(
                    toFile: directory.path("\(name).yaml"), atomically: true, encoding: .utf8)
            }
            let check = try await agentEval(["check", "."], in: directory.url)
            #expect(check.status == 2, "\(check.stdoutText)")
            #expect(
                check.stderr.contains("error: caseId \"same\" is used twice (first at a.yaml:1:1)\n  --> b.yaml:1:1"), "\(check.stderr)")
            let run = try await agentEval(["run", ".", "--no-catalog"], in: directory.url)
            #expect(run.status == 2)
            #expect(run.stderr.contains("caseId \"same\" is used twice (first at a.yaml:1:1)"))
        }
    }

    @Test("check of a folder with nothing it reads fails, as run on it does, and says what it skipped")
    func checkOfNothingFails() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("empty"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory.path("other"), withIntermediateDirectories: true)
            try "a: 1\n".write(toFile: directory.path("other/x.yaml"), atomically: true, encoding: .utf8)
            let empty = try await agentEval(["check", "empty"], in: directory.url)
            #expect(empty.status == 2, "\(empty.stdoutText)")
            #expect(empty.stderr.contains("error: nothing to check under empty"), "\(empty.stderr)")
            let other = try await agentEval(["check", "other", "--json"], in: directory.url)
            #expect(other.status == 2)
            let report = try JSONParser.parse(other.stdout)
            #expect(report["ok"]?.boolValue == false)
            #expect(other.stdoutText.contains("1 other file was skipped"), "\(other.stdoutText)")
            for folder in ["empty", "other"] {
                #expect(try await agentEval(["run", folder, "--no-catalog"], in: directory.url).status == 2)
            }
            // Beside one file agent-eval reads, the other file is skipped and the folder checks clean.
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            try "caseId: c\nlogs: [\(log)]\nexpected: {stopReason: success}\n".write(
                toFile: directory.path("other/case.yaml"), atomically: true, encoding: .utf8)
            let clean = try await agentEval(["check", "other"], in: directory.url)
            #expect(clean.status == 0, "\(clean.stdoutText)\(clean.stderr)")
            #expect(clean.stdoutText.contains("1 file checked (1 skipped): no problems"), "\(clean.stdoutText)")
        }
    }

    @Test("check lists every error of an agent file in one round, with a did-you-mean for a misspelt verdict")
    func everyErrorOfAnAgentFile() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: typos
            model: {script: m.model.yaml}
            tools:
              - name: lookup
                descripton: Looks up.
                side_effect: reed
                fixture: [{output: {}}]
              - {name: refund, description: Refunds., side_effect: write, fixture: [{output: {}}], timeout: 5}
            policy:
              rules:
                - {id: r1, when: {tool: lookup}, verdict: denied}
                - {id: r2, when: {tool: refnd}, verdict: allow}
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try "decisions:\n  - answer: hi\n".write(toFile: directory.path("m.model.yaml"), atomically: true, encoding: .utf8)
            let check = try await agentEval(["check", "agent.yaml"], in: directory.url)
            #expect(check.status == 2)
            let stderr = check.stderr
            #expect(stderr.contains("error: tools[0] has no \"description\"\n  --> agent.yaml:4:5"), "\(stderr)")
            #expect(stderr.contains("tool \"lookup\" side_effect must be one of"), "\(stderr)")
            #expect(stderr.contains("has no setting \"descripton\""), "\(stderr)")
            #expect(stderr.contains("tool \"refund\" has no setting \"timeout\""), "\(stderr)")
            #expect(stderr.contains("rule \"r1\" verdict must be one of"), "\(stderr)")
            #expect(stderr.contains("hint: did you mean \"deny\"?"), "\(stderr)")
            #expect(stderr.contains("rule \"r2\" names the tool \"refnd\", which the agent does not have"), "\(stderr)")
            #expect(stderr.contains("hint: did you mean \"refund\"?"), "\(stderr)")
            #expect(check.stdoutText.contains("agent.yaml: 6 problems"), "\(check.stdoutText)")
        }
    }

    @Test("check finds a case's misspelt tool in the same round as the case file's own errors")
    func caseErrorsInOneRound() async throws {
        try await TemporaryDirectory.with { directory in
            try
                "name: a\nmodel: {script: m.model.yaml}\ntools:\n  - {name: cancel_order, description: d, side_effect: write, fixture: [{output: {}}]}\n"
                .write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try "decisions:\n  - answer: hi\n".write(toFile: directory.path("m.model.yaml"), atomically: true, encoding: .utf8)
            try """
            caseId: typos
            agent: agent.yaml
            input: hi
            expected:
              toolsCaled: [cancel_order]
              toolsNotCalled: [cancel_ordr]
              stopReason: sucess
            """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let check = try await agentEval(["check", "case.yaml"], in: directory.url)
            #expect(check.status == 2)
            #expect(check.stderr.contains("expected has no setting \"toolsCaled\"\n  --> case.yaml:5:3"), "\(check.stderr)")
            #expect(check.stderr.contains("found \"sucess\"\n  --> case.yaml:7:15"), "\(check.stderr)")
            #expect(check.stderr.contains("names the tool \"cancel_ordr\", which agent a (agent.yaml) does not have\n  --> case.yaml:6:20"))
            #expect(check.stdoutText.contains("case.yaml: 3 problems"), "\(check.stdoutText)")
        }
    }

    @Test("a case's cross-file errors point at the line that names the tool, the agent or the logs")
    func crossFileErrorsPointAtTheirLine() async throws {
        try await TemporaryDirectory.with { directory in
            try
                "name: a\nmodel: {script: m.model.yaml}\ntools:\n  - {name: lookup, description: d, side_effect: read, fixture: [{output: {}}]}\n"
                .write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try "decisions:\n  - answer: hi\n".write(toFile: directory.path("m.model.yaml"), atomically: true, encoding: .utf8)
            try """
            caseId: tools
            agent: agent.yaml
            input: hi
            expected:
              toolsCalled: [lookup]
              toolsNotCalled: [lookup, delete_all]
            """.write(toFile: directory.path("tools.yaml"), atomically: true, encoding: .utf8)
            try "caseId: gone\ndescription: x\nagent: missing/agent.yaml\ninput: hi\nexpected: {stopReason: success}\n".write(
                toFile: directory.path("gone.yaml"), atomically: true, encoding: .utf8)
            try "caseId: logs\ndescription: x\nlogs: [runs/*.jsonl.gz]\nexpected: {stopReason: success}\n".write(
                toFile: directory.path("logs.yaml"), atomically: true, encoding: .utf8)
            let check = try await agentEval(["check", "."], in: directory.url)
            #expect(check.status == 2)
            #expect(check.stderr.contains("does not have\n  --> tools.yaml:6:28"), "\(check.stderr)")
            #expect(
                check.stderr.contains("names the agent file missing/agent.yaml, which does not exist\n  --> gone.yaml:3:8"),
                "\(check.stderr)")
            #expect(check.stderr.contains("no log matches runs/*.jsonl.gz\n  --> logs.yaml:3:7"), "\(check.stderr)")
        }
    }

    @Test("a case whose agent names api_key_env runs offline from its cassette with the key unset; check only warns")
    func cassetteNeedsNoKey() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let support = try String(contentsOfFile: ExampleRuns.agentPath("support"), encoding: .utf8)
            let model =
                "model: {provider: openai, name: local-model, base_url: \"\(server.baseURL("agent"))\", api_key_env: AE_TEST_UNSET_KEY}"
            try support.replacingOccurrences(of: "model:\n  script: support.model.yaml", with: model).write(
                toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try """
            caseId: offline
            agent: agent.yaml
            input: Where is order A-1042?
            cassette: cassettes/offline
            expected: {toolsCalled: [lookup_order], stopReason: success}
            """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            // Recorded once, with a key and the server up.
            let record = try await agentEval(
                ["run", "case.yaml", "--record", "new", "--no-catalog"], in: directory.url, environment: ["AE_TEST_UNSET_KEY": "sk-test"])
            #expect(record.status == 0, "\(record.stdoutText)\(record.stderr)")
            server.stop()
            // Offline CI: no key, no server.
            let replay = try await agentEval(["run", "case.yaml", "--no-catalog"], in: directory.url)
            #expect(replay.status == 0, "\(replay.stdoutText)\(replay.stderr)")
            let check = try await agentEval(["check", "."], in: directory.url)
            #expect(check.status == 0, "\(check.stderr)")
            #expect(
                check.stderr.contains("warning: agent support-agent's model reads its API key from AE_TEST_UNSET_KEY, which is not set"))
            // A request the cassette does not have names the variable instead of going out.
            let live = try await agentEval(["exec", "agent.yaml", "--input", "Where is order A-1042?", "--no-catalog"], in: directory.url)
            #expect(live.status == 1)
            #expect(
                live.stdoutText.contains("api_key_env names AE_TEST_UNSET_KEY, which is not set in the environment"), "\(live.stdoutText)")
        }
    }

    @Test("a misspelt command gets a did-you-mean and a negative step says so, both as usage errors")
    func usageErrors() async throws {
        let misspelt = try await agentEval(["rn", "EvalCases/"])
        #expect(misspelt.status == 64)
        #expect(misspelt.stderr.hasPrefix("error: agent-eval has no command \"rn\"\nhint: did you mean \"agent-eval run\"?"))
        let negative = try await agentEval(["replay", "Fixtures/runs/support-refund.jsonl.gz", "--step", "-1"], in: repositoryRoot)
        #expect(negative.status == 64)
        #expect(negative.stderr.hasPrefix("error: --step -1: a negative number is not accepted here"))
    }

    @Test("the catalog goes to the project root, found from a subfolder, and its creation is said once")
    func catalogAtTheProjectRoot() async throws {
        try await TemporaryDirectory.with { directory in
            #expect(try await agentEval(["init", "shop"], in: directory.url).status == 0)
            let evals = directory.url.appendingPathComponent("shop/evals")
            let environment = ["AGENT_EVAL_CATALOG": ""]
            let first = try await agentEval(["run", "."], in: evals, environment: environment)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(FileManager.default.fileExists(atPath: directory.path("shop/.agent-eval/catalog.sqlite")))
            #expect(!FileManager.default.fileExists(atPath: evals.appendingPathComponent(".agent-eval").path))
            #expect(first.stderr.contains("note: created the catalog "), "\(first.stderr)")
            let second = try await agentEval(["run", "."], in: evals, environment: environment)
            #expect(!second.stderr.contains("note: created the catalog"))
        }
    }
}
