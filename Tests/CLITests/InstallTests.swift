import Foundation
import TestSupport
import Testing

/// Using agent-eval every day: installed without `swift run`, with its version, completions,
/// help pages, and colour only where a person reads it.
@Suite("install and everyday use")
struct InstallTests {
    @Test("scripts/install puts a working agent-eval, its files and bash, zsh and fish completions under a prefix")
    func install() async throws {
        try await TemporaryDirectory.with { directory in
            let prefix = directory.path("prefix")
            let installed = try await Subprocess.run(
                "/bin/bash",
                [repositoryRoot.appendingPathComponent("scripts/install").path, "--prefix", prefix, "--binary", try agentEvalBinary()])
            #expect(installed.status == 0, "\(installed.stderr)")
            #expect(installed.stdoutText.contains("installed agent-eval 0.4.0 (commit "))

            let binary = prefix + "/bin/agent-eval"
            let version = try await Subprocess.run(binary, ["--version"], in: directory.url)
            #expect(version.status == 0)
            // The commit the binary was built from (this checkout's, recorded by the build plugin).
            #expect(
                version.stdoutText.range(of: #"^0\.4\.0 \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n$"#, options: .regularExpression) != nil
            )
            let head = try await Subprocess.run("/usr/bin/env", ["git", "-C", repositoryRoot.path, "rev-parse", "--short=12", "HEAD"])
            if head.status == 0 { #expect(version.stdoutText.contains(head.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines))) }

            // The installed binary finds its files through the link in bin/.
            let help = try await Subprocess.run(binary, ["help", "log-format"], in: directory.url)
            #expect(help.status == 0)
            #expect(help.stdoutText.hasPrefix("THE LOG FORMAT"))
            let project = try await Subprocess.run(binary, ["init", "project"], in: directory.url)
            #expect(project.status == 0, "\(project.stderr)")
            let run = try await Subprocess.run(
                binary, ["run", "evals/", "--no-catalog"], in: directory.url.appendingPathComponent("project"))
            #expect(run.status == 0, "\(run.stdoutText)\(run.stderr)")

            let bash = prefix + "/share/bash-completion/completions/agent-eval"
            let loaded = try await Subprocess.run("/bin/bash", ["-c", "source '\(bash)' && complete -p agent-eval"])
            #expect(loaded.status == 0, "\(loaded.stderr)")
            #expect(loaded.stdoutText.contains("agent-eval"))
            let zsh = try String(contentsOfFile: prefix + "/share/zsh/site-functions/_agent-eval", encoding: .utf8)
            #expect(zsh.hasPrefix("#compdef agent-eval"))
            let fish = try String(contentsOfFile: prefix + "/share/fish/vendor_completions.d/agent-eval.fish", encoding: .utf8)
            #expect(fish.contains("complete -c 'agent-eval'") || fish.contains("complete -c agent-eval"))
            #expect(fish.contains("check") && fish.contains("init"))
        }
    }

    @Test("a binary copied without its files says what is missing and how to install it")
    func missingFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let copy = directory.path("agent-eval")
            try FileManager.default.copyItem(atPath: try agentEvalBinary(), toPath: copy)
            let result = try await Subprocess.run(copy, ["init", "p"], in: directory.url)
            #expect(result.status == 2)
            #expect(result.stderr.contains("the files that come with agent-eval are missing"))
            #expect(result.stderr.contains("scripts/install"))
            #expect(!FileManager.default.fileExists(atPath: directory.path("p/agent.yaml")))
        }
    }

    @Test("help topics print reference pages; an unknown topic is a usage error that lists them")
    func helpTopics() async throws {
        for topic in ["cases", "agent-files", "log-format", "models", "ci"] {
            let page = try await agentEval(["help", topic])
            #expect(page.status == 0)
            #expect(page.stdoutText.contains("full "))
        }
        #expect(try await agentEval(["help", "run"]).stdoutText.contains("USAGE: agent-eval run"))
        let unknown = try await agentEval(["help", "casez"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("topics: cases, agent-files, log-format, models, ci"))
    }

    @Test("colour on a terminal only, and never with NO_COLOR; --quiet prints only what did not pass")
    func colourAndQuiet() async throws {
        func onTerminal(_ command: String, noColor: Bool) async throws -> String {
            // script(1) gives the command a pseudo-terminal, as a person's shell would.
            let line =
                "cd '\(repositoryRoot.path)' && env -u NO_COLOR \(noColor ? "NO_COLOR=1 " : "")TERM=xterm '\(try agentEvalBinary())' \(command)"
            return try await Subprocess.run("/usr/bin/script", ["-qec", line, "/dev/null"]).stdoutText
        }
        let coloured = try await onTerminal("run EvalCases/support --no-catalog", noColor: false)
        #expect(coloured.contains("\u{1B}[32m✔\u{1B}[0m support-refund-recorded"))
        let plain = try await onTerminal("run EvalCases/support --no-catalog", noColor: true)
        #expect(plain.contains("✔ support-refund-recorded"))
        #expect(!plain.contains("\u{1B}[32m"))
        let piped = try await agentEval(["run", "EvalCases/support", "--no-catalog"], in: repositoryRoot)
        #expect(!piped.stdoutText.contains("\u{1B}"))

        let quiet = try await agentEval(
            ["run", "EvalCases/support", "Fixtures/eval/failing/strict-order.yaml", "--no-catalog", "--quiet"], in: repositoryRoot)
        #expect(quiet.status == 1)
        #expect(!quiet.stdoutText.contains("✔"))
        #expect(quiet.stdoutText.hasPrefix("✘ support-strict-order"))
        #expect(quiet.stdoutText.contains("7 cases, 6 passed, 1 failed"))
    }
}
