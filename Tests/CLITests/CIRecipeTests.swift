import ConfigFile
import Foundation
import TestSupport
import Testing

/// docs/ci.md's recipes are files; each is valid YAML, and every agent-eval command in it runs,
/// with the flags it uses, in a project made by `agent-eval init` — and the first hour a new
/// user spends (scripts/first-hour) ends with a gate that catches a regression.
@Suite("CI recipes")
struct CIRecipeTests {
    /// Each recipe, and for the workflow `init` writes, also the project `init --external python`
    /// makes (an agent run as a command, its model's answers in a cassette, its calls held to a
    /// policy file): the same workflow gates both.
    static let recipes = [
        "Sources/agent-eval/Templates/init-common/dot-github/workflows/agent-eval.yml", "docs/ci/gitlab-ci.yml",
        "docs/ci/github-actions-sharded.yml",
        "Sources/agent-eval/Templates/init-common/dot-github/workflows/agent-eval.yml" + externalSuffix,
    ]
    static let externalSuffix = " (init --external python)"

    /// The shell text a workflow runs, in file order: GitHub steps' `run`, GitLab jobs'
    /// `before_script`, `script` and `after_script`.
    static func shellTexts(in node: ConfigNode, key: String? = nil) -> [String] {
        let scriptKeys = ["script", "before_script", "after_script"]
        switch node.content {
        case .scalar(let text, _):
            return (["run"] + scriptKeys).contains(key ?? "") ? [text] : []
        case .sequence(let items):
            return items.flatMap { shellTexts(in: $0, key: scriptKeys.contains(key ?? "") ? key : nil) }
        case .mapping(let pairs):
            return pairs.flatMap { shellTexts(in: $0.value, key: $0.key) }
        }
    }

    /// The agent-eval commands in shell text, continuation lines joined.
    static func commands(in text: String) -> [String] {
        text.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("agent-eval ") || $0 == "agent-eval" }
    }

    @Test("each recipe is valid YAML whose agent-eval commands all run in a new project", arguments: recipes)
    func recipe(_ recipe: String) async throws {
        let isExternal = recipe.hasSuffix(Self.externalSuffix)
        let path = isExternal ? String(recipe.dropLast(Self.externalSuffix.count)) : recipe
        let workflow = try ConfigNode.load(path: repositoryRoot.appendingPathComponent(path).path)
        let texts = Self.shellTexts(in: workflow)
        let commands = texts.flatMap(Self.commands)
        #expect(commands.count >= 2, "\(path) runs no agent-eval command")
        // The repository scripts a recipe runs exist.
        for text in texts {
            for match in text.matches(of: /scripts\/([a-z_-]+)/) {
                #expect(FileManager.default.fileExists(atPath: repositoryRoot.appendingPathComponent("scripts/\(match.1)").path))
            }
        }
        try await TemporaryDirectory.with { directory in
            let bin = directory.path("bin")
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: bin + "/agent-eval", withDestinationPath: try agentEvalBinary())
            #expect(
                try await agentEval(["init", "project"] + (isExternal ? ["--external", "python"] : []), in: directory.url).status == 0)
            let project = directory.url.appendingPathComponent("project")
            #expect(
                try await agentEval(["run", "evals/", "--update-baseline", "--no-catalog", "--out", "runs/setup"], in: project).status == 0)
            let environment = [
                "PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                "GITHUB_STEP_SUMMARY": directory.path("summary.md"),
            ]
            for command in commands {
                // A matrix runs the command once per shard.
                let variants =
                    command.contains("${{ matrix.shard }}")
                    ? (1...4).map { command.replacingOccurrences(of: "${{ matrix.shard }}", with: "\($0)") } : [command]
                for variant in variants {
                    #expect(!variant.contains("${{"), "\(path): \(variant) uses an expression this test does not know")
                    let result = try await Subprocess.run(
                        "/bin/sh", ["-c", "mkdir -p reports && " + variant], in: project, environment: environment)
                    #expect(result.status == 0, "\(path): `\(variant)` exited \(result.status): \(result.stderr)")
                }
            }
            // What the commands say they write is there.
            for command in commands {
                for match in command.matches(of: /--(?:junit|json-out|json|markdown|out) (reports\/[a-z0-9.-]+)(?=\s|$)/) {
                    let file = project.appendingPathComponent(String(match.1)).path
                    #expect(FileManager.default.fileExists(atPath: file), "\(path): \(match.1) was not written")
                }
            }
            // The scripts that post the pull request's comment, run as written with `gh` and
            // `curl` standing in: each posts the comment `results comment` wrote.
            let posting = texts.filter { $0.contains("gh pr comment") || $0.contains("curl ") }
            #expect(!posting.isEmpty || path.contains("sharded"), "\(path) posts no pull request comment")
            for text in posting {
                let record = directory.path("posted.txt")
                try? FileManager.default.removeItem(atPath: record)
                for tool in ["gh", "curl"] {
                    // Records its arguments, then the body it was given (--body-file F, or body@F).
                    try """
                    #!/bin/sh
                    echo "\(tool) $*" >> "\(record)"
                    for argument in "$@"; do
                      case "$previous:$argument" in
                        --body-file:*) cat "$argument" >> "\(record)" ;;
                        *:body@*) cat "${argument#body@}" >> "\(record)" ;;
                      esac
                      previous="$argument"
                    done
                    """.write(toFile: bin + "/" + tool, atomically: true, encoding: .utf8)
                    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: bin + "/" + tool)
                }
                var posting = environment
                for (name, value) in [
                    ("PR_NUMBER", "7"), ("GITHUB_REPOSITORY", "acme/agents"), ("GH_TOKEN", "token"), ("CI_MERGE_REQUEST_IID", "3"),
                    ("AGENT_EVAL_GITLAB_TOKEN", "token"), ("CI_API_V4_URL", "https://gitlab.example/api/v4"), ("CI_PROJECT_ID", "9"),
                ] {
                    posting[name] = value
                }
                let result = try await Subprocess.run("/bin/sh", ["-c", text], in: project, environment: posting)
                #expect(result.status == 0, "\(path): the posting script exited \(result.status): \(result.stderr)")
                let posted = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
                #expect(
                    posted.hasPrefix("gh pr comment 7 --repo acme/agents --body-file reports/comment.md\n")
                        || posted.hasPrefix("curl --fail"), "\(path): \(posted)")
                #expect(posted.contains("<!-- agent-eval results comment -->\n### ✅ agent-eval: PASS: "), "\(path): \(posted)")
                #expect(!posted.contains("curl") || posted.contains("/projects/9/merge_requests/3/notes"), "\(path): \(posted)")
            }
        }
    }

    @Test("scripts/first-hour: install, init, pass, baseline, then a change that regresses fails the gate")
    func firstHour() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await Subprocess.run(
                "/bin/bash",
                [
                    repositoryRoot.appendingPathComponent("scripts/first-hour").path, directory.path("work"), "--binary",
                    try agentEvalBinary(),
                ],
                environment: ["AGENT_EVAL_CATALOG": testCatalogPath])
            #expect(result.status == 0, "\(result.stdoutText)\n\(result.stderr)")
            #expect(result.stdoutText.contains("3 cases, 3 passed, 0 failed"))
            #expect(result.stdoutText.contains("2 regressed"))
            #expect(result.stdoutText.contains("regression: the forbidden tool cancel_order is attempted now"))
            #expect(result.stdoutText.hasSuffix("== done: installed, passing, failing and regressing, as CI sees it\n"))
        }
    }
}
