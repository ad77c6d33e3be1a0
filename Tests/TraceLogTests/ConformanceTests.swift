import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

@testable import TraceLog

/// The conformance kit in `Fixtures/conformance/`: valid and invalid logs, each with what a
/// conforming verifier must find (`expected.json`), checked against this implementation and
/// against the reference reader and writer in Python (`scripts/agent_eval_log.py`), both ways.
@Suite("Conformance kit")
struct ConformanceTests {
    static let directory = FixtureLogs.directory.deletingLastPathComponent().appendingPathComponent("conformance")
    static let reference = FixtureLogs.directory.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/agent_eval_log.py").path

    /// One case: how its log is made from the project's own code.
    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var make: @Sendable () throws -> [UInt8]
        var description: String { name }
    }

    static func sample(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: FixtureLogs.directory.appendingPathComponent(name)))
    }

    /// The support sample's lines, as the writer wrote them.
    static func lines() throws -> [[UInt8]] {
        try LogReader(path: FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path).readAll().events.map {
            Array($0.event.encodedLine())
        }
    }

    /// Lines as one gzip member, with the chain recomputed (`rechain`) or left as it is.
    static func log(_ lines: [[UInt8]], rechain: Bool, ending: [UInt8] = [0x0A]) throws -> [UInt8] {
        var text: [UInt8] = []
        var previous = ContentHash.genesis
        for (sequence, line) in lines.enumerated() {
            var line = line
            if rechain {
                var event = try Event(line: line)
                event = Event(
                    version: event.version, runId: event.runId, sequence: sequence, step: event.step, timeUs: event.timeUs,
                    previousHash: previous, payload: event.payload)
                line = Array(event.encodedLine())
                let hashed = ending.count > 1 ? line + ending.dropLast() : line
                previous = ContentHash.sha256Hex(hashed)
            }
            text += line + ending
        }
        return try text.withUnsafeBytes { try gzipMember($0) }
    }

    /// The version 3 support sample's lines, member by member, as the writer wrote them.
    static func members() throws -> [[[UInt8]]] {
        var members: [[[UInt8]]] = []
        _ = try LogReader(path: FixtureLogs.directory.appendingPathComponent("support-sample-v3.jsonl.gz").path).forEachLine {
            line, recorded in
            if recorded.location.memberIndex == members.count { members.append([]) }
            members[members.count - 1].append(Array(line))
        }
        return members
    }

    /// A conversation (format version 4): the user opens, the agent asks for the order, the user
    /// gives it, the agent looks it up and answers, and the user ends it with `user_stop`, as the
    /// project's writer writes it. Returned as the log's bytes.
    static func conversation() throws -> [UInt8] {
        let path = NSTemporaryDirectory() + "/agent-eval-conversation-\(UUID().uuidString).jsonl.gz"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try LogWriter.create(at: path, runId: "run-conversation", options: LogWriter.Options())
        let clock = SteppingClock()
        let recorder = RunRecorder(writer: writer, clock: { clock.now() })
        try recorder.record(.runStarted(SampleRun.supportStart(goal: "hi, my order arrived broken")))
        try recorder.record(.userTurn(UserTurn(turn: 1, text: "hi, my order arrived broken", source: .opening)))
        try recorder.endStep()
        try recorder.record(.decisionMade(DecisionMade(raw: "ask", outcome: .valid(.answer("What is your order number?")))))
        try recorder.endStep()
        try recorder.record(
            .userTurn(
                {
                    var turn = UserTurn(
                        turn: 2, text: "It's A-1042.", source: .model, model: ModelIdentity(provider: "openai", name: "customer"),
                        usage: TokenUsage(input: 120, output: 6), costUSD: 0.0001, latencyUs: 40_000)
                    // The sampling the user's model was sent is part of the turn, and of the state's digest.
                    turn.sampling = SamplingSettings(temperature: 0, maxTokens: 200, seed: 7)
                    return turn
                }()))
        let lookup = ToolCall(id: "call-1", name: "lookup_order", arguments: ["order_id": "A-1042"])
        try recorder.record(.decisionMade(DecisionMade(raw: "lookup", outcome: .valid(.toolCalls([lookup])))))
        try recorder.record(.verdictGiven(VerdictGiven(callId: "call-1", tool: "lookup_order", verdict: .allow, rule: "reads")))
        try recorder.record(.toolIntended(ToolIntended(callId: "call-1", tool: "lookup_order", arguments: lookup.arguments, attempt: 1)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "call-1", tool: "lookup_order", attempt: 1, status: .ok, output: ["total_cents": 4999], durationUs: 700)))
        try recorder.endStep()
        try recorder.record(.decisionMade(DecisionMade(raw: "answer", outcome: .valid(.answer("Order A-1042: 49.99 EUR. Refund it?")))))
        try recorder.endStep()
        try recorder.record(.userTurn(UserTurn(turn: 3, text: "no thanks, bye", source: .script, ends: .userStop, line: 0)))
        try recorder.record(.runStopped(RunStopped(reason: .userStop, answer: "Order A-1042: 49.99 EUR. Refund it?")))
        try writer.close()
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The conversation's lines, member by member.
    static func conversationMembers() throws -> [[[UInt8]]] {
        let path = NSTemporaryDirectory() + "/agent-eval-conversation-\(UUID().uuidString).jsonl.gz"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(try conversation()).write(to: URL(fileURLWithPath: path))
        var members: [[[UInt8]]] = []
        _ = try LogReader(path: path).forEachLine { line, recorded in
            if recorded.location.memberIndex == members.count { members.append([]) }
            members[members.count - 1].append(Array(line))
        }
        return members
    }

    /// Members of lines as gzip members of a version 3 log; with `rechain`, the first line of
    /// each links to the member before (docs/log-format.md §3) and no other line carries `prev`.
    static func log(members: [[[UInt8]]], rechain: Bool) throws -> [UInt8] {
        // Rechained, every line is written again: the first of a member with the link, the others without one.
        let members = try members.map { lines in
            try lines.enumerated().map { index, line in
                guard rechain && index > 0 else { return line }
                var event = try Event(line: line)
                event.previousHash = nil
                return event.encodedLine()
            }
        }
        let texts = try ChainedLog.memberTexts(members) { line, previous in
            guard rechain else { return line }
            var event = try Event(line: line)
            event.previousHash = previous
            return event.encodedLine()
        }
        return try texts.flatMap { text in try text.withUnsafeBytes { try gzipMember($0) } }
    }

    static func replacing(_ line: [UInt8], _ old: String, _ new: String) -> [UInt8] {
        Array(String(decoding: line, as: UTF8.self).replacingOccurrences(of: old, with: new).utf8)
    }

    static let cases: [Case] = [
        Case(name: "valid-support-sample") { try sample("support-sample.jsonl.gz") },
        Case(name: "valid-research-sample") { try sample("research-sample.jsonl.gz") },
        Case(name: "unfinished") { try log(Array(lines().prefix(10)), rechain: true) },
        Case(name: "torn-tail") { try sample("research-sample-torn.jsonl.gz") },
        Case(name: "first-event-not-run-started") { try log(Array(lines().dropFirst()), rechain: true) },
        Case(name: "step-goes-down") {
            var lines = try ConformanceTests.lines()
            lines[12] = replacing(lines[12], #""step":2,"#, #""step":1,"#)
            return try log(lines, rechain: true)
        },
        Case(name: "crlf-line-endings") { try log(lines(), rechain: true, ending: [0x0D, 0x0A]) },
        Case(name: "prev-not-lowercase-hex") {
            var lines = try ConformanceTests.lines()
            let link = try #require(try Event(line: lines[5]).previousHash)
            lines[5] = replacing(lines[5], link, link.uppercased())
            return try log(lines, rechain: false)
        },
        Case(name: "edited-event") {
            var lines = try ConformanceTests.lines()
            lines[6] = replacing(lines[6], "A-1042", "A-1043")
            return try log(lines, rechain: false)
        },
        Case(name: "missing-event") {
            var lines = try ConformanceTests.lines()
            lines.remove(at: 6)
            return try log(lines, rechain: false)
        },
        Case(name: "stray-byte-after-the-end") { try sample("support-sample.jsonl.gz") + [0x78] },
        // Cut inside the first event: no event, so no run; not a tear that sealing would mend.
        Case(name: "cut-before-the-first-event") { Array(try sample("support-sample.jsonl.gz").prefix(40)) },
        Case(name: "hash-not-lowercase-hex") {
            // A member typed hash (here seq 1's state_digest) is "sha256:" and 64 lowercase hex digits.
            var lines = try ConformanceTests.lines()
            guard case .stepEnded(let ended) = try Event(line: lines[1]).payload else { throw KitError("seq 1 is not step_ended") }
            lines[1] = replacing(lines[1], ended.stateDigest, "sha256:" + ended.stateDigest.dropFirst(7).uppercased())
            // The chain links the line as written (a reader cannot decode it, so `log` cannot rechain it).
            var previous = ContentHash.sha256Hex(lines[1])
            for index in 2..<lines.count {
                let link = try #require(try Event(line: lines[index]).previousHash)
                lines[index] = replacing(lines[index], #""prev":"\#(link)""#, #""prev":"\#(previous)""#)
                previous = ContentHash.sha256Hex(lines[index])
            }
            return try log(lines, rechain: false)
        },
        Case(name: "delta-on-wrong-base") {
            // Seq 9 is a delta packet on seq 3 (version 2); another base is damage, chain or not.
            var lines = try ConformanceTests.lines()
            lines[9] = replacing(lines[9], #""base_seq":3,"#, #""base_seq":2,"#)
            return try log(lines, rechain: true)
        },
        Case(name: "delta-copy-past-the-end") {
            var lines = try ConformanceTests.lines()
            lines[9] = replacing(lines[9], #""tools_disclosed":[[0,2]]"#, #""tools_disclosed":[[0,3]]"#)
            return try log(lines, rechain: true)
        },
        Case(name: "valid-forked") {
            // A fork of the support sample after its step 2 (`agent-eval fork`): the events copied
            // under another run id, run_forked replacing one result, failing another and
            // restating the goal, one step of its own and the stop.
            let scratch = try TemporaryDirectory("agent-eval-kit-fork")
            defer { scratch.remove() }
            let path = scratch.url.appendingPathComponent("forked.jsonl.gz").path
            let events = try LogReader(
                path: FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path,
                options: LogReader.Options(resolvesContextPackets: true)
            ).readAll().events
            guard let end = events.firstIndex(where: { if case .stepEnded = $0.event.payload { $0.event.step == 2 } else { false } })
            else { throw KitError("the support sample has no step 2") }
            let writer = try LogWriter.create(at: path, runId: "run-forked-sample")
            let time = events[end].event.timeUs + 1_000
            let recorder = try RunRecorder.copying(events[...end].map(\.event), into: writer, clock: { time })
            try recorder.record(
                .runForked(
                    RunForked(
                        parentRunId: events[0].event.runId, parentHead: events[end].hash, step: 2, parentLog: "support-sample.jsonl.gz",
                        edits: [
                            ForkEdit(kind: .result, callId: "call-1", value: ["order_id": "A-1042", "status": "lost"]),
                            ForkEdit(kind: .error, callId: "call-2", text: "the customer service is down"),
                            ForkEdit(kind: .input, text: "Where is my order A-1042?"),
                        ],
                        agent: AgentIdentity(name: "support-agent", version: "2", configDigest: ContentHash.sha256(Array("v2".utf8))),
                        model: ModelIdentity(provider: "openai", name: "gpt-4o-mini"))))
            recorder.step += 1
            try recorder.endStep()
            try recorder.record(.runStopped(RunStopped(reason: .success, answer: "Your parcel is lost; we are looking for it.")))
            try writer.close()
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        },
        Case(name: "valid-forked-result-to-come") {
            // A fork of a run recorded through the gateway (`agent-eval fork … -- COMMAND`): its
            // fork point is the step that proposed the call, so the call has no result yet when
            // run_forked edits it (the fold changes nothing, with no anomaly); the result recorded
            // after it is the edited one, as the program sent it back to the model.
            let scratch = try TemporaryDirectory("agent-eval-kit-fork-gateway")
            defer { scratch.remove() }
            let path = scratch.url.appendingPathComponent("forked.jsonl.gz").path
            let writer = try LogWriter.create(at: path, runId: "run-forked-gateway")
            let recorder = RunRecorder(writer: writer, clock: { 1_767_225_600_000_000 })
            let lookup = ToolCall(id: "call_a1", name: "lookup_order", arguments: ["order_id": "A-1042"])
            try recorder.record(
                .runStarted(
                    RunStarted(
                        goal: "Where is order A-1042?",
                        agent: AgentIdentity(name: "order_agent", configDigest: ContentHash.sha256(Array("python3 agent.py".utf8))),
                        model: ModelIdentity(provider: "openai", name: "gpt-4o-mini"),
                        policy: PolicyIdentity(name: "none (recorded through the gateway)"),
                        tools: [], source: RunSource(format: "gateway", file: "python3 agent.py", importer: "agent-eval-record/1"))))
            try recorder.record(
                .decisionMade(DecisionMade(raw: "lookup", outcome: .valid(.toolCalls([lookup])), usage: TokenUsage(input: 120, output: 12)))
            )
            try recorder.record(
                .toolIntended(ToolIntended(callId: "call_a1", tool: "lookup_order", arguments: lookup.arguments, attempt: 1)))
            try recorder.endStep()
            recorder.step = 0
            try recorder.record(
                .runForked(
                    RunForked(
                        parentRunId: "run-gateway-parent", parentHead: String(repeating: "ab", count: 32), step: 0,
                        edits: [ForkEdit(kind: .result, callId: "call_a1", value: ["order_id": "A-1042", "status": "lost"])],
                        agent: AgentIdentity(name: "order_agent", configDigest: ContentHash.sha256(Array("python3 agent.py".utf8))),
                        model: ModelIdentity(provider: "gateway", name: "gpt-5"))))
            recorder.step = 1
            try recorder.record(
                .toolCompleted(
                    ToolCompleted(
                        callId: "call_a1", tool: "lookup_order", attempt: 1, status: .ok, output: ["order_id": "A-1042", "status": "lost"],
                        durationUs: 2_900)))
            try recorder.record(
                .decisionMade(
                    DecisionMade(raw: "answer", outcome: .valid(.answer("Your parcel is lost.")), usage: TokenUsage(input: 160, output: 8)))
            )
            try recorder.endStep()
            try recorder.record(.runStopped(RunStopped(reason: .success, answer: "Your parcel is lost.")))
            try writer.close()
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        },
        Case(name: "edited-with-chain-recomputed") {
            // Intact to the chain, but the recorded state digests no longer match the fold.
            try log(lines().map { replacing($0, #""amount_cents":4999"#, #""amount_cents":999"#) }, rechain: true)
        },
        Case(name: "intent-names-another-tool") {
            // The refund's first attempt edited to start another tool than the call proposed,
            // the chain recomputed: the fold notes the anomaly (A.2), so every state digest
            // from that step on differs from the one recorded.
            try log(
                lines().map { line in
                    String(decoding: line, as: UTF8.self).contains(#""kind":"tool_intended""#)
                        ? replacing(line, #""tool":"refund_order""#, #""tool":"delete_customer""#) : line
                }, rechain: true)
        },
        // Version 3: the chain links gzip members.
        Case(name: "v3-valid-support-sample") { try sample("support-sample-v3.jsonl.gz") },
        Case(name: "v3-torn-tail") {
            // Killed while writing run_stopped, which begins a member of its own: the torn member
            // holds no complete line, and what there is of it must link to the member before.
            try sample("research-sample-torn-v3.jsonl.gz")
        },
        Case(name: "v3-flipped-bit-in-the-last-member") {
            // A bit that still inflates: the stop event, then garbage, and no trailer. What
            // follows the last complete line is no start of a JSON object, so not a tear (§5).
            var bytes = try sample("support-sample-v3.jsonl.gz")
            bytes[bytes.count - 11] ^= 1 << 3
            return bytes
        },
        Case(name: "v3-edited-event") {
            // A changed line breaks the link of the next member, which covers its whole member.
            var members = try ConformanceTests.members()
            members[0][6] = replacing(members[0][6], "A-1042", "A-1043")
            return try log(members: members, rechain: false)
        },
        Case(name: "v3-lines-reordered") {
            // Two lines of a member swapped, their seq fields swapped back: an edit of the member.
            var members = try ConformanceTests.members()
            var (first, second) = (try Event(line: members[0][5]), try Event(line: members[0][6]))
            (first.sequence, second.sequence) = (second.sequence, first.sequence)
            (members[0][5], members[0][6]) = (second.encodedLine(), first.encodedLine())
            return try log(members: members, rechain: false)
        },
        Case(name: "v3-member-removed") {
            // The stop for approval left out: a gap, whatever the links say.
            var members = try ConformanceTests.members()
            members.remove(at: 1)
            return try log(members: members, rechain: false)
        },
        Case(name: "v3-recompressed-as-one-member") {
            // `zcat | gzip`: lines that carried a member's link now sit inside a member.
            try log(members: [try ConformanceTests.members().flatMap { $0 }], rechain: false)
        },
        Case(name: "v3-member-split-without-link") {
            // A member cut in two: the second begins without the link to the first.
            var members = try ConformanceTests.members()
            let (head, tail) = (Array(members[0].prefix(5)), Array(members[0].dropFirst(5)))
            members.replaceSubrange(0...0, with: [head, tail])
            return try log(members: members, rechain: false)
        },
        Case(name: "v3-version-1-line") {
            // A log's lines are all version 3, or all 1 and 2.
            var members = try ConformanceTests.members()
            members[0][4] = replacing(members[0][4], #"{"v":3,"#, #"{"v":1,"#)
            return try log(members: members, rechain: false)
        },
        Case(name: "v4-valid-conversation") { try conversation() },
        Case(name: "v4-user-turn-as-a-version-3-line") {
            // Under version 3 a user_turn is an unknown kind: the fold skips it, and the state
            // digests recorded after it (which counted the turn) no longer match.
            var members = try ConformanceTests.conversationMembers()
            members[0][1] = replacing(members[0][1], #"{"v":4,"#, #"{"v":3,"#)
            return try log(members: members, rechain: true)
        },
        Case(name: "v4-conversation-ending-in-a-version-3-line") {
            // A conversation's ending is a value version 3 does not have: the line is invalid.
            var members = try ConformanceTests.conversationMembers()
            let last = members.count - 1
            members[last][0] = replacing(members[last][0], #"{"v":4,"#, #"{"v":3,"#)
            // The last member: no link covers it, so nothing to rechain.
            return try log(members: members, rechain: false)
        },
        Case(name: "v4-user-turn-in-a-version-1-log") {
            // A conversation needs a log whose members link: a version 4 line among version 1 lines is an error.
            var lines = try ConformanceTests.lines()
            let runId = try Event(line: lines[0]).runId
            let turn = try #require(try ConformanceTests.conversationMembers().first?[1])
            lines.insert(replacing(turn, "run-conversation", runId), at: 1)
            return try log(lines, rechain: true)
        },
        Case(name: "v3-edited-with-chain-recomputed") {
            // Intact to the chain, but the recorded state digests no longer match the fold.
            try log(
                members: try ConformanceTests.members().map { $0.map { replacing($0, #""amount_cents":4999"#, #""amount_cents":999"#) } },
                rechain: true)
        },
    ]

    /// What a verifier finds, in the kit's terms.
    static func swiftFindings(_ path: String) throws -> JSONValue {
        let report = try LogVerifier.verify(path: path)
        var object = ObjectBuilder()
        object.set("intact", report.isIntact)
        object.set("ending", report.ending.rawValue)
        object.set("event_count", report.eventCount)
        object.set("problems", JSONValue.array(Array(Set(report.problems.map(\.code.rawValue))).sorted().map { .string($0) }))
        if report.isIntact || report.ending == .torn {
            var state = RunState()
            _ = try LogReader(path: path).forEachEvent { RunState.reduce(into: &state, $0.event) }
            object.set("state_digest", state.digest)
            // The verifier's own digest check, which `log verify` reports.
            object.set("digest_mismatches", JSONValue.array(report.digestMismatches.map { .int($0) }))
        }
        return object.json
    }

    /// The Python reference's findings, in the same terms.
    static func pythonFindings(_ path: String) async throws -> JSONValue {
        guard let python = Subprocess.which("python3") else {
            throw KitError("python3 is needed for the conformance kit's reference reader; install Python 3 (Debian: python3)")
        }
        let result = try await Subprocess.run(python, [reference, "verify", path])
        // 0 intact, 1 read but not intact: either way it reports what it found.
        guard result.status == 0 || result.status == 1 else { throw KitError("the reference reader failed on \(path): \(result.stderr)") }
        let found = try JSONParser.parse(result.stdout)
        #expect((result.status == 0) == (found["intact"] == true), "\(path): exit \(result.status)")
        var object = ObjectBuilder()
        for key in ["intact", "ending", "event_count", "problems"] { object.set(key, found[key]) }
        if found["intact"] == true || found["ending"] == "torn" {
            object.set("state_digest", found["state_digest"])
            object.set("digest_mismatches", found["digest_mismatches"])
        }
        return object.json
    }

    struct KitError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static var expectedPath: URL { directory.appendingPathComponent("expected.json") }

    @Test("each kit log is what the project's code makes, and what Swift finds in it is what expected.json says", arguments: cases)
    func swiftAgrees(_ kitCase: Case) throws {
        let path = Self.directory.appendingPathComponent("\(kitCase.name).jsonl.gz")
        let bytes = try kitCase.make()
        if FixtureLogs.isUpdating {
            try FileManager.default.createDirectory(at: Self.directory, withIntermediateDirectories: true)
            try Data(bytes).write(to: path)
        }
        #expect([UInt8](try Data(contentsOf: path)) == bytes, "rewrite with AGENT_EVAL_UPDATE_FIXTURES=1 if the change is intended")
        let found = try Self.swiftFindings(path.path)
        if FixtureLogs.isUpdating { try Self.record(found, for: kitCase.name) }
        #expect(try Self.expected()[kitCase.name] == found)
    }

    @Test("the Python reference reader finds in every kit log exactly what expected.json says", arguments: cases)
    func pythonAgrees(_ kitCase: Case) async throws {
        let path = Self.directory.appendingPathComponent("\(kitCase.name).jsonl.gz").path
        #expect(try await Self.pythonFindings(path) == (try Self.expected()[kitCase.name]))
    }

    @Test("a run written by the Python reference writer verifies here, and every digest it recorded matches this fold")
    func pythonWrites() async throws {
        try await TemporaryDirectory.with { directory in
            let python = try #require(Subprocess.which("python3"), "python3 is needed for the conformance kit")
            let path = directory.path("demo.jsonl.gz")
            #expect(try await Subprocess.run(python, [Self.reference, "demo", path]).status == 0)
            let found = try Self.swiftFindings(path)
            #expect(found["intact"] == true)
            #expect(found["ending"] == "complete")
            #expect(found["digest_mismatches"] == [])
            #expect(try await Subprocess.run(gzipPath, ["-t", path]).status == 0)
            let events = try LogReader(path: path).readAll().events.map(\.event)
            #expect(events.count == 20)
            #expect(events.contains { $0.kind == "future_kind" })
            #expect(found == (try await Self.pythonFindings(path)))
        }
    }

    @Test(
        "cut at every byte, a version 1 and a version 3 sample read the same to the Python reference as here: ending, events, problems",
        .atScale, .tags(.scale), arguments: ["support-sample.jsonl.gz", "support-sample-v3.jsonl.gz"])
    func cutsAgree(sample: String) async throws {
        try await TemporaryDirectory.with { directory in
            let python = try #require(Subprocess.which("python3"), "python3 is needed for the reference reader")
            let bytes = try Self.sample(sample)
            var paths: [String] = []
            for length in 1...bytes.count {
                let path = directory.path("cut-\(length).jsonl.gz")
                try Data(bytes.prefix(length)).write(to: URL(fileURLWithPath: path))
                paths.append(path)
            }
            // One process reads them all (a process per cut would take minutes).
            let script = """
                import json, sys
                sys.path.insert(0, sys.argv[1])
                import agent_eval_log
                for path in sys.argv[2:]:
                    found = agent_eval_log.verify(path)
                    print(json.dumps([found.get("ending", "unreadable"), found.get("event_count"), sorted(found.get("problems"))]))
                """
            let scripts = URL(fileURLWithPath: Self.reference).deletingLastPathComponent().path
            let result = try await Subprocess.run(python, ["-c", script, scripts] + paths)
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stdoutText.split(separator: "\n")
            #expect(lines.count == paths.count)
            var disagreements: [String] = []
            for (path, line) in zip(paths, lines) {
                let python = try JSONParser.parse(Array(line.utf8))
                let report = try? LogVerifier.verify(path: path)
                let problems = report.map { Array(Set($0.problems.map(\.code.rawValue))).sorted().map { JSONValue.string($0) } }
                let swift: JSONValue =
                    if let report, let problems {
                        [.string(report.ending.rawValue), .int(report.eventCount), .array(problems)]
                    } else { python.arrayValue?.first == "unreadable" ? python : ["unreadable"] }
                if swift != python {
                    disagreements.append(
                        "\(URL(fileURLWithPath: path).lastPathComponent): \(JSONWriter.encodeString(swift)) here, \(JSONWriter.encodeString(python)) in Python"
                    )
                }
            }
            #expect(disagreements.isEmpty, "\(disagreements.count) of \(paths.count) cuts: \(disagreements.prefix(5))")
        }
    }

    // MARK: expected.json

    static func expected() throws -> JSONValue { try JSONParser.parse([UInt8](try Data(contentsOf: expectedPath))) }

    /// Updating one case's entry; the file is rewritten in canonical, pretty form.
    static let lock = NSLock()
    static func record(_ found: JSONValue, for name: String) throws {
        lock.lock()
        defer { lock.unlock() }
        var object = (try? expected())?.objectValue ?? JSONObject()
        object[name] = found
        try JSONWriter.encodePretty(.object(object)).write(to: expectedPath, atomically: true, encoding: .utf8)
    }
}
