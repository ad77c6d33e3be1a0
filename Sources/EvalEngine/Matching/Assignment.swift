/// Maximum one-to-one assignment between two lists (Kuhn's augmenting paths): which left
/// item takes which right item when each may take any it is compatible with. Unlike first-fit
/// pairing, it never leaves an item unmatched because an earlier one took its only partner.
enum Assignment {
    /// `result[i]` is the right index assigned to left item `i`, or nil.
    static func maximum(left: Int, right: Int, compatible: (Int, Int) -> Bool) -> [Int?] {
        var edges = [[Int]](repeating: [], count: left)
        for i in 0..<left {
            for j in 0..<right where compatible(i, j) { edges[i].append(j) }
        }
        var owner = [Int?](repeating: nil, count: right)
        for i in 0..<left {
            var visited = [Bool](repeating: false, count: right)
            _ = augment(i, edges: edges, owner: &owner, visited: &visited)
        }
        var result = [Int?](repeating: nil, count: left)
        for (j, i) in owner.enumerated() { if let i { result[i] = j } }
        return result
    }

    private static func augment(_ i: Int, edges: [[Int]], owner: inout [Int?], visited: inout [Bool]) -> Bool {
        for j in edges[i] where !visited[j] {
            visited[j] = true
            // Take a free partner, or one whose owner can move to another of its own.
            if let current = owner[j], !augment(current, edges: edges, owner: &owner, visited: &visited) { continue }
            owner[j] = i
            return true
        }
        return false
    }
}
