import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// A green result must be believable: runs whose record cannot be trusted are "could not
/// run", never a pass.
@Suite("Trusting the verdict")
struct TrustTests {
    static let recorded = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    func run(_ caseText: String, in directory: TemporaryDirectory, name: String = "case.yaml") async throws -> CaseResult {
        try caseText.write(toFile: directory.path(name), atomically: true, encoding: .utf8)
        let session = try EvalSession(
            EvalSession.Plan(
                paths: [directory.path(name)],
                options: EvalOptions(jobs: 1, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "r"))))
        var report: EvalReport?
        for await update in session.run() { if case .completed(let completed) = update { report = completed } }
        return try #require(report?.results.first)
    }

    /// Writes `events` (their payloads, steps and times) as a new log with a valid chain.
    func rewrite(_ events: [Event], to path: String) throws {
        try LogWriter.withWriter(creating: path, runId: events.first?.runId ?? "r") { writer in
            for event in events { try writer.append(event.payload, step: event.step, timeUs: event.timeUs) }
        }
    }

    /// The events of `path`, with whole context packets (a writer writes its own deltas).
    func events(of path: String) throws -> [Event] {
        try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
    }

    @Test(
        "a log cut after an earlier stop (a wait for approval) fails toolsNotCalled, what followed the wait unproven, and the result says its end is unproven; a signed log's end is not"
    )
    func unprovenEnd() async throws {
        try await TemporaryDirectory.with { directory in
            // The support run stops for approval, is resumed and refunds: its last member, after
            // the first stop, dropped.
            var offsets: [(offset: Int, isStop: Bool)] = []
            _ = try LogReader(path: Self.recorded).forEachEvent { recorded in
                if case .runStopped = recorded.event.payload { offsets.append((recorded.location.memberOffset, true)) }
            }
            let whole = try Data(contentsOf: URL(fileURLWithPath: Self.recorded))
            let firstStop = try #require(offsets.first)
            var cut = -1
            _ = try LogReader(path: Self.recorded).forEachEvent { recorded in
                if cut < 0, recorded.location.memberOffset > firstStop.offset { cut = recorded.location.memberOffset }
            }
            try #require(cut > 0, "the sample has a member after its first stop")
            try whole.prefix(cut).write(to: URL(fileURLWithPath: directory.path("cut.jsonl.gz")))
            #expect(try LogVerifier.verify(path: directory.path("cut.jsonl.gz")).isIntact, "a cut at a member boundary verifies")
            let result = try await run(
                "caseId: never-refunds\nlogs: cut.jsonl.gz\nexpected: {toolsNotCalled: [refund_order]}\n",
                in: directory)
            let notes = result.runs.flatMap(\.notes).map(\.message)
            // The run waits for an approval no one gave (in what the log shows): what it did once
            // answered — the refund the cut dropped — is unproven, whatever the log shows.
            let failures = result.runs.flatMap(\.failures)
            #expect(!result.passed)
            #expect(failures.map(\.expectation) == ["evidence"], "\(failures)")
            #expect(failures.first?.actual.contains("waiting for an approval no one gave") == true, "\(failures)")
            #expect(notes.contains { $0.hasPrefix("the log's end is unproven") }, "\(notes)")

            // Signed, the same run ends in its final signature.
            let keyPath = directory.path("key")
            try LogSigner.generateKeyFiles(at: keyPath)
            let options = LogWriter.Options(signer: try LogSigner(keyFile: keyPath))
            _ = try LogWriter.withWriter(creating: directory.path("signed.jsonl.gz"), runId: "run-signed", options: options) {
                try SampleRun.recordSupportRun(into: $0)
            }
            #expect(try LogFacts.read(directory.path("signed.jsonl.gz")).endIsSigned)
            #expect(try !LogFacts.read(Self.recorded).endIsSigned)
            let signed = try await run(
                "caseId: no-deletes\nlogs: signed.jsonl.gz\nexpected: {toolsNotCalled: [delete_customer]}\n", in: directory,
                name: "signed.yaml")
            #expect(!signed.runs.flatMap(\.notes).contains { $0.message.hasPrefix("the log's end is unproven") })
        }
    }

    @Test("a call id used for two calls: the fold keeps both, and a forbidden tool run under the reused id cannot pass")
    func reusedCallIds() async throws {
        try await TemporaryDirectory.with { directory in
            var events = try events(of: Self.recorded)
            // The model's second decision proposes delete_customer under call-1, which lookup_order used.
            for (index, event) in events.enumerated() {
                guard case .decisionMade(var made) = event.payload, case .valid(.toolCalls(var calls)) = made.outcome else { continue }
                guard let position = calls.firstIndex(where: { $0.name == "delete_customer" }) else { continue }
                let original = calls[position].id
                calls[position].id = "call-1"
                made.outcome = .valid(.toolCalls(calls))
                events[index] = Event(
                    runId: event.runId, sequence: event.sequence, step: event.step, timeUs: event.timeUs, previousHash: "",
                    payload: .decisionMade(made))
                for later in events.indices where later > index {
                    if case .verdictGiven(var verdict) = events[later].payload, verdict.callId == original {
                        verdict.callId = "call-1"
                        events[later].payload = .verdictGiven(verdict)
                    }
                }
            }
            let folded = RunState(folding: events)
            #expect(folded.calls.filter { $0.id == "call-1" }.map(\.tool) == ["lookup_order", "delete_customer"])
            #expect(folded.anomalies.contains { $0.message.contains("proposes call id \"call-1\" a second time") })
            let log = directory.path("reused.jsonl.gz")
            try rewrite(events, to: log)
            let result = try await run("caseId: c\nlogs: reused.jsonl.gz\nexpected: {toolsNotCalled: [delete_customer]}\n", in: directory)
            #expect(!result.passed)
            #expect(
                result.harnessError?.diagnosticCode == "eval.anomalous_run" || result.harnessError?.diagnosticCode == "eval.digest_mismatch"
            )
        }
    }

    @Test("allowReusedCallIds: a run whose decisions reuse call ids is checked, and the reuse is reported; without it, not")
    func acceptedReusedCallIds() async throws {
        try await TemporaryDirectory.with { directory in
            // The recorded run again, its delete_customer proposal renamed to call-1 (lookup_order's id),
            // written through a recorder so that every step's digest is the fold's own.
            var renamed: String?
            let log = directory.path("reused.jsonl.gz")
            try LogWriter.withWriter(creating: log, runId: "r") { writer in
                let clock = Counter()
                let recorder = RunRecorder(writer: writer, clock: { clock.next() })
                for event in try events(of: Self.recorded) {
                    var payload = event.payload
                    switch payload {
                    case .stepEnded:
                        try recorder.endStep()
                        continue
                    case .decisionMade(var made):
                        if case .valid(.toolCalls(var calls)) = made.outcome,
                            let at = calls.firstIndex(where: { $0.name == "delete_customer" })
                        {
                            renamed = calls[at].id
                            calls[at].id = "call-1"
                            made.outcome = .valid(.toolCalls(calls))
                            payload = .decisionMade(made)
                        }
                    case .verdictGiven(var verdict) where verdict.callId == renamed:
                        verdict.callId = "call-1"
                        payload = .verdictGiven(verdict)
                    default: break
                    }
                    try recorder.record(payload)
                }
            }
            let expected = "expected: {toolsCalled: [lookup_order], toolsNotCalled: [delete_customer]}\n"
            let refused = try await run("caseId: c\nlogs: reused.jsonl.gz\n" + expected, in: directory)
            #expect(refused.harnessError?.diagnosticCode == "eval.anomalous_run")
            let accepted = try await run(
                "caseId: c\nlogs: reused.jsonl.gz\nallowReusedCallIds: true\n" + expected, in: directory, name: "b.yaml")
            #expect(accepted.harnessError == nil)
            #expect(accepted.passed)
            #expect(
                accepted.runs.first?.notes.contains {
                    $0.message.hasPrefix("call ids used again, accepted by allowReusedCallIds: \"call-1\" (2 calls)")
                }
                    == true, "\(accepted.runs.first?.notes ?? [])")
        }
    }

    /// Microseconds that only go forward, for a recorder's clock.
    final class Counter: @unchecked Sendable {
        // Confined: only the test's thread calls it, synchronously, from the recorder.
        private var now = 1_000
        func next() -> Int {
            now += 1
            return now
        }
    }

    @Test("a log with no event is no run: a case over it could not run, even when it allows unfinished runs")
    func noRun() async throws {
        try await TemporaryDirectory.with { directory in
            _ = FileManager.default.createFile(atPath: directory.path("empty.jsonl.gz"), contents: Data())
            // Cut with head(1) before the first event was complete.
            let head = try await Subprocess.run(
                "/usr/bin/env", ["head", "-c", "64", FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path])
            _ = FileManager.default.createFile(atPath: directory.path("cut.jsonl.gz"), contents: Data(head.stdout))
            for (log, code) in [("empty", "log.empty"), ("cut", "log.no_event")] {
                for allowed in [false, true] {
                    let result = try await run(
                        "caseId: \(log)\nlogs: \(log).jsonl.gz\nallowUnfinished: \(allowed)\nexpected: {toolsNotCalled: [delete_customer]}\n",
                        in: directory, name: "\(log)-\(allowed).yaml")
                    #expect(!result.passed, "\(log), allowUnfinished: \(allowed)")
                    #expect(result.harnessError?.diagnosticCode == code, "\(log), allowUnfinished: \(allowed)")
                    #expect(result.harnessError?.hint?.contains("allowUnfinished") != true, "no hint that would make it pass")
                }
            }
        }
    }

    @Test("a run that did not finish cannot pass: a torn log, a log without run_stopped")
    func unfinished() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path,
                toPath: directory.path("torn.jsonl.gz"))
            let events = try events(of: Self.recorded)
            // Everything up to the approval stop's resume, then the log simply ends.
            let cut = try #require(events.firstIndex { if case .runStopped = $0.payload { true } else { false } })
            try rewrite(Array(events.prefix(cut)), to: directory.path("open.jsonl.gz"))
            for log in ["torn", "open"] {
                let result = try await run(
                    "caseId: \(log)\nlogs: \(log).jsonl.gz\nexpected: {toolsNotCalled: [delete_customer]}\n", in: directory,
                    name: "\(log).yaml")
                #expect(!result.passed, "\(log)")
                #expect(result.harnessError?.diagnosticCode == "eval.unfinished_run", "\(log)")
            }
            // Allowed explicitly: checked over what was recorded, and said so.
            let allowed = try await run(
                "caseId: open\nlogs: open.jsonl.gz\nallowUnfinished: true\nexpected: {toolsNotCalled: [delete_customer]}\n", in: directory,
                name: "allowed.yaml")
            #expect(allowed.passed)
            #expect(allowed.runs.first?.notes.contains { $0.message.hasPrefix("the run did not finish") } == true)
        }
    }

    @Test("an edit with the hash chain recomputed passes verification, but the eval runner finds the digest mismatch")
    func editedLog() async throws {
        try await TemporaryDirectory.with { directory in
            func cheaper(_ arguments: JSONValue) -> JSONValue {
                guard case .object(var object) = arguments, object["amount_cents"] != nil else { return arguments }
                object["amount_cents"] = 999
                return .object(object)
            }
            var events = try events(of: Self.recorded)
            for index in events.indices {
                switch events[index].payload {
                case .decisionMade(var made):
                    if case .valid(.toolCalls(let calls)) = made.outcome {
                        made.outcome = .valid(
                            .toolCalls(
                                calls.map {
                                    var call = $0; call.arguments = cheaper(call.arguments); return call
                                }))
                        events[index].payload = .decisionMade(made)
                    }
                case .toolIntended(var intent):
                    intent.arguments = cheaper(intent.arguments)
                    events[index].payload = .toolIntended(intent)
                default: break
                }
            }
            let log = directory.path("edited.jsonl.gz")
            try rewrite(events, to: log)
            #expect(try LogVerifier.verify(path: log).isIntact, "the chain was recomputed: only the digests can tell")
            let result = try await run(
                "caseId: c\nlogs: edited.jsonl.gz\nexpected:\n  arguments:\n    refund_order: {paths: {amount_cents: {max: 1000}}}\n",
                in: directory)
            #expect(!result.passed)
            let error = try #require(result.harnessError)
            #expect(error.diagnosticCode == "eval.digest_mismatch")
            #expect(error.place?.sequence != nil)
        }
    }

    @Test("a tool name the runs do not have is an error with a suggestion, not a vacuous pass")
    func unknownTool() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.copyItem(atPath: Self.recorded, toPath: directory.path("run.jsonl.gz"))
            let result = try await run("caseId: c\nlogs: run.jsonl.gz\nexpected: {toolsNotCalled: [delete_custmer]}\n", in: directory)
            #expect(!result.passed)
            #expect(result.harnessError?.diagnosticCode == "eval.unknown_tool")
            #expect(result.harnessError?.hint == "did you mean \"delete_customer\"?")
        }
    }

    @Test("a live run never overwrites a log that is there: the case could not run, and the file is untouched")
    func liveLogExists() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("runs"), withIntermediateDirectories: true)
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: directory.path("runs/live-1.jsonl.gz")))
            let agent = ExampleRuns.agentPath("support")
            let result = try await run(
                "caseId: live\nagent: \(agent)\ninput: Order A-1042 arrived broken.\nexpected: {toolsNotCalled: [delete_customer]}\n",
                in: directory)
            #expect(result.harnessError?.diagnosticCode == "eval.log_exists")
            #expect(try String(contentsOfFile: directory.path("runs/live-1.jsonl.gz"), encoding: .utf8) == "keep me")
        }
    }

    @Test("JUnit time is how long the check took; the run's recorded duration is a property")
    func junitTime() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.copyItem(atPath: Self.recorded, toPath: directory.path("run.jsonl.gz"))
            let result = try await run("caseId: c\nlogs: run.jsonl.gz\nexpected: {toolsNotCalled: [delete_customer]}\n", in: directory)
            let run = try #require(result.runs.first)
            #expect(run.checkDurationUs > 0)
            let xml = EvalReport(results: [result]).junit
            #expect(xml.contains("time=\"\(String(format: "%.3f", Double(run.checkDurationUs) / 1_000_000))\""))
            #expect(xml.contains("<property name=\"attempt.1.duration_ms\" value=\"\(run.summary.durationMs)\"/>"))
        }
    }
}
