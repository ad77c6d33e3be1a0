import AgentRuntime
import ConfigFile
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// Conversations: the runtime's loop with a simulated user (docs/conversations.md). Every run is
/// written to a real log and read back; the state is the log's fold.
@Suite("conversations: a simulated user's turns recorded, answered and ended")
struct ConversationTests {
    /// The support agent of docs/conversations.md, scripted on what the user said last.
    static func agent(maxSteps: Int = 20) throws -> Agent {
        let rules: [ScriptedModel.Rule] = [
            ScriptedModel.Rule(lastTool: Glob("refund_order"), reply: answer("Done: a refund of 49.99 EUR is on its way.")),
            ScriptedModel.Rule(lastTool: Glob("lookup_order"), reply: answer("Order A-1042, 49.99 EUR. Shall I refund it?")),
            {
                var rule = ScriptedModel.Rule(reply: calls(("refund_order", ["order_id": "A-1042"])))
                rule.userSaid = "yes"
                return rule
            }(),
            {
                var rule = ScriptedModel.Rule(reply: calls(("lookup_order", ["order_id": "A-1042"])))
                rule.userSaid = "A-[0-9]+"
                return rule
            }(),
            ScriptedModel.Rule(reply: answer("What is your order number?")),
        ]
        return makeAgent(
            rules: rules, tools: [try echoTool(name: "lookup_order"), try echoTool(name: "refund_order", sideEffect: .write)],
            limits: RunLimits(maxSteps: maxSteps))
    }

    static let customer = CaseUser(
        opening: "hi, my order arrived broken",
        lines: [
            CaseUser.Line(agentSaid: "order number", say: "It's A-1042."),
            CaseUser.Line(toolCalled: "lookup_order", say: "yes, please"),
            CaseUser.Line(agentSaid: "refund of", say: "great, thanks! ###STOP###"),
        ])

