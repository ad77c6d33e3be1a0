import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// `agent-eval collect` as a real process, sent spans by real instrumentations from PyPI (the
/// OpenTelemetry SDK's OTLP/HTTP exporter, with opentelemetry-instrumentation-openai-v2 or
/// OpenInference's OpenAI instrumentation) in an agent talking to the local model server.
@Suite("collect: OpenTelemetry traces over OTLP/HTTP", .tags(.python), .needsPython, .ownThread)
struct CollectCommandTests {
    /// A running `agent-eval collect --listen 127.0.0.1:0 --json`.
    struct Collector {
        let process: Process
        let output: String
        let errors: String
        let traces: String
        let endpoint: String

        static func start(out: String, settle: Double, _ extra: [String] = [], scratch: TemporaryDirectory) async throws -> Collector {
            let output = scratch.path("collect-\(UUID().uuidString).out")
            let errors = output + ".err"
            for file in [output, errors] { _ = FileManager.default.createFile(atPath: file, contents: nil) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try agentEvalBinary())
            process.arguments = ["collect", "--listen", "127.0.0.1:0", "--json", "--out", out, "--settle", "\(settle)"] + extra
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
            try process.run()
            for _ in 0..<400 {
                let lines = (try? Self.lines(output)) ?? []
                if let listening = lines.first(where: { $0["event"] == "listening" }), let endpoint = listening["endpoint"]?.stringValue {
                    return Collector(
                        process: process, output: output, errors: errors, traces: listening["traces"]?.stringValue ?? "",
                        endpoint: endpoint)
                }
                if !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            process.terminate()
            let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            throw CLITestError.unexpected("agent-eval collect did not say where it listens within 20 s: \(said)")
        }

        static func lines(_ path: String) throws -> [JSONValue] {
            try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
        }

        /// Stops it with `signal`; its exit status and the JSON lines it printed.
        func stop(_ signal: Int32 = SIGTERM) async throws -> (status: Int32, lines: [JSONValue]) {
            let status = await stopped(process, with: signal)
            return (status, try Self.lines(output))
        }

        /// The collector's peak resident memory so far, in bytes (VmHWM).
        func peakMemory() throws -> Int {
            let status = try String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
    }

    /// One way the agent sends its spans.
    struct Exporter: CustomTestStringConvertible, Sendable {
        var name: String
        var arguments: [String]
        var environment: [String: String] = [:]
        var testDescription: String { name }
    }

    static let exporters = [
        Exporter(
            name: "openai-v2, protobuf, gzip", arguments: ["--instrumentation", "openai-v2"],
            environment: ["OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"]),
        Exporter(name: "OpenInference, protobuf", arguments: ["--instrumentation", "openinference"]),
        Exporter(name: "OpenInference, JSON", arguments: ["--instrumentation", "openinference", "--otlp-json"]),
    ]

    /// Runs Fixtures/external/otel_agent.py against the local model server's refund scenario,
    /// exporting to `endpoint` (nil: the variables are left to whoever runs it).
    static func runAgent(_ arguments: [String], server: LocalModelServer, endpoint: String?, environment: [String: String] = [:])
        async throws -> ProcessResult
    {
        var environment = environment
        environment["OPENAI_BASE_URL"] = server.baseURL("refund")
        environment["OPENAI_API_KEY"] = RecordCommandTests.key
        environment["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
        environment["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        if let endpoint { environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint }
        let result = try await Subprocess.run(
            try await agentCommand()[0], Array(try await agentCommand().dropFirst()) + arguments, environment: environment)
        return result
    }

    static func agentCommand() async throws -> [String] {
        [
            try await PythonEnvironment.otel.path() + "/bin/python",
            ExampleRuns.fixtures.appendingPathComponent("external/otel_agent.py").path,
        ]
    }

    static func logs(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".jsonl.gz") }.sorted().map {
            (directory as NSString).appendingPathComponent($0)
        }
    }

    static let failedRefund = [
        #"intent lookup_order {"order_id":"A-1042"}"#, "result lookup_order ok", #"intent refund_order {"amount":25,"order_id":"A-1042"}"#,
        "result refund_order error", "stop success Refunded 25 EUR for order A-1042.",
    ]

    @Test("an instrumented agent's trace, as its SDK exports it, becomes a verifiable log once it settles", arguments: exporters)
    func collectsTrace(exporter: Exporter) async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let out = scratch.path("collected")
        let collector = try await Collector.start(out: out, settle: 0.3, scratch: scratch)
        let agent = try await Self.runAgent(
            exporter.arguments + ["--fail-refund"], server: server, endpoint: collector.endpoint, environment: exporter.environment)
        #expect(agent.status == 0, "\(agent.stderr)")
        // Written as the trace settles, before the collector stops.
        for _ in 0..<200 where Self.logs(in: out).isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        let logs = Self.logs(in: out)
        #expect(logs.count == 1)
        let (status, lines) = try await collector.stop()
        #expect(status == 0)
        let log = try #require(logs.first)
        let events = try RecordCommandTests.events(log)
        #expect(RecordCommandTests.trajectory(events) == Self.failedRefund)
        #expect(RecordCommandTests.decisions(events).count == 3, "one decision per model call")
        let failure = events.compactMap { event -> ToolCompleted? in
            if case .toolCompleted(let completed) = event.payload, completed.status == .error { return completed }
            return nil
        }
        #expect(failure.first?.error == "the payment service is down", "the tool span's status message")
        #expect(lines.contains { $0["event"] == "log" && $0["trace"]?["stop"] == "success" && $0["trace"]?["calls"] == 2 })
        #expect(lines.last?["event"] == "stopped" && lines.last?["refused"] == 0)
        let verify = try await agentEval(["log", "verify", log])
        #expect(verify.status == 0, "\(verify.stdoutText)\(verify.stderr)")
        // The spans it acknowledged, kept per trace, import to the same run.
        let journal = try #require(
            try FileManager.default.contentsOfDirectory(atPath: out + "/spans").first { $0.hasSuffix(".otlp.jsonl") })
        let again = try await agentEval(["import", "otlp", out + "/spans/" + journal, "--out", scratch.path("again"), "--json"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(
            RecordCommandTests.trajectory(try RecordCommandTests.events(try #require(Self.logs(in: scratch.path("again")).first)))
                == Self.failedRefund)
    }

    @Test(
        "tools the agent's own code runs before asking the model and after its answer are calls of their own; the run ends as its last model call did"
    )
    func ownTools() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let out = scratch.path("collected")
        let collector = try await Collector.start(out: out, settle: 0.3, scratch: scratch)
        let agent = try await Self.runAgent(
            ["--instrumentation", "openai-v2", "--tool-first", "--own-tool"], server: server, endpoint: collector.endpoint)
        #expect(agent.status == 0, "\(agent.stderr)")
        let (status, lines) = try await collector.stop()
        #expect(status == 0)
        let log = try #require(Self.logs(in: out).first)
        let trajectory = RecordCommandTests.trajectory(try RecordCommandTests.events(log))
        #expect(
            trajectory == [
                #"intent lookup_order {"order_id":"A-1042"}"#, "result lookup_order ok", #"intent lookup_order {"order_id":"A-1042"}"#,
                "result lookup_order ok", #"intent refund_order {"amount":25,"order_id":"A-1042"}"#, "result refund_order ok",
                #"intent notify_customer {"order_id":"A-1042","text":"Refunded 25 EUR for order A-1042."}"#, "result notify_customer ok",
                "stop success Refunded 25 EUR for order A-1042.",
            ], "\(trajectory)")
        let warnings = lines.first { $0["event"] == "log" }?["trace"]?["warnings"]?.arrayValue ?? []
        #expect(!warnings.contains { $0.stringValue?.contains("clocks disagree") == true }, "\(warnings)")
    }

    @Test("a model client's instrumentation alone makes each model call a trace: import --group-by window reads them as one run")
    func groupedTraces() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let out = scratch.path("collected")
        let collector = try await Collector.start(out: out, settle: 0.3, scratch: scratch)
        let agent = try await Self.runAgent(
            ["--instrumentation", "openai-v2", "--no-root", "--no-tool-spans", "--fail-refund"], server: server,
            endpoint: collector.endpoint)
        #expect(agent.status == 0, "\(agent.stderr)")
        let (status, _) = try await collector.stop()
        #expect(status == 0)
        #expect(Self.logs(in: out).count == 3, "one trace, one log, per model call")
        // The journals as one JSON Lines file of requests, as a collector's file exporter writes them.
        let journals = try FileManager.default.contentsOfDirectory(atPath: out + "/spans").filter { $0.hasSuffix(".otlp.jsonl") }.sorted()
        var all = Data()
        for name in journals { all += try Data(contentsOf: URL(fileURLWithPath: out + "/spans/" + name)) }
        try all.write(to: URL(fileURLWithPath: scratch.path("all.otlp.jsonl")))
        let grouped = try await agentEval([
            "import", "otlp", scratch.path("all.otlp.jsonl"), "--group-by", "window", "--out", scratch.path("grouped"), "--json",
        ])
        #expect(grouped.status == 0, "\(grouped.stderr)")
        let logs = Self.logs(in: scratch.path("grouped"))
        #expect(logs.count == 1)
        let events = try RecordCommandTests.events(try #require(logs.first))
        #expect(RecordCommandTests.trajectory(events) == Self.failedRefund)
        let report = try JSONParser.parse(Array(grouped.stdout))
        let warnings = report["runs"]?.arrayValue?.first?["warnings"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(warnings.contains { $0.contains("the result is read from the tool message a later model call was given") }, "\(warnings)")
        #expect(warnings.contains("3 traces read as one run (--group-by)"), "\(warnings)")
        // One trace per run, as before: the calls count as proposed, not run.
        let apart = try await agentEval(["import", "otlp", scratch.path("all.otlp.jsonl"), "--out", scratch.path("apart")])
        #expect(apart.status == 0)
        #expect(Self.logs(in: scratch.path("apart")).count == 3)
        let bad = try await agentEval(["import", "otlp", scratch.path("all.otlp.jsonl"), "--group-by", "hour", "--out", scratch.path("x")])
        #expect(bad.status == 64 && bad.stderr.contains("--group-by takes trace, session or window"))
    }

    @Test("import --group-by session: the traces that share a session id are one run; a trace without one is a run of its own")
    func sessions() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        func request(_ trace: Int, session: String?) -> JSONValue {
            var attributes: [JSONValue] = [
                ["key": "gen_ai.operation.name", "value": ["stringValue": "execute_tool"]],
                ["key": "gen_ai.tool.name", "value": ["stringValue": "ping"]],
            ]
            if let session { attributes.append(["key": "session.id", "value": ["stringValue": .string(session)]]) }
            let span: JSONValue = [
                "traceId": .string(String(format: "%032x", trace)), "spanId": .string(String(format: "%016x", trace)),
                "name": "execute_tool",
                "startTimeUnixNano": .string(String(1_790_000_000_000_000_000 + trace * 1_000_000)),
                "endTimeUnixNano": .string(String(1_790_000_000_000_000_000 + trace * 1_000_000 + 1000)), "attributes": .array(attributes),
            ]
            let scope: JSONValue = ["spans": [span]]
            let batch: JSONValue = ["scopeSpans": [scope]]
            return ["resourceSpans": [batch]]
        }
        let lines = [request(1, session: "s-1"), request(2, session: "s-1"), request(3, session: nil)].map {
            String(decoding: JSONWriter.encode($0), as: UTF8.self)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: scratch.path("sessions.jsonl"), atomically: true, encoding: .utf8)
        let result = try await agentEval([
            "import", "otlp", scratch.path("sessions.jsonl"), "--group-by", "session", "--out", scratch.path("out"), "--json",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let runs = try JSONParser.parse(Array(result.stdout))["runs"]?.arrayValue ?? []
        #expect(runs.map { $0["source_id"]?.stringValue ?? $0["sourceId"]?.stringValue ?? "" }.count == 2, "\(runs)")
        #expect(runs.compactMap { $0["calls"]?.intValue }.sorted() == [1, 2], "\(runs)")
    }

    @Test("a collector killed with SIGKILL loses no span it acknowledged: started again on its directory, it writes the trace's log")
    func survivesKill() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let out = scratch.path("collected")
        let first = try await Collector.start(out: out, settle: 600, scratch: scratch)
        // The SDK's shutdown waits for every export's answer: once the agent exits, every span was acknowledged.
        let agent = try await Self.runAgent(["--instrumentation", "openai-v2", "--fail-refund"], server: server, endpoint: first.endpoint)
        #expect(agent.status == 0, "\(agent.stderr)")
        let (killed, _) = try await first.stop(SIGKILL)
        #expect(killed == SIGKILL)
        #expect(Self.logs(in: out).isEmpty, "the trace had not settled: no log yet")
        // A write the kill tore (never acknowledged) at the end of the journal.
        let journal =
            out + "/spans/"
            + (try #require(try FileManager.default.contentsOfDirectory(atPath: out + "/spans").first { $0.hasSuffix(".otlp.jsonl") }))
        let handle = try #require(FileHandle(forWritingAtPath: journal))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"resourceSpans":[{"scopeSpa"#.utf8))
        handle.closeFile()

        let second = try await Collector.start(out: out, settle: 0.3, scratch: scratch)
        let (status, lines) = try await second.stop()
        #expect(status == 0)
        let log = try #require(Self.logs(in: out).first)
        #expect(RecordCommandTests.trajectory(try RecordCommandTests.events(log)) == Self.failedRefund)
        #expect(lines.first?["event"] == "log", "the trace is written as the collector starts, before it listens")
        #expect(!(try String(contentsOfFile: journal, encoding: .utf8)).hasSuffix("scopeSpa"), "the torn line is cut")
    }

    @Test("bad bodies are answered with the reason; a 100 MB body, a gzip bomb and a flood of requests keep the collector's memory small")
    func badInput() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let out = scratch.path("collected")
        let collector = try await Collector.start(out: out, settle: 0.3, ["--max-body", "1M"], scratch: scratch)
        let garbage = scratch.path("garbage")
        try Data("garbage\n".utf8).write(to: URL(fileURLWithPath: garbage))
        func post(_ arguments: [String], to url: String? = nil) async throws -> JSONValue {
            let result = try await Subprocess.run(
                "/usr/bin/env", ["python3", PythonEnvironment.scriptPath("otlp_post.py"), url ?? collector.traces] + arguments)
            #expect(result.status == 0, "\(result.stderr)")
            return try JSONParser.parse(Array(result.stdout))
        }
        /// The message of a protobuf `Status` answer (field 2), read from its hex.
        func statusMessage(_ answer: JSONValue) -> String {
            let hex = Array((answer["body"]?.stringValue ?? "").utf8)
            let bytes = stride(from: 0, to: hex.count - 1, by: 2).compactMap {
                UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        let notProtobuf = try await post(["--body-file", garbage])
        #expect(notProtobuf["status"] == 400)
        #expect(statusMessage(notProtobuf).contains("the protobuf body is not an OTLP ExportTraceServiceRequest"))
        let notJSON = try await post(["--body-file", garbage, "--content-type", "application/json"])
        #expect(notJSON["status"] == 400)
        #expect(notJSON["body"]?.stringValue?.contains("the JSON body does not parse") == true, "\(notJSON)")
        let noSpans = scratch.path("empty.json")
        try Data(#"{"spans": []}"#.utf8).write(to: URL(fileURLWithPath: noSpans))
        let wrongShape = try await post(["--body-file", noSpans, "--content-type", "application/json"])
        #expect(wrongShape["status"] == 400 && wrongShape["body"]?.stringValue?.contains("resourceSpans") == true, "\(wrongShape)")
        // A span whose time no log can hold (1e300 ns; it once trapped converting it) is refused
        // with the request, naming the span, and the collector goes on.
        let badTime = scratch.path("bad-time.json")
        try Data(
            (#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"1111111111111111","#
                + #""name":"chat m","startTimeUnixNano":1e300,"endTimeUnixNano":"2000000000"}]}]}]}"#).utf8
        ).write(to: URL(fileURLWithPath: badTime))
        let timeRefused = try await post(["--body-file", badTime, "--content-type", "application/json"])
        #expect(
            timeRefused["status"] == 400
                && timeRefused["body"]?.stringValue?.contains(
                    "span 1111111111111111 of trace 0123456789abcdef0123456789abcdef: "
                        + "startTimeUnixNano is 1e+300, which is no time") == true,
            "\(timeRefused)")
        let plain = try await post(["--body-file", garbage, "--content-type", "text/plain"])
        #expect(plain["status"] == 415 && statusMessage(plain).contains("application/x-protobuf or application/json"))
        let metrics = try await post(["--body-file", garbage], to: collector.endpoint + "/v1/metrics")
        #expect(metrics["status"] == 404)
        let huge = try await post(["--zeros", "\(100 << 20)"])
        #expect(huge["status"] == 413 && statusMessage(huge).contains("--max-body"), "\(huge)")
        let bomb = try await post(["--gzip-bomb", "\(64 << 20)"])
        #expect(bomb["status"] == 413 && statusMessage(bomb).contains("inflates to more than 1048576 bytes"))
        let flood = try await post(["--flood", "1000"])
        #expect(flood["statuses"] == ["200": 1000])
        // Three bodies of 0.9 MB held open at once, under --max-body 1M: the server holds two
        // of them (2 MiB) and answers the third 503, which an exporter sends again.
        let together = try await post(["--together", "3", "--size", "900000"])
        #expect(together["statuses"] == ["200": 2, "503": 1], "\(together)")
        let peak = try collector.peakMemory()
        #expect(peak < 200 << 20, "peak resident memory \(peak >> 20) MB after a 100 MB body, a 64 MB gzip bomb and 1,000 requests")
        let (status, lines) = try await collector.stop()
        #expect(status == 0)
        #expect(lines.last?["refused"] == 9 && lines.last?["requests"] == 1002 && lines.last?["logs"] == 1002, "\(lines.last ?? .null)")
        #expect(Self.logs(in: out).count == 1002)
    }

    /// One OTLP/JSON span of `trace`, 0.5 ms long, `start` ms after a fixed instant, with
    /// string attributes.
    static func span(_ trace: String, _ id: String, _ name: String, start: Int, _ attributes: [(String, String)], parent: String? = nil)
        -> JSONValue
    {
        let base = 1_790_000_000_000_000_000 + start * 1_000_000
        var object = JSONObject()
        object["traceId"] = .string(trace)
        object["spanId"] = .string(id)
        object["name"] = .string(name)
        object["startTimeUnixNano"] = .string(String(base))
        object["endTimeUnixNano"] = .string(String(base + 500_000))
        object["attributes"] = .array(attributes.map { key, value in ["key": .string(key), "value": ["stringValue": .string(value)]] })
        if let parent { object["parentSpanId"] = .string(parent) }
        return .object(object)
    }

    /// Posts `spans` (one resource, one scope) as OTLP/JSON to `traces` with the reference
    /// client (`scripts/otlp_post.py`); its answer: `status` and `body`.
    static func post(_ spans: [JSONValue], to traces: String, in scratch: TemporaryDirectory, name: String) async throws -> JSONValue {
        let request: JSONValue = ["resourceSpans": [["scopeSpans": [["spans": .array(spans)]]]]]
        let path = scratch.path("request-\(name).json")
        try Data(JSONWriter.encode(request)).write(to: URL(fileURLWithPath: path))
        let sent = try await Subprocess.run(
            "/usr/bin/env",
            ["python3", PythonEnvironment.scriptPath("otlp_post.py"), traces, "--body-file", path, "--content-type", "application/json"])
        return try JSONParser.parse(Array(sent.stdout))
    }

    @Test("a span attribute nested as deep as a reader allows (167 OTLP arrays: 511 JSON levels) is kept and imported, not a crash")
    func deepAttribute() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let out = scratch.path("collected")
        let collector = try await Collector.start(out: out, settle: 0.2, scratch: scratch)
        var value = #"{"stringValue":"leaf"}"#
        for _ in 0..<167 { value = #"{"arrayValue":{"values":["# + value + "]}}" }
        let body = scratch.path("deep.json")
        try Data(
            (#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"1111111111111111","#
                + #""name":"invoke_agent a","startTimeUnixNano":"1000000000","endTimeUnixNano":"2000000000","attributes":["#
                + #"{"key":"gen_ai.operation.name","value":{"stringValue":"invoke_agent"}},{"key":"deep","value":"# + value + "}]}]}]}]}")
                .utf8
        ).write(to: URL(fileURLWithPath: body))
        let posted = try await Subprocess.run(
            "/usr/bin/env",
            [
                "python3", PythonEnvironment.scriptPath("otlp_post.py"), collector.traces, "--body-file", body, "--content-type",
                "application/json",
            ])
        #expect(posted.status == 0, "\(posted.stderr)")
        #expect(try JSONParser.parse(Array(posted.stdout))["status"] == 200, "\(posted.stdoutText)")
        var logs: [String] = []
        for _ in 0..<200 where logs.isEmpty {
            logs = Self.logs(in: out)
            try await Task.sleep(for: .milliseconds(50))
        }
        let (status, lines) = try await collector.stop()
        #expect(status == 0, "the collector ran to its stop: \(lines)")
        #expect(Self.logs(in: out).count == 1, "\(lines)")
    }

    @Test("an exporter's retry of a request keeps each span once; a trace id that is not 32 hex digits names no file")
    func retriesAndHostileIds() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let out = scratch.path("collected")
        // A settle longer than the test: the trace is written once, when the collector stops. With
        // 0.3 s, a second request that waited for a free slot on a loaded machine came after the
        // trace had settled, and the trace was written twice (each time with its 3 spans).
        let collector = try await Collector.start(out: out, settle: 600, scratch: scratch)
        let trace = String(repeating: "ab", count: 16)
        let output = #"[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"ping","arguments":{}}]}]"#
        let spans: [JSONValue] = [
            Self.span(trace, "0000000000000001", "invoke_agent", start: 0, [("gen_ai.operation.name", "invoke_agent")]),
            Self.span(
                trace, "0000000000000002", "chat", start: 1, [("gen_ai.operation.name", "chat"), ("gen_ai.output.messages", output)],
                parent: "0000000000000001"),
            Self.span(
                trace, "0000000000000003", "execute_tool ping", start: 2,
                [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "ping"), ("gen_ai.tool.call.id", "c1")],
                parent: "0000000000000001"),
            Self.span("../../../escaped", "0000000000000004", "chat", start: 3, [("gen_ai.operation.name", "chat")]),
        ]
        let scope: JSONValue = ["spans": .array(spans)]
        let batch: JSONValue = ["scopeSpans": [scope]]
        let request: JSONValue = ["resourceSpans": [batch]]
        let body = scratch.path("request.json")
        try Data(JSONWriter.encode(request)).write(to: URL(fileURLWithPath: body))
        for _ in 0..<2 {
            let sent = try await Subprocess.run(
                "/usr/bin/env",
                [
                    "python3", PythonEnvironment.scriptPath("otlp_post.py"), collector.traces, "--body-file", body, "--content-type",
                    "application/json",
                ])
            let answer = try JSONParser.parse(Array(sent.stdout))
            #expect(answer["status"] == 200, "\(answer)")
            let partial = try JSONParser.parse(Array((answer["body"]?.stringValue ?? "").utf8))
            #expect(partial["partialSuccess"]?["rejectedSpans"] == "1", "the span with a path for a trace id is left out: \(partial)")
        }
        let (status, lines) = try await collector.stop()
        #expect(status == 0)
        #expect(lines.filter { $0["event"] == "log" }.map { $0["trace"]?["spans"] } == [3], "\(lines)")
        let log = try #require(Self.logs(in: out).first)
        #expect(RecordCommandTests.trajectory(try RecordCommandTests.events(log)).filter { $0.hasPrefix("intent") } == ["intent ping {}"])
        #expect(!FileManager.default.fileExists(atPath: scratch.path("escaped.otlp.jsonl")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: out + "/spans").sorted() == ["\(trace).logged", "\(trace).otlp.jsonl"])
    }

    @Test("a trace past --max-trace: the request that would pass it is answered 413 and not kept, and the trace's log says so")
    func traceCap() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let out = scratch.path("collected")
        let collector = try await Collector.start(out: out, settle: 600, ["--max-trace", "64K"], scratch: scratch)
        let trace = String(repeating: "ef", count: 16)
        let other = String(repeating: "cd", count: 16)
        func span(_ number: Int, of trace: String) -> JSONValue {
            Self.span(
                trace, String(format: "%016x", number), "execute_tool", start: number,
                [
                    ("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "ping"),
                    ("padding", String(repeating: "x", count: 40_000)),
                ])
        }
        func post(_ spans: [JSONValue], _ name: String) async throws -> JSONValue {
            try await Self.post(spans, to: collector.traces, in: scratch, name: name)
        }
        #expect(try await post([span(1, of: trace)], "1")["status"] == 200)
        let second = try await post([span(2, of: trace)], "2")
        #expect(second["status"] == 413 && second["body"]?.stringValue?.contains("--max-trace") == true, "\(second)")
        // A request with spans of the full trace and of another: the other's are kept.
        let mixed = try await post([span(3, of: trace), span(4, of: other)], "3")
        #expect(mixed["status"] == 200, "\(mixed)")
        let partial = try JSONParser.parse(Array((mixed["body"]?.stringValue ?? "").utf8))
        #expect(partial["partialSuccess"]?["rejectedSpans"] == "1", "\(partial)")
        let (status, lines) = try await collector.stop()
        #expect(status == 0)
        let logs = lines.filter { $0["event"] == "log" }
        #expect(logs.count == 2, "\(lines)")
        let logged = try #require(logs.first { $0["trace"]?["trace_id"]?.stringValue == trace }, "\(lines)")
        #expect(logged["trace"]?["spans"] == 1, "\(logged)")
        #expect(logged["trace"]?["warnings"]?.arrayValue?.contains { $0.stringValue?.contains("2 requests") == true } == true, "\(logged)")
        let log = try #require(Self.logs(in: out).first { $0.contains(trace) })
        guard case .runStarted(let started)? = try RecordCommandTests.events(log).first?.payload else {
            Issue.record("no run_started")
            return
        }
        #expect(started.source?.metadata?["collect"]?["refused_requests"] == 2, "\(String(describing: started.source?.metadata))")
        #expect(started.source?.metadata?["collect"]?["max_trace_bytes"] == 65536)
    }

    @Test("usage errors: an address that is none, a size that is none")
    func usage() async throws {
        let badAddress = try await agentEval(["collect", "--listen", "localhost:http"])
        #expect(badAddress.status == 64 && badAddress.stderr.contains("--listen takes HOST:PORT"))
        let badSize = try await agentEval(["collect", "--max-body", "lots"])
        #expect(badSize.status == 64 && badSize.stderr.contains("--max-body takes a size"))
        let hugeSettle = try await agentEval(["collect", "--settle", "1e300"])
        #expect(hugeSettle.status == 64 && hugeSettle.stderr.contains("--settle takes a number of seconds"))
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        try Data().write(to: URL(fileURLWithPath: scratch.path("a-file")))
        let outIsFile = try await agentEval(["collect", "--listen", ":0", "--out", scratch.path("a-file")])
        #expect(outIsFile.status == 2 && outIsFile.stderr.contains("is a file, not a directory"), "\(outIsFile.stderr)")
        let notHere = try await agentEval(["collect", "--listen", "192.0.2.1:4318", "--out", scratch.path("c")])
        #expect(notHere.status == 2 && notHere.stderr.contains("cannot listen on 192.0.2.1:4318"), "\(notHere.stderr)")
        #expect(notHere.stderr.contains("is not an address of this machine"), "\(notHere.stderr)")
    }
}

/// `agent-eval record` on an instrumented agent: its spans are merged into the run.
@Suite("record: an instrumented agent's OpenTelemetry spans", .tags(.python), .needsPython, .ownThread)
struct RecordSpansTests {
    static func record(_ arguments: [String], server: LocalModelServer, log: String) async throws -> (JSONValue, [Event]) {
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log, "--json", "--timeout", "120"] + ["--"] + (try await CollectCommandTests.agentCommand())
                + arguments,
            environment: [
                "OPENAI_BASE_URL": server.baseURL("refund"), "OPENAI_API_KEY": RecordCommandTests.key,
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
                "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        return (try JSONParser.parse(Array(result.stdout)), try RecordCommandTests.events(log))
    }

    static func results(_ events: [Event]) -> [ToolCompleted] {
        events.compactMap { event in
            if case .toolCompleted(let completed) = event.payload { return completed }
            return nil
        }
    }

    @Test(
        "tool spans give the results their measured duration and error; model spans matching the gateway's requests add no step",
        arguments: ["openai-v2", "openinference"])
    func timesTools(instrumentation: String) async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let (summary, events) = try await Self.record(
            ["--instrumentation", instrumentation, "--fail-refund", "--slow-tool", "0.25"], server: server,
            log: scratch.path("run.jsonl.gz"))
        #expect(summary["stop_reason"] == "success")
        #expect(summary["spans"]?["model_matched"] == 3 && summary["spans"]?["model_unmatched"] == 0, "\(summary)")
        #expect(summary["spans"]?["tool_timed"] == 2 && summary["spans"]?["tool_late"] == 0, "\(summary)")
        #expect(RecordCommandTests.trajectory(events) == CollectCommandTests.failedRefund)
        #expect(RecordCommandTests.decisions(events).count == 3, "the model calls are recorded once, from the wire")
        let results = Self.results(events)
        #expect(results.allSatisfy { $0.durationUs >= 250_000 }, "\(results.map(\.durationUs))")
        #expect(results.last?.error == "the payment service is down", "the tool span's status message, not the text sent back")
        #expect(
            events.contains { event in
                if case .contentStored(let content) = event.payload { return content.mediaType == "application/vnd.otlp.spans+json" }
                return false
            })
        let verify = try await agentEval(["log", "verify", scratch.path("run.jsonl.gz")])
        #expect(verify.status == 0, "\(verify.stdoutText)\(verify.stderr)")
    }

    @Test("a tool span before the first model request waits for the run to begin: the run's start still names the goal and model")
    func spansBeforeTheRun() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let (summary, events) = try await Self.record(
            ["--instrumentation", "openai-v2", "--tool-first"], server: server, log: scratch.path("run.jsonl.gz"))
        #expect(summary["stop_reason"] == "success" && summary["spans"]?["own_tool_calls"] == 1, "\(summary)")
        guard case .runStarted(let start)? = events.first?.payload else {
            Issue.record("the log starts with \(String(describing: events.first))")
            return
        }
        #expect(start.goal == "Order A-1042 arrived broken. Refund me.")
        #expect(start.model.name == "gpt-test")
        #expect(
            RecordCommandTests.trajectory(events).prefix(2) == [#"intent lookup_order {"order_id":"A-1042"}"#, "result lookup_order ok"],
            "the agent's own lookup, as the first step")
        #expect(RecordCommandTests.decisions(events).first?.format == "otlp.span")
    }

    @Test("a tool the agent's own code runs is a call of its own; a call whose result never went back is completed from its span")
    func untoldCalls() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let (own, ownEvents) = try await Self.record(
            ["--instrumentation", "openai-v2", "--own-tool"], server: server, log: scratch.path("own.jsonl.gz"))
        #expect(own["spans"]?["own_tool_calls"] == 1, "\(own)")
        let decisions = RecordCommandTests.decisions(ownEvents)
        #expect(decisions.last?.format == "otlp.span")
        #expect(
            Array(RecordCommandTests.trajectory(ownEvents).suffix(3)) == [
                #"intent notify_customer {"order_id":"A-1042","text":"Refunded 25 EUR for order A-1042."}"#, "result notify_customer ok",
                "stop success Refunded 25 EUR for order A-1042.",
            ])

        let (cut, cutEvents) = try await Self.record(
            ["--instrumentation", "openai-v2", "--exit-after-tools", "2"], server: server, log: scratch.path("cut.jsonl.gz"))
        #expect(cut["stop_reason"] == "blocked")
        #expect(
            RecordCommandTests.trajectory(cutEvents).dropLast() == [
                #"intent lookup_order {"order_id":"A-1042"}"#, "result lookup_order ok",
                #"intent refund_order {"amount":25,"order_id":"A-1042"}"#,
                "result refund_order ok",
            ], "the refund ran (its span says so) though the agent exited before telling the model")
        #expect(Self.results(cutEvents).last?.output == ["amount": 25, "refund_id": "rf-9"])
    }
}
