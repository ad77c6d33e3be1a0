public import TraceCore

/// Per tool: how often it was called, how often it failed, how long it took.
public struct ToolStats: Sendable, Hashable {
    public var tool: String
    /// Calls proposed.
    public var calls: Int
    /// Calls that ran at least once.
    public var executed: Int
    /// Executed calls whose last attempt did not finish `ok`.
    public var failed: Int
    public var denied: Int
    /// Duration of executed calls (all attempts), microseconds.
    public var p50Us: Int
    public var p95Us: Int

    public var errorRate: Double { executed == 0 ? 0 : Double(failed) / Double(executed) }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("tool", tool)
        object.set("calls", calls)
        object.set("executed", executed)
        object.set("failed", failed)
        object.set("denied", denied)
        object.set("error_rate", errorRate)
        object.set("p50_us", p50Us)
        object.set("p95_us", p95Us)
        return object.json
    }
}

/// Per agent and model: runs, tokens, cost, and how runs stopped.
public struct AgentStats: Sendable {
    public var agent: String
    public var model: String
    public var runs: Int
    public var tokens: Int
    public var costUSD: Double
    /// Stop reason → runs, sorted by reason; `running` for logs without `run_stopped`.
    public var stopReasons: [(reason: String, runs: Int)]

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("agent", agent)
        object.set("model", model)
        object.set("runs", runs)
        object.set("tokens", tokens)
        object.set("cost_usd", costUSD)
        var reasons = JSONObject()
        for (reason, runs) in stopReasons { reasons[reason] = .int(runs) }
        object.set("stop_reasons", JSONValue.object(reasons))
        return object.json
    }
}

extension Catalog {
    /// Statistics over the indexed runs that `query` selects (its limit is ignored).
    public func stats(_ query: RunQuery) throws(CatalogError) -> (tools: [ToolStats], agents: [AgentStats]) {
        var selection = query
        selection.limit = Int(Int32.max)
        return try read { db in
            // The index to follow, as the runs list chooses it (a stop reason's, an agent's).
            let (runsSQL, arguments) = selection.statement(dialect: dialect, stopLead: try selection.stopLead(in: db))
            let scope = "SELECT log_id FROM (\(runsSQL)) AS selected"
            let values: [(any SQLArgument)?] = arguments
            var tools: [ToolStats] = []
            let counts = try db.rows(
                """
                SELECT tool, COUNT(*) AS calls, COUNT(CASE WHEN attempts > 0 THEN 1 END) AS executed,
                    COUNT(CASE WHEN attempts > 0 AND (status IS NULL OR status <> 'ok') THEN 1 END) AS failed,
                    COUNT(CASE WHEN verdict = 'deny' OR approval = 'refused' THEN 1 END) AS denied
                FROM calls WHERE log_id IN (\(scope)) GROUP BY tool ORDER BY tool
                """, values)
            for row in counts {
                let tool: String = row["tool"]
                let durations = try db.column(
                    "SELECT duration_us FROM calls WHERE tool = ? AND attempts > 0 AND log_id IN (\(scope)) ORDER BY duration_us",
                    [tool] + values, as: Int.self)
                tools.append(
                    ToolStats(
                        tool: tool, calls: row["calls"], executed: row["executed"], failed: row["failed"], denied: row["denied"],
                        p50Us: Self.percentile(durations, 0.50), p95Us: Self.percentile(durations, 0.95)))
            }
            var agents: [AgentStats] = []
            let groups = try db.rows(
                """
                SELECT COALESCE(agent, '?') AS agent, COALESCE(model, '?') AS model, COALESCE(stop_reason, 'running') AS reason,
                    COUNT(*) AS runs, SUM(input_tokens + output_tokens) AS tokens, SUM(cost_usd) AS cost
                FROM logs WHERE log_id IN (\(scope)) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                """, values)
            for row in groups {
                let (agent, model): (String, String) = (row["agent"], row["model"])
                if agents.last?.agent != agent || agents.last?.model != model {
                    agents.append(AgentStats(agent: agent, model: model, runs: 0, tokens: 0, costUSD: 0, stopReasons: []))
                }
                agents[agents.count - 1].runs += row["runs"] as Int
                agents[agents.count - 1].tokens = agents[agents.count - 1].tokens.addingSaturating(row["tokens"] as Int)
                agents[agents.count - 1].costUSD += row["cost"] as Double
                agents[agents.count - 1].stopReasons.append((row["reason"], row["runs"]))
            }
            return (tools, agents)
        }
    }

    /// The nearest-rank percentile of sorted values (0 for none).
    static func percentile(_ sorted: [Int], _ fraction: Double) -> Int {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count, max(1, rank)) - 1]
    }
}
