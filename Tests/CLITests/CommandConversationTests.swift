import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// Conversation cases whose agent is a program (`command:` with `user:`, docs/conversations.md,
/// "Command agents"): real agents written with Pydantic AI, smolagents and the raw openai SDK
/// read the user's turns from their standard input, through the recording gateway, against the
/// local model server, which also plays the user.
@Suite("conversations with command agents", .tags(.python), .needsPython, .ownThread)
struct CommandConversationTests {
    struct Agent: CustomTestStringConvertible, Sendable {
        var name: String
        var script: String
        var testDescription: String { name }
    }

    static let agents = [
        Agent(name: "raw openai SDK loop", script: "external/raw_sdk_chat.py"),
        Agent(name: "Pydantic AI", script: "external/pydantic_ai_chat.py"),
        Agent(name: "smolagents", script: "external/smolagents_chat.py"),
    ]

    /// The scripted customer of the bundled conversation case.
    static let scriptedUser = """
        user:
          opening: hi, my order arrived broken
          script:
            - after: {agentSaid: "order number"}
              say: It's A-1042.
            - after: {toolCalled: lookup_order}
              say: yes, please
            - after: {agentSaid: "refund of"}
              say: great, thanks!
              end: user_stop
            - say: that is not what I asked, bye
              end: user_stop
          maxTurns: 6
        """

    static let refundExpectations = """
        expected:
          stopReason: user_stop
          toolsCalled: [lookup_order, refund_order]
          turns:
            2: {toolsCalled: [lookup_order], toolsNotCalled: [refund_order]}
            3: {toolsCalled: [refund_order]}
          communicate: ["refund of 49.99"]
        """

    /// A conversation case running `command` against `agentBase`, with `user` and `expected` as given.
    static func writeCase(
        _ directory: TemporaryDirectory, command: [String], agentBase: String, user: String, expected: String = refundExpectations,
        extra: String = ""
    ) throws {
        let commandLine = command.map { "\"\($0)\"" }.joined(separator: ", ")
        try """
        caseId: chat
        command: [\(commandLine)]
        upstream: {openai: "\(agentBase)"}
        timeout: 90
        \(extra)\(user)
        \(expected)
        """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
    }

    static func command(_ script: String) async throws -> [String] {
        [try await RecordCommandTests.python(), ExampleRuns.fixtures.appendingPathComponent(script).path]
    }

    static let environment = ["OPENAI_API_KEY": RecordCommandTests.key]

