import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// Conversation cases from the command line (docs/conversations.md): a real local model server
/// plays both the agent and the user, a real cassette replays them, a real process is killed.
@Suite("conversations from the command line", .tags(.python), .needsPython, .ownThread)
struct ConversationCommandTests {
    /// A conversation case over an HTTP agent at `agentBase`, its user played by the model at
    /// `userBase`, both served through the case's cassette.
    static func writeCase(in directory: TemporaryDirectory, agentBase: String, userBase: String) throws {
        try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
        try EvidenceMatrixTests.agentFile(baseURL: agentBase, limits: "max_steps: 30").write(
            toFile: directory.path("cases/agent.yaml"), atomically: true, encoding: .utf8)
        try """
        caseId: conversation
        agent: agent.yaml
        cassette: ../cassettes/conversation
        user:
          persona: A busy customer who answers only what is asked.
          scenario: {reason: The mug set arrived broken., known: [order A-1042], unknown: [the order date], task: Get a refund.}
          model: {provider: openai, name: customer-model, base_url: "\(userBase)", max_retries: 0, temperature: 0, seed: 7}
          maxTurns: 6
        expected:
          stopReason: user_stop
          turns:
            2: {toolsCalled: [lookup_order], toolsNotCalled: [refund_order]}
            3: {toolsCalled: [refund_order]}
          communicate: [refund of 49.99]
        """.write(toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
    }

    static func state(_ path: String) throws -> RunState {
        RunState(folding: try LogReader(path: path).readAll().events.map(\.event))
    }

    @Test(
        "a model-played user's calls are recorded into the case's cassette with the agent's, and the conversation replays offline turn for turn"
    )
    func cassetteReplaysBothRoles() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            try Self.writeCase(in: directory, agentBase: server.baseURL("support-chat"), userBase: server.baseURL("customer"))
            // The user's turns are reviewed by a judge over HTTP: its calls go into the case's
            // cassette with the others, and replay from it.
            let text = try String(contentsOfFile: directory.path("cases/case.yaml"), encoding: .utf8).replacingOccurrences(
                of: "  maxTurns: 6\n",
                with: "  maxTurns: 6\n  review: {model: {provider: openai, name: judge-model, base_url: \"\(server.baseURL("judge"))\", "
                    + "max_retries: 0}}\n")
            try text.write(toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
            let environment = ["OPENAI_API_KEY": RecordCommandTests.key]
            let recorded = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/1", "--record", "new", "--json"], in: directory.url,
                environment: environment)
            let judgeRequests = try server.requests().filter { ($0["path"] as? String)?.hasPrefix("/judge/") == true }
            #expect(judgeRequests.count == 1, "the review asked its judge once")
            let recordedReport = try JSONParser.parse(Array(recorded.stdout))
            func review(_ report: JSONValue) -> JSONValue? {
                report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["judgements"]?.arrayValue?.first {
                    $0["expectation"] == "user.review"
                }
            }
            let recordedReview = try #require(review(recordedReport), "\(recorded.stdoutText)\(recorded.stderr)")
            let requests = try server.requests().compactMap { $0["path"] as? String }
            #expect(requests.filter { $0.hasPrefix("/customer/") }.count == 4, "the user's four turns asked its model: \(requests)")
            let sentSeeds = try server.requests().filter { ($0["path"] as? String)?.hasPrefix("/customer/") == true }.map {
                ($0["body"] as? [String: Any])?["seed"] as? Int
            }
            server.stop()
            // Nothing listens now: only the cassette can answer, for both roles.
            let replayed = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/2", "--json"], in: directory.url, environment: environment)
            #expect(replayed.status == recorded.status, "\(replayed.stdoutText)\(replayed.stderr)")
            #expect(!replayed.stderr.contains("could not connect"), "\(replayed.stderr)")
            // The judge's verdict came from the cassette: the same as when it was recorded.
            let replayedReview = try #require(review(try JSONParser.parse(Array(replayed.stdout))), "\(replayed.stdoutText)")
            #expect(replayedReview["passed"] == recordedReview["passed"] && replayedReview["reason"] == recordedReview["reason"])
            let first = try Self.state(directory.path("runs/1/conversation-1.jsonl.gz"))
            let second = try Self.state(directory.path("runs/2/conversation-1.jsonl.gz"))
            #expect(first.dialogue == second.dialogue)
            #expect(first.dialogue.count == 7, "\(first.dialogue.map(\.text))")
            #expect(second.userTurns.map(\.turn.source) == [.model, .model, .model, .model])
            #expect(second.userTurns.last?.turn.text == "great, thanks!", "the stop token is taken out of what is said")
            // The sampling the user's model was sent is recorded with each of its turns, and was sent.
            #expect(second.userTurns.allSatisfy { $0.turn.sampling == SamplingSettings(temperature: 0, seed: 7) })
            #expect(sentSeeds == [7, 7, 7, 7])
            // The user's calls are the user's: never in the agent's usage.
            #expect(second.userUsage.modelCalls == 4)
            #expect(second.usage.modelCalls == second.decisions.count)
            let report = try JSONParser.parse(Array(replayed.stdout))
            #expect(report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["stop_reason"] == "user_stop", "\(replayed.stdoutText)")
        }
    }

    @Test("a conversation's user turn is durable: killed with SIGKILL while the agent answers it, the log still holds it")
    func killedMidConversation() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.writeCase(
                in: directory, agentBase: server.baseURL("support-chat-then-hang"), userBase: server.baseURL("customer"))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try agentEvalBinary())
            process.arguments = ["run", "cases", "--no-catalog", "--out", "runs", "--record", "new"]
            process.currentDirectoryURL = directory.url
            process.environment = ProcessInfo.processInfo.environment.merging(["OPENAI_API_KEY": RecordCommandTests.key]) { $1 }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // The agent's model has the request that answers turn 2: the turn was recorded before it.
            var waited = 0
            func hanging() throws -> Bool {
                try server.requests().filter { ($0["path"] as? String)?.hasPrefix("/support-chat-then-hang/") == true }.count >= 2
            }
            while try !hanging(), waited < 400 {
                try await Task.sleep(for: .milliseconds(50))
                waited += 1
            }
            #expect(try hanging(), "the conversation never reached turn 2")
            kill(process.processIdentifier, SIGKILL)
            await wait(for: process, seconds: 10)
            let read = try LogReader(path: directory.path("runs/conversation-1.jsonl.gz")).readAll()
            let turns = read.events.compactMap { if case .userTurn(let turn) = $0.event.payload { turn } else { nil } }
            #expect(turns.map(\.text) == ["hi, my order arrived broken", "It's A-1042."], "\(turns)")
            #expect(read.events.last?.event.kind != "run_stopped", "killed: no stop was recorded")
        }
    }

    @Test(
        "user.review: a judge reads the user model's turns; a user that invents what it does not know makes the attempt a simulator fault (exit 2), a faithful one passes",
        arguments: [("customer", 0), ("customer-inventive", 2)])
    func userReview(userScenario: String, status: Int32) async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.writeCase(in: directory, agentBase: server.baseURL("support-chat"), userBase: server.baseURL(userScenario))
            // A scripted judge that fails the user when a turn gives the order date (its scenario's unknown).
            try """
            name: review-judge
            rules:
              - when: {goal_matches: "user, turn 2. It's A-1042, ordered on"}
                reply: {raw: '{"pass": false, "reason": "Turn 2 gives the order date, which the user does not know."}'}
              - when: {goal_matches: "What they do not know: the order date"}
                reply: {raw: '{"pass": true, "reason": "The user keeps to its scenario."}'}
              - reply: {raw: '{"pass": false, "reason": "No scenario in the question."}'}
            """.write(toFile: directory.path("cases/judge.yaml"), atomically: true, encoding: .utf8)
            let text = try String(contentsOfFile: directory.path("cases/case.yaml"), encoding: .utf8)
                .replacingOccurrences(of: "  maxTurns: 6\n", with: "  maxTurns: 6\n  review: {model: {script: judge.yaml}}\n")
            try text.write(toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs", "--record", "new", "--json"], in: directory.url,
                environment: ["OPENAI_API_KEY": RecordCommandTests.key])
            #expect(result.status == status, "\(result.stdoutText)\(result.stderr)")
            let report = try JSONParser.parse(Array(result.stdout))
            let run = report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first
            let review = run?["judgements"]?.arrayValue?.first { $0["expectation"] == "user.review" }
            #expect(review?["passed"] == .bool(status == 0), "the review is reported on its own: \(result.stdoutText)")
            #expect(
                review?["request"]?["prompt"]?.stringValue?.contains("great, thanks! [the user ended the conversation: user_stop]") == true,
                "\(result.stdoutText)")
            if status != 0 {
                #expect(run?["diagnostic"]?["code"] == "eval.simulator_fault", "\(result.stdoutText)")
                #expect(result.stdoutText.contains("Turn 2 gives the order date"), "\(result.stdoutText)")
            }
        }
    }

    @Test(
        "--user frozen: when the agent words its question otherwise, the recorded user turns are said again, and the first turn recorded after another conversation is noted"
    )
    func frozenUser() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.writeCase(in: directory, agentBase: server.baseURL("support-chat"), userBase: server.baseURL("customer"))
            let environment = ["OPENAI_API_KEY": RecordCommandTests.key]
            let recorded = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/1", "--record", "new"], in: directory.url, environment: environment)
            #expect(recorded.status == 0, "\(recorded.stdoutText)\(recorded.stderr)")
            // The agent is changed (its instructions: none of its requests is recorded) and now asks for
            // the order in other words; nothing serves the user's model.
            try EvidenceMatrixTests.agentFile(baseURL: server.baseURL("support-chat-polite"), limits: "max_steps: 30")
                .replacingOccurrences(of: "instructions: Help the customer.", with: "instructions: Help the customer kindly.")
                .write(toFile: directory.path("cases/agent.yaml"), atomically: true, encoding: .utf8)
            let text = try String(contentsOfFile: directory.path("cases/case.yaml"), encoding: .utf8)
                .replacingOccurrences(of: server.baseURL("customer"), with: "http://127.0.0.1:9/v1")
            try text.write(toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
            // Strict: the user would be asked something the cassette does not hold.
            let strict = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/2", "--record", "new", "--json"], in: directory.url,
                environment: environment)
            #expect(strict.status == 2, "\(strict.stdoutText)\(strict.stderr)")
            // Frozen: the user's recorded turns are said again, and the divergence is noted.
            let frozen = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/3", "--record", "new", "--user", "frozen", "--json"], in: directory.url,
                environment: environment)
            #expect(frozen.status == 0, "\(frozen.stdoutText)\(frozen.stderr)")
            let state = try Self.state(directory.path("runs/3/conversation-1.jsonl.gz"))
            #expect(state.userTurns.map(\.turn.text) == ["hi, my order arrived broken", "It's A-1042.", "yes, please", "great, thanks!"])
            #expect(state.agentMessages.first == "Oh no, I'm sorry! Could you tell me your order number, please?")
            // The log says which turns were replayed from the recording (given, naming the model
            // that said them then, with no call of this run's), not asked of the model now.
            let replayed = state.userTurns.dropFirst().map(\.turn)
            #expect(replayed.allSatisfy { $0.source == .given && $0.model?.name == "customer-model" && $0.usage == nil }, "\(replayed)")
            #expect(state.userUsage.modelCalls == 0)
            let report = try JSONParser.parse(Array(frozen.stdout))
            // A warning: shown even though the case passed.
            let warnings = report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["warnings"]?.arrayValue ?? []
            let note = warnings.compactMap(\.stringValue).first { $0.hasPrefix("--user frozen: from user turn 2 on") }
            #expect(note?.contains("\"I'm sorry to hear that! What is your order number?\"") == true, "\(frozen.stdoutText)")
            #expect(note?.contains("Could you tell me your order number") == true, "\(frozen.stdoutText)")
            // A frozen case without a cassette cannot run.
            try text.replacingOccurrences(of: "cassette: ../cassettes/conversation\n", with: "").write(
                toFile: directory.path("cases/case.yaml"), atomically: true, encoding: .utf8)
            let noCassette = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/4", "--user", "frozen"], in: directory.url, environment: environment)
            #expect(noCassette.status == 2, "\(noCassette.stdoutText)\(noCassette.stderr)")
            #expect(noCassette.stdoutText.contains("--user frozen replays the user's recorded turns"), "\(noCassette.stdoutText)")
        }
    }

    @Test(
        "--user frozen replays one recording of each turn: the user's turns recorded after another conversation are named unused, as stale recordings are"
    )
    func frozenUserNamesWhatItDidNotReplay() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.writeCase(in: directory, agentBase: server.baseURL("support-chat"), userBase: server.baseURL("customer"))
            let environment = ["OPENAI_API_KEY": RecordCommandTests.key]
            let first = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/1", "--record", "new"], in: directory.url, environment: environment)
            #expect(first.status == 0, "\(first.stdoutText)\(first.stderr)")
            let before = try Self.state(directory.path("runs/1/conversation-1.jsonl.gz"))
            // The agent changed: it words its question otherwise, and the user's model is asked anew.
            try EvidenceMatrixTests.agentFile(baseURL: server.baseURL("support-chat-polite"), limits: "max_steps: 30")
                .replacingOccurrences(of: "instructions: Help the customer.", with: "instructions: Help the customer kindly.")
                .write(toFile: directory.path("cases/agent.yaml"), atomically: true, encoding: .utf8)
            let second = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/2", "--record", "new"], in: directory.url, environment: environment)
            #expect(second.status == 0, "\(second.stdoutText)\(second.stderr)")
            // Frozen, two recordings of each user turn: the second conversation's are replayed, and
            // the first's are named unused with the first agent's requests.
            let frozen = try await agentEval(
                ["run", "cases", "--no-catalog", "--out", "runs/3", "--record", "new", "--user", "frozen"], in: directory.url,
                environment: environment)
            #expect(frozen.status == 0, "\(frozen.stdoutText)\(frozen.stderr)")
            // The note names files in order, the user's model's (customer-model) first: the first
            // conversation's turns 2 to 4 (turn 1, asked before the agent said anything, is one
            // recording of both).
            #expect(before.userTurns.count { $0.turn.source == .model } == 4)
            #expect(frozen.stderr.contains("recordings this run did not use"), "\(frozen.stderr)")
            #expect(frozen.stderr.components(separatedBy: "openai-customer-model-").count - 1 == 3, "\(frozen.stderr)")
        }
    }

    @Test("a judged expectation over a conversation shows the judge the whole transcript, who said what in which turn")
    func judgeSeesTheTranscript() async throws {
        try await TemporaryDirectory.with { directory in
            // A scripted judge that passes only when its question holds the customer's third turn.
            try """
            name: transcript-judge
            rules:
              - when: {goal_matches: "user, turn 3. yes, please"}
                reply: {raw: '{"pass": true, "reason": "It refunded after the yes."}'}
              - reply: {raw: '{"pass": false, "reason": "No transcript in the question."}'}
            """.write(toFile: directory.path("judge.yaml"), atomically: true, encoding: .utf8)
            let text =
                try String(
                    contentsOfFile: repositoryRoot.appendingPathComponent("EvalCases/support/refund-conversation.yaml").path,
                    encoding: .utf8
                )
                .replacingOccurrences(of: "../../Fixtures/", with: repositoryRoot.appendingPathComponent("Fixtures").path + "/")
                + "  answer: {rubric: The agent refunds only after the customer said yes., model: {script: judge.yaml}}\n"
            try text.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", "case.yaml", "--no-catalog", "--out", "runs", "--json"], in: directory.url)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let report = try JSONParser.parse(Array(result.stdout))
            let judgement = report["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["judgements"]?.arrayValue?.first
            #expect(judgement?["passed"] == true, "\(result.stdoutText)")
            #expect(
                judgement?["request"]?["prompt"]?.stringValue?.contains("[user, turn 1] hi, my order arrived broken") == true,
                "\(result.stdoutText)")
        }
    }

    @Test("fork --turn N --say TEXT: the user says something else at turn N, the agent answers it live, and the diff shows what changed")
    func forkSaysSomethingElse() async throws {
        try await TemporaryDirectory.with { directory in
            let ran = try await agentEval(
                ["run", "EvalCases/support/refund-conversation.yaml", "--no-catalog", "--out", directory.path("runs")], in: repositoryRoot)
            #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
            let parent = directory.path("runs/support-refund-conversation-1.jsonl.gz")
            let agent = repositoryRoot.appendingPathComponent("Fixtures/agents/support-chat/agent.yaml").path
            let fork = try await agentEval(
                ["fork", parent, "--agent", agent, "--turn", "3", "--say", "no, do not refund it", "--no-catalog", "--json"],
                in: directory.url)
            #expect(fork.status == 1, "the fork diverges: \(fork.stdoutText)\(fork.stderr)")
            let log = try #require(try JSONParser.parse(Array(fork.stdout))["log"]?.stringValue, "\(fork.stdoutText)")
            let path = log.hasPrefix("/") ? log : directory.path(log)
            let state = try Self.state(path)
            #expect(state.userTurns.map(\.turn.text) == ["hi, my order arrived broken", "It's A-1042.", "no, do not refund it"])
            #expect(state.userTurns.last?.turn.source == .given)
            #expect(state.forked?.edits.first?.kind == .say)
            #expect(!state.calls.contains { $0.tool == "refund_order" }, "the agent did not refund after a no")
            #expect(state.stop?.reason == .maxTurns)
            // The fork is a log like any other: its digests hold, and the Python reference reader agrees.
            #expect(try await agentEval(["log", "verify", path]).status == 0)
            let reference = try await Subprocess.run(
                "/usr/bin/env", ["python3", repositoryRoot.appendingPathComponent("scripts/agent_eval_log.py").path, "verify", path])
            #expect(reference.status == 0 && reference.stdoutText.contains(#""digest_mismatches":[]"#), "\(reference.stdoutText)")
            // Right after the agent spoke to the user, what comes next is the user's: no fork goes on without one.
            let answered = try await agentEval(
                ["fork", parent, "--agent", agent, "--at", "3", "--input", "x", "--no-catalog"], in: directory.url)
            #expect(answered.status == 2 && answered.stderr.contains("the agent spoke to the user at step 3"), "\(answered.stderr)")
            // Turn 1 opens the conversation: no fork says something else there.
            let early = try await agentEval(
                ["fork", parent, "--agent", agent, "--turn", "1", "--say", "hello", "--no-catalog"], in: directory.url)
            #expect(early.status == 2 && early.stderr.contains("turn 1 opens the conversation"), "\(early.stderr)")
        }
    }

    @Test(
        "a conversation exports to ATIF with a user step per turn and to OTLP with the chat as input messages and each turn as an event, and both import back as the same conversation"
    )
    func exportsAndImportsBack() async throws {
        try await TemporaryDirectory.with { directory in
            let ran = try await agentEval(
                ["run", "EvalCases/support/refund-conversation.yaml", "--no-catalog", "--out", directory.path("runs")], in: repositoryRoot)
            #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
            let log = directory.path("runs/support-refund-conversation-1.jsonl.gz")
            let original = try Self.state(log)
            let atif = try await agentEval(["export", "atif", log, "--out", directory.path("atif")])
            #expect(atif.status == 0, "\(atif.stderr)")
            let file = try #require(try FileManager.default.contentsOfDirectory(atPath: directory.path("atif")).first)
            let trajectory = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: directory.path("atif/" + file)))))
            let users = (trajectory["steps"]?.arrayValue ?? []).filter { $0["source"] == "user" }.compactMap { $0["message"]?.stringValue }
            #expect(users == original.userTurns.map(\.turn.text), "\(users)")
            let imported = try await agentEval([
                "import", "auto", directory.path("atif/" + file), "--out", directory.path("in"), "--no-catalog",
            ])
            #expect(imported.status == 0, "\(imported.stderr)")
            let back = try #require(
                try FileManager.default.contentsOfDirectory(atPath: directory.path("in")).first { $0.hasSuffix(".jsonl.gz") })
            let state = try Self.state(directory.path("in/" + back))
            #expect(state.dialogue.map(\.text) == original.dialogue.map(\.text))
            #expect(state.userTurns.map(\.turn.ends) == original.userTurns.map(\.turn.ends), "the turn that ended it ends it again")
            #expect(state.stop?.reason == .userStop)

            let otlp = try await agentEval(["export", "otlp", log, "--output", directory.path("otlp.json"), "--include-content"])
            #expect(otlp.status == 0, "\(otlp.stderr)")
            let text = try String(contentsOfFile: directory.path("otlp.json"), encoding: .utf8)
            #expect(
                text.contains(#"{\"parts\":[{\"content\":\"yes, please\",\"type\":\"text\"}],\"role\":\"user\"}"#), "\(text.prefix(2000))")
            // The OTLP export imports back as the same conversation: every turn, the one that ended it too
            // (said in no model call's input), each before the step that answered it.
            let fromOTLP = try await agentEval([
                "import", "otlp", directory.path("otlp.json"), "--out", directory.path("in-otlp"), "--no-catalog",
            ])
            #expect(fromOTLP.status == 0, "\(fromOTLP.stderr)")
            let otlpLog = try #require(
                try FileManager.default.contentsOfDirectory(atPath: directory.path("in-otlp")).first { $0.hasSuffix(".jsonl.gz") })
            let viaOTLP = try Self.state(directory.path("in-otlp/" + otlpLog))
            #expect(viaOTLP.userTurns.map(\.turn.text) == original.userTurns.map(\.turn.text))
            #expect(viaOTLP.userTurns.map(\.turn.ends) == original.userTurns.map(\.turn.ends))
            #expect(viaOTLP.userTurns.map(\.turn.source) == original.userTurns.map(\.turn.source))
            #expect(
                viaOTLP.userTurns.map(\.turn.usage) == original.userTurns.map(\.turn.usage), "the user's model's tokens stay the user's")
            #expect(viaOTLP.dialogue.map(\.text) == original.dialogue.map(\.text), "each turn before the reply that answered it")
            #expect(viaOTLP.stop?.reason == .userStop)
            #expect(viaOTLP.anomalies.isEmpty, "\(viaOTLP.anomalies)")
            // A turn missing from the trace (an event a collector dropped): the run comes back
            // unfinished, saying which turn, so no case passes on a conversation with a gap.
            #expect(original.userTurns.count == 4, "\(original.userTurns.map(\.turn.text))")
            let gap = text.replacingOccurrences(
                of: #"{"key":"agent_eval.turn","value":{"intValue":"2"}}"#, with: #"{"key":"agent_eval.turn","value":{"intValue":"5"}}"#)
            #expect(gap != text)
            try gap.write(toFile: directory.path("gap.json"), atomically: true, encoding: .utf8)
            let gapped = try await agentEval([
                "import", "otlp", directory.path("gap.json"), "--out", directory.path("in-gap"), "--no-catalog",
            ])
            #expect(
                (gapped.stdoutText + gapped.stderr).contains("user turn 2 of the conversation is not in the trace"),
                "\(gapped.stdoutText)\(gapped.stderr)")
            let gapLog = try #require(
                try FileManager.default.contentsOfDirectory(atPath: directory.path("in-gap")).first { $0.hasSuffix(".jsonl.gz") })
            let gapState = try Self.state(directory.path("in-gap/" + gapLog))
            #expect(gapState.stop == nil, "unfinished")
            #expect(gapState.userTurns.map(\.turn.turn) == [1, 2, 3, 4])
            // Without content no words of the user leave the log, and none come back.
            let bare = try await agentEval(["export", "otlp", log, "--output", directory.path("bare.json")])
            #expect(bare.status == 0, "\(bare.stderr)")
            #expect(!(try String(contentsOfFile: directory.path("bare.json"), encoding: .utf8)).contains("yes, please"))
            // Imported back, it holds no turn, and its stop (the user's) is no contradiction.
            let bareIn = try await agentEval([
                "import", "otlp", directory.path("bare.json"), "--out", directory.path("in-bare"), "--no-catalog",
            ])
            #expect(bareIn.status == 0, "\(bareIn.stderr)")
            let bareLog = try #require(
                try FileManager.default.contentsOfDirectory(atPath: directory.path("in-bare")).first { $0.hasSuffix(".jsonl.gz") })
            let bareState = try Self.state(directory.path("in-bare/" + bareLog))
            #expect(bareState.userTurns.isEmpty && bareState.stop?.reason == .userStop)
            #expect(bareState.anomalies.isEmpty, "\(bareState.anomalies)")
        }
    }

    @Test(
        "a limit that cuts a conversation within a turn whose expectations forbid a tool fails the case: what it would have done is unproven"
    )
    func limitCutsAForbiddingTurn() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = try String(
                contentsOfFile: repositoryRoot.appendingPathComponent("Fixtures/agents/support-chat/agent.yaml").path, encoding: .utf8
            )
            .replacingOccurrences(
                of: "model:\n  script: chat.model.yaml",
                with: "model:\n  script: \(repositoryRoot.path)/Fixtures/agents/support-chat/chat.model.yaml"
            )
            .replacingOccurrences(of: "max_steps: 20", with: "max_steps: 2")
            try agent.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            let text = try String(
                contentsOfFile: repositoryRoot.appendingPathComponent("EvalCases/support/refund-conversation.yaml").path, encoding: .utf8)
            let user = text[text.range(of: "user:\n")!.lowerBound..<text.range(of: "expected:\n")!.lowerBound]
            try ("caseId: cut\nagent: agent.yaml\n" + user + "expected:\n  turns: {2: {toolsNotCalled: [refund_order]}}\n").write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", "case.yaml", "--no-catalog", "--out", "runs"], in: directory.url)
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("cut short by max_steps"), "\(result.stdoutText)")
        }
    }

    @Test("a conversation case's mistakes are named at their lines, with what to do, before anything runs")
    func caseErrors() async throws {
        try await TemporaryDirectory.with { directory in
            try EvidenceMatrixTests.agentFile(baseURL: "http://127.0.0.1:9/v1").write(
                toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try """
            - caseId: a
              agent: agent.yaml
              input: hi
              user: {opening: hi}
              expected: {toolsCalled: [lookup_order]}
            - caseId: b
              logs: "*.jsonl.gz"
              user: {opening: hi}
              expected: {toolsCalled: [lookup_order]}
            - caseId: c
              agent: agent.yaml
              user: {persona: p}
              expected: {toolsCalled: [lookup_order]}
            - caseId: d
              agent: agent.yaml
              user: {opening: hi, script: [{say: bye, end: user_stopp}]}
              expected: {toolsCalled: [lookup_order]}
            - caseId: e
              agent: agent.yaml
              user: {openning: hi}
              expected: {toolsCalled: [lookup_order]}
            - caseId: f
              agent: agent.yaml
              user: {opening: hi, maxTurns: 2}
              expected: {turns: {3: {toolsCalled: [lookup_order]}}}
            - caseId: g
              agent: agent.yaml
              user: {opening: hi}
              expected: {turns: {2: {stopReason: user_stop}}}
            - caseId: h
              agent: agent.yaml
              input: hi
              expected: {turns: {1: {toolsCalled: [lookup_order]}}}
            - caseId: i
              agent: agent.yaml
              user: {script: [{after: {turn: 1, agentSaid: hello}, say: hi}]}
              expected: {toolsCalled: [lookup_order]}
            - caseId: j
              agent: agent.yaml
              user: {opening: "hi ###STOP###"}
              expected: {toolsCalled: [lookup_order]}
            - caseId: k
              agent: agent.yaml
              user: {persona: p, model: {script: u.yaml}, script: [{after: {agentSaid: x}, say: y}, {say: bye, end: user_stop}]}
              expected: {toolsCalled: [lookup_order]}
            - caseId: l
              agent: agent.yaml
              user: {opening: hi, script: [{after: {turn: 1}, say: again}]}
              expected: {toolsCalled: [lookup_order]}
            - caseId: m
              agent: agent.yaml
              user: {opening: hi, maxTurns: 3, script: [{after: {turn: 7}, say: late}]}
              expected: {toolsCalled: [lookup_order]}
            - caseId: n
              agent: agent.yaml
              user: {opening: hi, script: [{say: "A-1042 ###TRANSFER###", end: user_stop}]}
              expected: {toolsCalled: [lookup_order]}
            """.write(toFile: directory.path("cases.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["check", "cases.yaml"], in: directory.url)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            let says = [
                ("cases.yaml:3:10", #"case "a" has input and user"#),
                ("cases.yaml:8:9", #"case "b" has user, which talks to live runs"#),
                ("cases.yaml:12:9", "user has no first turn"),
                ("cases.yaml:16:48", #"did you mean "user_stop"?"#),
                ("cases.yaml:20:10", #"did you mean "opening"?"#),
                ("cases.yaml:25:21", "expects turns.3, and its conversation has at most 2 user turns"),
                ("cases.yaml:29:38", "turns.2.stopReason: a turn has no stopReason of its own"),
                ("cases.yaml:33:21", #"case "h" expects turns, and its runs are no conversations"#),
                ("cases.yaml:36:", "asks for turn 1 and for what the agent said: at turn 1, the user's opening"),
                // A user that would end the conversation before the agent says anything.
                ("cases.yaml:40:", "user.opening holds the stop token ###STOP###"),
                ("cases.yaml:44:", "user.script[1] is said at turn 1 (its condition holds at once, and there is no opening)"),
                // Lines that can never be said, and a line that says two endings.
                ("cases.yaml:48:", "user.script[0] is for turn 1, which is the user's opening: it can never be said"),
                ("cases.yaml:52:", "user.script[0] is for turn 7, and the conversation has at most 3 user turns"),
                (
                    "cases.yaml:56:",
                    "holds the stop token ###TRANSFER###, which ends the conversation as user_transfer, and its end: is user_stop"
                ),
            ]
            for (place, text) in says {
                #expect(result.stderr.contains(place) && result.stderr.contains(text), "\(place) \(text):\n\(result.stderr)")
            }
        }
    }
}
