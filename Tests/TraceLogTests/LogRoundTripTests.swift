import Foundation
import TestSupport
import Testing
import TraceLog

@testable import TraceCore

@Suite("Writing and reading logs")
struct LogRoundTripTests {
    @Test("a quickly compressed blob is one gzip member that gzip and GzipData both read back byte for byte, on any thread")
    func quickGzip() async throws {
        var generator = SeededGenerator(seed: 7)
        let text = Array((0..<5_000).map { "line \($0): {\"tool\":\"lookup_order\",\"n\":\($0 % 17)}\n" }.joined().utf8)
        let noise = (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try await TemporaryDirectory.with { directory in
            for (name, bytes) in [("empty", [UInt8]()), ("text", text), ("noise", noise)] {
                let blob = try GzipData.compressQuickly(bytes)
                #expect(try GzipData.decompress(blob, path: name) == bytes)
                let path = directory.path("\(name).gz")
                try Data(blob).write(to: URL(fileURLWithPath: path))
                let unzipped = try await Subprocess.run(gzipPath, ["-dc", path])
                #expect(unzipped.status == 0)
                #expect(unzipped.stdout == bytes)
                if name == "text" { #expect(blob.count < bytes.count / 4) }
            }
        }
        // Each thread keeps a compressor of its own: many at once still give the same bytes.
        let expected = try GzipData.compressQuickly(text)
        let blobs = try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<8 { group.addTask { try GzipData.compressQuickly(text) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(blobs.allSatisfy { $0 == expected })
    }

    @Test(
        "gzip data of several members is read whole, as gzip reads it; bytes after the last member that are none, or a cut member, are errors"
    )
    func severalMembers() async throws {
        try await TemporaryDirectory.with { directory in
            let first = Array(#"{"resourceSpans":[1]}"#.utf8)
            let second = Array(#"{"resourceSpans":[2]}"#.utf8)
            let joined = try GzipData.compress(first) + GzipData.compressQuickly(second)
            #expect(try GzipData.decompress(joined, path: "body") == first + second)
            let path = directory.path("joined.gz")
            try Data(joined).write(to: URL(fileURLWithPath: path))
            #expect(try await Subprocess.run(gzipPath, ["-dc", path]).stdout == first + second, "gzip reads it the same")
            #expect {
                _ = try GzipData.decompress(joined + Array("junk".utf8), path: "body")
            } throws: { error in
                (error as? LogError)?.message.contains("4 bytes after the gzip member at byte \(joined.count) are no gzip member") == true
            }
            #expect(throws: LogError.self) { _ = try GzipData.decompress(Array(joined.dropLast(3)), path: "body") }
            // The limit holds over all the members together.
            #expect(throws: LogError.self) { _ = try GzipData.decompress(joined, limit: first.count + 1, path: "body") }
        }
    }

    @Test("a new log gets the directories leading to it; a file in the way is a clear error")
    func createsDirectories() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("a/b/c/run.jsonl.gz")
            try LogWriter.withWriter(creating: path, runId: "r") { writer in
                _ = try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
            }
            #expect(try LogReader(path: path).readAll().events.count == 1)
            try "x".write(toFile: directory.path("file"), atomically: true, encoding: .utf8)
            #expect(throws: LogError.self) { try LogWriter.create(at: directory.path("file/run.jsonl.gz"), runId: "r") }
            do {
                _ = try LogWriter.create(at: directory.path("file/run.jsonl.gz"), runId: "r")
            } catch let error as LogError {
                #expect(error.code == .writeFailed)
                #expect(error.message == "cannot create the log's directory: \(directory.path("file")) is a file, not a directory")
            }
        }
    }

    @Test("every event kind round-trips through the log, unknown kinds included")
    func roundTrip() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            let (liveState, _, events) = try writeSampleLog(at: path)
            let kinds = Set(events.map(\.event.kind))
            #expect(kinds.isSuperset(of: EventPayload.knownKinds))
            #expect(kinds.contains("annotation_added"))
            let unknown = try #require(events.first { $0.event.kind == "annotation_added" })
            #expect(
                unknown.event.payload
                    == .unknown(
                        kind: "annotation_added", data: ["note": "written by a newer agent-eval", "tags": ["x", 1, 2.5, nil, true]]))
            // The state rebuilt from the log is the state the writer held live.
            #expect(RunState(folding: events.map(\.event)) == liveState)
            #expect(events.map(\.event.sequence) == Array(0..<events.count))
        }
    }

