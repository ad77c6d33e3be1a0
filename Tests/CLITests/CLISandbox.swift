import Foundation
import TestSupport

/// A working directory for running the CLI as a user would from the repository: `Fixtures/`
/// and `EvalCases/` are linked into a fresh temporary directory, so every path the CLI prints
/// is relative and the same on every machine, and whatever a command writes (logs, the step
/// index cache, the catalog) stays in the sandbox.
struct CLISandbox {
    let directory: TemporaryDirectory

    static func with<T>(_ body: (CLISandbox) async throws -> T) async throws -> T {
        try await TemporaryDirectory.with { directory in
            for name in ["Fixtures", "EvalCases"] {
                try FileManager.default.createSymbolicLink(
                    atPath: directory.path(name), withDestinationPath: repositoryRoot.appendingPathComponent(name).path)
            }
            return try await body(CLISandbox(directory: directory))
        }
    }

    /// Runs `agent-eval` in the sandbox, with a catalog of its own: what a call prints does not
    /// depend on what other tests indexed, and no other test's write holds it up.
    func run(_ arguments: [String]) async throws -> ProcessResult {
        try await agentEval(
            arguments, in: directory.url,
            environment: ["NO_COLOR": "1", "AGENT_EVAL_CATALOG": directory.path(".agent-eval/catalog.sqlite")])
    }

    /// Output with what legitimately differs between runs replaced: the sandbox's path,
    /// wall-clock durations of a suite, run ids made from the clock.
    func normalized(_ text: String) -> String {
        var text = text.replacingOccurrences(of: directory.url.path, with: "/tmp")
        for (pattern, replacement) in Self.volatile {
            text = text.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return text
    }

    static let volatile = [
        (#"\(\d+\.\d+ s\)"#, "(TIME s)"),
        (#"run-\d{8}-\d{6}-[0-9a-f]{8}"#, "run-ID"),
        (#""duration_seconds":[0-9.e-]+"#, #""duration_seconds":TIME"#),
        (#""duration_ms":\d+"#, #""duration_ms":TIME"#),
        (#""check_us":\d+"#, #""check_us":TIME"#),
        // A judge's latency (judgements in the JSON report), not a recorded decision's.
        (#"("judge":"[^"]*","latency_us":)\d+"#, "$1TIME"),
    ]
}
