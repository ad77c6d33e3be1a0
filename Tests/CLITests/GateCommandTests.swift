import Foundation
import TestSupport
import Testing
import TraceCore

/// The gate from the command line: quarantine with its commands and `check`, the verdict in
/// every report file `run` writes, `--repeat auto`, annotations and the pull-request comment.
@Suite("The gate, from the command line")
struct GateCommandTests {
    static let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    /// A project (a `.git` marker makes it the project root) with a passing and a failing case.
    func project(in directory: TemporaryDirectory) throws -> URL {
        let root = directory.url.appendingPathComponent("project")
        try FileManager.default.createDirectory(atPath: root.path + "/.git", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root.path + "/cases", withIntermediateDirectories: true)
        try "caseId: ok\nlogs: \(Self.log)\nexpected: {stopReason: success}\n".write(
            toFile: root.path + "/cases/ok.yaml", atomically: true, encoding: .utf8)
        try "caseId: bad\nlogs: \(Self.log)\nexpected: {toolsNotCalled: [refund_order]}\n".write(
            toFile: root.path + "/cases/bad.yaml", atomically: true, encoding: .utf8)
        return root
    }

    @Test("quarantine add, list and release edit the project's file; a held entry keeps the gate green, an expired one fails run and check")
    func quarantine() async throws {
        try await TemporaryDirectory.with { directory in
            let root = try project(in: directory)
            let failing = try await agentEval(["run", "cases", "--no-catalog"], in: root)
            #expect(failing.status == 1)

            let add = try await agentEval(["quarantine", "add", "bad", "--owner", "alice", "--reason", "#42", "--days", "7"], in: root)
            #expect(add.status == 0, "\(add.stderr)")
            #expect(add.stdoutText.hasPrefix("quarantined bad in .agent-eval/quarantine.yaml: owner alice, until "))
            let held = try await agentEval(["run", "cases", "--no-catalog", "--junit", "r.xml"], in: root)
            #expect(held.status == 0, "\(held.stdoutText)")
            #expect(held.stdoutText.contains("✘ bad  (1 log, quarantined)"))
            #expect(held.stdoutText.contains("quarantined, not failing the gate: owner alice"))
            #expect(held.stdoutText.contains("PASS: 2 cases, 1 passed, 0 failed, 1 quarantined"))
            let junit = try String(contentsOfFile: root.path + "/r.xml", encoding: .utf8)
            #expect(junit.contains("failures=\"0\" errors=\"0\" skipped=\"1\""))
            #expect(junit.contains("<skipped message=\"quarantined (owner alice"))
            #expect(try await agentEval(["check", "cases"], in: root).status == 0)

            let list = try await agentEval(["quarantine", "list", "--json", "--no-catalog"], in: root)
            let listed = try JSONParser.parse(Array(list.stdout))
            #expect(listed["entries"]?.arrayValue?.first?["case_id"] == "bad")
            #expect(listed["entries"]?.arrayValue?.first?["expired"] == false)

            // Past its date: `check` names the entry's line, `run` fails the case even under --fail-on regression.
            #expect(
                try await agentEval(["quarantine", "add", "bad", "--owner", "alice", "--reason", "#42", "--until", "2020-01-31"], in: root)
                    .status == 0)
            let check = try await agentEval(["check", "cases"], in: root)
            #expect(check.status == 2)
            #expect(check.stderr.contains("the quarantine of case bad ended on 2020-01-31"), "\(check.stderr)")
            #expect(check.stderr.contains(".agent-eval/quarantine.yaml:4:5"), "\(check.stderr)")
            let expired = try await agentEval(["run", "cases", "--no-catalog", "--fail-on", "regression", "--allow-no-baseline"], in: root)
            #expect(expired.status == 1)
            #expect(expired.stdoutText.contains("quarantine expired: owner alice, until 2020-01-31"))
            #expect(expired.stdoutText.contains("FAIL: 2 cases, 1 passed, 1 failed, 1 quarantine expired"))

            let missingFile = try await agentEval(["run", "cases", "--no-catalog", "--quarantine", "nope.yaml"], in: root)
            #expect(missingFile.status == 2 && missingFile.stderr.contains("the quarantine file nope.yaml does not exist"))
            // The same case quarantined in its case file too: check and run both refuse it.
            try
                "caseId: bad\nlogs: \(Self.log)\nquarantine: {owner: bob, reason: \"#7\", until: 2999-01-01}\nexpected: {toolsNotCalled: [refund_order]}\n"
                .write(toFile: root.path + "/cases/bad.yaml", atomically: true, encoding: .utf8)
            let both = try await agentEval(["check", "cases"], in: root)
            #expect(both.status == 2 && both.stderr.contains("is quarantined both here and in its case file"), "\(both.stderr)")
            try "caseId: bad\nlogs: \(Self.log)\nexpected: {toolsNotCalled: [refund_order]}\n".write(
                toFile: root.path + "/cases/bad.yaml", atomically: true, encoding: .utf8)
            let release = try await agentEval(["quarantine", "release", "bad"], in: root)
            #expect(release.status == 0 && release.stdoutText == "released bad from .agent-eval/quarantine.yaml\n")
            let missing = try await agentEval(["quarantine", "release", "bad"], in: root)
            #expect(missing.status == 2 && missing.stderr.contains("bad has no entry in"))
            #expect(
                try await agentEval(["quarantine", "add", "x", "--owner", "a", "--reason", "r", "--until", "tomorrow"], in: root).status
                    == 64)
        }
    }

    @Test("run's console, JSON, JUnit, Markdown and HTML report files all carry the verdict the exit status was decided with")
    func verdictEverywhere() async throws {
        try await TemporaryDirectory.with { directory in
            let root = try project(in: directory)
            let result = try await agentEval(
                [
                    "run", "cases", "--no-catalog", "--json-out", "r.json", "--junit", "r.xml", "--markdown", "r.md", "--html", "r.html",
                    "--github-annotations",
                ], in: root)
            #expect(result.status == 1)
            let verdict = "FAIL: 2 cases, 1 passed, 1 failed"
            #expect(result.stdoutText.contains("\n\(verdict) ("))
            let report = try JSONParser.parse(Array(try Data(contentsOf: root.appendingPathComponent("r.json"))))
            #expect(report["verdict"]?["line"]?.stringValue == verdict)
            #expect(report["verdict"]?["exit_status"] == 1)
            #expect(try String(contentsOfFile: root.path + "/r.xml", encoding: .utf8).contains("value=\"\(verdict)\""))
            #expect(try String(contentsOfFile: root.path + "/r.md", encoding: .utf8).hasPrefix("## agent-eval: \(verdict)\n"))
            #expect(try String(contentsOfFile: root.path + "/r.html", encoding: .utf8).contains("<title>eval report: \(verdict)</title>"))
            #expect(result.stdoutText.contains("::error file=cases/bad.yaml,line=1,title=agent-eval%3A bad fail::toolsNotCalled"))

            let comment = try await agentEval(["results", "comment", "r.json", "--report-link", "https://ci.example/r.html"], in: root)
            #expect(comment.status == 0)
            #expect(comment.stdoutText.hasPrefix("<!-- agent-eval results comment -->\n### ❌ agent-eval: \(verdict)\n"))
            #expect(comment.stdoutText.contains("#### Failing (1)\n\n- `bad` (fail) — `cases/bad.yaml:1`"))
            #expect(comment.stdoutText.contains("look: `agent-eval replay \(Self.log) --step 2`"))
            let unreadable = try await agentEval(["results", "comment", "nothing.json"], in: root)
            #expect(unreadable.status == 2 && unreadable.stderr.contains("nothing.json"))
            try "{}".write(toFile: root.path + "/empty.json", atomically: true, encoding: .utf8)
            let empty = try await agentEval(["results", "comment", "empty.json"], in: root)
            #expect(empty.status == 2 && empty.stderr.contains("empty.json is not an agent-eval results report"), "\(empty.stderr)")
        }
    }

    @Test("--repeat auto runs the flaky fixture agent until its verdict is decided, and says what it saved")
    func adaptiveRepeats() async throws {
        try await TemporaryDirectory.with { directory in
            try ExampleRuns.flakyCase().write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(
                [
                    "run", directory.path("case.yaml"), "--repeat", "auto", "--max-repeats", "30", "--no-catalog", "--json", "--out",
                    directory.path("runs"),
                ])
            let report = try JSONParser.parse(Array(result.stdout))
            let adaptive = try #require(report["adaptive"])
            let attempts = try #require(adaptive["attempts_run"]?.intValue)
            #expect(attempts >= 1 && attempts <= 30)
            #expect(adaptive["attempts_saved"]?.intValue == 30 - attempts)
            #expect(report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.count == attempts)
            // The verdict holds whatever the attempts left would have done: at most 30 attempts, a rate of at least 0.5 passes.
            let passed = report["cases"]?.arrayValue?.first?["attempts"]?["passed"]?.intValue ?? -1
            #expect(result.status == (passed * 2 >= attempts ? 0 : 1), "\(passed) of \(attempts)")
            let usage = try await agentEval(["run", directory.path("case.yaml"), "--repeat", "sometimes"])
            #expect(usage.status == 64)
        }
    }

    @Test("judge calibrate: the bundled labels agree with the scripted judge; a person who disagrees lowers κ, reported as drift")
    func calibrate() async throws {
        try await TemporaryDirectory.with { directory in
            let bundled = try await agentEval(
                ["judge", "calibrate", "Fixtures/judges/support-labels.yaml", "--json-out", directory.path("before.json")],
                in: repositoryRoot)
            #expect(bundled.status == 0, "\(bundled.stderr)")
            #expect(bundled.stdoutText.contains("judge scripted:support-judge: κ 1.00, agreement 100%, self-consistency 100%"))
            let runs = ExampleRuns.fixtures.path
            try """
            cases: [\(repositoryRoot.path)/EvalCases/support]
            labels:
              - {case: support-refund-answer-judged, log: \(runs)/runs/support-refund.jsonl.gz, verdict: pass}
              - {case: support-refund-answer-judged, log: \(runs)/samples/support-sample.jsonl.gz, verdict: fail}
              - {case: support-refund-answer-judged, log: \(runs)/samples/support-sample.jsonl.gz, verdict: pass}
            """.write(toFile: directory.path("labels.yaml"), atomically: true, encoding: .utf8)
            let drifted = try await agentEval(
                ["judge", "calibrate", directory.path("labels.yaml"), "--baseline", directory.path("before.json")], in: repositoryRoot)
            #expect(drifted.status == 1)
            #expect(drifted.stdoutText.contains("κ 0.40"))
            #expect(drifted.stdoutText.contains("DRIFTED: scripted:support-judge: κ 1.00 → 0.40"))
            #expect(drifted.stdoutText.contains("disagrees: \(directory.path("labels.yaml")):5:5"), "\(drifted.stdoutText)")
            // A judge that gives no verdict in some rounds: no figure over the rounds that answered.
            try """
            name: coin-judge
            rules:
              - when: {chance: 0.5}
                reply: {raw: 'I refuse'}
              - reply: {raw: '{"pass": true, "reason": "ok"}'}
            """.write(toFile: directory.path("coin-judge.yaml"), atomically: true, encoding: .utf8)
            try FileManager.default.createDirectory(atPath: directory.path("coin"), withIntermediateDirectories: true)
            try """
            caseId: coin
            logs: \(runs)/runs/support-refund.jsonl.gz
            expected:
              answer:
                rubric: The answer tells the customer the id of their refund.
                model: {script: ../coin-judge.yaml}
            """.write(toFile: directory.path("coin/case.yaml"), atomically: true, encoding: .utf8)
            try "cases: [coin]\nlabels:\n  - {case: coin, log: \(runs)/runs/support-refund.jsonl.gz, verdict: pass}\n".write(
                toFile: directory.path("coin-labels.yaml"), atomically: true, encoding: .utf8)
            let coin = try await agentEval(["judge", "calibrate", directory.path("coin-labels.yaml"), "--repeat", "9"])
            #expect(coin.status == 2, "\(coin.stdoutText)\(coin.stderr)")
            #expect(coin.stderr.contains("of 9 rounds") && coin.stderr.contains("I refuse"), "\(coin.stderr)")
            #expect(!coin.stdoutText.contains("self-consistency 100%"), "\(coin.stdoutText)")
            try "cases: [.]\nlabels: []\n".write(toFile: directory.path("empty.yaml"), atomically: true, encoding: .utf8)
            let empty = try await agentEval(["judge", "calibrate", directory.path("empty.yaml")])
            #expect(empty.status == 2 && empty.stderr.contains("no labels"), "\(empty.stderr)")
        }
    }

    @Test("--base-branch and --baseline-branch: the comment's base and the gate's baseline from the catalog's history on a branch")
    func commentBaseFromCatalog() async throws {
        try await TemporaryDirectory.with { directory in
            let root = try project(in: directory)
            try FileManager.default.removeItem(atPath: root.path + "/.git")
            let git = [
                "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@example.org",
            ]
            for arguments in [["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "cases"]] {
                let result = try await Subprocess.run("/usr/bin/git", arguments, in: root, environment: git)
                #expect(result.status == 0, "git \(arguments): \(result.stderr)")
            }
            let catalog = directory.path("catalog.sqlite")
            // On main both cases pass; then the bad case is made to fail on a branch.
            try "caseId: bad\nlogs: \(Self.log)\nexpected: {stopReason: success}\n".write(
                toFile: root.path + "/cases/bad.yaml", atomically: true, encoding: .utf8)
            #expect(try await agentEval(["run", "cases"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog]).status == 0)
            try "caseId: bad\nlogs: \(Self.log)\nexpected: {toolsNotCalled: [refund_order]}\n".write(
                toFile: root.path + "/cases/bad.yaml", atomically: true, encoding: .utf8)
            _ = try await agentEval(["run", "cases", "--no-catalog", "--json-out", "head.json"], in: root)
            let comment = try await agentEval(
                ["results", "comment", "head.json", "--base-branch", "main"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog])
            #expect(comment.status == 0, "\(comment.stderr)")
            #expect(comment.stderr.contains("base: each case's newest result on main (2 cases, from suite run #"), "\(comment.stderr)")
            let newlyFailing = "#### Newly failing (1)\nThe gate passed them on the base branch, or they are new.\n\n- **`bad`** (fail)"
            #expect(comment.stdoutText.contains(newlyFailing))
            let none = try await agentEval(
                ["results", "comment", "head.json", "--base-branch", "release"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog])
            #expect(none.status == 2 && none.stderr.contains("has no suite run on branch release"), "\(none.stderr)")

            // Two suite runs on main of the other case alone (a --filter, a shard): they do not push
            // bad out of its own history, which the gate below reads one suite run deep.
            for _ in 0..<2 {
                let other = try await agentEval(["run", "cases", "--filter", "ok"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog])
                #expect(other.status == 0, "\(other.stdoutText)")
            }
            // The comment's base is per case too: bad's newest result on main is its pass, not missing
            // (missing, it would be new). Once bad fails on main, and the other case runs alone
            // after, bad is still failing, not newly.
            let perCase = try await agentEval(
                ["results", "comment", "head.json", "--base-branch", "main"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog])
            #expect(perCase.stdoutText.contains(newlyFailing), "\(perCase.stdoutText)")
            #expect(perCase.stderr.contains("(2 cases, from suite runs #"), "\(perCase.stderr)")
            // The gate against the catalog's history on main, in place of a baseline directory.
            let gated = try await agentEval(
                ["run", "cases", "--baseline-branch", "main", "--baseline-runs", "1", "--fail-on", "regression"], in: root,
                environment: ["AGENT_EVAL_CATALOG": catalog])
            #expect(gated.status == 1, "\(gated.stdoutText)")
            #expect(gated.stderr.contains("baseline: 2 suite runs on main in the catalog (2 cases)"), "\(gated.stderr)")
            #expect(gated.stdoutText.contains("regression: passed in the baseline, fails now"))
            #expect(gated.stdoutText.contains("1 regressed, 0 known failures"))
            let nowhere = try await agentEval(
                ["run", "cases", "--baseline-branch", "release"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog])
            #expect(nowhere.status == 2 && nowhere.stderr.contains("no suite run on branch release"), "\(nowhere.stderr)")

            _ = try await agentEval(["run", "cases"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog])
            #expect(
                try await agentEval(["run", "cases", "--filter", "ok"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog]).status == 0)
            let known = try await agentEval(
                ["results", "comment", "head.json", "--base-branch", "main"], in: root, environment: ["AGENT_EVAL_CATALOG": catalog])
            #expect(known.stdoutText.contains("#### Still failing (1)"), "\(known.stdoutText)")
            #expect(!known.stdoutText.contains("Newly failing"), "\(known.stdoutText)")
        }
    }
}
