public import Replay
public import TraceCore

/// The data of a diff's page: the diff document exactly as `agent-eval diff --json` prints it,
/// and both runs as run views, shown side by side with the first divergence marked.
public struct DiffView: Sendable {
    public var document: JSONValue
    public var diff: TrajectoryDiff

    public static func make(left: String, right: String, readsParent: (String) -> Bool = { _ in true }) throws -> DiffView {
        let diff = try TrajectoryDiff.compare(left: left, right: right)
        var object = ObjectBuilder()
        object.set("view", "diff")
        object.set("diff", diff.json(left: left, right: right))
        object.set("left", try RunView.make(log: left, readsParent: readsParent).document)
        object.set("right", try RunView.make(log: right, readsParent: readsParent).document)
        return DiffView(document: object.json, diff: diff)
    }
}