    static func converse(
        _ agent: Agent, with user: any SimulatedUser, maxTurns: Int = 12, in directory: TemporaryDirectory
    ) async throws -> (outcome: RunOutcome, events: [Event], path: String) {
        let path = directory.path("conversation.jsonl.gz")
        let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "run-conversation", clock: SteppingClock()))
        let outcome = try await runtime.converse(Conversation(user: user, maxTurns: maxTurns), log: path)
        let events = try LogReader(path: path, options: .init(isStrict: true)).readAll().events.map(\.event)
        return (outcome, events, path)
    }

    @Test(
        "each user turn is recorded before the step that answers it, the agent's answers go to the user, and the user's stop ends the run")
    func scriptedConversation() async throws {
        try await TemporaryDirectory.with { directory in
            let (outcome, events, path) = try await Self.converse(try Self.agent(), with: Self.customer, in: directory)
            let state = RunState(folding: events)
            #expect(state == outcome.state, "the live state is the log's fold")
            #expect(state.stop?.reason == .userStop)
            #expect(state.stop?.answer == "Done: a refund of 49.99 EUR is on its way.")
            #expect(state.start?.goal == "hi, my order arrived broken", "the opening is the run's goal")
            #expect(
                state.dialogue.map { "\($0.speaker.rawValue) \($0.turn): \($0.text)" } == [
                    "user 1: hi, my order arrived broken", "agent 1: What is your order number?", "user 2: It's A-1042.",
                    "agent 2: Order A-1042, 49.99 EUR. Shall I refund it?", "user 3: yes, please",
                    "agent 3: Done: a refund of 49.99 EUR is on its way.", "user 4: great, thanks!",
                ])
            #expect(state.userTurns.map(\.turn.source) == [.opening, .script, .script, .script])
            #expect(state.userTurns.last?.turn.ends == .userStop)
            #expect(state.calls.map { "\($0.tool)@\(state.turn(ofStep: $0.step))" } == ["lookup_order@2", "refund_order@3"])
            // A turn comes at the start of the step that answers it, before that step's packet.
            for record in state.userTurns.dropFirst() {
                let index = try #require(events.firstIndex { $0.sequence == record.sequence })
                #expect(events[index - 1].kind == "step_ended" && events[index + 1].step == record.step)
            }
            // Only the conversation's own lines say version 4; the digests hold in a replay.
            #expect(events.filter { $0.version == 4 }.map(\.kind) == ["user_turn", "user_turn", "user_turn", "user_turn", "run_stopped"])
            #expect(StateDigester.foldChecking(events).mismatch == nil)
            #expect(try await Subprocess.run(gzipPath, ["-t", path]).status == 0, "the real gzip reads it")
            // The user's turns cost the agent nothing: a scripted user has no usage at all.
            #expect(state.userUsage.modelCalls == 0)
        }
    }

    @Test("the conversation stops with max_turns after the agent answers the last turn it may have")
    func maxTurns() async throws {
        try await TemporaryDirectory.with { directory in
            let chatty = CaseUser(opening: "hi", lines: (2...9).map { CaseUser.Line(turn: $0, say: "and also \($0)?") })
            let (outcome, _, _) = try await Self.converse(try Self.agent(), with: chatty, maxTurns: 3, in: directory)
            #expect(outcome.stop.reason == .maxTurns, "\(outcome.stop)")
            #expect(outcome.state.userTurns.count == 3)
            #expect(outcome.state.agentMessages.count == 3, "the last turn is answered before the stop")
        }
    }

    @Test("a user with nothing to say is a simulator fault, never the agent's failure")
    func scriptRunsDry() async throws {
        try await TemporaryDirectory.with { directory in
            let dry = CaseUser(opening: "hi, my order arrived broken")
            let (outcome, _, _) = try await Self.converse(try Self.agent(), with: dry, in: directory)
            #expect(outcome.stop.reason == .blocked)
            #expect(outcome.stop.isSimulatorFault, "\(outcome.stop)")
            #expect(outcome.stop.error?.contains("nothing to say at turn 2") == true, "\(outcome.stop)")
        }
    }

    @Test(
        "a hostile user model is bounded and reported as a simulator fault",
        arguments: [
            ("", "is no message: \"answer\" is empty"), (String(repeating: "blah ", count: 5_000), "more than the 16384"),
            ("###STOP###", "at turn 1, before the agent answered"),
        ])
    func hostileUserModel(reply: String, says: String) async throws {
        try await TemporaryDirectory.with { directory in
            // The user's model: the product's scripted model, its first reply the hostile one.
            let model = ScriptedModel(name: "hostile-user", decisions: [ModelReply(decision: ["answer": .string(reply)])])
            let user = CaseUser(model: ModelUser(client: model, persona: UserPersona(persona: "A customer.")))
            let (outcome, events, _) = try await Self.converse(try Self.agent(), with: user, in: directory)
            #expect(outcome.stop.isSimulatorFault, "\(outcome.stop)")
            #expect(outcome.stop.error?.contains(says) == true, "\(outcome.stop)")
            #expect(!events.contains { $0.kind == "user_turn" }, "a turn the user could not give is not recorded")
            #expect(events.last?.kind == "run_stopped")
        }
    }

    @Test("a model user that answers with a tool call is a simulator fault; its usage is the user's, not the agent's")
    func userModelCallsATool() async throws {
        try await TemporaryDirectory.with { directory in
            let model = ScriptedModel(
                name: "user-model",
                decisions: [answer("hi, my order arrived broken"), calls(("refund_order", ["order_id": "A-1042"]))])
            let user = CaseUser(model: ModelUser(client: model, persona: UserPersona(persona: "A customer.")))
            let (outcome, _, _) = try await Self.converse(try Self.agent(), with: user, in: directory)
            #expect(
                outcome.stop.error?.contains("replied with a tool call at turn 2, not a message (a simulated user has no tools)") == true,
                "\(outcome.stop)")
            #expect(outcome.stop.error?.contains("refund_order") == true, "\(outcome.stop)")
            #expect(outcome.state.userUsage.modelCalls == 1)
            #expect(outcome.state.userUsage.inputTokens == 100)
            #expect(outcome.state.usage.modelCalls == 1, "the agent's one decision; the user's call is not counted in it")
        }
    }

    @Test("the user's model sees the conversation with the roles flipped, after its instructions")
    func userRequest() async throws {
        try await TemporaryDirectory.with { directory in
            let (outcome, _, _) = try await Self.converse(try Self.agent(), with: Self.customer, in: directory)
            let persona = UserPersona(persona: "A busy customer.", known: ["order A-1042"], unknown: ["the order date"], task: "A refund.")
            let request = ModelUser(client: ScriptedModel(name: "u"), persona: persona).request(turn: 5, after: outcome.state)
            #expect(request.instructions.contains("Who you are: A busy customer."))
            #expect(request.instructions.contains("never invent it") && request.instructions.contains("- the order date"))
            #expect(
                Array(request.dialogue.prefix(3)).map { "\($0.speaker.rawValue): \($0.text)" } == [
                    "user: \(UserPersona.kickoff)", "agent: hi, my order arrived broken", "user: What is your order number?",
                ])
            #expect(request.dialogue.count == 8, "the kickoff and the seven lines")
            #expect(request.tools.isEmpty)
        }
    }

    @Test("the agent ending the conversation is agent_stop; a log written as version 1 refuses a conversation")
    func agentStopAndOldLogs() async throws {
        try await TemporaryDirectory.with { directory in
            let stopper = makeAgent(decisions: [ModelReply(decision: ["stop": "nothing more to do"])], tools: [])
            let (outcome, _, _) = try await Self.converse(stopper, with: CaseUser(opening: "hi"), in: directory)
            #expect(outcome.stop.reason == .agentStop)
            var old = stopper
            old.logFormatVersion = 1
            let runtime = AgentRuntime(agent: old, environment: .deterministic(runId: "run-old", clock: SteppingClock()))
            await #expect(throws: RuntimeError.self) {
                _ = try await runtime.converse(Conversation(user: CaseUser(opening: "hi")), log: directory.path("old.jsonl.gz"))
            }
        }
    }
}
