import AgentRuntime
import ConfigFile
import Foundation
import TestSupport
import Testing
import TraceCore

@Suite("Agent files")
struct AgentFileTests {
    static let script = """
        decisions:
          - answer: hi
        """

    static let valid = """
        name: demo
        model: {script: demo.model.yaml}
        tools:
          - name: lookup
            description: Looks things up.
            side_effect: read
            input_schema:
              type: object
              properties:
                id: {type: string}
            fixture:
              - output: {found: true}
        policy:
          default: allow
          rules:
            - id: no-lookups-for-bots
              when: {tool: lookup, actor: "bot:*"}
              verdict: deny
        limits: {max_steps: 3}
        """

    /// Writes `agent` (and a script) to a fresh directory and loads it; returns the error.
    func loadError(_ agent: String, script: String = AgentFileTests.script) throws -> ConfigError? {
        try TemporaryDirectory.with { directory -> ConfigError? in
            try agent.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try script.write(toFile: directory.path("demo.model.yaml"), atomically: true, encoding: .utf8)
            do {
                _ = try AgentFile.load(path: directory.path("agent.yaml"))
                return nil
            } catch let error as ConfigError {
                // Report the location relative to the directory, so expectations are stable.
                var relative = error
                relative.location.path = (error.location.path as NSString).lastPathComponent
                return relative
            }
        }
    }

    @Test("a valid agent file loads, with its tools, policy and limits")
    func valid() throws {
        try TemporaryDirectory.with { directory in
            try Self.valid.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try Self.script.write(toFile: directory.path("demo.model.yaml"), atomically: true, encoding: .utf8)
            let agent = try AgentFile.load(path: directory.path("agent.yaml"))
            #expect(agent.name == "demo")
            #expect(agent.tools.names == ["lookup"])
            #expect(agent.limits.maxSteps == 3)
            #expect(agent.model.identity == ModelIdentity(provider: "scripted", name: "demo"))
            #expect(agent.policy.identity.name == "policy")
            #expect(agent.writesContextDeltas, "log version 2 by default")
        }
    }

