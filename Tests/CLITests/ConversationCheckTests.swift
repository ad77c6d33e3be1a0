import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// What a conversation case checks, over the bundled scripted conversation (offline): a turn the
/// agent never answered is never checked as passed, turns out of order make a log that cannot be
/// checked, a conversation stopped by a limit keeps its answer, and a re-run says the turns again.
@Suite("conversation checks: no turn passes on nothing")
struct ConversationCheckTests {
    static let agent = repositoryRoot.appendingPathComponent("Fixtures/agents/support-chat/agent.yaml").path

    /// The bundled refund conversation, run into `directory/runs`: its log.
    static func recorded(in directory: TemporaryDirectory) async throws -> String {
        let ran = try await agentEval(
            ["run", "EvalCases/support/refund-conversation.yaml", "--no-catalog", "--out", directory.path("runs")], in: repositoryRoot)
        #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
        return directory.path("runs/support-refund-conversation-1.jsonl.gz")
    }

    static func runCase(_ text: String, in directory: TemporaryDirectory) async throws -> ProcessResult {
        try text.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
        return try await agentEval(["run", directory.path("case.yaml"), "--no-catalog", "--out", directory.path("out"), "--json"])
    }

    @Test("a check of the turn that ended the conversation, which the agent never answered, fails saying so: it never passes on nothing")
    func closingTurnIsNotChecked() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try await Self.recorded(in: directory)
            let state = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
            #expect(state.userTurns.last?.turn.turn == 4 && state.userTurns.last?.turn.ends != nil)
            let result = try await Self.runCase(
                "caseId: closing\nlogs: \(log)\nexpected:\n  stopReason: user_stop\n  turns:\n    4: {toolsNotCalled: [refund_order], maxToolCalls: 0}\n",
                in: directory)
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("turns.4"), "\(result.stdoutText)")
            #expect(result.stdoutText.contains("turn 4 ended the conversation"), "\(result.stdoutText)")
            // Turn 3 was answered (the refund): its check still passes.
            let answered = try await Self.runCase(
                "caseId: answered\nlogs: \(log)\nexpected:\n  turns:\n    3: {toolsCalled: [refund_order]}\n", in: directory)
            #expect(answered.status == 0, "\(answered.stdoutText)\(answered.stderr)")
        }
    }

    @Test(
        "maxTurns stops a conversation after the agent answered its last turn: that turn's check is checked (it failed as cut short), the run's own still are cut short"
    )
    func maxTurnsAfterTheLastAnswer() async throws {
        try await TemporaryDirectory.with { directory in
            let user =
                "user:\n  opening: hi, my order arrived broken\n  script:\n    - after: {agentSaid: \"order number\"}\n"
                + "      say: It's A-1042.\n  maxTurns: 2\n"
            let answered = try await Self.runCase(
                "caseId: last-turn\nagent: \(Self.agent)\n\(user)expected:\n  turns:\n"
                    + "    2: {toolsCalled: [lookup_order], toolsNotCalled: [refund_order]}\n", in: directory)
            #expect(answered.status == 0, "\(answered.stdoutText)\(answered.stderr)")
            #expect(answered.stdoutText.contains("\"stop_reason\":\"max_turns\""), "\(answered.stdoutText)")
            // What the whole run forbids, it could still have done in a turn it never had.
            let whole = try await Self.runCase(
                "caseId: whole\nagent: \(Self.agent)\n\(user)expected:\n  toolsNotCalled: [refund_order]\n", in: directory)
            #expect(whole.status == 1, "\(whole.stdoutText)\(whole.stderr)")
            #expect(whole.stdoutText.contains("cut short by maxTurns"), "\(whole.stdoutText)")
        }
    }

    @Test("a turn whose model replies were none of them a decision was never answered: its checks fail, never pass on nothing")
    func turnOfInvalidRepliesIsNotChecked() async throws {
        try await TemporaryDirectory.with { directory in
            // The bundled conversation's agent, its model's reply to the order number no decision.
            let fixture = repositoryRoot.appendingPathComponent("Fixtures/agents/support-chat").path
            try FileManager.default.createDirectory(atPath: directory.path("agent"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: fixture + "/agent.yaml", toPath: directory.path("agent/agent.yaml"))
            let script = try String(contentsOfFile: fixture + "/chat.model.yaml", encoding: .utf8)
            let broken = script.replacingOccurrences(
                of: "reply: {tool_calls: [{name: lookup_order, arguments: {order_id: A-1042}}]", with: "reply: {raw: \"let me think\"")
            #expect(broken != script)
            try broken.write(toFile: directory.path("agent/chat.model.yaml"), atomically: true, encoding: .utf8)
            let result = try await Self.runCase(
                """
                caseId: never-answered
                agent: \(directory.path("agent/agent.yaml"))
                user:
                  opening: hi, my order arrived broken
                  script:
                    - after: {agentSaid: "order number"}
                      say: It's A-1042.
                    - say: bye
                      end: user_stop
                expected:
                  turns:
                    2: {toolsNotCalled: [refund_order], maxToolCalls: 0}

                """, in: directory)
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("3 model replies in turn 2 was rejected as a decision"), "\(result.stdoutText)")
        }
    }

    @Test("a scripted user model's decisions are its answers in order: after an opening, its first decision is the user's second turn")
    func userModelDecisionsInOrder() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: customer-script
            decisions:
              - answer: "It's A-1042."
              - answer: "yes, please"
              - answer: "great, thanks! ###STOP###"

            """.write(toFile: directory.path("user.model.yaml"), atomically: true, encoding: .utf8)
            let result = try await Self.runCase(
                """
                caseId: user-model-in-order
                agent: \(Self.agent)
                user:
                  persona: A customer whose mug set arrived broken.
                  opening: hi, my order arrived broken
                  model: {script: \(directory.path("user.model.yaml"))}
                  maxTurns: 6
                expected:
                  stopReason: user_stop
                  toolsCalled: [lookup_order, refund_order]

                """, in: directory)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let state = try RunState(
                folding: try LogReader(path: directory.path("out/user-model-in-order-1.jsonl.gz")).readAll().events.map(\.event))
            #expect(state.userTurns.map(\.turn.text) == ["hi, my order arrived broken", "It's A-1042.", "yes, please", "great, thanks!"])
        }
    }

    @Test("a script with nothing to say after what the agent said: could not run, naming the case's user by line and what the agent said")
    func scriptWithNothingToSay() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await Self.runCase(
                """
                caseId: nothing-to-say
                agent: \(Self.agent)
                user:
                  opening: hi, my order arrived broken
                  script:
                    - after: {agentSaid: "order id"}
                      say: It's A-1042.
                expected:
                  stopReason: user_stop

                """, in: directory)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            #expect(
                result.stdoutText.contains("after the agent said \\\"I'm sorry to hear that! What is your order number?\\\""),
                "\(result.stdoutText)")
            #expect(result.stdoutText.contains("check the case's user (\(directory.path("case.yaml")):4:3)"), "\(result.stdoutText)")
        }
    }

    @Test("a log whose user turns repeat a number cannot be checked (an anomaly), never a turn check that saw only the first of two")
    func turnsOutOfOrder() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try await Self.recorded(in: directory)
            let events = try LogReader(path: log, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
            // The same events, the third turn numbered 2 again, digests made by the fold as it is.
            let edited = directory.path("edited.jsonl.gz")
            var turns = 0
            let renumbered = events.map { event -> (payload: EventPayload, step: Int) in
                guard case .userTurn(var turn) = event.payload else { return (event.payload, event.step) }
                turns += 1
                if turns == 3 { turn.turn = 2 }
                return (.userTurn(turn), event.step)
            }
            let state = try DigestedLog.write(renumbered, to: edited, runId: events[0].runId)
            #expect(state.anomalies.map(\.message).contains { $0.contains("user turn 2 where turn 3 comes next") }, "\(state.anomalies)")
            let result = try await Self.runCase(
                "caseId: renumbered\nlogs: \(edited)\nexpected:\n  turns:\n    2: {toolsNotCalled: [refund_order]}\n", in: directory)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("user turn 2 where turn 3 comes next"), "\(result.stdoutText)")
        }
    }

    @Test(
        "a log that says the user ended the conversation and then spoke again, or stopped user_stop with no turn that ended it, cannot be checked (an anomaly)"
    )
    func endingsThatContradict() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try await Self.recorded(in: directory)
            let events = try LogReader(path: log, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
            /// The same events with each user turn as `edit` makes it, digests made by the fold as it is.
            func edited(_ name: String, _ edit: (inout UserTurn) -> Void) throws -> (path: String, state: RunState) {
                let path = directory.path(name)
                let changed = events.map { event -> (payload: EventPayload, step: Int) in
                    guard case .userTurn(var turn) = event.payload else { return (event.payload, event.step) }
                    edit(&turn)
                    return (.userTurn(turn), event.step)
                }
                return (path, try DigestedLog.write(changed, to: path, runId: events[0].runId))
            }
            // Turn 3 ends the conversation too: turn 4 comes after the user ended it.
            let spokeAgain = try edited("spoke-again.jsonl.gz") { if $0.turn == 3 { $0.ends = .userStop } }
            let again = "user turn 4 after user turn 3 ended the conversation (user_stop)"
            #expect(spokeAgain.state.anomalies.map(\.message).contains { $0.contains(again) }, "\(spokeAgain.state.anomalies)")
            // No turn ends it, yet the run stopped user_stop.
            let unended = try edited("unended.jsonl.gz") { $0.ends = nil }
            let stop = "the run stopped user_stop, which the user's ending of the conversation gives, but no user turn ended it"
            #expect(unended.state.anomalies.map(\.message).contains { $0.contains(stop) }, "\(unended.state.anomalies)")
            for (path, says) in [(spokeAgain.path, again), (unended.path, stop)] {
                let result = try await Self.runCase(
                    "caseId: contradicts\nlogs: \(path)\nexpected:\n  stopReason: user_stop\n  turns:\n    3: {toolsCalled: [refund_order]}\n",
                    in: directory)
                #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
                #expect(result.stdoutText.contains(says), "\(result.stdoutText)")
            }
            // The log as recorded holds neither.
            #expect(RunState(folding: events).anomalies.isEmpty)
        }
    }

    @Test("a conversation that a limit stops keeps what the agent said last as the run's answer")
    func limitKeepsTheAnswer() async throws {
        try await TemporaryDirectory.with { directory in
            let script = Self.agent.replacingOccurrences(of: "agent.yaml", with: "chat.model.yaml")
            let text = try String(contentsOfFile: Self.agent, encoding: .utf8)
                .replacingOccurrences(of: "max_steps: 20", with: "max_steps: 3")
                .replacingOccurrences(of: "script: chat.model.yaml", with: "script: \(script)")
            try text.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            let bundled = try String(
                contentsOfFile: repositoryRoot.appendingPathComponent("EvalCases/support/refund-conversation.yaml").path, encoding: .utf8)
            let cut = try #require(bundled.range(of: "expected:"))
            let conversation =
                bundled[..<cut.lowerBound].replacingOccurrences(
                    of: "agent: ../../Fixtures/agents/support-chat/agent.yaml", with: "agent: agent.yaml")
                + "expected:\n  stopReason: budget_exhausted\n  answer: {contains: \"refund\"}\n"
            try conversation.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(["run", directory.path("case.yaml"), "--no-catalog", "--out", directory.path("out")])
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let state = RunState(
                folding: try LogReader(path: directory.path("out/support-refund-conversation-1.jsonl.gz")).readAll().events.map(\.event))
            #expect(state.stop?.limit == .maxSteps, "\(String(describing: state.stop))")
            #expect(state.stop?.answer == state.agentMessages.last && state.stop?.answer != nil)
        }
    }

    @Test("rerun of a conversation says the log's user turns again: the same run, not a divergence at the first turn")
    func rerunSaysTheTurnsAgain() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try await Self.recorded(in: directory)
            let rerun = try await agentEval(["rerun", log, "--agent", Self.agent])
            #expect(rerun.status == 0, "\(rerun.stdoutText)\(rerun.stderr)")
        }
    }

    @Test(
        "rerun of a conversation whose user failed (its scripted model ran out of answers) fails there again: the same run, no divergence")
    func rerunOfAUserFault() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: customer-script
            decisions:
              - answer: "hi, my order arrived broken"
              - answer: "It's A-1042."

            """.write(toFile: directory.path("user.model.yaml"), atomically: true, encoding: .utf8)
            let result = try await Self.runCase(
                """
                caseId: user-runs-out
                agent: \(Self.agent)
                user:
                  persona: A customer whose mug set arrived broken.
                  model: {script: \(directory.path("user.model.yaml"))}
                expected:
                  turns:
                    2: {toolsCalled: [lookup_order]}

                """, in: directory)
            #expect(result.status == 2, "the user could not go on at turn 3: \(result.stdoutText)\(result.stderr)")
            let log = directory.path("out/user-runs-out-1.jsonl.gz")
            let state = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
            #expect(state.stop?.isSimulatorFault == true && state.userTurns.count == 2, "\(String(describing: state.stop))")
            let rerun = try await agentEval(["rerun", log, "--agent", Self.agent])
            #expect(rerun.status == 0, "\(rerun.stdoutText)\(rerun.stderr)")
            #expect(rerun.stdoutText.contains("identical"), "\(rerun.stdoutText)")
        }
    }

    @Test("rerun of a conversation that paused for an approval goes on with its user after the recorded approval: the same run")
    func rerunAcrossAnApproval() async throws {
        try await TemporaryDirectory.with { directory in
            // The bundled conversation's agent, its refunds waiting for a person's approval.
            let fixture = repositoryRoot.appendingPathComponent("Fixtures/agents/support-chat").path
            let text = try String(contentsOfFile: fixture + "/agent.yaml", encoding: .utf8)
            let gated = text.replacingOccurrences(
                of:
                    "    - id: refunds-up-to-500\n      when:\n        tool: refund_order\n        arguments: {amount_cents: {max: 50000}}\n      verdict: allow",
                with: "    - id: refunds-need-approval\n      when:\n        tool: refund_order\n      verdict: approval_required"
            ).replacingOccurrences(of: "script: chat.model.yaml", with: "script: \(fixture)/chat.model.yaml")
            #expect(gated.contains("refunds-need-approval"))
            try gated.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            let conversation = try String(
                contentsOfFile: repositoryRoot.appendingPathComponent("EvalCases/support/refund-conversation.yaml").path, encoding: .utf8)
            let result = try await Self.runCase(
                conversation.replacingOccurrences(
                    of: "agent: ../../Fixtures/agents/support-chat/agent.yaml", with: "agent: agent.yaml\napprove: [call-2]"),
                in: directory)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let log = directory.path("out/support-refund-conversation-1.jsonl.gz")
            let state = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
            #expect(state.calls.first { $0.tool == "refund_order" }?.approval?.isGranted == true)
            let rerun = try await agentEval(["rerun", log, "--agent", directory.path("agent.yaml")])
            #expect(rerun.status == 0, "\(rerun.stdoutText)\(rerun.stderr)")
            #expect(rerun.stdoutText.contains("identical"), "\(rerun.stdoutText)")
        }
    }
}
