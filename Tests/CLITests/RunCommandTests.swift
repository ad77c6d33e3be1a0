import Foundation
import TestSupport
import Testing
import TraceCore

/// The repository root: the README's commands run from there.
let repositoryRoot = ExampleRuns.fixtures.deletingLastPathComponent()

@Suite("agent-eval run")
struct RunCommandTests {
    @Test("the bundled EvalCases pass: exit 0, one line per case in a stable order, and a summary")
    func bundledCasesPass() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await agentEval(["run", "EvalCases/", "--out", directory.path("runs")], in: repositoryRoot)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let lines = result.stdoutText.split(separator: "\n").map(String.init)
            #expect(lines.count == 12)
            #expect(lines.prefix(11).allSatisfy { $0.hasPrefix("✔ ") })
            #expect(lines.last?.hasPrefix("PASS: 11 cases, 11 passed, 0 failed") == true)
        }
    }

    @Test("failing cases: exit 1, every failure explained with the replay command; reports are written")
    func failingCases() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await agentEval(
                [
                    "run", "Fixtures/eval/failing", "--out", directory.path("runs"), "--json-out", directory.path("r.json"), "--junit",
                    directory.path("r.xml"), "--markdown", directory.path("r.md"),
                ], in: repositoryRoot)
            #expect(result.status == 1)
            #expect(result.stdoutText.contains("✘ support-refund-under-10  (1 log)"))
            #expect(result.stdoutText.contains("happened: call-3: amount_cents is 4999, above the maximum 1000"))
            #expect(result.stdoutText.contains("look: agent-eval replay Fixtures/runs/support-refund.jsonl.gz --step 2"))
            let report = try JSONParser.parse(Array(try Data(contentsOf: directory.url.appendingPathComponent("r.json"))))
            #expect(report["summary"]?["failed"] == 5)
            #expect(FileManager.default.fileExists(atPath: directory.path("r.xml")))
            #expect(FileManager.default.fileExists(atPath: directory.path("r.md")))
        }
    }

    @Test("a bad case file: exit 2 with file:line:column, and nothing runs")
    func badCaseFile() async throws {
        try await TemporaryDirectory.with { directory in
            try "caseId: a\nlogs: x.gz\nexpected:\n  toolsNotCaled: [x]\n".write(
                toFile: directory.path("a.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", directory.url.path])
            #expect(result.status == 2)
            #expect(
                result.stderr == """
                    error: expected has no setting "toolsNotCaled"
                      --> \(directory.path("a.yaml")):4:3
                    hint: did you mean "toolsNotCalled"?
                    1 problem in the case files or the files they name; nothing was run

                    """)
        }
    }

    @Test("a missing log, a missing agent file, a broken agent file or an unknown tool: exit 2 before anything runs, each one said")
    func harnessErrors() async throws {
        try await TemporaryDirectory.with { directory in
            try "caseId: a\nlogs: missing-*.jsonl.gz\nexpected: {toolsCalled: [t]}\n".write(
                toFile: directory.path("a.yaml"), atomically: true, encoding: .utf8)
            try "caseId: b\nagent: nowhere.yaml\ninput: hi\nexpected: {toolsCalled: [t]}\n".write(
                toFile: directory.path("b.yaml"), atomically: true, encoding: .utf8)
            try "caseId: c\nagent: broken.agent.yaml\ninput: hi\nexpected: {toolsCalled: [t]}\n".write(
                toFile: directory.path("c.yaml"), atomically: true, encoding: .utf8)
            try "name: broken\nmodel: {script: none.yaml}\ntools: []\nlimits: {max_stepz: 2}\n".write(
                toFile: directory.path("broken.agent.yaml"), atomically: true, encoding: .utf8)
            try "caseId: d\nagent: \(ExampleRuns.agentPath("support"))\ninput: hi\nexpected: {toolsNotCalled: [delete_customers]}\n"
                .write(toFile: directory.path("d.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", directory.url.path, "--out", directory.path("runs")])
            #expect(result.status == 2)
            #expect(result.stdoutText.isEmpty)
            #expect(
                result.stderr.contains(
                    "error: case \"a\": no log matches \(directory.path("missing-*.jsonl.gz"))\n  --> \(directory.path("a.yaml")):2:7"))
            #expect(
                result.stderr.contains("error: case \"b\" names the agent file \(directory.path("nowhere.yaml")), which does not exist"))
            // Every error of the broken agent file, at its own lines.
            #expect(
                result.stderr.contains(
                    "model.script: \(directory.path("none.yaml")) does not exist\n  --> \(directory.path("broken.agent.yaml")):2:17"))
            #expect(result.stderr.contains("limits has no setting \"max_stepz\"\n  --> \(directory.path("broken.agent.yaml")):4:10"))
            #expect(result.stderr.contains("names the tool \"delete_customers\", which agent support-agent"))
            #expect(result.stderr.contains("hint: did you mean \"delete_customer\"?"))
            #expect(result.stderr.hasSuffix("5 problems in the case files or the files they name; nothing was run\n"))
            #expect(!FileManager.default.fileExists(atPath: directory.path("runs")))
        }
    }

    @Test("baselines: written, compared, and a regression fails CI while a known failure does not with --fail-on regression")
    func baselineGate() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            func write(_ expected: String) throws {
                try "caseId: gate\nlogs: \(log)\nexpected:\n\(expected)".write(
                    toFile: directory.path("cases/gate.yaml"), atomically: true, encoding: .utf8)
            }
            try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
            try "caseId: known\nlogs: \(log)\nexpected: {stopReason: blocked}\n".write(
                toFile: directory.path("cases/known.yaml"), atomically: true, encoding: .utf8)
            try write("  stopReason: success\n")
            let first = try await agentEval(["run", directory.path("cases"), "--update-baseline"])
            #expect(first.status == 1)
            #expect(first.stdoutText.contains("baseline written: \(directory.path("cases"))/.baseline (2 cases)"), "\(first.stdoutText)")
            #expect(FileManager.default.fileExists(atPath: directory.path("cases/.baseline/gate.json")))

            let same = try await agentEval(["run", directory.path("cases"), "--fail-on", "regression"])
            #expect(same.status == 0, "\(same.stdoutText)")
            #expect(same.stdoutText.contains("0 regressed, 1 known failure"))

            // The case now forbids a tool the run attempted: it fails, and the attempt is new.
            try write("  stopReason: success\n  toolsNotCalled: [delete_customer]\n  countDeniedAttempts: true\n")
            let regressed = try await agentEval(["run", directory.path("cases"), "--fail-on", "regression"])
            #expect(regressed.status == 1)
            #expect(regressed.stdoutText.contains("✘ gate  (1 log, regressed)"))
            #expect(regressed.stdoutText.contains("regression: passed in the baseline, fails now"))

            // Updating the baseline compares first: the regression is not added to it (which
            // would make it a known failure, and the next gate green) unless the run is
            // accepted with --replace-baseline.
            let before = try Data(contentsOf: URL(fileURLWithPath: directory.path("cases/.baseline/gate.json")))
            let update = try await agentEval(["run", directory.path("cases"), "--fail-on", "regression", "--update-baseline"])
            #expect(update.status == 1)
            #expect(update.stdoutText.contains("regression: passed in the baseline, fails now"), "\(update.stdoutText)")
            #expect(update.stderr.contains("baseline not written: a case regressed against it (gate)"), "\(update.stderr)")
            #expect(!update.stdoutText.contains("baseline written"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path("cases/.baseline/gate.json"))) == before)
            #expect(try await agentEval(["run", directory.path("cases"), "--fail-on", "regression"]).status == 1)
            let accepted = try await agentEval(["run", directory.path("cases"), "--update-baseline", "--replace-baseline"])
            #expect(
                accepted.stdoutText.contains("baseline written: \(directory.path("cases"))/.baseline (2 cases)"), "\(accepted.stdoutText)")
            let known = try await agentEval(["run", directory.path("cases"), "--fail-on", "regression"])
            #expect(known.status == 0, "\(known.stdoutText)")
            #expect(known.stdoutText.contains("0 regressed, 2 known failures"), "\(known.stdoutText)")
        }
    }

    @Test(
        "a new case that fails fails --fail-on regression and is not written as a known failure by the gate's update; a baseline of another case is refused"
    )
    func newFailingCase() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
            try "caseId: ok\nlogs: \(log)\nexpected: {toolsCalled: [refund_order]}\n".write(
                toFile: directory.path("cases/ok.yaml"), atomically: true, encoding: .utf8)
            let first = try await agentEval(["run", directory.path("cases"), "--no-catalog", "--update-baseline"])
            #expect(first.status == 0, "\(first.stdoutText)\(first.stderr)")

            // A pull request adds a case that has never passed: no baseline says it failed before.
            try "caseId: never-passed\nlogs: \(log)\nexpected: {toolsCalled: [delete_customer]}\n".write(
                toFile: directory.path("cases/new.yaml"), atomically: true, encoding: .utf8)
            let gate = try await agentEval(["run", directory.path("cases"), "--no-catalog", "--fail-on", "regression", "--json"])
            #expect(gate.status == 1, "\(gate.stdoutText)\(gate.stderr)")
            let report = try JSONParser.parse(Array(gate.stdout))
            #expect(report["summary"]?["new"]?.intValue == 1 && report["summary"]?["new_failing"]?.intValue == 1, "\(gate.stdoutText)")
            #expect(report["verdict"]?["line"]?.stringValue?.contains("1 new (no baseline to compare with; 1 of them failing)") == true)

            // The recipe's update on main writes nothing, and says why and what to do.
            let update = try await agentEval(
                ["run", directory.path("cases"), "--no-catalog", "--fail-on", "regression", "--update-baseline"])
            #expect(update.status == 1, "\(update.stdoutText)\(update.stderr)")
            #expect(update.stderr.contains("baseline not written: a new case fails (never-passed)"), "\(update.stderr)")
            #expect(update.stderr.contains("quarantine it"), "\(update.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("cases/.baseline/never-passed.json")))

            // Quarantined, it lands failing and the gate holds.
            try
                "caseId: never-passed\nlogs: \(log)\nexpected: {toolsCalled: [delete_customer]}\nquarantine: {owner: ana, reason: fixing the agent, until: 2999-01-01}\n"
                .write(toFile: directory.path("cases/new.yaml"), atomically: true, encoding: .utf8)
            let held = try await agentEval(["run", directory.path("cases"), "--no-catalog", "--fail-on", "regression"])
            #expect(held.status == 0, "\(held.stdoutText)\(held.stderr)")

            // Written on purpose (without --fail-on regression), it is a known failure from then on.
            try "caseId: never-passed\nlogs: \(log)\nexpected: {toolsCalled: [delete_customer]}\n".write(
                toFile: directory.path("cases/new.yaml"), atomically: true, encoding: .utf8)
            let decided = try await agentEval(["run", directory.path("cases"), "--no-catalog", "--update-baseline"])
            #expect(decided.status == 1 && decided.stdoutText.contains("baseline written"), "\(decided.stdoutText)\(decided.stderr)")
            let known = try await agentEval(["run", directory.path("cases"), "--no-catalog", "--fail-on", "regression"])
            #expect(known.status == 0 && known.stdoutText.contains("1 known failure"), "\(known.stdoutText)")

            // With no baseline at all (the recipe's first run, --allow-no-baseline), every case is
            // new: the failing one fails the gate, and the update writes nothing.
            try FileManager.default.removeItem(atPath: directory.path("cases/.baseline"))
            let firstGate = try await agentEval(
                ["run", directory.path("cases"), "--no-catalog", "--fail-on", "regression", "--allow-no-baseline"])
            #expect(firstGate.status == 1, "\(firstGate.stdoutText)\(firstGate.stderr)")
            let firstUpdate = try await agentEval(
                ["run", directory.path("cases"), "--no-catalog", "--fail-on", "regression", "--update-baseline"])
            #expect(firstUpdate.stderr.contains("baseline not written: a new case fails (never-passed)"), "\(firstUpdate.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("cases/.baseline/never-passed.json")))
            #expect(try await agentEval(["run", directory.path("cases"), "--no-catalog", "--update-baseline"]).status == 1)

            // A baseline file copied from another case's is that case's evidence, not this one's.
            try FileManager.default.removeItem(atPath: directory.path("cases/.baseline/never-passed.json"))
            try FileManager.default.copyItem(
                atPath: directory.path("cases/.baseline/ok.json"), toPath: directory.path("cases/.baseline/never-passed.json"))
            let copied = try await agentEval(["run", directory.path("cases"), "--no-catalog", "--fail-on", "regression"])
            #expect(copied.status == 2, "\(copied.stdoutText)\(copied.stderr)")
            #expect(copied.stderr.contains("is the baseline of case \"ok\", not of \"never-passed\""), "\(copied.stderr)")
        }
    }

    @Test("--shard and --filter select cases; a selection that is empty is an error")
    func selection() async throws {
        var seen: [String] = []
        for index in 1...3 {
            let result = try await agentEval(["run", "EvalCases/", "--filter", "*recorded*", "--shard", "\(index)/3"], in: repositoryRoot)
            #expect(result.status == 0 || result.status == 2)
            seen += result.stdoutText.split(separator: "\n").filter { $0.hasPrefix("✔ ") }.map { String($0.split(separator: " ")[1]) }
        }
        // The glob matches ids and the "recorded" tag.
        #expect(
            seen.sorted() == [
                "no-run-deletes-customers", "research-token-budget-recorded", "support-log-fixture", "support-refund-answer-judged",
                "support-refund-recorded", "triage-recovery-recorded",
            ])
        let none = try await agentEval(["run", "EvalCases/", "--filter", "nothing-matches"], in: repositoryRoot)
        #expect(none.status == 2)
        let usage = try await agentEval(["run", "EvalCases/", "--shard", "4/3"], in: repositoryRoot)
        #expect(usage.status == 64)
    }

    @Test("--repeat runs a live case N times and reports pass rate, pass@k, pass^k and stability")
    func repeats() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await agentEval(
                [
                    "run", "EvalCases/support/refund-live.yaml", "--repeat", "3", "--k", "2", "--out", directory.path("runs"), "--json-out",
                    directory.path("r.json"),
                ],
                in: repositoryRoot)
            #expect(result.status == 0, "\(result.stdoutText)")
            #expect(result.stdoutText.contains("✔ support-refund-live  (3 live runs, 3/3 passed, stable pass)"))
            let report = try JSONParser.parse(Array(try Data(contentsOf: directory.url.appendingPathComponent("r.json"))))
            let entry = try #require(report["cases"]?.arrayValue?.first)
            #expect(entry["runs"]?.arrayValue?.count == 3)
            #expect(entry["pass_hat_k"] == 1.0)
            #expect(entry["pass_at_k"] == 1.0)
            #expect(report["k"] == 2)
            #expect(FileManager.default.fileExists(atPath: directory.path("runs/support-refund-live-3.jsonl.gz")))
        }
    }

    @Test(
        "logs with minPassRate are repeated attempts: one of two passing is flaky_pass at 0.5, a failure at the default (each log must pass)"
    )
    func recordedRepeats() async throws {
        try await TemporaryDirectory.with { directory in
            let logs = ["runs/support-refund.jsonl.gz", "runs/research-budget.jsonl.gz"].map {
                ExampleRuns.fixtures.appendingPathComponent($0).path
            }
            for (rate, status, outcome) in [("minPassRate: 0.5\n", Int32(0), "flaky_pass"), ("", Int32(1), "fail")] {
                try "caseId: repeats\nlogs: [\(logs.joined(separator: ", "))]\n\(rate)expected:\n  stopReason: success\n".write(
                    toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
                let result = try await agentEval(["run", "case.yaml", "--no-catalog", "--json"], in: directory.url)
                #expect(result.status == status, "\(result.stdoutText)\(result.stderr)")
                let entry = try JSONParser.parse(Array(result.stdout))["cases"]?.arrayValue?.first
                #expect(entry?["outcome"] == .string(outcome), "\(result.stdoutText)")
                #expect(entry?["attempts"]?["passed"] == 1 && entry?["attempts"]?["failed"] == 1)
            }
        }
    }

    @Test("a linked folder inside a case folder is read like any other (its cases were skipped), and a link back up the tree ends there")
    func linkedCaseFolder() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path
            for folder in ["real", "root"] {
                try FileManager.default.createDirectory(atPath: directory.path(folder), withIntermediateDirectories: true)
            }
            try "caseId: shared\nlogs: \(log)\nexpected:\n  toolsNotCalled: [refund_order]\n".write(
                toFile: directory.path("real/shared.yaml"), atomically: true, encoding: .utf8)
            try "caseId: own\nlogs: \(log)\nexpected:\n  stopReason: success\n".write(
                toFile: directory.path("root/own.yaml"), atomically: true, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: directory.path("root/linked"), withDestinationPath: "../real")
            try FileManager.default.createSymbolicLink(atPath: directory.path("root/loop"), withDestinationPath: "..")
            // A case beside the folder given, which a link up the tree would take in.
            try "caseId: beside\nlogs: \(log)\nexpected:\n  toolsNotCalled: [refund_order]\n".write(
                toFile: directory.path("beside.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", "root", "--no-catalog"], in: directory.url)
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("✘ shared"), "\(result.stdoutText)")
            #expect(result.stdoutText.contains("2 cases, 1 passed, 1 failed"), "\(result.stdoutText)")
            let check = try await agentEval(["check", "root"], in: directory.url)
            #expect(check.stdoutText.contains("root/linked/shared.yaml"), "\(check.stdoutText)")
        }
    }

    @Test("a case file named .YAML or .Yml is read like a .yaml one (it was skipped without a word, a failing case included)")
    func upperCaseSuffix() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path
            try FileManager.default.createDirectory(atPath: directory.path("evals"), withIntermediateDirectories: true)
            try "caseId: loud\nlogs: \(log)\nexpected:\n  toolsNotCalled: [refund_order]\n".write(
                toFile: directory.path("evals/Refunds.YAML"), atomically: true, encoding: .utf8)
            try "caseId: mixed\nlogs: \(log)\nexpected:\n  stopReason: success\n".write(
                toFile: directory.path("evals/Budget.Yml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", "evals", "--no-catalog"], in: directory.url)
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("✘ loud"), "\(result.stdoutText)")
            #expect(result.stdoutText.contains("2 cases, 1 passed, 1 failed"), "\(result.stdoutText)")
            let check = try await agentEval(["check", "evals"], in: directory.url)
            #expect(check.stdoutText.contains("evals/Refunds.YAML"), "\(check.stdoutText)")
        }
    }

    @Test(
        "a logs: pattern globs folders too: * within one part, ** any number of folders; hidden names and links to folders are not walked")
    func globInAFolder() async throws {
        try await TemporaryDirectory.with { directory in
            // A different run in each place (one run in two files is refused as counted twice).
            for (path, fixture) in [
                ("runs/a/x.jsonl.gz", "runs/support-refund"), ("runs/b/x.jsonl.gz", "samples/support-sample"),
                ("runs/b/deep/y.jsonl.gz", "runs/research-budget"), ("runs/.hidden/x.jsonl.gz", "samples/research-sample"),
                ("outside/z.jsonl.gz", "samples/research-sample"),
            ] {
                try FileManager.default.createDirectory(
                    atPath: directory.path((path as NSString).deletingLastPathComponent), withIntermediateDirectories: true)
                try FileManager.default.copyItem(
                    atPath: ExampleRuns.fixtures.appendingPathComponent(fixture + ".jsonl.gz").path, toPath: directory.path(path))
            }
            // A file that is no log: `**` at the end names the logs below, not every file.
            try "notes".write(toFile: directory.path("runs/b/README.md"), atomically: true, encoding: .utf8)
            // A link to a folder: `*` follows it as a name; `**` does not walk through it.
            try FileManager.default.createSymbolicLink(atPath: directory.path("runs/b/out"), withDestinationPath: directory.path("outside"))
            func logs(_ pattern: String) async throws -> (status: Int32, logs: [String], stderr: String) {
                try "caseId: folders\nlogs: \(pattern)\nexpected:\n  stopReason: success\n".write(
                    toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
                let result = try await agentEval(["run", "case.yaml", "--no-catalog", "--json"], in: directory.url)
                let report = try? JSONParser.parse(result.stdout)
                let runs = report?["cases"]?.arrayValue?.first?["runs"]?.arrayValue ?? []
                // As given (relative to the case file's folder), or absolute: from its runs/ or outside/ on.
                let names = runs.compactMap { $0["log"]?.stringValue }.map { log in
                    ["runs/", "outside/"].compactMap { log.range(of: $0)?.lowerBound }.min().map { String(log[$0...]) } ?? log
                }
                return (result.status, names.sorted(), result.stderr)
            }
            let star = try await logs("runs/*/x.jsonl.gz")
            // Each log checked (passed or failed, not "could not run").
            #expect(star.status != 2 && star.logs == ["runs/a/x.jsonl.gz", "runs/b/x.jsonl.gz"], "\(star)")
            let deep = try await logs("runs/**/*.jsonl.gz")
            #expect(deep.status != 2 && deep.logs == ["runs/a/x.jsonl.gz", "runs/b/deep/y.jsonl.gz", "runs/b/x.jsonl.gz"], "\(deep)")
            let below = try await logs("runs/b/**")
            #expect(below.logs == ["runs/b/deep/y.jsonl.gz", "runs/b/x.jsonl.gz"], "\(below)")
            let linked = try await logs("runs/b/*/z.jsonl.gz")
            #expect(linked.logs == ["runs/b/out/z.jsonl.gz"], "\(linked)")
            let none = try await logs("runs/*/none.jsonl.gz")
            #expect(none.status == 2 && none.stderr.contains("no log matches runs/*/none.jsonl.gz"), "\(none)")
            // A case in a folder whose name holds a glob's character: its folder as named, not its siblings.
            try FileManager.default.createDirectory(atPath: directory.path("proj*/runs"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory.path("projB/runs"), withIntermediateDirectories: true)
            for (folder, fixture) in [("proj*", "runs/support-refund"), ("projB", "runs/research-budget")] {
                try FileManager.default.copyItem(
                    atPath: ExampleRuns.fixtures.appendingPathComponent(fixture + ".jsonl.gz").path,
                    toPath: directory.path("\(folder)/runs/run.jsonl.gz"))
            }
            try "caseId: starred\nlogs: runs/*.jsonl.gz\nexpected:\n  stopReason: success\n".write(
                toFile: directory.path("proj*/case.yaml"), atomically: true, encoding: .utf8)
            let starred = try await agentEval(["run", "proj*/case.yaml", "--no-catalog"], in: directory.url)
            #expect(starred.status == 0 && starred.stdoutText.contains("starred  (1 log)"), "\(starred.stdoutText)\(starred.stderr)")
            // index reads the same patterns.
            let catalog = ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")]
            let indexed = try await agentEval(["index", "runs/**/*.jsonl.gz", "--json"], in: directory.url, environment: catalog)
            #expect(indexed.status == 0, "\(indexed.stderr)")
            let listed = try await agentEval(["runs", "--json"], in: directory.url, environment: catalog)
            let paths = (try JSONParser.parse(listed.stdout).arrayValue ?? []).compactMap { $0["path"]?.stringValue }
            #expect(paths.map { String($0.dropFirst(directory.url.path.count + 1)) }.sorted() == deep.logs, "\(paths)")
        }
    }

    @Test(
        "an argument check on a key the tool does not declare, close to one it does, fails saying so: a misspelt exists: false passed every run"
    )
    func misspeltArgumentKey() async throws {
        try await TemporaryDirectory.with { directory in
            let log = ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path
            for (matcher, status) in [("{paths: {amount_cent: {exists: false}}}", Int32(1)), ("{paths: {amount_cents: {max: 100000}}}", 0)]
            {
                try "caseId: a\nlogs: \(log)\nexpected:\n  arguments:\n    refund_order: \(matcher)\n".write(
                    toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
                let result = try await agentEval(["run", "case.yaml", "--no-catalog"], in: directory.url)
                #expect(result.status == status, "\(matcher): \(result.stdoutText)\(result.stderr)")
                if status == 1 {
                    #expect(result.stdoutText.contains("amount_cent is not one (its input_schema declares amount_cents, order_id, reason)"))
                    #expect(result.stdoutText.contains("did you mean \"amount_cents\"?"))
                }
            }
        }
    }

    @Test(
        "a log named twice — the same path, patterns that overlap, a link to it, a hard link — is one attempt: 1 of 2 passing is not 2 of 3"
    )
    func logNamedTwice() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("logs"), withIntermediateDirectories: true)
            for name in ["support-refund", "research-budget"] {
                try FileManager.default.copyItem(
                    atPath: ExampleRuns.fixtures.appendingPathComponent("runs/\(name).jsonl.gz").path,
                    toPath: directory.path("logs/\(name).jsonl.gz"))
            }
            try FileManager.default.createSymbolicLink(
                atPath: directory.path("linked.jsonl.gz"), withDestinationPath: "logs/support-refund.jsonl.gz")
            try FileManager.default.linkItem(
                atPath: directory.path("logs/support-refund.jsonl.gz"), toPath: directory.path("hard.jsonl.gz"))
            let logs =
                "[logs/support-refund.jsonl.gz, ./logs/support-refund.jsonl.gz, logs/support-*.jsonl.gz, linked.jsonl.gz, hard.jsonl.gz, "
                + "logs/research-budget.jsonl.gz]"
            try "caseId: twice\nlogs: \(logs)\nminPassRate: 0.6\nexpected:\n  stopReason: success\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", "case.yaml", "--no-catalog", "--json"], in: directory.url)
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
            let entry = try JSONParser.parse(Array(result.stdout))["cases"]?.arrayValue?.first
            #expect(entry?["attempts"]?["passed"] == 1 && entry?["attempts"]?["failed"] == 1, "\(result.stdoutText)")
        }
    }

    @Test(
        "a copy of a log under another name is the same run, not a second attempt: the case could not run, naming both files, run after run; two imports of one file name and time are two runs"
    )
    func copiedLog() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("logs"), withIntermediateDirectories: true)
            for (name, copy) in [("support-refund", "a"), ("support-refund", "b"), ("research-budget", "c")] {
                try FileManager.default.copyItem(
                    atPath: ExampleRuns.fixtures.appendingPathComponent("runs/\(name).jsonl.gz").path,
                    toPath: directory.path("logs/\(copy).jsonl.gz"))
            }
            try "caseId: copies\nlogs: logs/*.jsonl.gz\nminPassRate: 0.6\nexpected:\n  stopReason: success\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            // Twice, with the catalog that keeps facts and results between runs.
            for _ in 0..<2 {
                let result = try await agentEval(["run", "case.yaml", "--json"], in: directory.url)
                #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
                let error = try JSONParser.parse(Array(result.stdout))["cases"]?.arrayValue?.first?["diagnostic"]
                #expect(error?["code"] == "eval.duplicate_run", "\(result.stdoutText)")
                #expect(error?["message"]?.stringValue?.contains("logs/a.jsonl.gz and logs/b.jsonl.gz hold the same run") == true)
            }
            // Two different runs pass as before.
            try FileManager.default.removeItem(atPath: directory.path("logs/b.jsonl.gz"))
            let result = try await agentEval(["run", "case.yaml", "--json"], in: directory.url)
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
            // Two transcripts of one file name and modification time, imported: one run id and
            // start time (the import derives them from those), two runs all the same.
            for (folder, order) in [("x", "A-1"), ("y", "B-2")] {
                try FileManager.default.createDirectory(atPath: directory.path(folder), withIntermediateDirectories: true)
                let path = directory.path("\(folder)/chat.json")
                try """
                [{"role": "user", "content": "Where is \(order)?"},
                 {"role": "assistant", "content": "It is on its way.", "finish_reason": "stop"}]
                """.write(toFile: path, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_767_225_600)], ofItemAtPath: path)
                let imported = try await agentEval(
                    ["import", "messages", "\(folder)/chat.json", "--out", "imported/\(folder)"], in: directory.url)
                #expect(imported.status == 0, "\(imported.stdoutText)\(imported.stderr)")
            }
            try "caseId: imports\nlogs: [imported/x/chat.jsonl.gz, imported/y/chat.jsonl.gz]\nexpected:\n  stopReason: success\n".write(
                toFile: directory.path("imports.yaml"), atomically: true, encoding: .utf8)
            let imports = try await agentEval(["run", "imports.yaml", "--json"], in: directory.url)
            #expect(imports.status == 0, "\(imports.stdoutText)\(imports.stderr)")
        }
    }
}