    @Test(
        "each framework's agent holds the conversation over its standard input: turns, calls per turn and the user's stop",
        arguments: agents)
    func frameworkConversation(agent: Agent) async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.writeCase(
                directory, command: try await Self.command(agent.script), agentBase: server.baseURL("support-chat"), user: Self.scriptedUser
            )
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs", "--json"], in: directory.url, environment: Self.environment)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let log = directory.path("runs/chat-1.jsonl.gz")
            let state = try RecordCommandTests.state(log)
            #expect(
                state.userTurns.map(\.turn.text) == ["hi, my order arrived broken", "It's A-1042.", "yes, please", "great, thanks!"])
            #expect(state.userTurns.map(\.turn.turn) == [1, 2, 3, 4])
            #expect(state.stop?.reason == .userStop)
            #expect(state.stop?.answer == "Done: a refund of 49.99 EUR for order A-1042 is on its way.")
            #expect(state.agentMessages.count == 3, "\(state.agentMessages)")
            #expect(state.slice(turn: 2)?.calls.map(\.tool) == ["lookup_order"])
            #expect(state.slice(turn: 3)?.calls.map(\.tool) == ["refund_order"])
            let verify = try await agentEval(["log", "verify", log])
            #expect(verify.status == 0, "\(verify.stdoutText)\(verify.stderr)")
            #expect(
                !String(decoding: try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", log]).stdout, as: UTF8.self).contains(
                    RecordCommandTests.key), "the key stays out of the log")
        }
    }

    @Test("a model-played user and the agent record into one cassette; with nothing listening the conversation replays turn for turn")
    func cassetteReplaysBothRoles() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            let user = """
                user:
                  persona: A busy customer who answers only what is asked.
                  scenario: {reason: The mug set arrived broken., known: [order A-1042], unknown: [the order date], task: Get a refund.}
                  model: {provider: openai, name: customer-model, base_url: "\(server.baseURL("customer"))", max_retries: 0, temperature: 0}
                  maxTurns: 6
                """
            try Self.writeCase(
                directory, command: try await Self.command("external/raw_sdk_chat.py"), agentBase: server.baseURL("support-chat"),
                user: user, extra: "cassette: cassettes/chat\n")
            let recorded = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs/1", "--record", "new"], in: directory.url,
                environment: Self.environment)
            #expect(recorded.status == 0, "\(recorded.stdoutText)\(recorded.stderr)")
            let paths = try server.requests().compactMap { $0["path"] as? String }
            #expect(paths.filter { $0.hasPrefix("/customer/") }.count == 4, "the user's four turns asked its model: \(paths)")
            server.stop()
            let replayed = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs/2"], in: directory.url, environment: Self.environment)
            #expect(replayed.status == 0, "\(replayed.stdoutText)\(replayed.stderr)")
            let first = try RecordCommandTests.state(directory.path("runs/1/chat-1.jsonl.gz"))
            let second = try RecordCommandTests.state(directory.path("runs/2/chat-1.jsonl.gz"))
            #expect(first.dialogue == second.dialogue)
            #expect(second.dialogue.count == 7, "\(second.dialogue.map(\.text))")
            #expect(second.userTurns.map(\.turn.source) == [.model, .model, .model, .model])
            #expect(second.userUsage.modelCalls == 4, "the user's calls are the user's")
            #expect(second.usage.modelCalls == second.decisions.count)
        }
    }

    /// A program that answers the user once, then exits without reading another turn.
    static let oneShot = """
        import openai, sys
        line = sys.stdin.readline().strip()
        reply = openai.OpenAI(max_retries=0).chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": line}])
        print(reply.choices[0].message.content)
        """

    @Test("a program that exits after its first answer ends the conversation itself (agent_stop), the same however fast the user is")
    func programEndsConversation() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.oneShot.write(toFile: directory.path("one_shot.py"), atomically: true, encoding: .utf8)
            try Self.writeCase(
                directory, command: [try await RecordCommandTests.python(), "one_shot.py"], agentBase: server.baseURL("support-chat"),
                user: Self.scriptedUser)
            for attempt in 1...3 {
                let result = try await agentEval(
                    ["run", "case.yaml", "--no-catalog", "--out", "runs/\(attempt)", "--json"], in: directory.url,
                    environment: Self.environment)
                #expect(result.status == 1, "a conversation the agent ended early fails its case: \(result.stdoutText)\(result.stderr)")
                let state = try RecordCommandTests.state(directory.path("runs/\(attempt)/chat-1.jsonl.gz"))
                #expect(state.stop?.reason == .agentStop, "\(String(describing: state.stop))")
                #expect(
                    state.userTurns.map(\.turn.text) == ["hi, my order arrived broken"],
                    "the turn the program never read is not in the log: \(state.userTurns.map(\.turn.text))")
                #expect(state.stop?.answer == "I'm sorry to hear that! What is your order number?")
            }
            // The user's reply to that last answer ends the conversation: the run ends as the user
            // ended it, however fast the program exited.
            let ending = """
                user:
                  opening: hi, my order arrived broken
                  script:
                    - {after: {agentSaid: "order number"}, say: "never mind, bye", end: user_stop}
                """
            try Self.writeCase(
                directory, command: [try await RecordCommandTests.python(), "one_shot.py"], agentBase: server.baseURL("support-chat"),
                user: ending, expected: "expected:\n  stopReason: user_stop\n")
            for attempt in 4...6 {
                let result = try await agentEval(
                    ["run", "case.yaml", "--no-catalog", "--out", "runs/\(attempt)"], in: directory.url, environment: Self.environment)
                #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
                let state = try RecordCommandTests.state(directory.path("runs/\(attempt)/chat-1.jsonl.gz"))
                #expect(state.userTurns.map(\.turn.text) == ["hi, my order arrived broken", "never mind, bye"])
            }
        }
    }

    @Test(
        "a program that rewrites what the user says before its model sees it leaves its answers unplaced: the conversation could not run, never a pass"
    )
    func rewrittenTurnCouldNotRun() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            // Each line the user says, upper-cased before the model sees it: no request holds the
            // user's own words of turn 2.
            try """
            import openai, sys
            client = openai.OpenAI(max_retries=0)
            messages = []
            for line in sys.stdin:
                messages.append({"role": "user", "content": line.strip().upper()})
                reply = client.chat.completions.create(model="gpt-test", messages=messages)
                messages.append({"role": "assistant", "content": reply.choices[0].message.content})
                print(reply.choices[0].message.content, flush=True)
            """.write(toFile: directory.path("shouting.py"), atomically: true, encoding: .utf8)
            try """
            caseId: chat
            command: ["\(try await RecordCommandTests.python())", "shouting.py"]
            upstream: {openai: "\(server.baseURL("support-chat"))"}
            timeout: 10
            \(Self.scriptedUser)
            expected:
              communicate: ["order number"]

            """.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs"], in: directory.url, environment: Self.environment)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("none of which holds its text"), "\(result.stdoutText)")
            let state = try RecordCommandTests.state(directory.path("runs/chat-1.jsonl.gz"))
            #expect(state.stop?.isSimulatorFault == true, "\(String(describing: state.stop))")
        }
    }

    /// What the support-chat model says to the user in the refund conversation, in order.
    static let refundReplies = [
        "I'm sorry to hear that! What is your order number?",
        "I found order A-1042, an espresso mug set, 49.99 EUR. Shall I refund it in full?",
        "Done: a refund of 49.99 EUR for order A-1042 is on its way.",
    ]

    /// Runs `Fixtures/external/raw_sdk_chat.py` with `text` in it replaced by `replacement` as a
    /// command case with the scripted user, against the support-chat model; expects the case to
    /// pass, and gives the run's state.
    static func runRawLoop(in directory: TemporaryDirectory, editing text: String, to replacement: String) async throws -> RunState {
        let server = try LocalModelServer()
        defer { server.stop() }
        let loop = try String(contentsOf: ExampleRuns.fixtures.appendingPathComponent("external/raw_sdk_chat.py"), encoding: .utf8)
        let edited = loop.replacingOccurrences(of: text, with: replacement)
        #expect(edited != loop, "the loop holds \(text)")
        try edited.write(toFile: directory.path("edited.py"), atomically: true, encoding: .utf8)
        try Self.writeCase(
            directory, command: [try await RecordCommandTests.python(), "edited.py"], agentBase: server.baseURL("support-chat"),
            user: Self.scriptedUser)
        let result = try await agentEval(
            ["run", "case.yaml", "--no-catalog", "--out", "runs"], in: directory.url, environment: Self.environment)
        #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
        return try RecordCommandTests.state(directory.path("runs/chat-1.jsonl.gz"))
    }

    @Test(
        "an input guardrail's chat, which opens with what the user said and asks whether it is safe, was not the agent's reply: the user is answered by the agent"
    )
    func guardrailIsAside() async throws {
        try await TemporaryDirectory.with { directory in
            // The raw SDK loop, which first asks its model about each user message in a chat of its
            // own that opens with the message (the input-guardrail shape); the model says SAFE.
            let appended = "        messages.append({\"role\": \"user\", \"content\": line.rstrip(\"\\n\")})\n"
            let state = try await Self.runRawLoop(
                in: directory, editing: appended,
                to: "        client.chat.completions.create(model=\"gpt-test\", messages=[\n"
                    + "            {\"role\": \"user\", \"content\": line.rstrip(\"\\n\")},\n"
                    + "            {\"role\": \"user\", \"content\": \"Is the message above safe? Reply SAFE or UNSAFE.\"}])\n" + appended)
            #expect(state.userTurns.map(\.turn.text) == ["hi, my order arrived broken", "It's A-1042.", "yes, please", "great, thanks!"])
            #expect(
                state.agentMessages == Self.refundReplies, "\(state.agentMessages)")
            #expect(state.decisions.count { $0.isAside } >= 3, "\(state.decisions.map(\.isAside))")
        }
    }

    @Test("an answer in a side conversation (a note for the back office) was not said to the user: marked aside, no check or user reads it")
    func sideConversationIsAside() async throws {
        try await TemporaryDirectory.with { directory in
            // The raw SDK loop, which after each answer asks its model for a back-office note in a
            // chat of its own; the model answers that with its question for the order number.
            let printed = "                print(message.content, flush=True)\n"
            let state = try await Self.runRawLoop(
                in: directory, editing: printed,
                to: printed + """
                                    client.chat.completions.create(model="gpt-test", messages=[
                                        {"role": "system", "content": "You write notes for the back office."},
                                        {"role": "user", "content": "Write the note on the conversation so far."}])

                    """)
            #expect(state.decisions.count { $0.isAside } >= 2, "\(state.decisions.map(\.isAside))")
            // The reference reader in Python folds `aside` into the state as the digests say.
            let reference = try await Subprocess.run(
                "/usr/bin/env",
                [
                    "python3", repositoryRoot.appendingPathComponent("scripts/agent_eval_log.py").path, "verify",
                    directory.path("runs/chat-1.jsonl.gz"),
                ])
            #expect(
                reference.status == 0 && reference.stdoutText.contains(#""digest_mismatches":[]"#),
                "\(reference.stdoutText)\(reference.stderr)")
            #expect(
                state.agentMessages == Self.refundReplies, "\(state.agentMessages)")
            #expect(state.userTurns.map(\.turn.text) == ["hi, my order arrived broken", "It's A-1042.", "yes, please", "great, thanks!"])
            #expect(state.stop?.reason == .userStop)
        }
    }

    /// A user whose model never answers: it opens, then is asked for turn 2 for ever.
    static func hangingUser(_ server: LocalModelServer) -> String {
        """
        user:
          persona: A customer.
          opening: hi, my order arrived broken
          model: {provider: openai, name: customer-model, base_url: "\(server.baseURL("hang"))", max_retries: 0}
        """
    }

    @Test(
        "a user model still answering 30 s after the program answered and exited is a simulator fault: could not run, never the agent's stop"
    )
    func userSlowerThanTheProgramsEnd() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.oneShot.write(toFile: directory.path("one_shot.py"), atomically: true, encoding: .utf8)
            let user = Self.hangingUser(server)
            try Self.writeCase(
                directory, command: [try await RecordCommandTests.python(), "one_shot.py"], agentBase: server.baseURL("support-chat"),
                user: user, expected: "expected:\n  stopReason: user_stop\n")
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs", "--json"], in: directory.url, environment: Self.environment)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("simulator_fault"), "\(result.stdoutText)")
            let state = try RecordCommandTests.state(directory.path("runs/chat-1.jsonl.gz"))
            #expect(state.stop?.reason == .blocked, "\(String(describing: state.stop))")
            #expect(state.stop?.error?.contains("the user was still answering turn 2 30 s after the program exited") == true)
            #expect(state.stop?.answer == "I'm sorry to hear that! What is your order number?")
        }
    }

    @Test("a user model still answering when the command's time runs out is a simulator fault: could not run, not the agent's timeout")
    func userOutOfTime() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let user = Self.hangingUser(server)
            try Self.writeCase(
                directory, command: try await Self.command("external/raw_sdk_chat.py"), agentBase: server.baseURL("support-chat"),
                user: user, expected: "expected:\n  toolsNotCalled: [refund_order]\n")
            let text = try String(contentsOfFile: directory.path("case.yaml"), encoding: .utf8)
                .replacingOccurrences(of: "timeout: 90", with: "timeout: 4")
            try text.write(toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs", "--json"], in: directory.url, environment: Self.environment)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("simulator_fault"), "\(result.stdoutText)")
            let state = try RecordCommandTests.state(directory.path("runs/chat-1.jsonl.gz"))
            #expect(state.stop?.error?.contains("the user was still answering turn 2") == true, "\(String(describing: state.stop))")
        }
    }

    @Test(
        "a user model that answers with a tool call is a simulator fault: could not run (exit 2), the program stopped, never a failed case")
    func simulatorFault() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let user = """
                user:
                  persona: A customer.
                  model: {provider: openai, name: customer-model, base_url: "\(server.baseURL("customer-calls"))", max_retries: 0}
                """
            try Self.writeCase(
                directory, command: try await Self.command("external/raw_sdk_chat.py"), agentBase: server.baseURL("support-chat"),
                user: user)
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs", "--json"], in: directory.url, environment: Self.environment)
            #expect(result.status == 2, "\(result.stdoutText)\(result.stderr)")
            #expect(result.stdoutText.contains("simulator_fault"), "\(result.stdoutText)")
            let state = try RecordCommandTests.state(directory.path("runs/chat-1.jsonl.gz"))
            #expect(state.stop?.isSimulatorFault == true, "\(String(describing: state.stop))")
            #expect(state.userTurns.count == 1)
        }
    }

    @Test("a user that never stops is bounded by maxTurns; the program, given no more turns, exits and the run stops max_turns")
    func neverEndingUser() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let user = """
                user:
                  persona: A customer.
                  model: {provider: openai, name: customer-model, base_url: "\(server.baseURL("customer-chatty"))", max_retries: 0}
                  maxTurns: 3
                """
            try Self.writeCase(
                directory, command: try await Self.command("external/raw_sdk_chat.py"), agentBase: server.baseURL("support-chat"),
                user: user, expected: "expected:\n  stopReason: max_turns\n")
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs"], in: directory.url, environment: Self.environment)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            let state = try RecordCommandTests.state(directory.path("runs/chat-1.jsonl.gz"))
            #expect(state.stop?.reason == .maxTurns)
            #expect(state.userTurns.count == 3)
        }
    }

    @Test("a program that ignores the end of its input is stopped after the grace period; the run keeps the user's ending")
    func programIgnoringEndOfInput() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            // The raw SDK loop, then a sleep where it should exit.
            let script = try String(
                contentsOfFile: ExampleRuns.fixtures.appendingPathComponent("external/raw_sdk_chat.py").path, encoding: .utf8)
            try (script + "\nimport time\ntime.sleep(3600)\n").write(toFile: directory.path("stays.py"), atomically: true, encoding: .utf8)
            try Self.writeCase(
                directory, command: [try await RecordCommandTests.python(), "stays.py"], agentBase: server.baseURL("support-chat"),
                user: Self.scriptedUser)
            let started = ContinuousClock.now
            let result = try await agentEval(
                ["run", "case.yaml", "--no-catalog", "--out", "runs"], in: directory.url, environment: Self.environment)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            #expect(ContinuousClock.now - started < .seconds(80), "stopped after the grace, long before the case's 90 s timeout")
            let state = try RecordCommandTests.state(directory.path("runs/chat-1.jsonl.gz"))
            #expect(state.stop?.reason == .userStop)
        }
    }

    @Test("killed with SIGKILL while the agent's model answers turn 2, the log still holds turn 2: it is recorded as the request begins")
    func killedMidConversation() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            try Self.writeCase(
                directory, command: try await Self.command("external/raw_sdk_chat.py"),
                agentBase: server.baseURL("support-chat-then-hang"), user: Self.scriptedUser)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try agentEvalBinary())
            process.arguments = ["run", "case.yaml", "--no-catalog", "--out", "runs"]
            process.currentDirectoryURL = directory.url
            process.environment = ProcessInfo.processInfo.environment.merging(Self.environment) { $1 }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            func hanging() throws -> Bool {
                try server.requests().filter { ($0["path"] as? String)?.hasPrefix("/support-chat-then-hang/") == true }.count >= 2
            }
            var waited = 0
            while try !hanging(), waited < 600 {
                try await Task.sleep(for: .milliseconds(50))
                waited += 1
            }
            #expect(try hanging(), "the conversation never reached turn 2")
            kill(process.processIdentifier, SIGKILL)
            await wait(for: process, seconds: 10)
            let read = try LogReader(path: directory.path("runs/chat-1.jsonl.gz")).readAll()
            let turns = read.events.compactMap { if case .userTurn(let turn) = $0.event.payload { turn } else { nil } }
            #expect(turns.map(\.text) == ["hi, my order arrived broken", "It's A-1042."], "\(turns)")
        }
    }

    @Test("a conversation case's command may not take {input}: its turns come on standard input (check names the line)")
    func inputPlaceholderIsAnError() async throws {
        try await TemporaryDirectory.with { directory in
            try Self.writeCase(
                directory, command: ["python3", "agent.py", "{input}"], agentBase: "http://127.0.0.1:9/v1", user: Self.scriptedUser)
            let result = try await agentEval(["check", "case.yaml"], in: directory.url)
            #expect(result.status != 0)
            #expect(result.stderr.contains("case.yaml:2"), "\(result.stderr)")
            #expect(result.stderr.contains("standard input"), "\(result.stderr)")
        }
    }
}
