import AgentRuntime
import Foundation
import Interop
import Recording
import Synchronization
import TestSupport
import Testing
import TraceCore
import TraceLog

/// `agent-eval collect`'s loop (`TraceCollection`): each trace's log is written once it has
/// settled, on the injected clock's tick, until the task is cancelled; what is left is written at
/// the end.
@Suite("Trace collection")
struct TraceCollectionTests {
    /// One trace of one model span, as OTLP/JSON.
    static func request(trace: String) -> JSONValue {
        let span: JSONValue = [
            "traceId": .string(trace), "spanId": "00000000000000a1", "name": "chat gpt-4.1-mini",
            "startTimeUnixNano": "1790000000000000000", "endTimeUnixNano": "1790000000500000000",
            "attributes": [
                ["key": "gen_ai.operation.name", "value": ["stringValue": "chat"]],
                ["key": "gen_ai.request.model", "value": ["stringValue": "gpt-4.1-mini"]],
            ],
        ]
        return ["resourceSpans": [["scopeSpans": [["spans": [span]]]]]]
    }

    @Test("a settled trace is written at the next tick of the clock, and collect returns what it wrote when cancelled")
    func writesOnTheTick() async throws {
        try await TemporaryDirectory.with { directory in
            let out = directory.path("collected")
            let collector = TraceCollector(directory: out, settleUs: 0, now: { 1_790_000_001_000_000 })
            let clock = ManualClock()
            let collection = try TraceCollection(collector: collector, settleSeconds: 0, clock: clock)
            #expect(collection.tick == .milliseconds(50))
            #expect(FileManager.default.fileExists(atPath: out + "/spans"))
            _ = try collector.accept(try ReceivedTraces(request: Self.request(trace: String(repeating: "ab", count: 16))))
            let batches = Batches()
            let collecting = Task { await collection.collect { batches.add($0) } }
            // Nothing is written before the clock moves.
            while clock.sleeperCount == 0 { await Task.yield() }
            #expect(batches.count == 0)
            clock.advance(by: collection.tick)
            while batches.count == 0 { await Task.yield() }
            collecting.cancel()
            while clock.sleeperCount > 0 { clock.advance(by: collection.tick) }
            let written = await collecting.value
            #expect(written.count == 1)
            let log = try #require(written.first?.log)
            #expect(log.hasPrefix(out + "/") && FileManager.default.fileExists(atPath: log))
            #expect(await collection.finishAll().isEmpty)
        }
    }

