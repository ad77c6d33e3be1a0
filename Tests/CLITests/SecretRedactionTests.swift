import Foundation
import TestSupport
import TestTags
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Secrets planted where a run meets them — key patterns in a tool's output and the model's
/// reply, values handed to a command tool and to an MCP server through `env:` — and every way
/// the run is shown afterwards: the log itself, `exec --stream --json`, `replay`, `view` and
/// `export otlp`.
@Suite("Secrets stay out of every output")
struct SecretRedactionTests {
    static let stripeKey = "sk_live_51PlantedStripeKey0123456789"
    static let googleKey = "AIzaSyPlanted_GoogleKey-0123456789abcde"
    static let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlLXBsYW50ZWQtMDEy"
    /// Handed to the command tool under a name listed in `redact.env`, and only there.
    static let toolSetting = "tool-setting-7f3a9c41"
    /// Handed to the command tool under a name that looks secret and is listed nowhere.
    static let serviceToken = "service-token-5521a9e0"
    /// Handed to the MCP server under a name listed in `redact.env`, and only there.
    static let serverSetting = "server-setting-2d8e4b77"

    @Test(
        "keys in tool output and model replies, and env values given to a tool and an MCP server, appear in no output", .tags(.python),
        .needsPython)
    func plantedSecrets() async throws {
        #expect(Self.googleKey.count == 39)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await MCPTestServers.failureServer().map { "\"\($0)\"" }.joined(separator: ", ")
        try """
        #!/bin/sh
        echo "connecting with $TOOL_SETTING and $SERVICE_TOKEN" >&2
        printf '{"stripe":"\(Self.stripeKey)","google":"\(Self.googleKey)","session":"\(Self.jwt)","setting":"%s","token":"%s"}' \
          "$TOOL_SETTING" "$SERVICE_TOKEN"
        """.write(toFile: directory.path("leak.sh"), atomically: true, encoding: .utf8)
        #expect(chmod(directory.path("leak.sh"), 0o755) == 0)
        try """
        name: leaky
        model: {script: leaky.model.yaml}
        tools:
          - name: leak
            description: Prints what it was given.
            side_effect: read
            command: [./leak.sh]
            env: {TOOL_SETTING: \(Self.toolSetting), SERVICE_TOKEN: \(Self.serviceToken)}
        mcp_servers:
          vault:
            command: [\(server)]
            env: {SERVER_SETTING: \(Self.serverSetting)}
            tools: [getenv]
        policy: {default: allow}
        limits: {max_steps: 4}
        redact: {env: [TOOL_SETTING, SERVER_SETTING]}
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        try """
        name: leaky-script
        decisions:
          - tool_calls:
              - {name: leak, arguments: {}}
              - {name: getenv, arguments: {name: SERVER_SETTING}}
          - answer: "Use \(Self.stripeKey), \(Self.googleKey) and \(Self.jwt)."
        """.write(toFile: directory.path("leaky.model.yaml"), atomically: true, encoding: .utf8)

        let log = directory.path("run.jsonl.gz")
        let exec = try await agentEval([
            "exec", "--agent", directory.path("agent.yaml"), "--input", "go", "--log", log, "--stream", "--json",
        ])
        #expect(exec.status == 0, "\(exec.stderr)")
        let logText = String(decoding: try await Subprocess.run(gzipPath, ["-dc", log]).stdout, as: UTF8.self)
        let replay = try await agentEval(["replay", log, "--full"])
        #expect(replay.status == 0, "\(replay.stderr)")
        let replayJSON = try await agentEval(["replay", log, "--json"])
        #expect(replayJSON.status == 0, "\(replayJSON.stderr)")
        let view = try await agentEval(["view", log, "--out", directory.path("run.html")])
        #expect(view.status == 0, "\(view.stderr)")
        let page = try String(contentsOfFile: directory.path("run.html"), encoding: .utf8)
        let export = try await agentEval(["export", "otlp", log, "--out", "-", "--include-content"])
        #expect(export.status == 0, "\(export.stderr)")

        let outputs: [(String, String)] = [
            ("the log", logText), ("exec --stream --json", exec.stdoutText + exec.stderr),
            ("replay --full", replay.stdoutText + replay.stderr), ("replay --json", replayJSON.stdoutText + replayJSON.stderr),
            ("view", page + view.stdoutText + view.stderr), ("export otlp", export.stdoutText + export.stderr),
        ]
        for (name, text) in outputs {
            for secret in [Self.stripeKey, Self.googleKey, Self.jwt, Self.toolSetting, Self.serviceToken, Self.serverSetting] {
                #expect(!text.contains(secret), "\(secret) leaked into \(name)")
            }
            // The outputs show the tool's result, so the check above could have failed.
            #expect(text.contains("[redacted:stripe-key:"), "\(name) does not show the tool's output")
        }
        for rule in ["stripe-key", "google-api-key", "jwt", "env:TOOL_SETTING", "env:SERVICE_TOKEN", "env:SERVER_SETTING"] {
            #expect(logText.contains("[redacted:\(rule):"), "no \(rule) placeholder in the log")
        }
    }
}