    @Test("a script's answer written as a YAML number or boolean is that text, as YAML shows it; a mapping stays what it is")
    func scalarAnswers() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("numbers.model.yaml")
            try "decisions:\n  - answer: 42\n  - ask_human: true\n  - answer: 2.50\n  - answer: {text: x}\n".write(
                toFile: path, atomically: true, encoding: .utf8)
            let script = try ScriptedModel.load(path: path)
            #expect(
                script.decisions.map(\.raw) == [
                    #"{"answer":"42"}"#, #"{"ask_human":"true"}"#, #"{"answer":"2.50"}"#, #"{"answer":{"text":"x"}}"#,
                ])
        }
    }

    @Test("log_version: 1 writes every context packet whole; 2 allows deltas")
    func logVersion() throws {
        try TemporaryDirectory.with { directory in
            try Self.script.write(toFile: directory.path("demo.model.yaml"), atomically: true, encoding: .utf8)
            for (version, deltas) in [(1, false), (2, true)] {
                try (Self.valid + "\nlog_version: \(version)\n").write(
                    toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
                #expect(try AgentFile.load(path: directory.path("agent.yaml")).writesContextDeltas == deltas, "log_version \(version)")
            }
        }
    }

    static func replacing(_ old: String, _ new: String) -> String {
        valid.replacingOccurrences(of: old, with: new)
    }

    @Test(
        "bad agent files are rejected with file:line:column, what is wrong and a hint",
        arguments: [
            (replacing("name: demo", "name: [demo"), "agent.yaml:2:6: the file is not valid YAML: did not find expected ',' or ']'"),
            (replacing("name: demo\n", ""), #"agent.yaml:1:1: the agent file has no "name""#),
            (replacing("limits:", "limts:"), #"agent.yaml:19:1: the agent file has no setting "limts" (did you mean "limits"?)"#),
            (replacing("max_steps: 3", "max_steps: many"), "agent.yaml:19:21: limits.max_steps must be a whole number, found a string"),
            (replacing("max_steps: 3", "max_steps: 0"), "agent.yaml:19:21: limits.max_steps must be at least 1, found 0"),
            (
                replacing("side_effect: read", "side_effect: reed"),
                #"agent.yaml:6:18: tool "lookup" side_effect must be one of "read", "draft", "write", found "reed" (did you mean "read"?)"#
            ),
            (
                replacing("id: {type: string}", "id: {type: str}"),
                #"agent.yaml:10:14: tool "lookup" input_schema: properties.id.type names an unknown type "str" (known: string, integer, number, boolean, object, array, null)"#
            ),
            (
                replacing("when: {tool: lookup,", "when: {tool: lookpu,"),
                #"agent.yaml:17:20: rule "no-lookups-for-bots" names the tool "lookpu", which the agent does not have (did you mean "lookup"?)"#
            ),
            (
                replacing("verdict: deny", "verdict: block"),
                #"agent.yaml:18:16: rule "no-lookups-for-bots" verdict must be one of "allow", "deny", "approval_required", found "block""#
            ),
            (
                replacing("      - output: {found: true}", "      - {}"),
                #"agent.yaml:12:9: tool "lookup" fixture[0] needs "output" or "error""#
            ),
            (
                replacing("    fixture:\n      - output: {found: true}\n", ""),
                #"agent.yaml:4:5: tool "lookup" has neither "command" nor "fixture" (tools written in Swift are registered through the library API (ClosureToolHost))"#
            ),
            (replacing("script: demo.model.yaml", "script: missing.yaml"), "agent.yaml:2:17: model.script: "),
            (
                replacing("limits: {max_steps: 3}", "limits: {max_steps: 3}\nname: again"),
                #"agent.yaml:20:1: the key "name" appears twice in this mapping (first at line 1) (remove one of them)"#
            ),
            ("- just\n- a list\n", "agent.yaml:1:1: the agent file must be a mapping, found a list"),
            (
                replacing("limits: {max_steps: 3}", "limits: {max_steps: 3}\nlog_version: 4"),
                "agent.yaml:20:14: log_version must be between 1 and 3, found 4"
            ),
            (
                replacing("    fixture:\n      - output: {found: true}\n", "    command: [no-such-tool-program, --json]\n"),
                #"agent.yaml:11:14: tool "lookup" command: "no-such-tool-program" is not a program on PATH (install it, or give its path (relative paths start from the agent file's folder))"#
            ),
            (
                replacing("    fixture:\n      - output: {found: true}\n", "    command: [./tools/lookup.sh]\n"),
                "agent.yaml:11:14: tool \"lookup\" command: ./tools/lookup.sh does not exist or is not executable (install it, or give its path (relative paths start from the agent file's folder))"
            ),
        ] as [(String, String)])
    func badAgentFiles(_ text: String, _ expected: String) throws {
        let error = try #require(try loadError(text))
        #expect(error.description.hasPrefix(expected))
    }

    @Test(
        "bad model scripts are rejected with file:line:column",
        arguments: [
            (
                "decisions:\n  - answer: a\n    stop: b\n",
                "demo.model.yaml:2:5: decisions[0] has answer and stop; a reply is exactly one of them"
            ),
            (
                "decisions:\n  - answer: a\n    usage: {input: -1, output: 2}\n",
                "demo.model.yaml:3:20: usage.input must be at least 0, found -1"
            ),
            (
                "rules:\n  - when: {last_status: fine}\n    reply: {answer: x}\n",
                #"demo.model.yaml:2:25: last_status must be one of "ok", "error", "refused", "denied", found "fine""#
            ),
            ("name: x\n", #"demo.model.yaml:1:1: the model script has neither "decisions" nor "rules""#),
        ] as [(String, String)])
    func badScripts(_ script: String, _ expected: String) throws {
        let error = try #require(try loadError(Self.valid, script: script))
        #expect(error.description.hasPrefix(expected))
    }
}
