import Foundation
import Interop
import ModelClients
import TestSupport
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Importing OpenTelemetry traces and Inspect logs, exporting OTLP", .serialized)
struct TraceImportTests {
    @Test("spans from the official OpenTelemetry SDK: OTLP/JSON, protobuf JSON, Tempo batches and Jaeger give the same runs")
    func sdkTraces() async throws {
        let directory = try temporaryDirectory("otel")
        try await runPython("otel_traces.py", [directory])
        var trajectories: [[Trajectory]] = []
        for name in ["genai.otlp.json", "genai.proto.json", "genai.tempo.json", "genai.jaeger.json"] {
            let (outcome, states) = try importRuns([(directory as NSString).appendingPathComponent(name)])
            #expect(outcome.importedCount == 2, "\(name)")
            #expect(states.allSatisfy { $0.anomalies.isEmpty })
            trajectories.append(states.map(Trajectory.init))
            // The model call seen by two instrumentation layers is imported once.
            #expect(states[0].decisions.count == 3, "\(name)")
            #expect(states[0].usage.inputTokens == 320, "\(name)")
        }
        #expect(Set(trajectories.map(\.description)).count == 1)
        let first = try #require(trajectories.first)
        #expect(
            first[0].calls == [
                #"lookup_order({"order_id":"A-1"})"#, #"get_policy({"topic":"refunds"})"#,
                #"refund_order({"amount_cents":1999,"order_id":"A-1"})"#,
            ])
        #expect(first[0].stop == "success")
        // Content capture off: the call comes from its tool span; the last reply hit max_tokens.
        #expect(first[1].calls == ["web_search({})"])
        #expect(first[1].stop == "budget_exhausted/token_budget")

        let (legacy, states) = try importRuns([(directory as NSString).appendingPathComponent("openllmetry.otlp.json")])
        #expect(legacy.importedCount == 1)
        #expect(states.map(Trajectory.init).first?.calls == [#"get_weather({"city":"Paris"})"#])
        #expect(states.first?.finalAnswer == "It is 18 °C in Paris.")
        #expect(states.first?.start?.goal == "Weather in Paris?")
    }

    @Test("Inspect AI logs written by Inspect: one run per sample and epoch, tool errors, limits, scores kept")
    func inspectLogs() async throws {
        let directory = try temporaryDirectory("inspect")
        try await runPython("inspect_logs.py", [directory])
        func files(_ folder: String) throws -> [String] {
            let path = (directory as NSString).appendingPathComponent(folder)
            return try FileManager.default.contentsOfDirectory(atPath: path).map { (path as NSString).appendingPathComponent($0) }
        }
        let (fromJSON, jsonStates) = try importRuns(try files("json"))
        let (fromEval, evalStates) = try importRuns(try files("deflate"))
        #expect(fromJSON.importedCount == 2 && fromEval.importedCount == 2)
        #expect(jsonStates.map(Trajectory.init) == evalStates.map(Trajectory.init))
        let add = try #require(jsonStates.first { $0.start?.source?.id == "add:1" })
        #expect(add.start?.source?.format == "inspect")
        #expect(Trajectory(add).calls == [#"add({"x":1,"y":2})"#])
        #expect(add.finalAnswer == "1 + 2 = 3")
        #expect(add.start?.source?.metadata?["scores"] != nil)
        let divide = try #require(jsonStates.first { $0.start?.source?.id == "divide:1" })
        #expect(divide.executedCalls.first?.lastResult?.status == .error)
        #expect(divide.stop?.reason == .budgetExhausted && divide.stop?.limit == .maxSteps)
        // Inspect's own .eval archives compress with zstd: a clear error says how to convert them.
        let zstd = try importRuns(try files("eval")).outcome.failedInputs.first
        #expect(zstd?.code == .badArchive)
        #expect(zstd?.hint?.contains("inspect log convert") == true)
    }

    @Test("export then import gives every fixture run's trajectory back")
    func roundTrip() throws {
        let directory = try temporaryDirectory("roundtrip")
        let logs = try fixtureLogs()
        #expect(logs.count >= 5)
        for log in logs {
            let name = (log as NSString).lastPathComponent
            let request = try OTLPExporter(includeContent: true).request(logs: [log])
            let file = try write(JSONWriter.encodeString(request), to: directory, "\(name).json")
            let (outcome, states) = try importRuns([file], format: .otlp)
            #expect(outcome.importedCount == 1, "\(name)")
            var original = RunState()
            _ = try LogReader(path: log).forEachEvent { RunState.reduce(into: &original, $0.event) }
            #expect(states.map(Trajectory.init) == [Trajectory(original)], "\(name)")
        }
    }

    @Test("a real OTLP receiver parses the export with the official protobuf definitions; a 503 is retried")
    func receiver() async throws {
        let directory = try temporaryDirectory("receiver")
        let portFile = (directory as NSString).appendingPathComponent("port")
        let command = try await PythonEnvironment.interop.script("otlp_receiver.py", [portFile, directory, "--fail-first", "1"])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        // Its output goes nowhere: a child holding the test runner's pipes would keep it waiting.
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { kill(process.processIdentifier, SIGKILL) }
        var port: String?
        for _ in 0..<200 where port == nil {
            port = try? String(contentsOfFile: portFile, encoding: .utf8)
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let bound = try #require(port, "the receiver did not start")
        let logs = try fixtureLogs()
        let request = try OTLPExporter(includeContent: true).request(logs: logs)
        let response = try await HTTPPoster(maxRetries: 2).post(JSONWriter.encode(request), to: "http://127.0.0.1:\(bound)/v1/traces")
        #expect(response.status == 200)
        #expect(response.attempts.map(\.status) == [503])
        let summary = try JSONParser.parse(
            Array(try Data(contentsOf: URL(fileURLWithPath: (directory as NSString).appendingPathComponent("request-2.json")))))
        let spans = try #require(summary["spans"]?.arrayValue)
        let roots = spans.filter { $0["attributes"]?["gen_ai.operation.name"] == "invoke_agent" }
        #expect(roots.count == logs.count)
        #expect(
            spans.contains {
                $0["attributes"]?["gen_ai.operation.name"] == "execute_tool" && $0["attributes"]?["gen_ai.tool.call.arguments"] != nil
            })
        #expect(spans.contains { ($0["events"]?.arrayValue ?? []).contains { $0["name"] == "agent_eval.policy.verdict" } })
        // Without --include-content no arguments, results or messages leave the machine.
        let bare = JSONWriter.encodeString(try OTLPExporter().request(logs: logs))
        #expect(!bare.contains("gen_ai.tool.call.arguments") && !bare.contains("gen_ai.output.messages"))
    }
}

/// Every fixture log of the repository (Fixtures/samples and Fixtures/runs).
func fixtureLogs() throws -> [String] {
    try ["samples", "runs"].flatMap { folder in
        let path = ExampleRuns.fixtures.appendingPathComponent(folder).path
        return try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix(".jsonl.gz") }.sorted()
            .map { (path as NSString).appendingPathComponent($0) }
    }
}
