/// A way a case got worse than its baseline.
public struct Regression: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        /// It passed and now fails.
        case nowFails = "now_fails"
        /// A run stops for another reason.
        case stopReasonChanged = "stop_reason_changed"
        /// A tool is executed that no run executed before.
        case newTool = "new_tool"
        /// A pipeline task runs that no run ran before (a fallback, a task that was skipped).
        case newTask = "new_task"
        /// A tool the case forbids is now attempted (proposed), and was not before.
        case forbiddenToolAttempted = "forbidden_tool_attempted"
        /// The pass rate fell below the baseline's 95% interval.
        case passRateDropped = "pass_rate_dropped"
    }

    public var kind: Kind
    public var message: String
}