    @Test("the real zcat reads the log and gzip -t accepts it")
    func realGzipReadsIt() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            _ = try writeSampleLog(at: path, options: LogWriter.Options(memberBound: 600))
            #expect(try memberOffsets(path).count > 3)
            let test = try await Subprocess.run(gzipPath, ["-t", path])
            #expect(test.status == 0, "gzip -t: \(test.stderr)")
            let cat = try await Subprocess.run(gzipPath, ["-dc", path])
            var lines: [[UInt8]] = []
            _ = try LogReader(path: path).forEachLine { line, _ in lines.append(Array(line)) }
            #expect(cat.stdout == Array(lines.joined(separator: [0x0A])) + [0x0A])
        }
    }

    @Test("re-encoding a read event gives its line byte for byte")
    func reencodeIsIdentity() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            _ = try writeSampleLog(at: path)
            var count = 0
            _ = try LogReader(path: path).forEachLine { line, recorded in
                #expect(recorded.event.encodedLine() == Array(line))
                count += 1
            }
            #expect(count > 20)
        }
    }

    @Test("payloads and state records are written straight to the bytes their JSON trees encode to, in key order")
    func straightWritingMatchesTheTree() throws {
        let fixtures = FixtureLogs.directory.deletingLastPathComponent()
        let logs = try #require(FileManager.default.enumerator(atPath: fixtures.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".jsonl.gz") && !$0.contains("torn") && !$0.contains("conformance") }.sorted()
        #expect(logs.count >= 6)
        var kinds = Set<String>()
        for log in logs {
            var state = RunState()
            _ = try LogReader(path: fixtures.appendingPathComponent(log).path).forEachLine { line, recorded in
                let payload = recorded.event.payload
                var writer = JSONWriter()
                payload.writeData(to: &writer)
                #expect(writer.bytes == JSONWriter.encode(payload.data), "\(log) seq \(recorded.event.sequence)")
                if let object = payload.body as? any JSONObjectEncodable {
                    #expect(object.setsMembersInKeyOrder, "\(log): \(payload.kind) falls back to its tree")
                }
                #expect(recorded.event.encodedLine() == Array(line))
                kinds.insert(payload.kind)
                if case .pipeline = payload { return }
                RunState.reduce(into: &state, recorded.event)
            }
            func check(_ records: [some JSONObjectEncodable]) {
                for record in records {
                    #expect(JSONWriter.encode(record) == JSONWriter.encode(record.json), "\(log): \(record)")
                    #expect(record.setsMembersInKeyOrder, "\(log): \(type(of: record)) falls back to its tree")
                }
            }
            check(state.decisions)
            check(state.calls)
            check(state.calls.flatMap(\.results))
            check(state.calls.compactMap(\.verdict))
            check(state.contents)
            check(state.anomalies)
            check([state.usage])
        }
        // The fixtures cover every kind of run log and the pipeline kinds.
        #expect(kinds.isSuperset(of: EventPayload.knownKinds.filter { $0 != "approval_recorded" }))
        #expect(kinds.contains("pipeline_started") && kinds.contains("task_finished"))
    }

    @Test("an object whose members are set out of key order is still written canonically")
    func outOfOrderMembersFallBack() {
        struct Backwards: JSONObjectEncodable {
            func members(into object: inout some JSONMemberSink) {
                object.set("zeta", 1)
                object.set("alpha", ["b", "a"])
                object.set("absent", String?.none)
                object.set("mid", JSONValue.object(JSONObject([("y", 2), ("x", 1)])))
            }
        }
        var writer = JSONWriter()
        writer.write("before")
        Backwards().write(to: &writer)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #""before"{"alpha":["b","a"],"mid":{"x":1,"y":2},"zeta":1}"#)
        #expect(!Backwards().setsMembersInKeyOrder)
    }

    @Test("an event larger than the member bound gets a member of its own and reads back")
    func eventLargerThanMember() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("big.jsonl.gz")
            let big = String(repeating: "large tool output ", count: 20_000)  // 360 KB
            try LogWriter.withWriter(creating: path, runId: "r", options: .init(memberBound: 64 * 1024)) { writer in
                try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
                try writer.append(.contentStored(ContentStored(text: big)), step: 1, timeUs: 2)
                try writer.append(.runStopped(RunStopped(reason: .success)), step: 1, timeUs: 3)
            }
            let (events, summary) = try LogReader(path: path).readAll()
            #expect(events.count == 3)
            #expect(summary.memberCount == 2)
            guard case .contentStored(let content) = events[1].event.payload else {
                Issue.record("expected content")
                return
            }
            #expect(content.body == big)
        }
    }

    @Test("non-ASCII text and bytes that are not UTF-8 are stored faithfully")
    func faithfulBytes() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("bytes.jsonl.gz")
            let raw: [UInt8] = [0x00, 0xFF, 0xC3, 0x28, 0xE2, 0x82, 0x0A, 0x22, 0x5C] + Array("ok".utf8)
            let text = "naïve café — 日本語 🚀 \u{0}\u{1F} \"quoted\" \\ \u{2028}"
            try LogWriter.withWriter(creating: path, runId: "r") { writer in
                try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 0)
                try writer.append(.contentStored(ContentStored(bytes: raw, mediaType: "application/octet-stream")), step: 0, timeUs: 1)
                try writer.append(.contentStored(ContentStored(text: text)), step: 0, timeUs: 2)
            }
            let events = Array(try LogReader(path: path).readAll().events.dropFirst())
            guard case .contentStored(let binary) = events[0].event.payload,
                case .contentStored(let textual) = events[1].event.payload
            else {
                Issue.record("expected two content events")
                return
            }
            #expect(binary.encoding == .base64)
            #expect(binary.bytes == raw)
            #expect(binary.isIntact)
            #expect(binary.byteCount == raw.count)
            #expect(textual.encoding == .utf8)
            #expect(textual.body == text)
            #expect(Array(textual.body.utf8) == Array(text.utf8))
        }
    }

    @Test("a 60 MiB event (near the default read limit of 64 MiB) reads back with memory bounded by the event, not the log")
    func hugeEvent() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("huge.jsonl.gz")
            var generator = SeededGenerator(seed: 7)
            let words = ["alpha", "beta", "gamma", "delta", "epsilon", "tool", "result", "row", "value", "42"]
            var body = ""
            body.reserveCapacity(60 << 20)
            while body.utf8.count < 60 << 20 { body += words[Int(generator.next() % 10)] + " " }
            try LogWriter.withWriter(creating: path, runId: "r") { writer in
                try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 0)
                try writer.append(.contentStored(ContentStored(text: body)), step: 0, timeUs: 1)
                for index in 0..<200 {
                    try writer.append(.contentStored(ContentStored(text: "small \(index)")), step: 0, timeUs: 2 + index)
                }
            }
            var sizes: [Int] = []
            let summary = try LogReader(path: path).forEachEvent { recorded in
                if case .contentStored(let content) = recorded.event.payload { sizes.append(content.byteCount) }
            }
            #expect(sizes.first == body.utf8.count)
            #expect(sizes.count == 201)
            // One member's content plus one input chunk, with doubling: under 2.5x the event.
            #expect(summary.peakBufferBytes < body.utf8.count * 5 / 2)
            #expect(summary.peakBufferBytes > body.utf8.count)
            // A reader limit below the event is a clear error, not an unbounded allocation.
            #expect {
                _ = try LogReader(path: path, options: .init(memberContentLimit: 8 << 20)).forEachEvent { _ in }
            } throws: { error in
                (error as? LogError)?.code == .eventTooLarge
            }
        }
    }

    @Test(
        "durability points are in the file before append returns",
        arguments: [
            Durability(flush: .durabilityPoints), Durability(flush: .everyEvent), Durability(flush: .batch(3)),
            Durability(flush: .durabilityPoints, sync: .durabilityPoints),
        ])
    func durabilityPoints(durability: Durability) throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("durable.jsonl.gz")
            let writer = try LogWriter.create(at: path, runId: "r", options: .init(durability: durability))
            try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
            try writer.append(
                .decisionMade(
                    DecisionMade(raw: "x", outcome: .valid(.toolCalls([ToolCall(id: "c1", name: "lookup_order", arguments: [:])])))),
                step: 1, timeUs: 2)
            try writer.append(.verdictGiven(VerdictGiven(callId: "c1", tool: "lookup_order", verdict: .allow)), step: 1, timeUs: 3)
            try writer.append(
                .toolIntended(ToolIntended(callId: "c1", tool: "lookup_order", arguments: [:], attempt: 1)), step: 1, timeUs: 4)
            // Without closing the writer (as if the process died now), a reader sees the intent.
            let (events, summary) = try LogReader(path: path).readAll()
            #expect(events.last?.event.kind == "tool_intended")
            #expect(events.count == 4)
            #expect(summary.tear != nil)
            try writer.close()
        }
    }

    @Test("opening a torn log seals it and continues the chain in a new member")
    func reopenAfterCrash() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("resume.jsonl.gz")
            var crashed: [UInt8] = []
            do {
                let writer = try LogWriter.create(at: path, runId: "r-resume")
                try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
                try writer.append(.stepEnded(StepEnded(stateDigest: "sha256:" + String(repeating: "0", count: 64))), step: 0, timeUs: 2)
                try writer.append(.contextBuilt(ContextBuilt(goal: "g", stateSummary: "s", tokenEstimate: 1)), step: 1, timeUs: 3)
                // The process "dies": the last event was never flushed; nothing closes the member.
                crashed = try readBytes(path)
            }
            // Its lock died with it; its bytes are what the crash left.
            try writeBytes(crashed, to: path)

            let (reopened, repair) = try LogWriter.open(at: path)
            #expect(repair != nil)
            #expect(reopened.nextSequence == 2)
            try reopened.append(.runStopped(RunStopped(reason: .blocked)), step: 1, timeUs: 4)
            try reopened.close()
            let report = try LogVerifier.verify(path: path)
            #expect(report.isIntact, "\(report.problems)")
            #expect(report.eventCount == 3)
            #expect(try await Subprocess.run(gzipPath, ["-t", path]).status == 0)
        }
    }

    @Test("creating a log over an existing file is refused")
    func createRefusesExisting() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("exists.jsonl.gz")
            _ = try writeSampleLog(at: path)
            #expect {
                _ = try LogWriter.create(at: path, runId: "r")
            } throws: { ($0 as? LogError)?.code == .alreadyExists }
        }
    }
}
