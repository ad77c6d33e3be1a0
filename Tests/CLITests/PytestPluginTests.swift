import Foundation
import TestSupport
import TestTags
import Testing

/// The Python package and its pytest plugin (python/): its own tests, written with pytester, run
/// by a real pytest from PyPI against this build's binary and the repository's fixture logs.
@Suite("The pytest plugin: eval cases as pytest tests", .tags(.python), .needsPython, .ownThread)
struct PytestPluginTests {
    static let package = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("python").path

    @Test(
        "pytest collects cases as items (JSON case files too) and maps pass, fail, could not run, quarantine, the gate's regressions, a bad file, -k, JUnit XML, xdist shards and the repeats marker"
    )
    func pluginTests() async throws {
        let python = try await PythonEnvironment.pytest.path() + "/bin/python"
        let result = try await Subprocess.run(
            python, ["-m", "pytest", Self.package + "/tests", "-p", "no:cacheprovider", "-q"], in: URL(fileURLWithPath: Self.package),
            environment: [
                "AGENT_EVAL_BIN": try agentEvalBinary(), "PYTHONPATH": Self.package,
                // The MCP proxy test's agent and server: the official openai and mcp packages.
                "AGENT_EVAL_AGENTS_PYTHON": try await PythonEnvironment.agents.path() + "/bin/python",
            ])
        #expect(result.status == 0, "\(result.stdoutText)\n\(result.stderr)")
        #expect(result.stdoutText.contains("32 passed"), "\(result.stdoutText)")
    }
}