    @Test("a trace whose model call's parent has not come is still open: its run is written unfinished, and whole once the parent comes")
    func openTrace() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let trace = String(repeating: "cd", count: 16)
        func request(_ span: JSONValue) -> JSONValue { ["resourceSpans": [["scopeSpans": [["spans": [span]]]]]] }
        func attribute(_ key: String, _ value: String) -> JSONValue { ["key": .string(key), "value": ["stringValue": .string(value)]] }
        let chat: JSONValue = [
            "traceId": .string(trace), "spanId": "00000000000000a2", "parentSpanId": "00000000000000a1", "name": "chat m",
            "startTimeUnixNano": "1790000000100000000", "endTimeUnixNano": "1790000000400000000",
            "attributes": [
                attribute("gen_ai.operation.name", "chat"),
                attribute("gen_ai.output.messages", #"[{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}]"#),
            ],
        ]
        let agent: JSONValue = [
            "traceId": .string(trace), "spanId": "00000000000000a1", "name": "invoke_agent ops",
            "startTimeUnixNano": "1790000000000000000", "endTimeUnixNano": "1790000000500000000",
            "attributes": [attribute("gen_ai.operation.name", "invoke_agent")],
        ]
        let collector = TraceCollector(directory: directory.path("collected"), settleUs: 0, now: { 1_790_000_001_000_000 })
        try FileManager.default.createDirectory(atPath: directory.path("collected/spans"), withIntermediateDirectories: true)
        _ = try collector.accept(try ReceivedTraces(request: request(chat)))
        let open = try #require(collector.finishAll().first)
        #expect(open.stop == nil, "\(open.warnings)")
        #expect(open.warnings.contains { $0.contains("the trace is still open") }, "\(open.warnings)")
        var state = RunState()
        _ = try LogReader(path: try #require(open.log)).forEachEvent { RunState.reduce(into: &state, $0.event) }
        #expect(state.stop == nil && state.start?.source?.stop == "open")
        // The agent's span ends, and comes: the run is written again, whole.
        _ = try collector.accept(try ReceivedTraces(request: request(agent)))
        let whole = try #require(collector.finishAll().first)
        #expect(whole.stop == .success, "\(whole.warnings)")
        #expect(!whole.warnings.contains { $0.contains("still open") })
    }

    @Test("credentials in span attributes reach neither the journal (the owner's alone) nor the log: an auth header, an api_key, a token")
    func attributeSecrets() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let trace = String(repeating: "ef", count: 16)
        let secrets = [
            "Basic dXNlcjpodW50ZXIyaHVudGVyMg==", "Zq8vT3kLm9PxW2rB7nHc", "ya29.a0AfH6SMBx-planted", "Bearer array-held-Q7xK2mP9",
            "c2VjcmV0LWJ5dGVzLWtleQ==", "COLSECRETquery55", "COLSECRETpw123", "COLSECRETuserinfo",
        ]
        func attribute(_ key: String, _ value: String) -> JSONValue { ["key": .string(key), "value": ["stringValue": .string(value)]] }
        let span: JSONValue = [
            "traceId": .string(trace), "spanId": "00000000000000b1", "name": "chat m",
            "startTimeUnixNano": "1790000000000000000", "endTimeUnixNano": "1790000000500000000",
            "attributes": [
                attribute("gen_ai.operation.name", "chat"), attribute("http.request.header.authorization", secrets[0]),
                attribute("api_key", secrets[1]), attribute("gen_ai.request.model", "gpt-test"),
                // A header as the semantic conventions type it (string[]), and a key as bytes.
                [
                    "key": "http.request.header.proxy-authorization",
                    "value": ["arrayValue": ["values": [["stringValue": .string(secrets[3])]]]],
                ],
                ["key": "x-api-key", "value": ["bytesValue": .string(secrets[4])]],
                attribute("gen_ai.output.messages", #"[{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}]"#),
                // Secrets in attributes whose names say nothing: a URL's query and password, a
                // connection string.
                attribute("url.full", "https://api.x.com/v1?api_key=\(secrets[5])&page=2"),
                attribute("db.connection_string", "Server=db;User Id=sa;Password=\(secrets[6]);"),
                attribute("gen_ai.tool.call.arguments", #"{"url":"https://user:\#(secrets[7])@host/"}"#),
            ],
            "events": [
                ["name": "auth", "timeUnixNano": "1790000000100000000", "attributes": [attribute("oauth.access_token", secrets[2])]]
            ],
        ]
        let collector = TraceCollector(directory: directory.path("collected"), settleUs: 0, now: { 1_790_000_001_000_000 })
        _ = try collector.accept(try ReceivedTraces(request: ["resourceSpans": [["scopeSpans": [["spans": [span]]]]]]))
        let finished = try #require(collector.finishAll().first)
        let journal = try String(contentsOfFile: collector.journalPath(of: trace), encoding: .utf8)
        let log = try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", try #require(finished.log)])
        for secret in secrets {
            #expect(!journal.contains(secret), "\(journal)")
            #expect(!log.stdoutText.contains(secret))
        }
        #expect(journal.contains("[redacted:attribute:api_key:") && journal.contains("gpt-test"))
        let mode = try FileManager.default.attributesOfItem(atPath: collector.journalPath(of: trace))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // Names that hold credentials, and names that only look like it (counts of tokens).
        for name in ["http.request.header.authorization", "api_key", "db.password", "oauth.access_token", "langfuse.secret_key"] {
            #expect(AttributeRedaction.isSecret(name), "\(name)")
        }
        for name in [
            "gen_ai.request.max_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.request.model", "session.id",
        ] {
            #expect(!AttributeRedaction.isSecret(name), "\(name)")
        }
    }

    @Test("a folder that cannot be made is a RecordingError naming it and --out")
    func unwritableFolder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try "not a folder".write(toFile: directory.path("file"), atomically: true, encoding: .utf8)
        let collector = TraceCollector(directory: directory.path("file/collected"), settleUs: 0, now: { 0 })
        do {
            _ = try TraceCollection(collector: collector, settleSeconds: 1)
            Issue.record("a folder under a file was made")
        } catch {
            #expect(error.code == .unwritable)
            #expect(error.message.hasPrefix("cannot create \(directory.path("file/collected"))/spans: "), "\(error.message)")
            #expect(error.hint?.contains("--out") == true)
        }
    }

    final class Batches: Sendable {
        private let batches = Mutex<[[TraceCollector.Finished]]>([])
        var count: Int { batches.withLock { $0.count } }
        func add(_ batch: [TraceCollector.Finished]) { batches.withLock { $0.append(batch) } }
    }
}
