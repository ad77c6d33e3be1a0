import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

@Suite("exec and run --otlp-endpoint: live export to a real OTLP receiver", .ownThread)
struct LiveExportTests {
    /// The run id of every root (`invoke_agent`) span the receiver accepted.
    func receivedRunIds(_ receiver: OTLPReceiver) throws -> [String] {
        try receiver.receivedSpans().flatMap { $0 }.filter { $0["attributes"]?["gen_ai.operation.name"] == "invoke_agent" }
            .compactMap { $0["attributes"]?["agent_eval.run_id"]?.stringValue }
    }

    @Test(
        "exec sends its run's trace when the run ends (a 503 is retried); content stays home unless asked for", .tags(.python), .needsPython
    )
    func exec() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("receiver"), withIntermediateDirectories: true)
            let receiver = try await OTLPReceiver(directory: directory.path("receiver"), failFirst: 1)
            defer { receiver.stop() }
            // Headers (a collector's API key) come from the environment, as the OpenTelemetry SDKs take them.
            let secret = "s3cr3t-\(UUID().uuidString)"
            let result = try await agentEval(
                [
                    "exec", "--agent", ExampleRuns.agentPath("research"), "--input", "zstd?", "--out", directory.path("runs"), "--json",
                    "--no-catalog", "--otlp-endpoint", receiver.endpoint,
                ], environment: ["OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=\(secret), x-tenant=team%201"])
            // The run's own exit status (budget_exhausted), whatever the export did.
            #expect(result.status == 1)
            let summary = try JSONParser.parse(result.stdout)
            #expect(summary["otlp"] == ["endpoint": .string(receiver.endpoint), "sent": 1, "failed": 0])
            #expect(try receivedRunIds(receiver) == [try #require(summary["run_id"]?.stringValue)])
            #expect(try receiver.receivedRequests().last?["headers"] == ["x-api-key": .string(secret), "x-tenant": "team 1"])
            #expect(!result.stdoutText.contains(secret) && !result.stderr.contains(secret))
            #expect(try receiver.rejections().isEmpty)
            let spans = try receiver.receivedSpans().flatMap { $0 }
            #expect(spans.contains { $0["attributes"]?["gen_ai.operation.name"] == "execute_tool" })
            #expect(
                !spans.contains {
                    $0["attributes"]?["gen_ai.input.messages"] != nil || $0["attributes"]?["gen_ai.tool.call.arguments"] != nil
                })
        }
    }

    @Test(
        "run sends every live run's trace (pipeline child runs too) as its case ends, with content when asked", .tags(.python), .needsPython
    )
    func run() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("receiver"), withIntermediateDirectories: true)
            let receiver = try await OTLPReceiver(directory: directory.path("receiver"))
            defer { receiver.stop() }
            let out = directory.path("runs")
            let result = try await agentEval(
                [
                    "run", repositoryRoot.appendingPathComponent("EvalCases").path, "--out", out, "--json", "--no-catalog",
                    "--otlp-endpoint", receiver.endpoint, "--otlp-include-content",
                ])
            #expect(result.status == 0, "\(result.stderr)")
            // Every run log the live cases wrote, and nothing else: not the pipeline logs, not the
            // recorded logs the other cases read.
            var written: [String] = []
            let enumerator = FileManager.default.enumerator(atPath: out)
            while let name = enumerator?.nextObject() as? String {
                guard name.hasSuffix(".jsonl.gz"), !name.hasSuffix("pipeline.jsonl.gz") else { continue }
                written.append(try #require(try LogReader(path: out + "/" + name).readAll().events.first?.event.runId))
            }
            #expect(written.count >= 3)
            let summary = try JSONParser.parse(result.stdout)
            #expect(summary["otlp"]?["sent"] == .int(written.count) && summary["otlp"]?["failed"] == 0)
            #expect(try receivedRunIds(receiver).sorted() == written.sorted())
            #expect(try receiver.receivedSpans().flatMap { $0 }.contains { $0["attributes"]?["gen_ai.input.messages"] != nil })
            // An agent case's run carries its eval outcome beside it: the case, scored 1 (it passed).
            let roots = try receiver.receivedSpans().flatMap { $0 }.filter { $0["attributes"]?["gen_ai.operation.name"] == "invoke_agent" }
            let outcomes = roots.flatMap { ($0["events"]?.arrayValue ?? []).filter { $0["name"] == "gen_ai.evaluation.result" } }
            let refund = outcomes.first { $0["attributes"]?["gen_ai.evaluation.name"] == "agent-eval.case support-refund-live" }
            #expect(refund?["attributes"]?["gen_ai.evaluation.score.value"]?.doubleValue == 1, "\(outcomes)")
            #expect(refund?["attributes"]?["gen_ai.evaluation.score.label"] == "pass")
        }
    }

    @Test("a collector that is down is a warning with the command that sends again; the run's result stands")
    func collectorDown() async throws {
        try await TemporaryDirectory.with { directory in
            // A port nothing listens on: bound, then closed.
            let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
            }
            close(socket)
            let endpoint = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))/v1/traces"
            let log = directory.path("support.jsonl.gz")
            let result = try await agentEval(
                [
                    "exec", "--agent", ExampleRuns.agentPath("support"), "--input", "Order A-1042 arrived broken.", "--log", log,
                    "--no-catalog", "--otlp-endpoint", endpoint,
                ])
            // approval_required, as without the export.
            #expect(result.status == 1)
            #expect(result.stdoutText.contains("traces: 0 sent to \(endpoint), 1 not sent"))
            #expect(result.stderr.contains("warning: the trace of \(log) could not be sent to \(endpoint)"))
            #expect(result.stderr.contains("agent-eval export otlp \(log) --endpoint \(endpoint)"))
            #expect(try LogVerifier.verify(path: log).isIntact)
        }
    }

    @Test("--otlp-include-content without an endpoint, or an endpoint that is not a URL, is a usage error")
    func usage() async throws {
        let agent = ExampleRuns.agentPath("support")
        let alone = try await agentEval(["exec", "--agent", agent, "--input", "x", "--otlp-include-content"])
        #expect(alone.status == 64 && alone.stderr.contains("--otlp-include-content goes with --otlp-endpoint"))
        let notURL = try await agentEval(["run", "EvalCases", "--otlp-endpoint", "localhost:4318"])
        #expect(notURL.status == 64 && notURL.stderr.contains("--otlp-endpoint must be an http:// or https:// URL"))
        // A malformed headers variable stops the command before any run, without showing its value.
        try await TemporaryDirectory.with { directory in
            let bad = try await agentEval(
                [
                    "exec", "--agent", agent, "--input", "x", "--log", directory.path("x.jsonl.gz"), "--otlp-endpoint",
                    "http://127.0.0.1:4318/v1/traces",
                ], environment: ["OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-ok=1,not-a-pair-Hunter2"])
            #expect(bad.status == 2, "\(bad.stderr)")
            #expect(bad.stderr.contains("OTEL_EXPORTER_OTLP_TRACES_HEADERS: pair 2 is not key=value") && !bad.stderr.contains("Hunter2"))
            #expect(!FileManager.default.fileExists(atPath: directory.path("x.jsonl.gz")))
        }
        let version = try await agentEval(["export", "otlp", "Fixtures/runs", "--out", "-", "--semconv", "1.37"])
        #expect(version.status == 64 && version.stderr.contains("--semconv must be latest (or gen_ai_latest_experimental) or v1.36"))
    }

    @Test(
        "OTEL_SEMCONV_STABILITY_OPT_IN without gen_ai_latest_experimental gives v1.36 spans, as it does other instrumentations; the option wins",
        .tags(.python), .needsPython)
    func conventions() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("receiver"), withIntermediateDirectories: true)
            let receiver = try await OTLPReceiver(directory: directory.path("receiver"))
            defer { receiver.stop() }
            let environment = ["OTEL_SEMCONV_STABILITY_OPT_IN": "http"]
            for semconv in [nil, "latest"] {
                let result = try await agentEval(
                    [
                        "exec", "--agent", ExampleRuns.agentPath("support"), "--input", "Order A-1042 arrived broken.", "--out",
                        directory.path("runs"), "--no-catalog", "--otlp-endpoint", receiver.endpoint, "--otlp-include-content",
                    ] + (semconv.map { ["--otlp-semconv", $0] } ?? []), environment: environment)
                #expect(result.status != 2, "\(result.stderr)")
            }
            let requests = try receiver.receivedSpans()
            #expect(requests.count == 2)
            let roots = requests.compactMap { $0.first { $0["attributes"]?["gen_ai.operation.name"] == "invoke_agent" }?["attributes"] }
            #expect(roots.map { $0["gen_ai.system"] != nil } == [true, false])
            #expect(roots.map { $0["gen_ai.provider.name"] != nil } == [false, true])
            let events = requests[0].flatMap { $0["events"]?.arrayValue ?? [] }.compactMap { $0["name"]?.stringValue }
            #expect(events.contains("gen_ai.user.message") && events.contains("gen_ai.choice"))
        }
    }
}
