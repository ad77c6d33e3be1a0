import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// The viewer's pages in a real browser: Debian's headless Chromium, driven through
/// chromium-driver by Selenium (scripts/viewer_browser.py), uses each page as a person would and
/// reports what it saw. Screenshots of every page go to .build/viewer-screenshots, and with
/// AGENT_EVAL_UPDATE_FIXTURES=1 to docs/images as well (the README's and docs/viewer.md's).
/// Chromium is installed by scripts/python_venv browser when missing; if it cannot be, the test
/// fails saying so.
@Suite("Viewer in a real browser")
struct ViewerBrowserTests {
    /// Events in the long run the test opens; `viewer-benchmark --keep DIR` makes a 100,000-event
    /// page for measuring by hand (docs/viewer.md, "Size limits").
    static let longRunEvents = 20_000

    @Test("run, report, diff, planted markup and a long run, each opened and used in Chromium", .tags(.python, .browser), .needsBrowser)
    func pagesInChromium() async throws {
        let command = try await PythonEnvironment.browser.script("viewer_browser.py")
        try await TemporaryDirectory.with { directory in
            // The pages, made with the CLI as a user would.
            let run = directory.path("run.html")
            try expectStatus(0, await agentEval(["view", "Fixtures/runs/support-refund.jsonl.gz", "--out", run], in: repositoryRoot))
            let report = directory.path("report.html")
            let suite = try await agentEval(
                ["run", "Fixtures/eval/failing", "--out", directory.path("runs"), "--no-catalog", "--quiet", "--html", report],
                in: repositoryRoot)
            try expectStatus(1, suite)
            // The `view:` line under a failure's `look:` line links into the page.
            let look = try #require(
                suite.stdoutText.split(separator: "\n").first { $0.contains("view: ") && $0.contains("support-refund.jsonl.gz") })
            let link = String(look.split(separator: "view: ")[1])
            // A report against a baseline: one case regressed, one failed before too, one passes.
            let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
            let cases = directory.path("cases")
            try FileManager.default.createDirectory(atPath: cases, withIntermediateDirectories: true)
            for (name, expected) in [
                ("gate", "{stopReason: success}"), ("known", "{stopReason: blocked}"), ("fine", "{toolsCalled: [lookup_order]}"),
            ] {
                try "caseId: \(name)\nlogs: \(log)\nexpected: \(expected)\n".write(
                    toFile: directory.path("cases/\(name).yaml"), atomically: true, encoding: .utf8)
            }
            try expectStatus(1, await agentEval(["run", cases, "--update-baseline", "--no-catalog", "--quiet"]))
            try
                "caseId: gate\nlogs: \(log)\nexpected: {stopReason: success, toolsNotCalled: [delete_customer], countDeniedAttempts: true}\n"
                .write(toFile: directory.path("cases/gate.yaml"), atomically: true, encoding: .utf8)
            let baseline = directory.path("baseline.html")
            try expectStatus(1, await agentEval(["run", cases, "--no-catalog", "--quiet", "--html", baseline]))
            for (name, cents) in [("before", 4999), ("after", 2500)] {
                try LogWriter.withWriter(creating: directory.path("\(name).jsonl.gz"), runId: "run-\(name)") { writer in
                    _ = try SampleRun.recordSupportRun(into: writer, refundCents: cents)
                }
            }
            let diff = directory.path("diff.html")
            try expectStatus(1, await agentEval(["diff", "before.jsonl.gz", "after.jsonl.gz", "--html", diff], in: directory.url))
            try LogWriter.withWriter(creating: directory.path("hostile.jsonl.gz"), runId: "run-hostile") { writer in
                _ = try SampleRun.recordHostileRun(into: writer)
            }
            let hostile = directory.path("hostile.html")
            try expectStatus(0, await agentEval(["view", directory.path("hostile.jsonl.gz"), "--out", hostile]))
            var corpus = SyntheticCorpus()
            try corpus.writeLongRun(to: directory.path("long.jsonl.gz"), events: Self.longRunEvents)
            let long = directory.path("long.html")
            try expectStatus(0, await agentEval(["view", directory.path("long.jsonl.gz"), "--out", long]))
            #expect(
                try String(contentsOfFile: long, encoding: .utf8).contains("data-encoding=\"gzip+base64\""),
                "a long run's data is compressed")

