import Foundation
import Interop
import ModelClients
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Importing OpenTelemetry traces and Inspect logs, exporting OTLP", .ownThread, .serialized)
struct TraceImportTests {
    @Test(
        "spans from the official OpenTelemetry SDK: OTLP/JSON, protobuf JSON, Tempo batches and Jaeger give the same runs", .tags(.python),
        .needsPython)
    func sdkTraces() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-otel")
        defer { scratch.remove() }
        let directory = scratch.url.path
        try await runPython("otel_traces.py", [directory])
        var trajectories: [[Trajectory]] = []
        for name in ["genai.otlp.json", "genai.proto.json", "genai.tempo.json", "genai.jaeger.json"] {
            let (outcome, states) = try await importRuns([(directory as NSString).appendingPathComponent(name)])
            #expect(outcome.importedCount == 2, "\(name)")
            #expect(states.allSatisfy { $0.anomalies.isEmpty })
            trajectories.append(states.map(Trajectory.init))
            // The model call seen by two instrumentation layers is imported once.
            #expect(states[0].decisions.count == 3, "\(name)")
            #expect(states[0].usage.inputTokens == 320, "\(name)")
            // The tools the agent span and every model call declare (gen_ai.tool.definitions), the
            // never-called web_search too, each once; trace 2 declares none: its tools are its calls.
            let tools = states[0].start?.tools ?? []
            #expect(tools.map(\.name) == ["lookup_order", "get_policy", "refund_order", "web_search"], "\(name)")
            #expect(tools.last?.description == "Search the web." && tools.last?.inputSchema["required"] == ["query"], "\(name)")
            #expect(states[1].start?.tools.map(\.name) == ["web_search"], "\(name)")
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
        let (captureOff, _) = try await importRuns([(directory as NSString).appendingPathComponent("genai.otlp.json")])
        let offNotes = captureOff.runs[1].warnings
        #expect(offNotes.contains { $0.contains("(web_search) carries no result (content capture off?): recorded as run, without output") })
        #expect(offNotes.contains { $0.contains("(web_search) carries no arguments, and no model call proposed it: recorded with {}") })
        #expect(first[1].stop == "budget_exhausted/token_budget")

        let (legacy, states) = try await importRuns([(directory as NSString).appendingPathComponent("openllmetry.otlp.json")])
        #expect(legacy.importedCount == 1)
        #expect(states.map(Trajectory.init).first?.calls == [#"get_weather({"city":"Paris"})"#])
        #expect(states.first?.finalAnswer == "It is 18 °C in Paris.")
        #expect(states.first?.start?.goal == "Weather in Paris?")
        // OpenLLMetry's llm.request.functions.N.*: web_search is declared, never called.
        let weatherTools = states.first?.start?.tools ?? []
        #expect(weatherTools.map(\.name) == ["get_weather", "web_search"])
        #expect(weatherTools.first?.description == "Current weather in a city.")
        #expect(weatherTools.first?.inputSchema["properties"]?["city"] == ["type": "string"])
        #expect(legacy.runs[0].warnings.isEmpty, "\(legacy.runs[0].warnings)")

        // The same traces made with the SDK's attribute length limit: every message attribute is
        // cut at 80 characters. The content in them is lost, and said so; the tools that ran and
        // the stop still come through (from the tool spans and the finish reasons).
        let (cut, cutStates) = try await importRuns([(directory as NSString).appendingPathComponent("truncated.otlp.json")])
        #expect(cut.importedCount == 2)
        #expect(
            cutStates.map { $0.executedCalls.map(\.tool).sorted() } == [["get_policy", "lookup_order", "refund_order"], ["web_search"]])
        #expect(cutStates.map(Trajectory.init).map(\.stop) == first.map(\.stop))
        let notes = cut.runs[0].warnings
        #expect(
            notes.filter { $0.contains("gen_ai.output.messages is not valid JSON, it ends too early (80 characters)") }.count == 3,
            "\(notes)")
        #expect(!notes.contains { $0.contains("content capture off") })
        // The cut tool definitions are lost, said once for the trace; the tools that ran are declared.
        #expect(cutStates[0].start?.tools.map(\.name).sorted() == ["get_policy", "lookup_order", "refund_order"])
        let cutDefinitions = notes.filter { $0.hasPrefix("gen_ai.tool.definitions is not a JSON list of tool definitions on spans") }
        #expect(cutDefinitions.count == 1 && cutDefinitions[0].contains("it ends too early (80 characters)"), "\(notes)")
    }

    @Test(
        "Inspect AI logs written by Inspect: one run per sample and epoch, tool errors, limits, scores kept", .tags(.python), .needsPython)
    func inspectLogs() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-inspect")
        defer { scratch.remove() }
        let directory = scratch.url.path
        try await runPython("inspect_logs.py", [directory])
        func files(_ folder: String) throws -> [String] {
            let path = (directory as NSString).appendingPathComponent(folder)
            return try FileManager.default.contentsOfDirectory(atPath: path).map { (path as NSString).appendingPathComponent($0) }
        }
        let (fromJSON, jsonStates) = try await importRuns(try files("json"))
        let (fromEval, evalStates) = try await importRuns(try files("deflate"))
        #expect(fromJSON.importedCount == 2 && fromEval.importedCount == 2)
        #expect(jsonStates.map(Trajectory.init) == evalStates.map(Trajectory.init))
        let add = try #require(jsonStates.first { $0.start?.source?.id == "add:1" })
        #expect(add.start?.source?.format == "inspect")
        #expect(Trajectory(add).calls == [#"add({"x":1,"y":2})"#])
        #expect(add.finalAnswer == "1 + 2 = 3")
        #expect(add.start?.source?.metadata?["scores"] != nil)
        // The tools the model was offered (each model event's tools), the never-called web_search too;
        // Inspect moved its long description to the sample's attachments, where it is read from.
        let offered = add.start?.tools ?? []
        #expect(offered.map(\.name) == ["add", "divide", "web_search"])
        #expect(
            offered.last?.description.hasPrefix("Search the web for pages that match a query") == true, "\(offered.last?.description ?? "")"
        )
        #expect(offered.first?.inputSchema["required"] == ["x", "y"])
        #expect(fromJSON.runs.allSatisfy { $0.warnings.allSatisfy { !$0.contains("user turn") } })
        let divide = try #require(jsonStates.first { $0.start?.source?.id == "divide:1" })
        #expect(divide.executedCalls.first?.lastResult?.status == .error)
        #expect(divide.stop?.reason == .budgetExhausted && divide.stop?.limit == .maxSteps)
        // Inspect's own .eval archives compress their entries with zstd (zip method 93).
        let evalFiles = try files("eval")
        let (fromZstd, zstdStates) = try await importRuns(evalFiles)
        #expect(fromZstd.importedCount == 2 && fromZstd.failedInputs.isEmpty)
        #expect(zstdStates.map(Trajectory.init) == jsonStates.map(Trajectory.init))
        #expect(zstdStates.map(\.finalAnswer) == jsonStates.map(\.finalAnswer))
        #expect(zstdStates.map { $0.start?.tools.map(\.name) } == jsonStates.map { $0.start?.tools.map(\.name) })

        // A sample whose messages end on a user turn nobody answered: unfinished, with a note.
        let (cutOff, cutOffStates) = try await importRuns(try files("cut"))
        #expect(cutOff.importedCount == 1)
        #expect(cutOffStates.first?.stop == nil && cutOff.runs.first?.stop == nil)
        #expect(cutOffStates.first?.start?.source?.stop == "ends on a user turn")
        #expect(cutOff.runs.first?.warnings.contains { $0.hasPrefix("the transcript ends on a user turn (message 3") } == true)

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
        let (damagedOutcome, _) = try await importRuns([damaged])
        // The damaged sample is reported; the archive's other sample still imports.
        let failure = try #require(damagedOutcome.runs.compactMap(\.error).first ?? damagedOutcome.failedInputs.first)
        #expect(failure.code == .badArchive)
        #expect(failure.message.contains("damaged.eval") && failure.message.contains("samples/"), "\(failure.message)")
        #expect(damagedOutcome.importedCount == 1)
    }

    @Test(
        "a span or message time no log can hold is an error naming the span (or the event), never a trap or a log no reader takes",
        arguments: [
            (#"1e300"#, "startTimeUnixNano is 1e+300"), (#""-5000000000000000000""#, #"startTimeUnixNano is "-5000000000000000000""#),
            (#""18446744073709551615""#, #"startTimeUnixNano is "18446744073709551615""#), (#"1.5"#, "startTimeUnixNano is 1.5"),
        ])
    func timesNoLogHolds(start: String, named: String) async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-times")
        defer { scratch.remove() }
        let span = { (id: String, parent: String, start: String) in
            #"{"traceId":"0123456789abcdef0123456789abcdef","spanId":"\#(id)","parentSpanId":"\#(parent)","name":"chat m","#
                + #""startTimeUnixNano":\#(start),"endTimeUnixNano":"2000000000","attributes":[{"key":"gen_ai.operation.name","#
                + #""value":{"stringValue":"chat"}}]}"#
        }
        let request = { (start: String) in
            #"{"resourceSpans":[{"scopeSpans":[{"spans":["# + span("1111111111111111", "", #""1000000000""#) + ","
                + span("2222222222222222", "1111111111111111", start) + "]}]}]}"
        }
        let path = scratch.path("trace.json")
        try Data(request(start).utf8).write(to: URL(fileURLWithPath: path))
        let (outcome, _) = try await importRuns([path], format: .otlp)
        let error = try #require(outcome.failedInputs.first, "\(outcome.runs.map(\.log))")
        #expect(outcome.importedCount == 0)
        #expect(
            error.message.hasPrefix(
                "\(path): span 2222222222222222 of trace 0123456789abcdef0123456789abcdef: \(named), which is no time: "),
            "\(error.message)")
        #expect(error.message.hasSuffix("nanoseconds since 1970, a whole number from 0 to 9007199254740991999"), "\(error.message)")
        // A receiver (`collect`, `record`'s) refuses the request with the same words.
        #expect {
            _ = try ReceivedTraces(request: try JSONParser.parse(Array(request(start).utf8)))
        } throws: { ($0 as? ImportError)?.message.contains("span 2222222222222222 of trace") == true }
        // The same trace with a time that is one imports.
        try Data(request(#""3000000000""#).utf8).write(to: URL(fileURLWithPath: path))
        #expect(try await importRuns([path], format: .otlp).outcome.importedCount == 1)
    }

    @Test("a token count no Int holds (doubleValue 1e300, \"inf\") is no count: the model call is imported without it, not a trap")
    func tokenCountsNoIntHolds() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-tokens")
        defer { scratch.remove() }
        let path = scratch.path("trace.json")
        try Data(
            (#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"1111111111111111","#
                + #""name":"chat m","startTimeUnixNano":"1000000000","endTimeUnixNano":"2000000000","attributes":["#
                + #"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},"#
                + #"{"key":"gen_ai.usage.input_tokens","value":{"doubleValue":1e300}},"#
                + #"{"key":"gen_ai.usage.output_tokens","value":{"doubleValue":"inf"}}]}]}]}]}"#).utf8
        ).write(to: URL(fileURLWithPath: path))
        let (outcome, states) = try await importRuns([path], format: .otlp)
        #expect(outcome.importedCount == 1, "\(outcome.failedInputs) \(outcome.runs.compactMap(\.error))")
        #expect(states.first?.usage.totalTokens == 0)
    }

    @Test("Jaeger: a start time of Int.max with a duration, and a message timestamp of 1e300, are errors, not traps")
    func jaegerAndTranscriptTimes() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-times")
        defer { scratch.remove() }
        let jaeger = scratch.path("jaeger.json")
        try Data(
            (#"{"data":[{"traceID":"0123456789abcdef0123456789abcdef","processes":{},"spans":[{"traceID":"0123456789abcdef0123456789abcdef","#
                + #""spanID":"1111111111111111","operationName":"chat m","startTime":\#(Int.max),"duration":10,"#
                + #""tags":[{"key":"gen_ai.operation.name","value":"chat"}]}]}]}"#).utf8
        ).write(to: URL(fileURLWithPath: jaeger))
        let (fromJaeger, _) = try await importRuns([jaeger], format: .jaeger)
        let jaegerError = try #require(fromJaeger.failedInputs.first)
        #expect(
            jaegerError.message.contains(
                "span 1111111111111111 of trace 0123456789abcdef0123456789abcdef: startTime is \(Int.max), which is no time: microseconds"),
            "\(jaegerError.message)")
        // A transcript's own times go through the log writer, which refuses what no reader takes.
        let transcript = scratch.path("chat.json")
        try Data(
            #"[{"role":"user","content":"hi","timestamp":1e300},{"role":"assistant","content":"hello","timestamp":1e300}]"#.utf8
        ).write(to: URL(fileURLWithPath: transcript))
        let (fromTranscript, _) = try await importRuns([transcript], format: .messages)
        let transcriptError = try #require(fromTranscript.runs.first?.error, "\(fromTranscript.runs.map(\.log))")
        #expect(fromTranscript.importedCount == 0)
        #expect(
            transcriptError.message.contains("has time_us \(Int.max), which is not a whole number from 0 to 9007199254740991 (2^53 − 1)"),
            "\(transcriptError.message)")
    }

    @Test("declared tools: gen_ai.tool.definitions as a structured list, on an event, in OpenAI's shape; OpenLLMetry's cut parameters")
    func declaredToolForms() async throws {
        func attribute(_ key: String, _ value: JSONValue) -> JSONValue { ["key": .string(key), "value": value] }
        func text(_ value: String) -> JSONValue { ["stringValue": .string(value)] }
        func list(_ items: [JSONValue]) -> JSONValue { ["arrayValue": ["values": .array(items)]] }
        func kvlist(_ pairs: KeyValuePairs<String, JSONValue>) -> JSONValue {
            ["kvlistValue": ["values": .array(pairs.map { attribute($0.key, $0.value) })]]
        }
        func span(
            _ trace: String, _ id: String, parent: String? = nil, _ name: String, at start: Int, _ attributes: [JSONValue],
            events: [JSONValue] = []
        ) -> JSONValue {
            [
                "traceId": .string(trace), "spanId": .string(id), "parentSpanId": parent.map { .string($0) } ?? "", "name": .string(name),
                "startTimeUnixNano": .string("\(1_790_000_000 + start)000000000"),
                "endTimeUnixNano": .string("\(1_790_000_000 + start)500000000"),
                "attributes": .array(attributes), "events": .array(events),
            ]
        }
        func definition(_ name: String, _ description: String, required: [String]) -> JSONValue {
            kvlist([
                "type": text("function"), "name": text(name), "description": text(description),
                "parameters": kvlist(["type": text("object"), "required": list(required.map(text))]),
            ])
        }
        let genAI = String(repeating: "a", count: 32)
        let legacy = String(repeating: "b", count: 32)
        let spans: [JSONValue] = [
            // The structured form the conventions prefer, on the agent span.
            span(
                genAI, "0000000000000001", "invoke_agent orders", at: 0,
                [
                    attribute("gen_ai.operation.name", text("invoke_agent")),
                    attribute("gen_ai.tool.definitions", list([definition("lookup_order", "Look up an order.", required: ["order_id"])])),
                ]),
            // On the model call's event; lookup_order again, which keeps its first definition.
            span(
                genAI, "0000000000000002", parent: "0000000000000001", "chat m", at: 1,
                [
                    attribute("gen_ai.operation.name", text("chat")),
                    attribute(
                        "gen_ai.output.messages",
                        text(
                            #"[{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "lookup_order", "arguments": {"order_id": "A-1"}}]}]"#
                        )),
                ],
                events: [
                    [
                        "name": "gen_ai.client.inference.operation.details", "timeUnixNano": "1790000001000000000",
                        "attributes": .array([
                            attribute(
                                "gen_ai.tool.definitions",
                                list([
                                    definition("web_search", "Search the web.", required: ["query"]),
                                    definition("lookup_order", "Another description.", required: []),
                                ]))
                        ]),
                    ]
                ]),
            span(
                genAI, "0000000000000003", parent: "0000000000000001", "execute_tool lookup_order", at: 2,
                [
                    attribute("gen_ai.operation.name", text("execute_tool")), attribute("gen_ai.tool.name", text("lookup_order")),
                    attribute("gen_ai.tool.call.id", text("c1")), attribute("gen_ai.tool.call.result", text(#"{"status": "shipped"}"#)),
                ]),
            // A JSON string in OpenAI's request shape.
            span(
                genAI, "0000000000000004", parent: "0000000000000001", "chat m", at: 3,
                [
                    attribute("gen_ai.operation.name", text("chat")),
                    attribute(
                        "gen_ai.tool.definitions",
                        text(
                            #"[{"type": "function", "function": {"name": "cancel_order", "description": "Cancel an order.", "parameters": {"type": "object"}}}]"#
                        )),
                    attribute(
                        "gen_ai.output.messages",
                        text(
                            #"[{"role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": "It has shipped."}]}]"#)
                    ),
                ]),
            // OpenLLMetry: a function whose parameters an exporter cut short.
            span(
                legacy, "0000000000000005", "openai.chat", at: 0,
                [
                    attribute("llm.request.type", text("chat")), attribute("gen_ai.completion.0.content", text("Escalated.")),
                    attribute("gen_ai.completion.0.finish_reason", text("stop")),
                    attribute("llm.request.functions.0.name", text("escalate")),
                    attribute("llm.request.functions.0.parameters", text(#"{"type": "object", "properties": {"reas"#)),
                    attribute("llm.request.functions.1.name", text("close_ticket")),
                    attribute("llm.request.functions.1.description", text("Close the ticket.")),
                ]),
        ]
        let request: JSONValue = ["resourceSpans": [["scopeSpans": [["spans": .array(spans)]]]]]
        let scratch = try TemporaryDirectory("agent-eval-interop-tool-definitions")
        defer { scratch.remove() }
        let (outcome, states) = try await importRuns([try write(JSONWriter.encodeString(request), to: scratch.url.path, "tools.json")])
        #expect(outcome.importedCount == 2)
        let orders = try #require(states.first { $0.start?.source?.id == genAI })
        let tools = orders.start?.tools ?? []
        #expect(tools.map(\.name) == ["lookup_order", "web_search", "cancel_order"])
        #expect(tools.map(\.description) == ["Look up an order.", "Search the web.", "Cancel an order."])
        #expect(tools.first?.inputSchema["required"] == ["order_id"])
        #expect(orders.executedToolNames == ["lookup_order"] && orders.stop?.reason == .success)
        let escalation = try #require(states.first { $0.start?.source?.id == legacy })
        #expect(escalation.start?.tools.map(\.name) == ["escalate", "close_ticket"])
        #expect(escalation.start?.tools.map(\.inputSchema) == [["type": "object"], ["type": "object"]])
        let notes = try #require(outcome.runs.first { $0.sourceId == legacy }).warnings
        #expect(
            notes.contains {
                $0.contains("llm.request.functions.0.parameters is not valid JSON, it ends too early") && $0.contains("escalate")
            },
            "\(notes)")
    }

    @Test(
        "a trace that does not show how its run ended is no success: a last reply not captured, a failed model call; a reply on the operation-details event is read"
    )
    func unseenEnds() async throws {
        func attribute(_ key: String, _ value: String) -> JSONValue { ["key": .string(key), "value": ["stringValue": .string(value)]] }
        func span(
            _ trace: String, _ id: String, parent: String? = nil, _ name: String, at start: Int, _ attributes: [JSONValue],
            events: [JSONValue] = [], error: String? = nil
        ) -> JSONValue {
            var value = JSONObject([
                ("traceId", .string(trace)), ("spanId", .string(id)), ("parentSpanId", parent.map { .string($0) } ?? ""),
                ("name", .string(name)), ("startTimeUnixNano", .string("\(1_790_000_000 + start)000000000")),
                ("endTimeUnixNano", .string("\(1_790_000_000 + start)500000000")), ("attributes", .array(attributes)),
                ("events", .array(events)),
            ])
            if let error { value["status"] = ["code": 2, "message": .string(error)] }
            return .object(value)
        }
        func agent(_ trace: String) -> JSONValue {
            span(trace, trace.prefix(15) + "1", "invoke_agent ops", at: 0, [attribute("gen_ai.operation.name", "invoke_agent")])
        }
        let chat = attribute("gen_ai.operation.name", "chat")
        let proposed = String(repeating: "a", count: 32)
        let failed = String(repeating: "b", count: 32)
        let onEvent = String(repeating: "c", count: 32)
        let stopped = String(repeating: "d", count: 32)
        let spans: [JSONValue] = [
            // Content capture off, and the reply asked for tools no span shows.
            agent(proposed),
            span(
                proposed, "aaaaaaaaaaaaaaa2", parent: "aaaaaaaaaaaaaaa1", "chat m", at: 1,
                [chat, attribute("gen_ai.response.finish_reasons", #"["tool_calls"]"#)]),
            // The model call failed (a rate limit) inside an agent span that is fine.
            agent(failed),
            span(
                failed, "bbbbbbbbbbbbbbb2", parent: "bbbbbbbbbbbbbbb1", "chat m", at: 1, [chat, attribute("error.type", "RateLimitError")],
                error: "429 rate limited"),
            // The reply on the operation-details event, as the current conventions allow.
            agent(onEvent),
            span(
                onEvent, "ccccccccccccccc2", parent: "ccccccccccccccc1", "chat m", at: 1, [chat],
                events: [
                    [
                        "name": "gen_ai.client.inference.operation.details", "timeUnixNano": "1790000001000000000",
                        "attributes": .array([
                            attribute(
                                "gen_ai.output.messages",
                                #"[{"role": "assistant", "finish_reason": "tool_call", "parts": [{"type": "tool_call", "id": "c1", "name": "delete_db", "arguments": {}}]}]"#
                            )
                        ]),
                    ]
                ]),
            // Capture off, but the reply says it stopped: an answer whose text is not known.
            agent(stopped),
            span(
                stopped, "ddddddddddddddd2", parent: "ddddddddddddddd1", "chat m", at: 1,
                [chat, attribute("gen_ai.response.finish_reasons", #"["stop"]"#)]),
        ]
        let request: JSONValue = ["resourceSpans": [["scopeSpans": [["spans": .array(spans)]]]]]
        let scratch = try TemporaryDirectory("agent-eval-interop-unseen-ends")
        defer { scratch.remove() }
        let (outcome, states) = try await importRuns([try write(JSONWriter.encodeString(request), to: scratch.url.path, "unseen.json")])
        #expect(outcome.importedCount == 4)
        func state(_ trace: String) throws -> RunState { try #require(states.first { $0.start?.source?.id == trace }) }
        let unseen = try state(proposed).stop
        #expect(
            unseen?.isModelFailure == true && unseen?.error?.contains(RunStopped.replyNotCapturedPhrase) == true,
            "\(String(describing: unseen))")
        #expect(unseen?.error?.contains("its finish reason is tool_calls") == true)
        let rateLimited = try state(failed)
        #expect(rateLimited.stop?.error == "model failed: model call bbbbbbbbbbbbbbb2 failed: RateLimitError: 429 rate limited")
        #expect(rateLimited.decisions.isEmpty, "a failed model call made no decision")
        let read = try state(onEvent)
        #expect(read.decisions.count == 1 && read.stop?.reason != .success, "\(String(describing: read.stop))")
        if case .valid(.toolCalls(let calls)) = read.decisions.first?.outcome {
            #expect(calls.map(\.name) == ["delete_db"])
        } else {
            Issue.record("the reply on the event is a decision with its call: \(String(describing: read.decisions.first?.outcome))")
        }
        #expect(try state(stopped).stop?.reason == .success)
    }

    @Test(
        "nothing read is dropped unsaid: spans without ids are named in the run's warnings, a span sent twice is read once (a differing copy said), spans that are no list are an error"
    )
    func spansLeftOutAreSaid() async throws {
        let trace = String(repeating: "e", count: 32)
        func span(_ id: String, _ name: String, _ operation: String, at start: Int, _ more: [JSONValue] = []) -> JSONValue {
            [
                "traceId": .string(trace), "spanId": .string(id), "name": .string(name),
                "startTimeUnixNano": .string("\(1_790_000_000 + start)000000000"),
                "endTimeUnixNano": .string("\(1_790_000_000 + start)500000000"),
                "attributes": .array([["key": "gen_ai.operation.name", "value": ["stringValue": .string(operation)]]] + more),
            ]
        }
        let answer: JSONValue = [
            "key": "gen_ai.output.messages",
            "value": ["stringValue": #"[{"role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": "Done."}]}]"#],
        ]
        let chat = span("00000000000000e1", "chat m", "chat", at: 1, [answer])
        let tool = span("0000000000000000", "execute_tool delete_db", "execute_tool", at: 0)
        func request(_ spans: [JSONValue]) -> String {
            JSONWriter.encodeString(["resourceSpans": [["scopeSpans": [["spans": .array(spans)]]]]])
        }
        let scratch = try TemporaryDirectory("agent-eval-interop-left-out")
        defer { scratch.remove() }
        // A journal: the same request twice (an exporter's retry), and a tool span with a zero id.
        let journal = try write(
            [request([chat, tool]), request([chat]), request([span("00000000000000e1", "chat m", "chat", at: 1)])].joined(separator: "\n")
                + "\n",
            to: scratch.url.path, "journal.otlp.jsonl")
        let (outcome, states) = try await importRuns([journal], format: .otlp)
        #expect(states.count == 1 && states.first?.decisions.count == 1, "read once, not once a copy")
        let warnings = outcome.runs.first?.warnings ?? []
        #expect(warnings.contains { $0.contains("1 span of \(journal) had no trace id or no span id") }, "\(warnings)")
        #expect(warnings.contains { $0.contains("came again with other content (00000000000000e1)") }, "\(warnings)")
        // The run may lack the tool the span left out ran: written unfinished, never a stop a case could pass on.
        #expect(states.first?.stop == nil, "\(String(describing: states.first?.stop))")
        #expect(states.first?.start?.source?.stop == "incomplete")
        #expect(warnings.contains { $0.contains("had no ids and were left out: the run is written unfinished") }, "\(warnings)")
        // A list that is not a list is no empty request.
        let shapeless = try JSONParser.parse(Array(#"{"resourceSpans":[{"scopeSpans":[{"spans":{"traceId":"x"}}]}]}"#.utf8))
        #expect {
            _ = try ReceivedTraces(request: shapeless)
        } throws: { error in
            (error as? ImportError)?.message.contains("resourceSpans[0].scopeSpans[0].spans is an object, not a list") == true
        }
        let file = try write(JSONWriter.encodeString(shapeless), to: scratch.url.path, "shapeless.json")
        let (refused, _) = try await importRuns([file], format: .otlp)
        #expect(refused.importedCount == 0)
    }

    @Test(
        "export then import gives every fixture run's trajectory back, in either version of the conventions",
        arguments: OTLPExporter.Conventions.allCases)
    func roundTrip(conventions: OTLPExporter.Conventions) async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-roundtrip")
        defer { scratch.remove() }
        let directory = scratch.url.path
        let logs = try fixtureLogs()
        #expect(logs.count >= 5)
        for log in logs {
            let name = (log as NSString).lastPathComponent
            let request = try OTLPExporter(includeContent: true, conventions: conventions).request(logs: [log])
            let file = try write(JSONWriter.encodeString(request), to: directory, "\(name).json")
            let (outcome, states) = try await importRuns([file], format: .otlp)
            #expect(outcome.importedCount == 1, "\(name)")
            var original = RunState()
            _ = try LogReader(path: log).forEachEvent { RunState.reduce(into: &original, $0.event) }
            #expect(states.map(Trajectory.init) == [Trajectory(original)], "\(name)")
            // The model's replies in their order too: a fixture's scripted latencies reach back
            // past the run's start, so the export starts its model calls together.
            #expect(states.map(Self.replyOrder) == [Self.replyOrder(original)], "\(name)")
            // Every attempt of every call that ran, as it went: status, error, whether to retry,
            // how long it took (a retried call is not one clean attempt).
            #expect(states.map(Self.attempts) == [Self.attempts(original)], "\(name)")
            // A result that is a string comes back as that string, not as its JSON (quotes and all).
            // (One stored as content in the log comes back inline when it is small: compared as a string.)
            if conventions == .latest {
                let back = Dictionary((states.first?.calls ?? []).map { ($0.id, $0.lastResult?.output) }) { first, _ in first }
                for call in original.calls where call.lastResult?.status == .ok {
                    if let output = call.lastResult?.output {
                        #expect(back[call.id] == output, "\(name) \(call.id)")
                    } else if case .string(let text)?? = back[call.id] {
                        #expect(!text.hasPrefix("\""), "\(name) \(call.id): \(text.prefix(40))")
                    }
                }
            }
        }
    }

    /// Each executed call's attempts: `tool#attempt status error retryable duration`.
    static func attempts(_ state: RunState) -> [String] {
        state.calls.flatMap { call in
            call.results.map {
                "\(call.tool)#\($0.attempt) \($0.status) \($0.error ?? "-") \($0.isRetryable.map(String.init) ?? "-") \($0.durationUs)"
            }
        }
    }

    /// The decisions that called tools or answered, in order (`lookup_order+get_customer`, `answer`).
    static func replyOrder(_ state: RunState) -> [String] {
        state.decisions.compactMap { record in
            guard case .valid(let decision) = record.outcome else { return nil }
            switch decision {
            case .toolCalls(let calls): return calls.map(\.name).joined(separator: "+")
            case .answer: return "answer"
            case .askHuman, .stop: return nil
            }
        }
    }

    @Test("a real OTLP receiver parses the export with the official protobuf definitions; a 503 is retried", .tags(.python), .needsPython)
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
        // Each policy verdict: an apply_guardrail span under its decision, its result in the policy's own words.
        let guardrails = spans.filter { $0["attributes"]?["gen_ai.operation.name"] == "apply_guardrail" }
        #expect(!guardrails.isEmpty)
        let decisions = Set(spans.filter { $0["attributes"]?["gen_ai.operation.name"] == "chat" }.compactMap { $0["span_id"]?.stringValue })
        for guardrail in guardrails {
            #expect(decisions.contains(guardrail["parent_span_id"]?.stringValue ?? ""))
            #expect(guardrail["attributes"]?["gen_ai.tool.call.id"]?.stringValue != nil)
            let decision = (guardrail["events"]?.arrayValue ?? []).first { $0["name"] == "gen_ai.guardrail.result" }?["attributes"]?[
                "gen_ai.guardrail.decision"]?.stringValue
            #expect(["allow", "deny", "approval_required"].contains(decision ?? ""), "\(guardrail)")
        }
        #expect(
            guardrails.contains { ($0["events"]?.arrayValue ?? []).contains { $0["attributes"]?["gen_ai.guardrail.decision"] == "deny" } })
        // Each decision is given the conversation so far and the agent's instructions.
        let chats = spans.filter { $0["attributes"]?["gen_ai.operation.name"] == "chat" }
        #expect(chats.allSatisfy { $0["attributes"]?["gen_ai.input.messages"]?.stringValue != nil })
        #expect(chats.contains { $0["attributes"]?["gen_ai.system_instructions"]?.stringValue?.contains("support agent") == true })
        #expect(chats.contains { $0["attributes"]?["gen_ai.input.messages"]?.stringValue?.contains("tool_call_response") == true })
        // Without --include-content no arguments, results or messages leave the machine.
        let bare = JSONWriter.encodeString(try OTLPExporter().request(logs: logs))
        #expect(!bare.contains("gen_ai.tool.call.arguments") && !bare.contains("gen_ai.output.messages"))
        #expect(!bare.contains("gen_ai.system_instructions") && !bare.contains("gen_ai.input.messages"))
    }

    @Test("v1.36 export: gen_ai.system and content events, parsed by the official protobuf definitions", .tags(.python), .needsPython)
    func version136() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-v136")
        defer { scratch.remove() }
        let receiver = try await OTLPReceiver(directory: scratch.url.path)
        defer { receiver.stop() }
        let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
        let request = try OTLPExporter(includeContent: true, conventions: .v1_36).request(logs: [log])
        #expect(try await HTTPPoster(maxRetries: 2).post(JSONWriter.encode(request), to: receiver.endpoint).status == 200)
        let spans = try #require(try receiver.receivedSpans().first)
        let attributes = spans.compactMap { $0["attributes"]?.objectValue }
        // No attribute of the later conventions.
        for key in [
            "gen_ai.provider.name", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
            "gen_ai.tool.definitions",
            "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
        ] {
            #expect(!attributes.contains { $0[key] != nil }, "\(key)")
        }
        #expect(attributes.filter { $0["gen_ai.system"] == "scripted" }.count == 4)  // the run and its 3 decisions
        #expect(!spans.contains { $0["attributes"]?["gen_ai.operation.name"] == "apply_guardrail" })
        let chats = spans.filter { $0["attributes"]?["gen_ai.operation.name"] == "chat" }
        let last = try #require(chats.last)
        let events = (last["events"]?.arrayValue ?? []).map { $0["name"]?.stringValue ?? "" }
        #expect(
            events.filter { $0.hasPrefix("gen_ai.") } == [
                "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.tool.message",
                "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.choice",
            ])
        // v1.36 has no guardrail spans: each verdict is an event of the decision that proposed the call.
        let verdicts = chats.flatMap { $0["events"]?.arrayValue ?? [] }.filter { $0["name"] == "agent_eval.policy.verdict" }
        #expect(
            verdicts.compactMap { $0["attributes"]?["agent_eval.verdict"]?.stringValue } == ["allow", "allow", "approval_required", "deny"])
        let choice = try #require((last["events"]?.arrayValue ?? []).first { $0["name"] == "gen_ai.choice" })
        let body = try JSONParser.parse(Array((choice["attributes"]?["body"]?.stringValue ?? "").utf8))
        #expect(body["finish_reason"] == "stop")
        #expect(body["message"]?["content"]?.stringValue?.contains("rf-9") == true)
    }

    @Test("the conventions' version: --semconv first, then OTEL_SEMCONV_STABILITY_OPT_IN when set, else latest")
    func conventionsChoice() {
        let variable = OTLPExporter.Conventions.optInVariable
        #expect(OTLPExporter.Conventions.resolve(flag: nil, environment: [:]) == .latest)
        #expect(OTLPExporter.Conventions.resolve(flag: nil, environment: [variable: "http, gen_ai_latest_experimental"]) == .latest)
        #expect(OTLPExporter.Conventions.resolve(flag: nil, environment: [variable: "http,database"]) == .v1_36)
        #expect(OTLPExporter.Conventions.resolve(flag: "latest", environment: [variable: "http"]) == .latest)
        #expect(OTLPExporter.Conventions.resolve(flag: "v1.36", environment: [variable: "gen_ai_latest_experimental"]) == .v1_36)
        #expect(OTLPExporter.Conventions.resolve(flag: "gen_ai_latest_experimental", environment: [:]) == .latest)
        #expect(OTLPExporter.Conventions.resolve(flag: "1.37", environment: [:]) == nil)
    }

    @Test("eval outcomes from a run report ride on the run's span as gen_ai.evaluation.result events", .tags(.python), .needsPython)
    func evaluationEvents() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-evaluations")
        defer { scratch.remove() }
        let receiver = try await OTLPReceiver(directory: scratch.url.path)
        defer { receiver.stop() }
        let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
        // A report as `agent-eval run --json-out` writes it: one case passed, one failed an expectation.
        let report: JSONValue = [
            "cases": [
                ["case_id": "refund-ok", "checks": 3, "runs": [["log": .string(log), "outcome": "pass", "failures": []]]],
                [
                    "case_id": "refund-small",
                    "runs": [
                        [
                            "log": .string(log), "outcome": "fail",
                            "failures": [
                                ["expectation": "arguments.refund_order", "expected": "amount_cents at most 1000", "actual": "4999"]
                            ],
                        ]
                    ],
                ],
            ]
        ]
        let evaluations = OTLPExporter.EvaluationResult.fromReport(report)
        let request = try OTLPExporter(evaluations: evaluations).request(logs: [log])
        let response = try await HTTPPoster(maxRetries: 2).post(JSONWriter.encode(request), to: receiver.endpoint)
        #expect(response.status == 200)
        let spans = try #require(try receiver.receivedSpans().first)
        let root = try #require(spans.first { $0["attributes"]?["gen_ai.operation.name"] == "invoke_agent" })
        let results = (root["events"]?.arrayValue ?? []).filter { $0["name"] == "gen_ai.evaluation.result" }.map { $0["attributes"] ?? [:] }
        #expect(
            results.map { $0["gen_ai.evaluation.name"]?.stringValue ?? "" } == [
                "agent-eval.case refund-ok", "agent-eval.case refund-small", "agent-eval.arguments.refund_order",
            ])
        #expect(results.map { $0["gen_ai.evaluation.score.label"]?.stringValue ?? "" } == ["pass", "fail", "fail"])
        #expect(results.map { $0["gen_ai.evaluation.score.value"]?.doubleValue ?? -1 } == [1, 0, 0])
        #expect(results[2]["gen_ai.evaluation.explanation"] == "expected amount_cents at most 1000; actual 4999")
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
