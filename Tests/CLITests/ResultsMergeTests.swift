import Foundation
import TestSupport
import Testing
import TraceCore

@Suite("agent-eval results merge")
struct ResultsMergeTests {
    /// The report at `path`, parsed.
    func report(_ path: String) throws -> JSONValue {
        try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    /// JUnit without its timings (check and run durations) and the folders live runs wrote into,
    /// which differ between any two runs.
    func untimed(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8).replacing(/time="[0-9.]+"/, with: "time").replacing(/out-[a-z0-9]+/, with: "out")
            .replacing(/"run_duration_ms" value="[0-9]+"/, with: "run_duration_ms")
    }

    @Test("shards merged give the report, JUnit and exit status of one unsharded run, baseline comparison included")
    func shardsMergeLikeOneRun() throws {
        try TemporaryDirectory.with { directory in
            let cases = "Fixtures/eval/failing"
            let baseline = directory.path("baseline")
            let whole = try agentEval(
                [
                    "run", cases, "--baseline", baseline, "--update-baseline", "--fail-on", "regression", "--out",
                    directory.path("out-first"),
                ], in: repositoryRoot)
            #expect(whole.status == 0, "without a baseline yet, every case is new: nothing regressed")
            let again = try agentEval(
                [
                    "run", cases, "--baseline", baseline, "--json-out", directory.path("whole.json"), "--junit",
                    directory.path("whole.xml"),
                    "--out", directory.path("out-whole"),
                ], in: repositoryRoot)
            #expect(again.status == 1)
            var shards: [String] = []
            for index in 1...3 {
                let shard = directory.path("shard-\(index).json")
                let result = try agentEval(
                    [
                        "run", cases, "--baseline", baseline, "--shard", "\(index)/3", "--json-out", shard, "--out",
                        directory.path("out-\(index)"),
                    ],
                    in: repositoryRoot)
                #expect(result.status == 0 || result.status == 1 || result.status == 2)
                shards.append(shard)
            }
            let merged = try agentEval(
                ["results", "merge"] + shards + ["--json", directory.path("all.json"), "--junit", directory.path("all.xml")],
                in: repositoryRoot)
            #expect(merged.status == again.status, "\(merged.stdoutText)\(merged.stderr)")
            #expect(merged.stdoutText.contains("5 cases, 0 passed, 5 failed, 0 regressed, 5 known failures (merged from 3 reports)"))
            #expect(merged.stdoutText.contains("look: agent-eval replay Fixtures/runs/support-refund.jsonl.gz --step 2"))

            let one = try report(directory.path("whole.json"))
            let all = try report(directory.path("all.json"))
            #expect(all["cases"]?.arrayValue?.map { $0["case_id"] } == one["cases"]?.arrayValue?.map { $0["case_id"] })
            for key in ["cases", "passed", "failed", "errors", "regressed", "known_failures"] {
                #expect(all["summary"]?[key] == one["summary"]?[key], "summary.\(key)")
            }
            #expect(all["merged_from"]?.arrayValue?.count == 3)
            #expect(try untimed(directory.path("all.xml")) == untimed(directory.path("whole.xml")))

            let gate = try agentEval(["results", "merge"] + shards + ["--fail-on", "regression"], in: repositoryRoot)
            #expect(gate.status == 0, "known failures do not fail --fail-on regression")

            let standardOutput = try agentEval(["results", "merge"] + shards + ["--json", "-"], in: repositoryRoot)
            #expect(try JSONParser.parse(Array(standardOutput.stdout))["summary"]?["cases"] == 5)
        }
    }

    @Test("reports that cannot be merged: exit 2 naming the file and, for broken JSON, the line and column")
    func badReports() throws {
        try TemporaryDirectory.with { directory in
            let plain = directory.path("plain.json")
            let compared = directory.path("compared.json")
            let twice = directory.path("k2.json")
            #expect(
                try agentEval(["run", "EvalCases/support", "--json-out", plain, "--out", directory.path("r1")], in: repositoryRoot).status
                    == 0)
            let baselineRun = ["run", "EvalCases/support", "--baseline", directory.path("b")]
            #expect(try agentEval(baselineRun + ["--update-baseline", "--out", directory.path("r2")], in: repositoryRoot).status == 0)
            #expect(try agentEval(baselineRun + ["--json-out", compared, "--out", directory.path("r4")], in: repositoryRoot).status == 0)
            #expect(
                try agentEval(
                    ["run", "EvalCases/research", "--json-out", twice, "--repeat", "2", "--out", directory.path("r3")], in: repositoryRoot
                ).status == 0)
            let text = try String(contentsOfFile: plain, encoding: .utf8)
            try String(text.prefix(text.count / 2)).write(toFile: directory.path("cut.json"), atomically: true, encoding: .utf8)
            try "{\"schema\": \"something/else\"}".write(toFile: directory.path("other.json"), atomically: true, encoding: .utf8)

            func merge(_ files: [String]) throws -> ProcessResult { try agentEval(["results", "merge"] + files, in: repositoryRoot) }
            let duplicate = try merge([plain, plain])
            #expect(duplicate.status == 2)
            #expect(duplicate.stderr.contains("is in both \(plain) and \(plain)"))
            let cut = try merge([plain, directory.path("cut.json")])
            #expect(cut.status == 2)
            #expect(cut.stderr.contains("--> \(directory.path("cut.json")):"), "\(cut.stderr)")
            let other = try merge([directory.path("other.json")])
            #expect(other.stderr.contains("is not an agent-eval results report"))
            let mixed = try merge([compared, twice])
            #expect(mixed.status == 2)
            #expect(mixed.stderr.contains("was run with k = 2"), "\(mixed.stderr)")
            let baseline = try merge([plain, compared])
            #expect(baseline.stderr.contains("compared with a baseline and"), "\(baseline.stderr)")
            let missing = try merge([directory.path("nowhere.json")])
            #expect(missing.status == 2)
            #expect(missing.stderr.contains("cannot read \(directory.path("nowhere.json"))"))
        }
    }

    @Test("--record adds the merged suite to the catalog as one suite run that history sees")
    func recordsIntoTheCatalog() throws {
        try TemporaryDirectory.with { directory in
            let catalog = directory.path("catalog.sqlite")
            var shards: [String] = []
            for index in 1...2 {
                let shard = directory.path("s\(index).json")
                _ = try agentEval(
                    [
                        "run", "Fixtures/eval/failing", "--shard", "\(index)/2", "--json-out", shard, "--no-catalog", "--out",
                        directory.path("o\(index)"),
                    ], in: repositoryRoot)
                shards.append(shard)
            }
            let merged = try agentEval(["results", "merge"] + shards + ["--record", "--catalog", catalog], in: repositoryRoot)
            #expect(merged.status == 1)
            #expect(merged.stdoutText.contains("recorded as suite run 1"))
            let rows = try agentEval(
                ["sql", "SELECT origin, cases, failed FROM suite_runs", "--json", "--catalog", catalog], in: repositoryRoot)
            #expect(rows.stdoutText.contains("\"merge\""), "\(rows.stdoutText)")
            let history = try agentEval(["history", "support-refund-under-10", "--catalog", catalog], in: repositoryRoot)
            #expect(history.stdoutText.contains("fail"), "\(history.stdoutText)")
        }
    }
}