            // A fork and its parent, with a catalog that knows the fork.
            let catalog = ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")]
            try expectStatus(
                1,
                await agentEval(
                    [
                        "fork", "Fixtures/runs/support-refund.jsonl.gz", "--agent", ExampleRuns.agentPath("support"), "--deny", "call-3",
                        "--log", directory.path("fork.jsonl.gz"),
                    ], in: repositoryRoot, environment: catalog))
            let fork = directory.path("fork.html")
            try expectStatus(
                0, await agentEval(["view", directory.path("fork.jsonl.gz"), "--out", fork], in: repositoryRoot, environment: catalog))
            let parent = directory.path("parent.html")
            try expectStatus(
                0,
                await agentEval(
                    ["view", "Fixtures/runs/support-refund.jsonl.gz", "--out", parent], in: repositoryRoot, environment: catalog))

            // A pipeline run forked at a task.
            try expectStatus(
                0,
                await agentEval(
                    [
                        "pipeline", "run", "Fixtures/pipelines/release-notes/pipeline.yaml", "--out", directory.path("pipes"), "--run-id",
                        "pipe-parent",
                    ], in: repositoryRoot))
            try expectStatus(
                0,
                await agentEval(
                    ["pipeline", "fork", directory.path("pipes/release-notes-pipe-parent"), "--at", "write", "--run-id", "pipe-fork"],
                    in: repositoryRoot))
            let pipelineFork = directory.path("pipeline-fork.html")
            try expectStatus(
                0, await agentEval(["view", directory.path("pipes/release-notes-pipe-fork"), "--out", pipelineFork], in: repositoryRoot))

