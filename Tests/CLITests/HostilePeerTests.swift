import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `exec` and `export otlp` against peers that never stop sending, send too much, or echo the
/// credentials they were sent, all started by the test on 127.0.0.1: every run stops within a
/// bound set by its limits, says which limit fired, leaves a log that verifies and replays, and
/// holds far less memory than an uncapped read would; no token is printed.
@Suite("Bounded under hostile peers", .ownThread, .serialized)
struct HostilePeerTests {
    /// What a measured `agent-eval` did: its exit status, output, wall time and peak memory.
    struct Measured {
        var status: Int32
        var stdout: String
        var stderr: String
        var seconds: Double
        /// The child's own peak resident set (`ru_maxrss` from `wait4`, through a small Python
        /// parent, whose own few MiB are the floor), in bytes.
        var peakBytes: Int
    }

    /// Runs `agent-eval arguments` through a Python parent that waits for it with `wait4` and
    /// writes its `ru_maxrss`: the child's peak alone, not the test process's.
    static func measure(_ arguments: [String], environment: [String: String] = [:]) async throws -> Measured {
        let directory = try TemporaryDirectory("hostile-measure")
        defer { directory.remove() }
        let script = """
            import os, sys
            pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
            _, status, usage = os.wait4(pid, 0)
            open(sys.argv[1], "w").write(str(usage.ru_maxrss))
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        var environment = environment
        if environment["AGENT_EVAL_CATALOG"] == nil { environment["AGENT_EVAL_CATALOG"] = testCatalogPath }
        let result = try await Subprocess.run(
            "/usr/bin/env", ["python3", "-c", script, directory.path("rss"), try agentEvalBinary()] + arguments, environment: environment)
        let kib = Int((try? String(contentsOfFile: directory.path("rss"), encoding: .utf8)) ?? "") ?? Int.max / 1024
        return Measured(
            status: result.status, stdout: result.stdoutText, stderr: result.stderr, seconds: seconds(result.elapsed),
            peakBytes: kib * 1024)
    }

    /// An agent file served by `baseURL`, with `model` settings added to the model and `limits`.
    static func agentFile(
        in directory: TemporaryDirectory, baseURL: String, provider: String = "openai", model: [String] = [], limits: [String] = []
    ) throws -> String {
        let path = directory.path("agent.yaml")
        try """
        name: hostile-peer-test
        instructions: Answer in one sentence.
        model:
          provider: \(provider)
          name: local-model
          base_url: \(baseURL)
        \(model.map { "  " + $0 }.joined(separator: "\n"))
        limits:
          max_steps: 3
        \(limits.map { "  " + $0 }.joined(separator: "\n"))
        tools: []
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The run's stop, after checking its log verifies and replays.
    static func checkedStop(_ log: String) async throws -> RunStopped {
        let verify = try await agentEval(["log", "verify", log])
        #expect(verify.status == 0, "log verify: \(verify.stdoutText) \(verify.stderr)")
        let replay = try await agentEval(["replay", "--plain", log])
        #expect(replay.status == 0, "replay: \(replay.stdoutText) \(replay.stderr)")
        let stops = try LogReader(path: log).readAll().events.compactMap { recorded -> RunStopped? in
            if case .runStopped(let stop) = recorded.event.payload { return stop }
            return nil
        }
        #expect(stops.count == 1)
        return try #require(stops.first)
    }

    @Test(
        "a model stream that keeps sending is cut at the model's timeout_ms: the stop names it",
        arguments: [
            ("drip", "openai"), ("drip", "anthropic"), ("sse-comments", "openai"), ("pings", "anthropic"), ("byte-per-second", "openai"),
        ])
    func perAttemptTimeout(scenario: String, provider: String) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let agent = try Self.agentFile(
                in: directory, baseURL: server.baseURL(scenario), provider: provider, model: ["timeout_ms: 1000", "max_retries: 1"])
            let log = directory.path("run.jsonl.gz")
            let run = try await Self.measure(["exec", "--agent", agent, "--input", "Hello?", "--log", log, "--no-catalog"])
            #expect(run.status == 1, "\(run.stderr)")
            // Two attempts of 1 s and a backoff of at most 0.5 s, with room for a busy machine;
            // uncut, each of these servers goes on for minutes.
            #expect(run.seconds < 30, "\(run.seconds) s")
            let stop = try await Self.checkedStop(log)
            #expect(stop.reason == .blocked)
            let error = stop.error ?? ""
            #expect(error.contains("gave up after 2 attempts") && error.contains("took longer than 1000 ms (timeout_ms)"), "\(error)")
            #expect(try server.requests().count == 2)
        }
    }

    @Test("the run's limits.timeout_ms cuts a model stream that keeps sending: budget_exhausted, limit timeout")
    func runTimeout() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let agent = try Self.agentFile(in: directory, baseURL: server.baseURL("drip"), limits: ["timeout_ms: 1500"])
            let log = directory.path("run.jsonl.gz")
            let run = try await Self.measure(["exec", "--agent", agent, "--input", "Hello?", "--log", log, "--no-catalog"])
            #expect(run.status == 1, "\(run.stderr)")
            #expect(run.seconds < 30, "\(run.seconds) s")
            let stop = try await Self.checkedStop(log)
            #expect(stop.reason == .budgetExhausted)
            #expect(stop.limit == .timeout)
            #expect(stop.error?.contains("the model was still answering at step 1 and was cut off") == true, "\(stop.error ?? "")")
            #expect(stop.error?.contains("1500 ms timeout") == true, "\(stop.error ?? "")")
            #expect(stop.isModelFailure, "a hung model is the model's failure, not the agent's: \(stop.error ?? "")")
        }
    }

    @Test(
        "a reply past max_reply_bytes, streamed or whole, or a line past max_line_bytes: cut at the cap, in bounded memory",
        arguments: [
            ("huge-stream", ["max_reply_bytes: 1048576", "max_line_bytes: 262144"], "max_reply_bytes"),
            ("huge-json", ["stream: false", "max_reply_bytes: 1048576"], "max_reply_bytes"),
            ("huge-line", ["max_line_bytes: 65536"], "max_line_bytes"),
        ])
    func sizeCaps(scenario: String, model: [String], limit: String) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        try await TemporaryDirectory.with { directory in
            let agent = try Self.agentFile(in: directory, baseURL: server.baseURL(scenario), model: model)
            let log = directory.path("run.jsonl.gz")
            let run = try await Self.measure(["exec", "--agent", agent, "--input", "Hello?", "--log", log, "--no-catalog"])
            #expect(run.status == 1, "\(run.stderr)")
            #expect(run.seconds < 30, "\(run.seconds) s")
            // The server offers 256 MiB: an uncapped read holds at least that much, and the
            // reply it assembles and records a few times over.
            #expect(run.peakBytes < 160 << 20, "peak resident memory \(run.peakBytes >> 20) MiB")
            let stop = try await Self.checkedStop(log)
            #expect(stop.reason == .blocked)
            #expect(stop.error?.contains("(\(limit))") == true, "\(stop.error ?? "")")
            #expect(try server.requests().count == 1, "not retried: asking again gets the same")
        }
    }

    // MARK: The OTLP exporter

    static func receiver(_ directory: TemporaryDirectory, _ misbehaviour: OTLPReceiver.Misbehaviour) async throws -> OTLPReceiver {
        try FileManager.default.createDirectory(atPath: directory.path("receiver"), withIntermediateDirectories: true)
        return try await OTLPReceiver(directory: directory.path("receiver"), misbehaving: misbehaviour)
    }

    @Test("export otlp to a collector that drips its answer ends at --timeout-ms per attempt", .tags(.python), .needsPython)
    func exportDrip() async throws {
        try await TemporaryDirectory.with { directory in
            let receiver = try await Self.receiver(directory, .dripsAnswer)
            defer { receiver.stop() }
            let run = try await Self.measure([
                "export", "otlp", fixture("support-sample.jsonl.gz"), "--endpoint", receiver.endpoint, "--timeout-ms", "1000", "--retries",
                "1",
            ])
            #expect(run.status != 0)
            #expect(run.seconds < 30, "\(run.seconds) s")
            #expect(run.stderr.contains("took longer than 1000 ms, the answer included"), "\(run.stderr)")
        }
    }

    @Test(
        "exec --otlp-endpoint to a collector that drips its answer: three attempts of --otlp-timeout-ms, a warning, the run's result",
        .tags(.python), .needsPython)
    func liveExportDrip() async throws {
        try await TemporaryDirectory.with { directory in
            let receiver = try await Self.receiver(directory, .dripsAnswer)
            defer { receiver.stop() }
            let log = directory.path("support.jsonl.gz")
            let run = try await Self.measure([
                "exec", "--agent", ExampleRuns.agentPath("support"), "--input", "Where is order A-1042?", "--log", log, "--no-catalog",
                "--otlp-endpoint", receiver.endpoint, "--otlp-timeout-ms", "1000",
            ])
            #expect(run.seconds < 30, "\(run.seconds) s")
            #expect(run.stderr.contains("could not be sent to \(receiver.endpoint)"), "\(run.stderr)")
            #expect(run.stderr.contains("gave up after 3 attempts"), "\(run.stderr)")
            #expect(try LogVerifier.verify(path: log).isIntact)
        }
    }

    @Test(
        "a collector that echoes the headers' token in its 401: the token is never printed, by export or by a live export", .tags(.python),
        .needsPython)
    func echoedToken() async throws {
        try await TemporaryDirectory.with { directory in
            let receiver = try await Self.receiver(directory, .echoesHeadersIn401)
            defer { receiver.stop() }
            let token = "otlp-secret-\(UUID().uuidString)"
            let environment = ["OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20\(token),x-api-key=\(token)"]
            let export = try await agentEval(
                ["export", "otlp", fixture("support-sample.jsonl.gz"), "--endpoint", receiver.endpoint], environment: environment)
            #expect(export.status != 0)
            #expect(export.stderr.contains("HTTP 401"), "\(export.stderr)")
            #expect(export.stderr.contains("[redacted]"), "the echo was there, and was redacted: \(export.stderr)")
            #expect(!export.stderr.contains(token) && !export.stdoutText.contains(token), "\(export.stderr)")
            let live = try await agentEval(
                [
                    "exec", "--agent", ExampleRuns.agentPath("support"), "--input", "Where is order A-1042?", "--log",
                    directory.path("support.jsonl.gz"), "--no-catalog", "--otlp-endpoint", receiver.endpoint,
                ], environment: environment)
            #expect(live.stderr.contains("HTTP 401"), "\(live.stderr)")
            #expect(!live.stderr.contains(token) && !live.stdoutText.contains(token), "\(live.stderr)")
        }
    }
}
