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
            .replacing(/"attempt\.([0-9]+)\.duration_ms" value="[0-9]+"/, with: "duration_ms")
    }

    /// Runs the bundled cases as `count` shards, each with `--json-out`; the reports' paths.
    func runShards(_ count: Int, of cases: String = "EvalCases/", in directory: TemporaryDirectory, prefix: String = "shard")
        async throws -> [String]
    {
        var paths: [String] = []
        for index in 1...count {
            let path = directory.path("\(prefix)-\(index)-of-\(count).json")
            let result = try await agentEval(
                [
                    "run", cases, "--shard", "\(index)/\(count)", "--json-out", path, "--no-catalog", "--out",
                    directory.path("out-\(prefix)-\(index)-\(count)"),
                ], in: repositoryRoot)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            paths.append(path)
        }
        return paths
    }

    /// How many cases the bundled suite has, as an unsharded run reports it.
    func wholeSuiteCount(in directory: TemporaryDirectory) async throws -> Int {
        let path = directory.path("whole.json")
        let result = try await agentEval(
            ["run", "EvalCases/", "--json-out", path, "--no-catalog", "--out", directory.path("out-whole")], in: repositoryRoot)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try report(path)["summary"]?["cases"]?.intValue)
    }

    @Test("a shard's report missing: exit 2 naming the missing shard and the ones given; nothing is written")
    func missingShard() async throws {
        try await TemporaryDirectory.with { directory in
            let shards = try await runShards(2, in: directory)
            let merged = try await agentEval(
                ["results", "merge", shards[0], "--json-out", directory.path("all.json"), "--junit", directory.path("all.xml")],
                in: repositoryRoot)
            #expect(merged.status == 2, "\(merged.stdoutText)")
            #expect(
                merged.stderr.contains("error: shard 2/2 is missing: the reports given hold shard 1/2 (\(shards[0]))"), "\(merged.stderr)")
            #expect(merged.stderr.contains("hint: pass every shard's report"))
            #expect(merged.stderr.contains("--allow-partial"))
            #expect(!merged.stdoutText.contains("passed"), "no summary that reads as a verdict")
            #expect(!FileManager.default.fileExists(atPath: directory.path("all.json")))
            #expect(!FileManager.default.fileExists(atPath: directory.path("all.xml")))

            let four = try await runShards(4, in: directory)
            let two = try await agentEval(["results", "merge", four[0], four[2]], in: repositoryRoot)
            #expect(two.status == 2)
            #expect(
                two.stderr.contains("shards 2/4 and 4/4 are missing: the reports given hold shards 1/4 (\(four[0])) and 3/4 (\(four[2]))"),
                "\(two.stderr)")
        }
    }

    @Test("the same shard twice: exit 2 naming both files, even when every shard is there")
    func duplicateShard() async throws {
        try await TemporaryDirectory.with { directory in
            let shards = try await runShards(2, in: directory)
            let again = directory.path("shard-1-again.json")
            try FileManager.default.copyItem(atPath: shards[0], toPath: again)
            let merged = try await agentEval(["results", "merge", shards[0], shards[1], again], in: repositoryRoot)
            #expect(merged.status == 2, "\(merged.stdoutText)")
            #expect(merged.stderr.contains("error: shard 1/2 is given twice: \(shards[0]) and \(again)"), "\(merged.stderr)")
            let allowed = try await agentEval(["results", "merge", shards[0], again, "--allow-partial"], in: repositoryRoot)
            #expect(allowed.status == 2, "--allow-partial allows missing shards, not doubled ones")
            #expect(allowed.stderr.contains("is given twice"))
        }
    }

    @Test("every shard: exit 0 with the whole suite's count, and an unsharded report merges alone as shard 1/1")
    func everyShard() async throws {
        try await TemporaryDirectory.with { directory in
            let count = try await wholeSuiteCount(in: directory)
            let shards = try await runShards(2, in: directory)
            let merged = try await agentEval(
                ["results", "merge"] + shards + ["--json-out", directory.path("all.json")], in: repositoryRoot)
            #expect(merged.status == 0, "\(merged.stderr)")
            #expect(merged.stdoutText.contains("\(count) cases, \(count) passed, 0 failed (merged from 2 reports)"), "\(merged.stdoutText)")
            #expect(merged.stderr.isEmpty, "no warning")
            let all = try report(directory.path("all.json"))
            #expect(all["partial"] == nil)
            #expect(all["shards"] == ["count": 2, "merged": [1, 2], "missing": []])
            #expect(try all["suite"] == report(shards[0])["suite"])
            #expect(all["suite"]?["cases"]?.intValue == count)
            #expect(all["shard"] == ["count": 1, "index": 1], "a whole merge stands for an unsharded run")

            let whole = try await agentEval(["results", "merge", directory.path("whole.json")], in: repositoryRoot)
            #expect(whole.status == 0, "\(whole.stderr)")
            #expect(whole.stdoutText.contains("\(count) cases, \(count) passed"))
            let again = try await agentEval(["results", "merge", directory.path("all.json")], in: repositoryRoot)
            #expect(again.status == 0, "a whole merge merges again: \(again.stderr)")
        }
    }

    @Test("--allow-partial merges what is there and says it is partial: summary, warning, JSON, JUnit; --record refuses")
    func allowPartial() async throws {
        try await TemporaryDirectory.with { directory in
            let shards = try await runShards(2, in: directory)
            let held = try #require(try report(shards[0])["summary"]?["cases"]?.intValue)
            let merged = try await agentEval(
                [
                    "results", "merge", shards[0], "--allow-partial", "--json-out", directory.path("part.json"), "--junit",
                    directory.path("part.xml"),
                ], in: repositoryRoot)
            #expect(merged.status == 0, "the cases merged passed: \(merged.stderr)")
            #expect(
                merged.stdoutText.hasPrefix("PARTIAL (shard 2/2 is missing): PASS: \(held) cases, \(held) passed"), "\(merged.stdoutText)")
            #expect(merged.stderr.contains("warning: the merged report is partial: shard 2/2 is missing"), "\(merged.stderr)")
            let part = try report(directory.path("part.json"))
            #expect(part["partial"] == "shard 2/2 is missing")
            #expect(part["shards"] == ["count": 2, "merged": [1], "missing": [2]])
            #expect(part["shard"] == nil, "a partial merge is not the whole suite")
            #expect(
                try String(contentsOfFile: directory.path("part.xml"), encoding: .utf8).contains(
                    "<property name=\"partial\" value=\"shard 2/2 is missing\"/>"))
            // Nor is its pull-request comment a green check for the change: half the suite is missing.
            let comment = try await agentEval(["results", "comment", directory.path("part.json")])
            #expect(comment.status == 0)
            #expect(comment.stdoutText.contains("### ⚠️ agent-eval: PASS: \(held) cases"), "\(comment.stdoutText)")
            #expect(comment.stdoutText.contains("> **Partial:** shard 2/2 is missing"), "\(comment.stdoutText)")

            let again = try await agentEval(["results", "merge", directory.path("part.json"), shards[1]], in: repositoryRoot)
            #expect(again.status == 2, "a partial merge cannot make a whole one")
            #expect(again.stderr.contains("is a partial merge (shard 2/2 is missing)"), "\(again.stderr)")

            let catalog = directory.path("catalog.sqlite")
            let recorded = try await agentEval(
                ["results", "merge", shards[0], "--allow-partial", "--record", "--catalog", catalog], in: repositoryRoot)
            #expect(recorded.status == 2)
            #expect(recorded.stderr.contains("the merged report is partial (shard 2/2 is missing)"), "\(recorded.stderr)")
            #expect(!FileManager.default.fileExists(atPath: catalog))
        }
    }

    @Test("reports of different suites, of different shard counts, or short of the suite's cases: exit 2 saying which")
    func mismatchedReports() async throws {
        try await TemporaryDirectory.with { directory in
            let bundled = try await runShards(2, in: directory)
            let support = try await runShards(2, of: "EvalCases/support", in: directory, prefix: "support")
            let suites = try await agentEval(["results", "merge", bundled[0], support[1]], in: repositoryRoot)
            #expect(suites.status == 2)
            #expect(suites.stderr.contains("\(support[1]) and \(bundled[0]) are reports of different suites"), "\(suites.stderr)")

            let three = try await runShards(3, in: directory)
            let counts = try await agentEval(["results", "merge", bundled[0], three[1]], in: repositoryRoot)
            #expect(counts.status == 2)
            #expect(
                counts.stderr.contains("\(three[1]) is shard 2/3 and \(bundled[0]) is shard 1/2: the suite was split in different ways"),
                "\(counts.stderr)")

            // A shard whose report lacks one of its cases (its run stopped early, or an edit).
            guard case .object(var short) = try report(bundled[1]), var cases = short["cases"]?.arrayValue, !cases.isEmpty else {
                Issue.record("shard 2/2 of the bundled cases holds no case")
                return
            }
            cases.removeLast()
            short["cases"] = .array(cases)
            let shortPath = directory.path("short.json")
            try JSONWriter.encodePretty(.object(short)).write(toFile: shortPath, atomically: true, encoding: .utf8)
            let suite = try #require(try report(bundled[0])["suite"]?["cases"]?.intValue)
            let lacking = try await agentEval(["results", "merge", bundled[0], shortPath], in: repositoryRoot)
            #expect(lacking.status == 2)
            #expect(
                lacking.stderr.contains("the reports hold \(suite - 1) of the suite's \(suite) cases, though every shard is here"),
                "\(lacking.stderr)")
        }
    }

    @Test("a report that does not record its shard and suite (an older agent-eval's) merges only with --allow-partial")
    func reportsWithoutShards() async throws {
        try await TemporaryDirectory.with { directory in
            let shards = try await runShards(2, in: directory)
            var old: [String] = []
            for (index, path) in shards.enumerated() {
                guard case .object(var members) = try report(path) else { Issue.record("not an object"); return }
                members["shard"] = nil
                members["suite"] = nil
                let oldPath = directory.path("old-\(index + 1).json")
                try JSONWriter.encodePretty(.object(members)).write(toFile: oldPath, atomically: true, encoding: .utf8)
                old.append(oldPath)
            }
            let merged = try await agentEval(["results", "merge"] + old, in: repositoryRoot)
            #expect(merged.status == 2)
            #expect(
                merged.stderr.contains("error: \(old[0]) (and 1 more report) does not record which shard of which suite it holds"),
                "\(merged.stderr)")
            #expect(merged.stderr.contains("--allow-partial"))
            let allowed = try await agentEval(["results", "merge"] + old + ["--allow-partial"], in: repositoryRoot)
            #expect(allowed.status == 0, "\(allowed.stderr)")
            #expect(allowed.stdoutText.contains("PARTIAL (\(old[0]) does not record its shard and suite): "), "\(allowed.stdoutText)")
        }
    }

    @Test("shards merged give the report, JUnit and exit status of one unsharded run, baseline comparison included")
    func shardsMergeLikeOneRun() async throws {
        try await TemporaryDirectory.with { directory in
            let cases = "Fixtures/eval/failing"
            let baseline = directory.path("baseline")
            let whole = try await agentEval(
                [
                    "run", cases, "--baseline", baseline, "--update-baseline", "--out", directory.path("out-first"),
                ], in: repositoryRoot)
            // Written on purpose (not under --fail-on regression): the failing cases are known failures from now on.
            #expect(whole.status == 1 && whole.stdoutText.contains("baseline written"), "\(whole.stdoutText)\(whole.stderr)")
            let again = try await agentEval(
                [
                    "run", cases, "--baseline", baseline, "--json-out", directory.path("whole.json"), "--junit",
                    directory.path("whole.xml"),
                    "--out", directory.path("out-whole"),
                ], in: repositoryRoot)
            #expect(again.status == 1)
            var shards: [String] = []
            for index in 1...3 {
                let shard = directory.path("shard-\(index).json")
                let result = try await agentEval(
                    [
                        "run", cases, "--baseline", baseline, "--shard", "\(index)/3", "--json-out", shard, "--out",
                        directory.path("out-\(index)"),
                    ],
                    in: repositoryRoot)
                #expect(result.status == 0 || result.status == 1 || result.status == 2)
                shards.append(shard)
            }
            let merged = try await agentEval(
                ["results", "merge"] + shards + ["--json-out", directory.path("all.json"), "--junit", directory.path("all.xml")],
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

            let gate = try await agentEval(["results", "merge"] + shards + ["--fail-on", "regression"], in: repositoryRoot)
            #expect(gate.status == 0, "known failures do not fail --fail-on regression")

            let standardOutput = try await agentEval(["results", "merge"] + shards + ["--json"], in: repositoryRoot)
            #expect(try JSONParser.parse(Array(standardOutput.stdout))["summary"]?["cases"] == 5)
        }
    }

    @Test("reports that cannot be merged: exit 2 naming the file and, for broken JSON, the line and column")
    func badReports() async throws {
        try await TemporaryDirectory.with { directory in
            let plain = directory.path("plain.json")
            let plainHalf = directory.path("plain-2.json")
            let compared = directory.path("compared-1.json")
            let twice = directory.path("k2-2.json")
            #expect(
                try await agentEval(["run", "EvalCases/support", "--json-out", plain, "--out", directory.path("r1")], in: repositoryRoot)
                    .status
                    == 0)
            // Shards of one suite that differ in one way each: a baseline, k.
            let baselineRun = ["run", "EvalCases/support", "--baseline", directory.path("b")]
            #expect(
                try await agentEval(baselineRun + ["--update-baseline", "--out", directory.path("r2")], in: repositoryRoot).status == 0)
            #expect(
                try await agentEval(
                    baselineRun + ["--shard", "1/2", "--json-out", compared, "--out", directory.path("r4")], in: repositoryRoot
                )
                .status == 0)
            #expect(
                try await agentEval(
                    ["run", "EvalCases/support", "--shard", "2/2", "--json-out", plainHalf, "--out", directory.path("r5")],
                    in: repositoryRoot
                ).status == 0)
            #expect(
                try await agentEval(
                    [
                        "run", "EvalCases/support", "--shard", "2/2", "--json-out", twice, "--repeat", "2", "--out",
                        directory.path("r3"),
                    ], in: repositoryRoot
                ).status == 0)
            let text = try String(contentsOfFile: plain, encoding: .utf8)
            try String(text.prefix(text.count / 2)).write(toFile: directory.path("cut.json"), atomically: true, encoding: .utf8)
            try "{\"schema\": \"something/else\"}".write(toFile: directory.path("other.json"), atomically: true, encoding: .utf8)

            func merge(_ files: [String]) async throws -> ProcessResult {
                try await agentEval(["results", "merge"] + files, in: repositoryRoot)
            }
            let duplicate = try await merge([plain, plain])
            #expect(duplicate.status == 2)
            #expect(duplicate.stderr.contains("shard 1/1 is given twice: \(plain) and \(plain)"), "\(duplicate.stderr)")
            let cut = try await merge([plain, directory.path("cut.json")])
            #expect(cut.status == 2)
            #expect(cut.stderr.contains("--> \(directory.path("cut.json")):"), "\(cut.stderr)")
            let other = try await merge([directory.path("other.json")])
            #expect(other.stderr.contains("is not an agent-eval results report"))
            let mixed = try await merge([compared, twice])
            #expect(mixed.status == 2)
            #expect(mixed.stderr.contains("was run with k = 2"), "\(mixed.stderr)")
            let baseline = try await merge([plainHalf, compared])
            #expect(baseline.stderr.contains("compared with a baseline and"), "\(baseline.stderr)")
            let missing = try await merge([directory.path("nowhere.json")])
            #expect(missing.status == 2)
            #expect(missing.stderr.contains("cannot read \(directory.path("nowhere.json"))"))

            // A case whose outcome its own attempts contradict (an edited report) is no verdict.
            guard case .object(var edited) = try report(plain), case .array(var entries)? = edited["cases"],
                case .object(var entry)? = entries.first
            else { throw CLITestError.unexpected("no case in \(plain)") }
            let id = entry["case_id"]?.stringValue ?? ""
            entry["attempts"] = ["passed": 0, "failed": 1, "could_not_run": 0]
            entry["outcome"] = "pass"
            entries[0] = .object(entry)
            edited["cases"] = .array(entries)
            try Data(JSONWriter.encode(.object(edited))).write(to: URL(fileURLWithPath: directory.path("edited.json")))
            let contradicted = try await merge([directory.path("edited.json")])
            #expect(contradicted.status == 2, "\(contradicted.stdoutText)\(contradicted.stderr)")
            #expect(
                contradicted.stderr.contains("case \(id) says its outcome is \"pass\", but its attempts make it \"fail\""),
                "\(contradicted.stderr)")
        }
    }

    @Test("--record adds the merged suite to the catalog as one suite run that history sees")
    func recordsIntoTheCatalog() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = directory.path("catalog.sqlite")
            var shards: [String] = []
            for index in 1...2 {
                let shard = directory.path("s\(index).json")
                _ = try await agentEval(
                    [
                        "run", "Fixtures/eval/failing", "--shard", "\(index)/2", "--json-out", shard, "--no-catalog", "--out",
                        directory.path("o\(index)"),
                    ], in: repositoryRoot)
                shards.append(shard)
            }
            let merged = try await agentEval(
                ["results", "merge"] + shards + ["--add-to-catalog", "--catalog", catalog], in: repositoryRoot)
            #expect(merged.status == 1)
            #expect(merged.stdoutText.contains("recorded as suite run 1"))
            let rows = try await agentEval(
                ["sql", "SELECT origin, cases, failed FROM suite_runs", "--json", "--catalog", catalog], in: repositoryRoot)
            #expect(rows.stdoutText.contains("\"merge\""), "\(rows.stdoutText)")
            let history = try await agentEval(["history", "support-refund-under-10", "--catalog", catalog], in: repositoryRoot)
            #expect(history.stdoutText.contains("fail"), "\(history.stdoutText)")

            // The same reports merged again (a CI job run again, the files in another order) are
            // that suite run, not another: five merges of one set once made one result five.
            for files in [shards, shards.reversed()] {
                let again = try await agentEval(
                    ["results", "merge"] + files + ["--add-to-catalog", "--catalog", catalog], in: repositoryRoot)
                #expect(again.status == 1)
                #expect(again.stdoutText.contains("these reports are suite run 1"), "\(again.stdoutText)")
            }
            let count = try await agentEval(
                ["sql", "SELECT COUNT(*) AS n FROM suite_runs", "--json", "--catalog", catalog], in: repositoryRoot)
            #expect(count.stdoutText.contains("\"n\":1") || count.stdoutText.contains("\"n\": 1"), "\(count.stdoutText)")
        }
    }
}
