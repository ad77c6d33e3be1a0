import Testing

@testable import Catalog

/// Where a suite run ran, as the catalog records it (`suite_runs.runner`, `ci_job`), from the
/// variables each CI service sets.
@Suite struct SuiteRunPlaceTests {
    @Test func fromTheCIsVariables() {
        let github = SuiteRunInfo.place(in: [
            "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/agents", "GITHUB_RUN_ID": "42",
            "GITHUB_RUN_ATTEMPT": "2", "GITHUB_JOB": "evals", "RUNNER_NAME": "runner-7",
        ])
        #expect(github.runner == "runner-7")
        #expect(github.job == "https://github.com/acme/agents/actions/runs/42/attempts/2 (job evals)")
        let gitlab = SuiteRunInfo.place(in: [
            "CI_JOB_URL": "https://gitlab.example/acme/agents/-/jobs/99", "CI_RUNNER_DESCRIPTION": "shared-3",
        ])
        #expect(gitlab.runner == "shared-3" && gitlab.job == "https://gitlab.example/acme/agents/-/jobs/99")
        // Outside a CI: this machine, no job; an empty variable counts as unset.
        let local = SuiteRunInfo.place(in: ["RUNNER_NAME": "", "BUILD_URL": ""])
        #expect(local.runner == SuiteRunInfo.hostName() && local.runner != nil)
        #expect(local.job == nil)
    }

    @Test("a command line is kept without the passwords of the URLs in it")
    func commandLineWithoutPasswords() {
        let info = SuiteRunInfo(
            startedAtUs: 0,
            commandLine: "agent-eval run evals --catalog postgres://ci:s3cret@db:5432/evals --catalog=postgres://u:pw@h/d --out runs")
        #expect(!info.commandLine.contains("s3cret") && !info.commandLine.contains(":pw@"), "\(info.commandLine)")
        #expect(
            info.commandLine == "agent-eval run evals --catalog postgres://ci:***@db:5432/evals --catalog=postgres://u:***@h/d --out runs")
    }

    @Test(
        "a suite run's command line is redacted an argument at a time: a password with a space in it, a URL's in --base-url, a key anywhere"
    )
    func commandLineRedactedByArgument() async {
        let info = await SuiteRunInfo.current(
            commandLine: [
                "agent-eval", "run", "evals", "--catalog", "postgres://agent_eval:my secret@127.0.0.1:5433/catalog?sslmode=disable",
                "--base-url=https://bob:hunter2 xyz@127.0.0.1:9/v1", "--header", "Authorization: Bearer sk-proj-AbCdEfGhIjKlMnOpQrStUv",
            ], environment: ["RUNNER_NAME": "r"])
        for secret in ["my secret", "secret@", "hunter2", "xyz@", "sk-proj-AbCdEfGhIjKlMnOpQrStUv"] {
            #expect(!info.commandLine.contains(secret), "\(secret): \(info.commandLine)")
        }
        #expect(
            info.commandLine.hasPrefix("agent-eval run evals --catalog postgres://agent_eval:***@127.0.0.1:5433/catalog"),
            "\(info.commandLine)")
        #expect(info.commandLine.contains("--base-url=https://bob:***@127.0.0.1:9/v1"), "\(info.commandLine)")
    }
}