            // The parent with its agent attempt's child log gone: the page is not green, and says why.
            let broken = directory.path("pipes/release-notes-pipe-broken")
            try FileManager.default.copyItem(atPath: directory.path("pipes/release-notes-pipe-parent"), toPath: broken)
            let childLog = try #require(
                try FileManager.default.contentsOfDirectory(atPath: broken + "/tasks").first { $0.hasSuffix(".jsonl.gz") })
            try FileManager.default.removeItem(atPath: broken + "/tasks/" + childLog)
            let pipelineBroken = directory.path("pipeline-broken.html")
            try expectStatus(2, await agentEval(["view", broken, "--out", pipelineBroken], in: repositoryRoot))

            // A diff against a log whose intents start another tool than proposed (chain recomputed).
            let diffProblems = directory.path("diff-problems.html")
            try expectStatus(
                1,
                await agentEval(
                    [
                        "diff", "Fixtures/conformance/valid-support-sample.jsonl.gz",
                        "Fixtures/conformance/intent-names-another-tool.jsonl.gz",
                        "--html", diffProblems,
                    ], in: repositoryRoot))

            let shots = repositoryRoot.appendingPathComponent(".build/viewer-screenshots").path
            let result = try await Subprocess.run(
                command[0],
                Array(command.dropFirst()) + [
                    shots, "run=\(run),delete_customer,3", "report=\(report),\(link)", "diff=\(diff)", "hostile=\(hostile)", "long=\(long)",
                    "baseline=\(baseline)", "fork=\(fork)", "forks=\(parent)", "pipelinefork=\(pipelineFork)",
                    "pipelinebroken=\(pipelineBroken)", "diffproblems=\(diffProblems)",
                ])
            try #require(result.status == 0, "viewer_browser.py failed: \(result.stderr)")
            let seen = try JSONParser.parse(result.stdout)
            for kind in [
                "run", "report", "diff", "hostile", "long", "baseline", "fork", "forks", "pipelinefork", "pipelinebroken", "diffproblems",
            ] {
                #expect(seen[kind]?["error"] == nil, "\(kind): \(seen[kind]?["error"]?.stringValue ?? "")")
                #expect(seen[kind]?["severe_console"] == .array([]), "\(kind): the console reported errors")
            }

            // A run: keys move between steps, f lands on the denied call, search finds a tool,
            // g jumps, a #step link opens at its step, stored content opens on demand.
            let page = try #require(seen["run"])
            #expect(page["steps"] == 5 && page["cards_drawn"] == 5)
            #expect(page["first_step"] == 0 && page["after_n"] == 1 && page["after_p"] == 0)
            #expect(page["after_f"] == 2 && page["problems_on_that_step"] == ["denied_call"])
            #expect(page["search_matches"] == 1 && page["after_search_enter"] == 2 && page["search_step_mentions"] == true)
            #expect(page["after_jump"] == 3 && page["hash_after_jump"] == "#step-3")
            #expect(page["deep_link_step"] == 3 && page["deep_link_card_is_current"] == true)
            #expect(page["help_shown"] == true && page["content_opened"] == 1)
            #expect(page["tools_in_summary"] == ["delete_customer", "get_customer", "lookup_order", "refund_order"])

            // A report: every failed expectation's link lands on its step in its own run.
            let reportSeen = try #require(seen["report"])
            #expect(reportSeen["case_rows"] == 5 && reportSeen["sections"] == ["failed"])
            #expect(reportSeen["look_log"] == "Fixtures/runs/support-refund.jsonl.gz")
            #expect(reportSeen["look_step"] == .int(Int(link.split(separator: "=").last ?? "") ?? -1))
            let landings = reportSeen["landings"]?.arrayValue ?? []
            #expect(landings.count == 6 && reportSeen["failure_links"] == 6)
            for landing in landings {
                #expect(landing["current"] == landing["wanted"] && landing["card"] == landing["wanted"], "\(landing)")
                #expect(landing["run_log"] == landing["wanted_log"], "\(landing)")
            }

            // Against a baseline, a regression is shown apart from a known failure, first.
            let baselineSeen = try #require(seen["baseline"])
            #expect(baselineSeen["sections"] == ["regressed", "known", "passed"])
            #expect(baselineSeen["case_rows"] == 3)
            for landing in baselineSeen["landings"]?.arrayValue ?? [] {
                #expect(landing["current"] == landing["wanted"] && landing["card"] == landing["wanted"], "\(landing)")
            }

            // A diff: the first divergent row is selected, the call is highlighted on both
            // sides and the argument itself is marked.
            let diffSeen = try #require(seen["diff"])
            #expect(diffSeen["first_row"] == diffSeen["selected_row"] && diffSeen["first_row"] == 2)
            #expect(diffSeen["after_n"] == 3 && diffSeen["after_f"] == 2, "n: the next row; f: back to the first divergence")
            // The call's arguments, in its decision and each of its two attempts' intents.
            #expect(diffSeen["marked_left"] == ["4999", "4999", "4999"] && diffSeen["marked_right"] == ["2500", "2500", "2500"])
            #expect((diffSeen["diverging_events"]?.intValue ?? 0) >= 4, "the call's decision, verdict, intent and result on both sides")
            #expect(diffSeen["banner"]?.stringValue?.contains("call-2 refund_order arguments.amount_cents") == true)

            // A fork's page says whose fork it is, what was edited and where it parts from the
            // parent; the parent's page lists the fork (from the catalog).
            let forkSeen = try #require(seen["fork"])
            let panel = forkSeen["fork_panel"]?.stringValue ?? ""
            #expect(panel.contains("Fork of run run-support-refund after its step 2"), "\(panel)")
            #expect(panel.contains("call-3 refused") && panel.contains("parts from the parent at step 2: call-3 refund_order results"))
            #expect(forkSeen["nav_mentions_fork"] == true)
            let forksSeen = try #require(seen["forks"])
            #expect(forksSeen["forks"]?.arrayValue?.count == 1)
            #expect(forksSeen["forks"]?.arrayValue?.first?.stringValue?.contains("after step 2") == true)

            // A pipeline fork's page says whose fork it is; the attempts it discarded are marked.
            let pipelineForkSeen = try #require(seen["pipelinefork"])
            let note = pipelineForkSeen["fork_note"]?.stringValue ?? ""
            #expect(note.contains("a fork of pipeline run pipe-parent") && note.contains("events copied"), "\(note)")
            #expect(pipelineForkSeen["discarded_attempts"] == 3, "write, lint and publish ran again")

            // A pipeline whose child log is missing: a red banner that says so, and the log named.
            let pipelineBrokenSeen = try #require(seen["pipelinebroken"])
            #expect(pipelineBrokenSeen["banner_class"] == "banner-bad")
            let banner = pipelineBrokenSeen["banner"]?.stringValue ?? ""
            #expect(banner.contains("succeeded, but its record does not check out: 1 child log is missing or damaged"), "\(banner)")
            let problems = pipelineBrokenSeen["child_log_problems"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(problems.count == 1 && problems.first?.contains(childLog) == true && problems.first?.hasSuffix("is missing") == true)

            // A diff where B does not check out: no green banner, B's problems listed.
            let diffProblemsSeen = try #require(seen["diffproblems"])
            #expect(diffProblemsSeen["heading"] == "A log does not check out" && diffProblemsSeen["green_banners"] == 0)
            let listed = diffProblemsSeen["problems"]?["B"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(
                diffProblemsSeen["problems"]?["A"] == nil && listed.first?.hasPrefix("the state digest recorded at seq") == true,
                "\(listed)")

            // Planted markup: shown as text, never run.
            let hostileSeen = try #require(seen["hostile"])
            #expect(hostileSeen["pwned"] == .null, "a planted script ran")
            #expect(hostileSeen["scripts"] == 2 && hostileSeen["images"] == 0 && hostileSeen["iframes"] == 0)
            #expect(hostileSeen["planted_text_shown"] == true)

            // A long run stays usable: a page of cards, a virtualised step list, jump and search.
            let longSeen = try #require(seen["long"])
            let steps = (Self.longRunEvents - 2) / 6 + 1
            #expect(longSeen["steps"] == .int(steps) && longSeen["cards_drawn"] == 25)
            #expect((longSeen["nav_rows_drawn"]?.intValue ?? 1000) < 100, "only the rows in view are drawn")
            #expect(longSeen["after_jump"] == longSeen["last_step"])
            #expect((longSeen["search_matches"]?.intValue ?? 0) > 1000)
            print(
                "viewer in Chromium: a \(Self.longRunEvents)-event run opened in \(longSeen["load_seconds"]?.doubleValue ?? 0) s; "
                    + "screenshots in \(shots)")

            if ProcessInfo.processInfo.environment["AGENT_EVAL_UPDATE_FIXTURES"] == "1" {
                let images = repositoryRoot.appendingPathComponent("docs/images").path
                try FileManager.default.createDirectory(atPath: images, withIntermediateDirectories: true)
                for kind in ["run", "report", "diff"] {
                    let target = images + "/viewer-\(kind).png"
                    try? FileManager.default.removeItem(atPath: target)
                    try FileManager.default.copyItem(atPath: shots + "/\(kind).png", toPath: target)
                }
            }
        }
    }

    func expectStatus(_ status: Int32, _ result: ProcessResult, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws {
        #expect(result.status == status, "\(result.stderr)", sourceLocation: sourceLocation)
    }
}
