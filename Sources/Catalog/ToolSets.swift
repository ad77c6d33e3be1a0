import TraceCore

/// The catalog's dictionary of the sets of tools runs executed (`tool_sets`, with each set's
/// tools in `tool_set_members`; schema 14). A run's row names its set (`logs.tool_set`), so
/// whether a run executed a tool is read from the row the query looks at anyway, and the sets
/// that qualify for `runs --tool X --not-tool Y` are found in the dictionary, which is as small
/// as the number of distinct ways the agents use their tools.
///
/// One per write transaction: it remembers the ids it looked up or made there, so a batch of
/// runs of one agent costs one lookup. Sets are never deleted (a set no row names costs a row
/// and its members); `catalog rebuild` of a file starts a new dictionary.
final class ToolSets {
    private var ids: [String: Int64] = [:]

    /// The set's text: the names as a JSON array, in the order of their UTF-8 bytes, duplicates
    /// dropped (the order `CatalogSchema.toolSetsFromCalls` sorts them in).
    static func key(_ tools: some Sequence<String>) -> String {
        JSONWriter.encodeString(.array(sorted(Set(tools)).map { .string($0) }))
    }

    /// `tools` in the order of their UTF-8 bytes (SQLite's and PostgreSQL's `COLLATE "C"`).
    static func sorted(_ tools: Set<String>) -> [String] {
        tools.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The id of the set of `tools` (any order, duplicates allowed), made with its members when
    /// the catalog has no such set yet.
    func id(of tools: some Sequence<String>, in db: any SQLConnection) throws -> Int64 {
        let names = Set(tools)
        let key = Self.key(names)
        if let id = ids[key] { return id }
        var made: Int64?
        // Another writer may have made it meanwhile (PostgreSQL): then nothing is returned here,
        // and the lookup below, a new statement, sees its committed row.
        try db.run(
            "INSERT INTO tool_sets (tools) VALUES (?) ON CONFLICT (tools) DO NOTHING RETURNING set_id",
            bind: { $0.bind(key) }
        ) { made = Int64($0.int(0)) }
        let id: Int64
        if let made {
            let members = Self.sorted(names)
            if !members.isEmpty {
                try db.insert(into: "tool_set_members", columns: ["tool", "set_id"], count: members.count) { index, row in
                    row.bind(members[index])
                    row.bind(made)
                }
            }
            id = made
        } else {
            guard let found = try db.value("SELECT set_id FROM tool_sets WHERE tools = ?", [key], as: Int.self) else {
                throw CatalogError(.queryFailed, "the catalog kept no set of tools \(key)", hint: "run the command again")
            }
            id = Int64(found)
        }
        ids[key] = id
        return id
    }
}
