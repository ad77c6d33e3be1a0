import Foundation
public import Testing

/// What a test needs beyond the build, or that it works at scale. `swift test` runs every test;
/// for a fast inner loop, `AGENT_EVAL_TEST_SKIP=python,scale swift test` skips those that need a
/// component from PyPI and those that check a property at scale (every byte offset, 100,000
/// spans, 50,000 cases), and says so for each: skipped, not passed. README, "Run the tests".
extension Tag {
    /// A component from PyPI in a virtual environment `scripts/python_venv` makes on first use:
    /// MCP servers, the OTLP receiver, the OpenTelemetry and OpenAI SDKs, Inspect AI.
    @Tag public static var python: Self
    /// Debian's Chromium, driven by Selenium (a PyPI component too).
    @Tag public static var browser: Self
    /// A property checked at scale: seconds of CPU each (every byte offset of a log, a 100,000-span
    /// trace, 50,000 cases). Smaller cases of the same behaviour stay in the fast loop.
    @Tag public static var scale: Self
}

extension Trait where Self == ConditionTrait {
    /// Skipped when `AGENT_EVAL_TEST_SKIP` (a comma-separated list) names `python`.
    public static var needsPython: Self { skippable("python") }
    /// Skipped when `AGENT_EVAL_TEST_SKIP` names `browser` or `python`.
    public static var needsBrowser: Self { skippable("browser", "python") }
    /// Skipped when `AGENT_EVAL_TEST_SKIP` names `scale`.
    public static var atScale: Self { skippable("scale") }

    private static func skippable(_ names: String...) -> Self {
        let skipped = Set(
            (ProcessInfo.processInfo.environment["AGENT_EVAL_TEST_SKIP"] ?? "").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            })
        let named = names.filter(skipped.contains)
        return .disabled(if: !named.isEmpty, "AGENT_EVAL_TEST_SKIP=\(named.joined(separator: ",")) skips the tests that need it")
    }
}
