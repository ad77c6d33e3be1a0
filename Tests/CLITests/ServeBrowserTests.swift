import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// `agent-eval serve` in a real browser: Debian's headless Chromium, driven by Selenium
/// (scripts/serve_browser.py), uses the pages while this test changes what they show — an `exec`
/// run written under the watched directory, a log that grows while the server goes away and
/// comes back, a call waiting in a real `mcp-proxy` answered from two windows at once. The two
/// sides meet through files in a signals folder.
@Suite("serve in a real browser", .tags(.python, .browser), .needsBrowser, .ownThread)
struct ServeBrowserTests {
    typealias Server = ServeCommandTests.Server

    /// Starts the browser script on `scenario`; its JSON when it ends.
    static func browse(_ scenario: String, _ base: String, _ arguments: [String], signals: String) async throws -> Task<
        JSONValue, any Error
    > {
        let command = try await PythonEnvironment.browser.script("serve_browser.py")
        let shots = repositoryRoot.appendingPathComponent(".build/viewer-screenshots").path
        return Task {
            let result = try await Subprocess.run(command[0], Array(command.dropFirst()) + [shots, signals, scenario, base] + arguments)
            guard result.status == 0 else { throw CLITestError.unexpected("serve_browser.py \(scenario) failed: \(result.stderr)") }
            return try JSONParser.parse(result.stdout)
        }
    }

    static func waitForSignal(_ path: String) async throws {
        let came = await eventually(seconds: 120) { FileManager.default.fileExists(atPath: path) }
        try #require(came, "the browser never wrote \(path)")
    }

    static func sequences(of log: String) throws -> [Int] {
        var sequences: [Int] = []
        _ = try LogReader(path: log).forEachEvent { sequences.append($0.event.sequence) }
        return sequences
    }

    @Test(
        "an exec run written under the watched directory appears in the open list without a reload, and its page fills in live until it stops"
    )
    func execRunAppearsLive() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        #expect(try await agentEval(["init"], in: directory.url).status == 0)
        // A tool that takes its time, so the run is seen while it runs.
        let tool = directory.path("tools/order_status.sh")
        let script = try String(contentsOfFile: tool, encoding: .utf8)
        try script.replacingOccurrences(of: "read -r arguments\n", with: "read -r arguments\nsleep 1.5\n").write(
            toFile: tool, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: tool)
        try FileManager.default.createDirectory(atPath: directory.path("runs"), withIntermediateDirectories: true)
        let signals = directory.path("signals")
        try FileManager.default.createDirectory(atPath: signals, withIntermediateDirectories: true)
        let server = try await Server.start(["runs"], in: directory)
        let browsing = try await Self.browse("live", server.url, ["/orders-agent-live-1.jsonl.gz"], signals: signals)
        try await Self.waitForSignal(signals + "/list-open")
        try String(Date().timeIntervalSince1970).write(toFile: signals + "/started", atomically: true, encoding: .utf8)
        let exec = try await agentEval(
            ["exec", "agent.yaml", "--run-id", "live-1", "--input", "Where is my order A-1001?", "--no-catalog"], in: directory.url)
        #expect(exec.status == 0, "\(exec.stderr)")
        #expect(exec.stdoutText.contains("log: runs/orders-agent-live-1.jsonl.gz"), "\(exec.stdoutText)")
        let seen = try await browsing.value
        #expect(seen["error"] == nil, "\(seen["error"]?.stringValue ?? "")")
        #expect(seen["reloads"] == 1, "the list took the new run in without a reload")
        let states = seen["states"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(states.first == "running" && states.last == "stopped", "the page showed it being written, then stopped: \(states)")
        let log = directory.path("runs/orders-agent-live-1.jsonl.gz")
        #expect(seen["sequences"]?.arrayValue?.compactMap(\.intValue) == (try Self.sequences(of: log)), "every event once, in order")
        #expect(seen["status_text"]?.stringValue?.contains("stopped: success") == true)
        #expect(seen["severe_console"]?.arrayValue?.isEmpty == true, "\(seen["severe_console"] ?? [])")
        _ = await server.stop()
    }

