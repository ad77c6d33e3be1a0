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
        let scratch = try TemporaryDirectory("agent-eval-interop-otel")
        defer { scratch.remove() }
        let directory = scratch.url.path
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

        // The same traces made with the SDK's attribute length limit: every message attribute is
        // cut at 80 characters. The content in them is lost, and said so; the tools that ran and
        // the stop still come through (from the tool spans and the finish reasons).
        let (cut, cutStates) = try importRuns([(directory as NSString).appendingPathComponent("truncated.otlp.json")])
        #expect(cut.importedCount == 2)
        #expect(
            cutStates.map { $0.executedCalls.map(\.tool).sorted() } == [["get_policy", "lookup_order", "refund_order"], ["web_search"]])
        #expect(cutStates.map(Trajectory.init).map(\.stop) == first.map(\.stop))
        let notes = cut.runs[0].warnings
        #expect(
            notes.filter { $0.contains("gen_ai.output.messages is not valid JSON, it ends too early (80 characters)") }.count == 3,
            "\(notes)")
        #expect(!notes.contains { $0.contains("content capture off") })
    }

    @Test("Inspect AI logs written by Inspect: one run per sample and epoch, tool errors, limits, scores kept")
    func inspectLogs() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-inspect")
        defer { scratch.remove() }
        let directory = scratch.url.path
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
        // Inspect's own .eval archives compress their entries with zstd (zip method 93).
        let evalFiles = try files("eval")
        let (fromZstd, zstdStates) = try importRuns(evalFiles)
        #expect(fromZstd.importedCount == 2 && fromZstd.failedInputs.isEmpty)
        #expect(zstdStates.map(Trajectory.init) == jsonStates.map(Trajectory.init))
        #expect(zstdStates.map(\.finalAnswer) == jsonStates.map(\.finalAnswer))

        // A flipped byte inside a zstd sample entry is a damaged archive, named, not garbage.
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: try #require(evalFiles.first))))
        let name = Array("samples/".utf8)
        let header = try #require(
            bytes.indices.first { index in
                index + 30 + name.count <= bytes.count && bytes[index..<index + 4].elementsEqual([0x50, 0x4B, 0x03, 0x04])
                    && bytes[index + 8] == 93 && bytes[(index + 30)..<(index + 30 + name.count)].elementsEqual(name)
            }, "no zstd sample entry in the .eval archive")
        let start =
            header + 30 + (Int(bytes[header + 26]) | Int(bytes[header + 27]) << 8)
            + (Int(bytes[header + 28]) | Int(bytes[header + 29]) << 8)
        let compressed = Int(bytes[header + 18]) | Int(bytes[header + 19]) << 8 | Int(bytes[header + 20]) << 16
        bytes[start + compressed / 2] ^= 0x5A
        let damaged = try write(String(decoding: [], as: UTF8.self), to: directory, "damaged.eval")
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))
        let (damagedOutcome, _) = try importRuns([damaged])
        // The damaged sample is reported; the archive's other sample still imports.
        let failure = try #require(damagedOutcome.runs.compactMap(\.error).first ?? damagedOutcome.failedInputs.first)
        #expect(failure.code == .badArchive)
        #expect(failure.message.contains("damaged.eval") && failure.message.contains("samples/"), "\(failure.message)")
        #expect(damagedOutcome.importedCount == 1)
    }

    @Test("export then import gives every fixture run's trajectory back")
    func roundTrip() throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-roundtrip")
        defer { scratch.remove() }
        let directory = scratch.url.path
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
        let scratch = try TemporaryDirectory("agent-eval-interop-receiver")
        defer { scratch.remove() }
        let receiver = try await OTLPReceiver(directory: scratch.url.path, failFirst: 1)
        defer { receiver.stop() }
        let logs = try fixtureLogs()
        let request = try OTLPExporter(includeContent: true).request(logs: logs)
        let response = try await HTTPPoster(maxRetries: 2).post(JSONWriter.encode(request), to: receiver.endpoint)
        #expect(response.status == 200)
        #expect(response.attempts.map(\.status) == [503])
        let spans = try #require(try receiver.receivedSpans().first)
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
