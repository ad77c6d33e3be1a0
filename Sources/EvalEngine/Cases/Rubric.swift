public import AgentRuntime
public import TraceCore

/// An expectation a model grades: the rubric a judge reads, and the judge. `answer: {rubric}`
/// grades the run's final answer; `arguments: {<tool>: {rubric}}` grades the arguments of
/// every executed call of the tool (docs/eval-cases.md, "Model-graded expectations").
public struct Rubric: Sendable, Hashable {
    /// What the judge is asked to check, in the case file's words.
    public var text: String
    /// The judge; nil uses the runner's default judge (`--judge-model`).
    public var model: ModelSource?
    /// Where the rubric is in the case file.
    public var location: SourceLocation

    public init(text: String, model: ModelSource? = nil, location: SourceLocation) {
        self.text = text
        self.model = model
        self.location = location
    }
}

/// A rubric for the arguments of one tool's calls.
public struct ArgumentRubric: Sendable, Hashable {
    public var tool: String
    public var rubric: Rubric

    public init(tool: String, rubric: Rubric) {
        self.tool = tool
        self.rubric = rubric
    }
}
