import Recording
import Testing

/// The agent's name a recording gives a command: its script or program, never a variable it sets.
@Suite("the name of a recorded command")
struct CommandNameTests {
    @Test(
        "interpreters, options and env assignments are skipped; an assignment's value is never a name",
        arguments: [
            (["python3", "agents/refund.py", "{input}"], "refund"),
            (["env", "OPENAI_BASE_URL=http://127.0.0.1:8000/v1", "OPENAI_API_KEY=sk-x", "python3", "agents/refund.py"], "refund"),
            (["env", "A=b/c", "node", "agent.mjs"], "agent"),
            (["uv", "run", "-q", "bot.py"], "bot"),
            (["./my-agent"], "my-agent"),
        ])
    func name(command: [String], expected: String) {
        #expect(CommandRecording.agentName(for: command) == expected)
    }
}
