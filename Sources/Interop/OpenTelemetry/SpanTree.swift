/// The parent links of one trace's spans, resolved once: each span's parent, its depth, and the
/// parent cycles that keep spans out of any tree. Built and walked without recursion and in
/// time linear in the spans, so a chain of 100,000 nested spans costs what 100,000 siblings do.
///
/// A span is a root when it names no parent, a parent that is not in the trace, or a parent in a
/// cycle it belongs to (a span naming itself, or spans naming each other round): no tree can
/// hold a cycle, so each of its spans is read as a root and `cycles` names them.
struct SpanTree {
    /// The index in the spans of each span's parent; nil for a root.
    let parent: [Int?]
    /// Each span's number of ancestors.
    let depth: [Int]
    /// The spans of each parent cycle, as indices, in the order the links run.
    let cycles: [[Int]]
    /// Every span, each after its parent (a preorder walk from the roots, in span order).
    let order: [Int]

    /// The tree of `spans`; a parent id that several spans share is the last of them.
    init(_ spans: [Span]) {
        var byId: [String: Int] = [:]
        for (index, span) in spans.enumerated() { byId[span.spanId] = index }
        var parent = spans.map { span in span.parentId.flatMap { byId[$0] } }

        // Cycles: follow each unvisited span's parents until a root, a span already settled,
        // or a span of this very walk (a cycle from there on). Each span is walked once.
        enum Mark { case unvisited, onWalk, settled }
        var marks = [Mark](repeating: .unvisited, count: spans.count)
        var cycles: [[Int]] = []
        for start in spans.indices where marks[start] == .unvisited {
            var walk: [Int] = []
            var current: Int? = start
            while let node = current, marks[node] == .unvisited {
                marks[node] = .onWalk
                walk.append(node)
                current = parent[node]
            }
            if let node = current, marks[node] == .onWalk, let from = walk.firstIndex(of: node) {
                cycles.append(Array(walk[from...]))
            }
            for node in walk { marks[node] = .settled }
        }
        for cycle in cycles {
            for node in cycle { parent[node] = nil }
        }

        var children = [[Int]](repeating: [], count: spans.count)
        for (index, up) in parent.enumerated() {
            if let up { children[up].append(index) }
        }
        var depth = [Int](repeating: 0, count: spans.count)
        var order: [Int] = []
        order.reserveCapacity(spans.count)
        var stack = spans.indices.filter { parent[$0] == nil }.reversed().map { $0 }
        while let node = stack.popLast() {
            order.append(node)
            for child in children[node].reversed() {
                depth[child] = depth[node] + 1
                stack.append(child)
            }
        }
        self.parent = parent
        self.depth = depth
        self.cycles = cycles
        self.order = order
    }

    /// For each span with a key, the outermost of its ancestors with the same key (nil when
    /// none has it); nil for spans without a key. `key` is asked once per span.
    func outermostAncestors(sharingKey key: (Int) -> String?) -> [Int?] {
        let keys = parent.indices.map(key)
        var outermost = [Int?](repeating: nil, count: parent.count)
        // The outermost span of each key on the path from the root to the current span. In
        // preorder, a span at depth d ends the paths through every entry made at depth d or
        // deeper; what is left are its ancestors'.
        var onPath: [String: Int] = [:]
        var exits: [(depth: Int, key: String)] = []
        for node in order {
            while let last = exits.last, last.depth >= depth[node] {
                onPath[last.key] = nil
                exits.removeLast()
            }
            guard let own = keys[node] else { continue }
            if let outer = onPath[own] {
                outermost[node] = outer
            } else {
                onPath[own] = node
                exits.append((depth[node], own))
            }
        }
        return outermost
    }
}
