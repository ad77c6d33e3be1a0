import Foundation
import TestSupport
import Testing

/// The project's catalog setting (`catalog:` in .agent-eval/settings.yaml, docs/catalog.md).
@Suite("The project's catalog setting")
struct CatalogSettingTests {
    /// `agent-eval arguments` in `directory` with no catalog from the environment.
    static func withoutEnvironment(_ arguments: [String], in directory: URL) async throws -> ProcessResult {
        try await agentEval(arguments, in: directory, environment: ["AGENT_EVAL_CATALOG": ""])
    }

    @Test("catalog: in the project's settings is where every command in the project goes; --catalog and AGENT_EVAL_CATALOG win")
    func settingIsUsed() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path(".agent-eval"), withIntermediateDirectories: true)
            try "# the team's catalog\ncatalog: shared/team.sqlite\n".write(
                toFile: directory.path(".agent-eval/settings.yaml"), atomically: true, encoding: .utf8)
            let logs = directory.path("deep/below/logs")
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: fixture("support-sample.jsonl.gz"), toPath: logs + "/a.jsonl.gz")
            try FileManager.default.createDirectory(atPath: directory.path("shared"), withIntermediateDirectories: true)

            // From a folder below the root: the setting's path is the root's.
            let index = try await Self.withoutEnvironment(
                ["index", "logs", "--json"], in: directory.url.appendingPathComponent("deep/below"))
            #expect(index.status == 0, "\(index.stderr)")
            #expect(index.stdoutText.contains(directory.path("shared/team.sqlite")))
            #expect(FileManager.default.fileExists(atPath: directory.path("shared/team.sqlite")))
            #expect(!FileManager.default.fileExists(atPath: directory.path(".agent-eval/catalog.sqlite")))

            // --catalog and AGENT_EVAL_CATALOG win over it.
            let flag = try await Self.withoutEnvironment(
                ["index", "deep/below/logs", "--catalog", directory.path("flag.sqlite")], in: directory.url)
            #expect(flag.status == 0 && FileManager.default.fileExists(atPath: directory.path("flag.sqlite")), "\(flag.stderr)")
            let environment = try await agentEval(
                ["index", "deep/below/logs"], in: directory.url, environment: ["AGENT_EVAL_CATALOG": directory.path("env.sqlite")])
            #expect(
                environment.status == 0 && FileManager.default.fileExists(atPath: directory.path("env.sqlite")), "\(environment.stderr)")
        }
    }

    @Test(
        "a setting with a password, an unknown key or no value stops a command that needs the catalog with its file and line, the password unshown"
    )
    func badSettings() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path(".agent-eval"), withIntermediateDirectories: true)
            let settings = directory.path(".agent-eval/settings.yaml")
            func attempt(_ text: String) async throws -> ProcessResult {
                try text.write(toFile: settings, atomically: true, encoding: .utf8)
                let result = try await Self.withoutEnvironment(["runs"], in: directory.url)
                #expect(result.status != 0)
                #expect(!FileManager.default.fileExists(atPath: directory.path(".agent-eval/catalog.sqlite")))
                return result
            }
            let password = try await attempt("\ncatalog: postgres://ci:s3cret-word@db.internal/agent_eval\n")
            #expect(password.stderr.contains(".agent-eval/settings.yaml:2"), "\(password.stderr)")
            #expect(password.stderr.contains("password") && password.stderr.contains("PGPASSWORD"), "\(password.stderr)")
            #expect(!password.stderr.contains("s3cret-word"))
            let unknown = try await attempt("catalgo: team.sqlite\n")
            #expect(
                unknown.stderr.contains(".agent-eval/settings.yaml:1") && unknown.stderr.contains("did you mean \"catalog\""),
                "\(unknown.stderr)")
            let empty = try await attempt("catalog: ''\n")
            #expect(empty.stderr.contains(".agent-eval/settings.yaml:1"), "\(empty.stderr)")
            // A command that can do without the catalog (replay keeps step tables there) warns
            // and goes on.
            let replay = try await Self.withoutEnvironment(
                ["replay", fixture("support-sample.jsonl.gz"), "--step", "1"], in: directory.url)
            #expect(replay.status == 0, "\(replay.stderr)")
            #expect(replay.stderr.contains(".agent-eval/settings.yaml:1") && replay.stderr.contains("going on without the catalog"))
        }
    }
}