    @Test(
        "a program recorded by `record` (the openai SDK, a slow streamed answer) appears in the open list without a reload, and its page shows every event once it stops"
    )
    func recordRunAppearsLive() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        let signals = directory.path("signals")
        for folder in [runs, signals] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let model = try LocalModelServer()
        defer { model.stop() }
        let python = try await RecordCommandTests.python()
        let server = try await Server.start([runs], in: directory)
        let browsing = try await Self.browse("live", server.url, ["/raw_sdk_agent-rec-1.jsonl.gz"], signals: signals)
        try await Self.waitForSignal(signals + "/list-open")
        try String(Date().timeIntervalSince1970).write(toFile: signals + "/started", atomically: true, encoding: .utf8)
        let recorded = try await agentEval(
            ["record", "--no-catalog", "--out", runs, "--run-id", "rec-1"] + RecordCommandTests.upstreams(model, "slow-answer")
                + ["--", python, RecordCommandTests.agent, "--stream", "Where is my order A-1001?"],
            environment: ["OPENAI_API_KEY": RecordCommandTests.key])
        #expect(recorded.status == 0, "\(recorded.stderr)")
        let seen = try await browsing.value
        #expect(seen["error"] == nil, "\(seen["error"]?.stringValue ?? "")")
        #expect(seen["reloads"] == 1, "the list took the new run in without a reload")
        #expect(seen["states"]?.arrayValue?.last == "stopped")
        let log = runs + "/raw_sdk_agent-rec-1.jsonl.gz"
        #expect(seen["sequences"]?.arrayValue?.compactMap(\.intValue) == (try Self.sequences(of: log)), "every event once, in order")
        #expect(seen["severe_console"]?.arrayValue?.isEmpty == true, "\(seen["severe_console"] ?? [])")
        _ = await server.stop()
    }

    @Test("the server goes away and comes back while a run is written: the open page reconnects and loses and repeats nothing")
    func reconnectsMidRun() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        let signals = directory.path("signals")
        for folder in [runs, signals] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let log = runs + "/growing.jsonl.gz"
        let run = try ServeCommandTests.GrowingRun(path: log, runId: "run-growing")
        let first = try await Server.start([runs], in: directory)
        _ = try await first.runs(count: 1)
        let browsing = try await Self.browse("reconnect", first.url, [log], signals: signals)
        for step in 1...3 {
            try run.step(step)
            try await Task.sleep(for: .milliseconds(200))
        }
        try await Self.waitForSignal(signals + "/seen")
        _ = await first.stop()
        // Written while no server is there to tell the page.
        try run.step(4)
        try run.step(5)
        let second = try await Server.start([runs], in: directory, port: first.port)
        try run.step(6)
        try run.finish()
        let seen = try await browsing.value
        #expect(seen["error"] == nil, "\(seen["error"]?.stringValue ?? "")")
        let before = seen["before"]?.arrayValue?.compactMap(\.intValue) ?? []
        let after = seen["after"]?.arrayValue?.compactMap(\.intValue) ?? []
        #expect(Array(after.prefix(before.count)) == before)
        #expect(after == (try Self.sequences(of: log)), "every event of the log once, in order")
        #expect(seen["states"]?.arrayValue?.last == "stopped")
        #expect(seen["severe_console"]?.arrayValue?.isEmpty == true, "\(seen["severe_console"] ?? [])")
        _ = await second.stop()
    }

    @Test(
        "two windows approve a call waiting in a real mcp-proxy at the same moment: one answer is taken, recorded as approve records it, and the call runs once"
    )
    func approveFromTwoWindows() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        let signals = directory.path("signals")
        for folder in [runs, signals] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try MCPProxyCommandTests.policy.write(toFile: directory.path("shop.policy.yaml"), atomically: true, encoding: .utf8)
        let log = runs + "/session.jsonl.gz"
        let plan: JSONValue = ["calls": [["tool": "refund_order", "arguments": ["order_id": "A-1", "amount": 50000]]]]
        let command = try await MCPProxyCommandTests.client(
            plan, proxy: ["--log", log, "--policy", "shop.policy.yaml"], server: try await MCPProxyCommandTests.shop(directory))
        let server = try await Server.start([runs, "--approver", "browser-tester"], in: directory)
        async let session = MCPProxyCommandTests.run(command, in: directory)
        let browsing = try await Self.browse("approve", server.url, [], signals: signals)
        let seen = try await browsing.value
        let (lines, result) = try await session
        #expect(seen["error"] == nil, "\(seen["error"]?.stringValue ?? "")")
        let outcomes = seen["outcomes"]?.arrayValue ?? []
        let statuses = outcomes.compactMap { $0.arrayValue?.first?.intValue }.sorted()
        #expect(statuses.count == 2 && statuses[0] == 200 && [404, 409].contains(statuses[1]), "one answer taken: \(outcomes)")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.last?["is_error"] == false, "the approved call ran")
        #expect(MCPProxyCommandTests.journal(directory) == ["refund A-1 50000"], "once")
        let approvals = try MCPProxyCommandTests.events(log).compactMap { event -> ApprovalRecorded? in
            if case .approvalRecorded(let approval) = event.payload { return approval }
            return nil
        }
        #expect(approvals.count == 1)
        #expect(approvals.first?.approver == "browser-tester")
        #expect(approvals.first?.reason == "checked in the browser")
        _ = await server.stop()
    }

    @Test(
        "filters and links round-trip, two runs compare at their divergence, a suite's failures link to their steps, a case's history, planted markup stays text"
    )
    func pages() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        let signals = directory.path("signals")
        for folder in [runs, signals] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        for (name, cents) in [("before", 4999), ("after", 2500)] {
            try ServeCommandTests.writeSupportRun(runs + "/\(name).jsonl.gz", runId: "run-\(name)", refundCents: cents)
        }
        try LogWriter.withWriter(creating: runs + "/hostile.jsonl.gz", runId: "run-hostile") { writer in
            _ = try SampleRun.recordHostileRun(into: writer)
        }
        // Planted markup in what the list shows of a run: its agent's name.
        let planted = try ServeCommandTests.GrowingRun(
            path: runs + "/hostile-agent.jsonl.gz", runId: "run-planted", agent: SampleRun.plantedMarkup)
        try planted.finish()
        let growing = try ServeCommandTests.GrowingRun(path: runs + "/lookups.jsonl.gz", runId: "run-lookups", agent: "lookup-agent")
        try growing.step(1)
        try growing.finish()
        // A suite run in the catalog whose case fails at the refund's step.
        try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
        try
            "caseId: refund-under-10\nlogs: ../runs/before.jsonl.gz\nexpected:\n  arguments:\n    refund_order:\n      paths:\n        amount_cents: {max: 1000}\n"
            .write(toFile: directory.path("cases/refund.yaml"), atomically: true, encoding: .utf8)
        let suite = try await agentEval(
            ["run", "cases", "--catalog", directory.path("catalog.sqlite"), "--out", directory.path("suite-runs"), "--quiet"],
            in: directory.url)
        #expect(suite.status == 1, "\(suite.stderr)")
        let server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 5)
        let seen = try await Self.browse("pages", server.url, [runs + "/hostile.jsonl.gz", "refund-under-10"], signals: signals).value
        #expect(seen["error"] == nil, "\(seen["error"]?.stringValue ?? "")")
        #expect(seen["tool_field"] == "refund_order")
        #expect(seen["refund_rows"] == 2, "before and after refund")
        #expect(
            seen["filtered_url"]?.stringValue == "/?tool=refund_order&agent=support-*"
                || seen["filtered_url"]?.stringValue == "/?tool=refund_order&agent=support-%2A")
        #expect(seen["filtered_rows"] == 2)
        #expect(seen["back_url"] == "/?tool=refund_order")
        #expect(seen["compare_first_row"]?.intValue != nil, "the first divergence is marked")
        #expect(seen["hostile_rows"] == 2)
        #expect(seen["pwned_list"] == .null, "no planted script ran in the list")
        #expect(seen["planted_agent_shown"] == true)
        #expect(seen["pwned"] == .null, "no planted script ran")
        #expect(seen["planted_text_shown"] == true)
        #expect(seen["images"] == 0)
        #expect(seen["suite_rows"] == 1)
        let links = seen["failure_links"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(links.first?.hasPrefix("/run?log=") == true, "\(links)")
        #expect(links.first?.hasSuffix("#step-2") == true, "the refund's step: \(links)")
        #expect(seen["failure_step"] == 2)
        #expect(seen["case_history_rows"] == 1)
        #expect(seen["case_last_failure"] == true)
        #expect(seen["severe_console"]?.arrayValue?.isEmpty == true, "\(seen["severe_console"] ?? [])")
        _ = await server.stop()
    }

    @Test(
        "a long run's page is drawn with its first steps, the others come as outlines, and a step's events are fetched when the reader reaches it"
    )
    func longRunOutline() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        let signals = directory.path("signals")
        for folder in [runs, signals] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let log = runs + "/long.jsonl.gz"
        var corpus = SyntheticCorpus()
        let state = try corpus.writeLongRun(to: log, jsonBytes: 24 << 20)
        let size = try #require(FileStamp(path: log)?.size)
        try #require(size >= 4 << 20, "the log must be long enough to be outlined: \(size) bytes")
        let server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 1)
        #expect(try await server.get("/run?log=" + ServeCommandTests.escaped(log)).status == 200)
        // A fetched step is the step `replay --json` gives.
        let last = state.step
        let fetched = try await server.json("/api/run/steps?log=\(ServeCommandTests.escaped(log))&from=\(last)&to=\(last)")
        let replayed = try await agentEval(["replay", log, "--step", "\(last)", "--json", "--no-catalog"])
        #expect(replayed.status == 0, "\(replayed.stderr)")
        let expected = try JSONParser.parse(replayed.stdout)
        #expect(fetched["steps"]?.arrayValue?.first == expected["step"], "the step as replay --step gives it")
        let seen = try await Self.browse("long", server.url, [log], signals: signals).value
        #expect(seen["error"] == nil, "\(seen["error"]?.stringValue ?? "")")
        #expect(seen["first_state"] == "loading" && seen["first_steps"]?.intValue == 25, "drawn before the whole log was read")
        #expect(seen["state"] == "stopped")
        #expect(seen["steps"]?.intValue == last + 1, "every step, outlined")
        #expect(seen["last_step"]?.intValue == last)
        #expect((seen["fetched"]?.intValue ?? 0) > 0, "the last page's steps were fetched")
        #expect((seen["last_card_events"]?.intValue ?? 0) > 0, "the last step's events are drawn")
        #expect(seen["severe_console"]?.arrayValue?.isEmpty == true, "\(seen["severe_console"] ?? [])")
        _ = await server.stop()
    }
}
