import ConfigFile
import EvalEngine
import Foundation
public import TraceCore

/// Which indexed runs to list: every filter given must hold.
///
/// Filters about a call (`tools`, `approval`, `hasDenied`) hold for the same call: with
/// `tools = ["refund_order"]` and `approval = .none`, a run matches when one `refund_order` call
/// ran without a human's approval, not when its refund was approved and some other call ran
/// without. With several tools, each needs such a call of its own. Every other filter is
/// about the run as a whole (`notTools`: no call of that tool ran).
public struct RunQuery: Sendable, Hashable {
    /// Tools the run called: alone, a call of each that ran; with `approval` or `hasDenied`, a
    /// call of each that those describe (a refused or pending call did not run). Per call.
    public var tools: [String] = []
    /// Tools the run never executed. Per run, and only runs that can show it: logs read whole
    /// (`intact`) to the run's stop.
    public var notTools: [String] = []
    /// Stop reasons (any of them); `running` for a log without `run_stopped`.
    public var stopReasons: [String] = []
    /// Agent names, globs allowed (`support-*`).
    public var agent: String?
    /// `provider:name`, globs allowed (`openai:*`).
    public var model: String?
    /// Runs that started at or after this time (microseconds since 1970).
    public var sinceUs: Int?
    /// Runs that started before this time.
    public var untilUs: Int?
    public var statuses: [LogStatus] = []
    /// Runs with a call denied by policy or refused by a human. Per call.
    public var hasDenied = false
    /// Runs with a call whose approval is in this state. Per call.
    public var approval: ApprovalFilter?
    public var minCostUSD: Double?
    /// Forks of this run (`agent-eval fork`): logs whose last `run_forked` names it.
    public var forksOf: String?
    /// Runs whose log path, run id, agent, model or input holds this text (the case of ASCII letters ignored; `%` and `_` are themselves).
    public var text: String?
    /// The page after this row, newest first (`serve`'s "more"): rows that sort after it.
    public var after: Cursor?
    /// The most rows to return, newest first.
    public var limit = 50

    public enum ApprovalFilter: String, Sendable, CaseIterable {
        /// A human granted a call.
        case granted
        /// A human refused a call.
        case refused
        /// A call waits for a human.
        case pending
        /// A call ran that no human approved (it was allowed by policy alone).
        case none
    }

    public init() {}

    /// How the runs are found: the shapes of the statement.
    enum Shape: Hashable {
        /// Walk `logs` newest first (`logs_by_start`), checking each run's set of tools and
        /// probing its calls (`calls_by_tool_log`) for the call filters, until `limit` rows
        /// matched: fast when matches are common.
        case newestFirst
        /// Start from the calls of this tool (`calls_by_tool_log`), then sort what matched: fast
        /// when the tool is rare, where walking every run to find few matches is not. For
        /// `tools` with call filters (`--approval`, `--denied`).
        case drivenBy(tool: String)
        /// Start from the runs whose set of tools qualifies (`logs_by_tool_set`), then sort
        /// them: fast when few runs do.
        case drivenByToolSets
        /// Read the table in its own order (the runs indexed last first), not newest first,
        /// keeping at most `bound` matches, then sort them: fast for a text few runs hold
        /// (`text`), which no index helps and a walk newest first reads row by row through
        /// `logs_by_start`. When `bound` matched, the matches are common, and the runs are
        /// walked newest first instead (`runs`).
        case scannedFirst(bound: Int)
    }

    /// Whether the text is the filter to find the runs by: set, and no other filter that an
    /// index answers (a stop reason, an agent's exact name, tools, a parent, a time range).
    var scansForText: Bool {
        guard let text, !text.isEmpty else { return false }
        return stopReasons.isEmpty && tools.isEmpty && notTools.isEmpty && forksOf == nil && sinceUs == nil && untilUs == nil
            && !(agent.map { Glob($0).isLiteral } ?? false)
    }

    /// Whether a run's set of tools (`logs.tool_set`) answers part of the query: `notTools`,
    /// and `tools` when no call filter asks about their calls.
    var usesToolSets: Bool { !notTools.isEmpty || (!tools.isEmpty && callConditions.isEmpty) }

    /// The tools a run's set must hold (all of them).
    private var setTools: [String] { callConditions.isEmpty ? tools : [] }

    /// The sets of tools that qualify (hold every `setTools`, none of `notTools`), by id: the
    /// statement that lists them, for a dictionary of any size.
    var qualifyingToolSets: (sql: String, arguments: [CatalogValue]) {
        let members = "SELECT 1 FROM tool_set_members u WHERE u.tool IN (\(SQLList.placeholders(notTools.count)))"
        let unwanted = notTools.isEmpty ? "" : " AND NOT EXISTS (\(members) AND u.set_id = s.set_id)"
        guard let first = setTools.first else {
            return ("SELECT s.set_id FROM tool_sets s WHERE TRUE\(unwanted)", notTools.map { .text($0) })
        }
        let wanted = setTools.dropFirst().map { _ in
            " AND EXISTS (SELECT 1 FROM tool_set_members w WHERE w.tool = ? AND w.set_id = s.set_id)"
        }.joined()
        return (
            "SELECT s.set_id FROM tool_set_members s WHERE s.tool = ?\(wanted)\(unwanted)",
            [.text(first)] + setTools.dropFirst().map { .text($0) } + notTools.map { .text($0) }
        )
    }

    /// Sets written into the statement as numbers at most; with more, it holds the query that
    /// lists them.
    static let inlinedToolSets = 500

    /// The ids of the qualifying sets of tools (`qualifyingToolSets`), ascending; nil when the
    /// query uses no set or more than `inlinedToolSets` qualify.
    func toolSets(in db: any SQLConnection) throws -> [Int64]? {
        guard usesToolSets else { return nil }
        let (sql, arguments) = qualifyingToolSets
        var ids: [Int64] = []
        try db.run(sql + " ORDER BY s.set_id LIMIT \(Self.inlinedToolSets + 1)", bind: { $0.bind(all: arguments) }) {
            ids.append(Int64($0.int(0)))
        }
        return ids.count > Self.inlinedToolSets ? nil : ids
    }

    /// The condition on a run's set of tools, on `column` (`tool_set`, or SQLite's `+tool_set`,
    /// which keeps it from choosing `logs_by_tool_set`): in `toolSets`, or in the sets the query
    /// lists when nil. No set qualifies: FALSE.
    func toolSetCondition(_ toolSets: [Int64]?, column: String = "tool_set") -> (sql: String, arguments: [CatalogValue]) {
        guard let toolSets else {
            let (sql, arguments) = qualifyingToolSets
            return ("\(column) IN (\(sql))", arguments)
        }
        guard !toolSets.isEmpty else { return ("FALSE", []) }
        return ("\(column) IN (\(toolSets.map(String.init).joined(separator: ", ")))", [])
    }

    /// The statement and its arguments for `shape`, in `dialect`, given the qualifying sets of
    /// tools (`toolSets(in:)`; nil: listed by the statement).
    ///
    /// `walksAgents`: an agent glob that many runs match is checked on each run walked newest
    /// first, not looked up in `logs_by_agent` (SQLite would take that index for a prefix and sort
    /// every match: 4 s for a glob every run of a million matches; `agentGlobIsCommon`).
    /// `stopLead`: with a stop reason asked for, which filter's index SQLite is to follow
    /// (`stopLead(in:)`); the others are written so that it does not take theirs.
    func statement(
        _ shape: Shape = .newestFirst, dialect: SQLDialect = .sqlite, walksAgents: Bool = false, stopLead: StopLead? = nil,
        toolSets: [Int64]? = nil
    ) -> (sql: String, arguments: [CatalogValue]) {
        // `+column`: SQLite's way to say "no index for this column".
        let keepsOff = { (filter: StopLead) in dialect == .sqlite && stopLead != nil && stopLead != filter ? "+" : "" }
        var conditions: [String] = []
        var arguments: [CatalogValue] = []
        func probe(_ condition: String) -> String {
            "EXISTS (SELECT 1 FROM calls c WHERE c.log_id = logs.log_id AND \(condition))"
        }
        // On PostgreSQL the shape driven by a tool's calls makes its matches first, in a
        // materialized common table expression: left to itself the planner turns `IN (SELECT
        // …)` into a semi-join and walks every run newest first, which over a million runs where
        // no run matches looked at them all (4 s, `catalog-benchmark --store postgres`).
        var matches = ""
        var matchArguments: [CatalogValue] = []
        // The call filters go into one condition on one call, never one probe each: a probe
        // each would match a run whose refund was approved when another call ran without.
        let call = callConditions
        for tool in tools {
            let condition = (["c.tool = ?"] + (call.isEmpty ? ["c.attempts > 0"] : call)).joined(separator: " AND ")
            if case .drivenBy(tool) = shape {
                if dialect == .postgres {
                    matches = "WITH matched AS MATERIALIZED (SELECT DISTINCT c.log_id FROM calls c WHERE \(condition))\n"
                    matchArguments = [.text(tool)]
                    conditions.append("log_id IN (SELECT log_id FROM matched)")
                } else {
                    conditions.append("log_id IN (SELECT c.log_id FROM calls c WHERE \(condition))")
                    arguments.append(.text(tool))
                }
            } else if !call.isEmpty {
                conditions.append(probe(condition))
                arguments.append(.text(tool))
            }
            // Without call filters, the run's set of tools says whether it executed the tool.
        }
        if tools.isEmpty && !call.isEmpty {
            // `--denied` alone is what the run's own count says.
            conditions.append(call == [Self.deniedCall] ? "denied_calls > 0" : probe(call.joined(separator: " AND ")))
        }
        var index = ""
        if usesToolSets {
            let driven = shape == .drivenByToolSets
            let (condition, values) = toolSetCondition(
                toolSets, column: dialect == .sqlite && !driven ? "+tool_set" : "tool_set")
            conditions.append(condition)
            arguments.append(contentsOf: values)
            // SQLite knows only how many runs a set has on average, and would walk every run
            // newest first rather than sort a few.
            if driven && dialect == .sqlite && condition != "FALSE" { index = " INDEXED BY logs_by_tool_set" }
        }
        if !notTools.isEmpty {
            // Only a log read whole, to its run's stop, shows that a tool never ran: a damaged
            // or torn log's rows end where the reading did, a running one's where it is now.
            // (`+`: not a range of `logs_by_stop` to read whole and sort, on SQLite.)
            conditions.append("status = 'intact' AND \(dialect == .sqlite ? "+" : "")stop_reason IS NOT NULL")
        }
        if !stopReasons.isEmpty {
            // One reason is an equality: `logs_by_stop` gives its runs newest first. Several
            // are read whole from it and sorted, unless another filter leads (`stopLead`). In a
            // shape driven by something else, SQLite must not take that index instead.
            let drives = shape == .newestFirst && stopLead != .agent && stopLead != .parent && stopLead != .walk
            let (condition, values) = stopCondition(column: dialect == .sqlite && !drives ? "+stop_reason" : "stop_reason")
            conditions.append(condition)
            arguments.append(contentsOf: values)
        }
        if let agent {
            // A name without a wildcard is an equality: `logs_by_agent` then gives its runs newest first.
            if Glob(agent).isLiteral {
                conditions.append("\(keepsOff(.agent))agent = ?")
                arguments.append(.text(agent))
            } else {
                conditions.append(dialect.glob((walksAgents && dialect == .sqlite ? "+" : keepsOff(.agent)) + "agent"))
                arguments.append(dialect.globArgument(agent))
            }
        }
        if let model {
            conditions.append(dialect.glob("model"))
            arguments.append(dialect.globArgument(model))
        }
        if let sinceUs {
            conditions.append("started_at_us >= ?")
            arguments.append(.integer(Int64(sinceUs)))
        }
        if let untilUs {
            conditions.append("started_at_us < ?")
            arguments.append(.integer(Int64(untilUs)))
        }
        if !statuses.isEmpty {
            conditions.append("status IN (\(statuses.map { _ in "?" }.joined(separator: ", ")))")
            arguments.append(contentsOf: statuses.map { .text($0.rawValue) })
        }
        if let minCostUSD {
            conditions.append("cost_usd >= ?")
            arguments.append(.real(minCostUSD))
        }
        if let forksOf {
            conditions.append("\(keepsOff(.parent))forked_from = ?")
            arguments.append(.text(forksOf))
        }
        if let text, !text.isEmpty {
            let columns = ["path", "run_id", "agent", "model", "input"]
            let each = columns.map { dialect.contains(ignoringCase: text, in: $0) }
            conditions.append("(" + each.map(\.sql).joined(separator: " OR ") + ")")
            arguments.append(contentsOf: each.map(\.argument))
        }
        if let after {
            // The order is `newestFirst`: later starts first, runs that never started last, ties by path.
            if let started = after.startedAtUs {
                // `started_at_us <= ?` alone bounds the walk of `logs_by_start`, so a deep page
                // starts at its cursor instead of at the newest run.
                conditions.append("((started_at_us <= ? AND (started_at_us < ? OR path > ?)) OR started_at_us IS NULL)")
                arguments.append(contentsOf: [.integer(Int64(started)), .integer(Int64(started)), .text(after.path)])
            } else {
                conditions.append("(started_at_us IS NULL AND path > ?)")
                arguments.append(.text(after.path))
            }
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let columns = """
            SELECT log_id, path, run_id, agent, model, status, problem, stop_reason, stop_limit, steps, tool_calls, executed_calls,
                denied_calls, input_tokens + output_tokens AS tokens, cost_usd, started_at_us, ended_at_us, forked_from, fork_step,
                seen_on, file_id, generation
            """
        if case .scannedFirst(let bound) = shape {
            // `scanned`: how many matched, up to `bound` (`NOT INDEXED`: the table in its order).
            let sql = """
                SELECT *, COUNT(*) OVER () AS scanned FROM (
                \(columns)
                FROM logs\(dialect == .sqlite ? " NOT INDEXED" : "") \(filter)
                ORDER BY log_id DESC
                LIMIT \(max(1, bound))
                ) AS found
                ORDER BY \(dialect.newestFirst)
                LIMIT \(max(0, limit))
                """
            return (sql, arguments)
        }
        let sql =
            matches + """
                \(columns)
                FROM logs\(index) \(filter)
                ORDER BY \(dialect.newestFirst)
                LIMIT \(max(0, limit))
                """
        return (sql, matchArguments + arguments)
    }

    /// The condition that the run stopped for one of `stopReasons` (`running`: it has not
    /// stopped), on `column`.
    func stopCondition(column: String = "stop_reason") -> (sql: String, arguments: [CatalogValue]) {
        let reasons = Self.distinct(stopReasons.filter { $0 != "running" })
        var any: [String] = []
        if !reasons.isEmpty {
            any.append(reasons.count == 1 ? "\(column) = ?" : "\(column) IN (\(SQLList.placeholders(reasons.count)))")
        }
        if stopReasons.contains("running") { any.append("\(column) IS NULL") }
        return ("(" + any.joined(separator: " OR ") + ")", reasons.map { .text($0) })
    }

    /// `values` without repeats, in their first order.
    private static func distinct(_ values: [String]) -> [String] {
        var seen = Set<String>()
        return values.filter { seen.insert($0).inserted }
    }

    /// A call denied by policy or refused by a human (what `RunCounters.deniedCalls` counts).
    static let deniedCall = "(c.verdict = 'deny' OR c.approval = 'refused')"

    /// What the call filters ask of one call (`c`), to be joined with AND; empty without them.
    var callConditions: [String] {
        var conditions: [String] = []
        switch approval {
        case .granted?: conditions.append("c.approval = 'granted'")
        case .refused?: conditions.append("c.approval = 'refused'")
        case .pending?: conditions.append("c.verdict = 'approval_required' AND c.approval IS NULL")
        case .none?: conditions.append("c.attempts > 0 AND c.approval IS NULL")
        case nil: break
        }
        if hasDenied { conditions.append(Self.deniedCall) }
        return conditions
    }
}

/// One indexed run, as `runs` lists it.
public struct RunRow: Sendable, Hashable {
    public var path: String
    public var runId: String?
    public var agent: String?
    public var model: String?
    public var status: LogStatus
    public var problem: String?
    public var stopReason: String?
    public var limit: String?
    public var steps: Int
    public var toolCalls: Int
    public var executedCalls: Int
    public var deniedCalls: Int
    public var tokens: Int
    public var costUSD: Double
    public var startedAtUs: Int?
    public var endedAtUs: Int?
    /// For a fork: the parent run and the parent's step it continued after.
    public var forkedFrom: String?
    public var forkStep: Int?
    /// The SHA-256 of the log's bytes (`LogFingerprint.contentHash`) as its file's record has
    /// it; nil when no reader hashed them (`index` does not hash a run that can still grow: not
    /// stopped, stopped for approval, torn) or the row is of older bytes than the record's.
    public var contentHash: String? = nil
    /// The runner or host that indexed the log last (`Catalog.seenOn`).
    public var seenOn: String? = nil
    /// Whether the log's file still holds the bytes this row was read from, looked at when the
    /// row was listed (nil for a row made by other means).
    public var file: IndexedFileState? = nil

    /// Where the log was seen: `file://SEEN_ON/PATH` (the host percent-encoded), or nil when
    /// the row does not say which machine.
    public var seenAt: String? {
        guard let seenOn, let host = seenOn.addingPercentEncoding(withAllowedCharacters: .urlHostAllowed),
            let file = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)
        else { return nil }
        return "file://\(host)\(file.hasPrefix("/") ? "" : "/")\(file)"
    }

    /// The command that steps through this run.
    public var replayCommand: String { EvalReport.replayCommand(log: path, step: nil) }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("path", path)
        object.set("run_id", runId)
        object.set("agent", agent)
        object.set("model", model)
        object.set("status", status.rawValue)
        object.set("problem", problem)
        object.set("stop_reason", stopReason)
        object.set("limit", limit)
        object.set("steps", steps)
        object.set("tool_calls", toolCalls)
        object.set("executed_calls", executedCalls)
        object.set("denied_calls", deniedCalls)
        object.set("tokens", tokens)
        object.set("cost_usd", costUSD)
        object.set("started_at_us", startedAtUs)
        object.set("ended_at_us", endedAtUs)
        object.set("forked_from", forkedFrom)
        object.set("fork_step", forkStep)
        object.set("content_hash", contentHash)
        object.set("file", file?.rawValue)
        object.set("seen_at", seenAt)
        object.set("replay", replayCommand)
        return object.json
    }
}

extension RunQuery {
    /// The shape to run, given the qualifying sets of tools (`toolSets(in:)`).
    ///
    /// Without call filters, the runs whose set qualifies are counted in `logs_by_tool_set`, up
    /// to √(`limit` × runs): walking newest first looks at about `limit` × runs ÷ matches runs,
    /// driven by the sets reads and sorts every match, so the walk is taken from that many
    /// matches on. Over a million runs, a tool in a fifth of them, every one of which called the
    /// tool not wanted, qualifies no set: nothing is read at all.
    ///
    /// With call filters, driven by the rarest tool of `tools` when it was executed fewer times
    /// than half the number of runs (then walking the runs newest first could read most of them
    /// to find a few), else newest first. Counting stops at that bound, so choosing is cheap.
    /// Driven, every call of the tool is looked at; newest first, about `limit` ÷ (the share of
    /// runs with such a call × the share of those the sets of tools keep) runs are. The second
    /// share is estimated from a sample of the tool's calls (`sampledCalls`), and the walk is
    /// taken when it looks at fewer runs than there are calls.
    func shape(in db: any SQLConnection, toolSets: [Int64]?) throws -> Shape {
        let runs = try db.value("SELECT COALESCE(MAX(log_id), 0) FROM logs", as: Int.self) ?? 0
        guard !tools.isEmpty, !callConditions.isEmpty else {
            // A text few runs hold is found by reading the table once, in its own order (a
            // million runs holding none: 0.7 s, against 5 s newest first through the index).
            guard usesToolSets else { return scansForText ? .scannedFirst(bound: Self.scanBound(limit: limit)) : .newestFirst }
            if toolSets?.isEmpty == true { return .drivenByToolSets }
            let bound = Self.matchBound(limit: limit, runs: runs)
            let (condition, arguments) = toolSetCondition(toolSets)
            let matches = try Self.countRuns(where: condition, arguments, upTo: bound, in: db)
            return matches < bound ? .drivenByToolSets : .newestFirst
        }
        let bound = runs / 2
        // With call filters the call need not have run (a refused one did not): every call of
        // the tool bounds the matches, and is still counted from the index alone.
        var rarest: (tool: String, calls: Int)?
        for tool in tools {
            let calls =
                try db.value("SELECT COUNT(*) FROM (SELECT 1 FROM calls WHERE tool = ? LIMIT ?) AS found", [tool, bound], as: Int.self)
                ?? 0
            if calls < bound && calls < (rarest?.calls ?? .max) { rarest = (tool, calls) }
        }
        guard let rarest else { return .newestFirst }
        guard rarest.calls > Self.sampledCalls, usesToolSets else { return .drivenBy(tool: rarest.tool) }
        let (condition, values) = toolSetCondition(toolSets, column: "l.tool_set")
        var arguments: [(any SQLArgument)?] = [rarest.tool, Self.sampledCalls]
        arguments += values.map { $0 }
        let kept =
            try db.value(
                """
                SELECT COUNT(*) FROM (SELECT c.log_id FROM calls c WHERE tool = ? LIMIT ?) AS m
                JOIN logs l ON l.log_id = m.log_id WHERE \(condition)
                """, arguments, as: Int.self) ?? 0
        guard kept > 0 else { return .drivenBy(tool: rarest.tool) }
        let walked = Double(max(1, limit)) * Double(runs) / (Double(rarest.calls) * Double(kept) / Double(Self.sampledCalls))
        return walked < Double(rarest.calls) ? .newestFirst : .drivenBy(tool: rarest.tool)
    }

    /// The most matches `scannedFirst` keeps: 8 × `limit`. A row read walking newest first
    /// (through `logs_by_start`, in an order unrelated to the table's) costs about 7 times one
    /// read in the table's order (5 s and 0.7 s over a million runs), and the walk reads about
    /// `limit` × runs ÷ matches rows: with fewer matches than this, reading the whole table
    /// costs less; with more, the scan stops after about 8 × `limit` × runs ÷ matches rows, and
    /// the walk that follows finds the page.
    static func scanBound(limit: Int) -> Int { max(1, limit).multipliedSaturating(by: 8) }

    /// The number of matches from which walking the runs newest first (about `limit` × runs ÷
    /// matches rows read) costs less than reading every match and sorting them: √(`limit` ×
    /// runs). Where the counts that choose between an index and the walk stop.
    static func matchBound(limit: Int, runs: Int) -> Int {
        Int((Double(max(1, limit)) * Double(max(0, runs))).squareRoot()) + 1
    }

    /// Calls of the driving tool sampled to estimate how many of its runs the sets of tools keep.
    static let sampledCalls = 200

    /// With a stop reason asked for, which filter's index SQLite is to follow, where the
    /// planner, knowing nothing of how many runs each matches, would take `logs_by_stop`
    /// (whose order is the list's) over a filter that rules out more: nil when there is no
    /// choice to make (no stop reason; PostgreSQL, whose planner weighs this from its
    /// statistics of the columns).
    ///
    /// One reason's runs come from `logs_by_stop` newest first, so the walk stops at the page
    /// however common the reason; several reasons' runs come from it a reason at a time and must
    /// all be read and sorted, which costs more than walking every run newest first once they
    /// are many. So the stop's runs are counted in that index, a reason at a time, up to
    /// `matchBound` in all; then the runs of an agent (an exact name, or a glob with a literal
    /// start, which `logs_by_agent` answers as a range) and of a parent (`logs_by_parent`) are
    /// counted up to that many. The filter with the fewest runs leads, the stop on a tie; several
    /// reasons at the bound with no other filter under it: walk.
    func stopLead(in db: any SQLConnection) throws -> StopLead? {
        let reasons = Self.distinct(stopReasons)
        guard !reasons.isEmpty, db.dialect == .sqlite else { return nil }
        let runs = try db.value("SELECT COALESCE(MAX(log_id), 0) FROM logs", as: Int.self) ?? 0
        let bound = Self.matchBound(limit: limit, runs: runs)
        func count(_ condition: String, _ arguments: [(any SQLArgument)?], upTo limit: Int) throws -> Int {
            try Self.countRuns(where: condition, arguments, upTo: limit, in: db)
        }
        var matches = 0
        for reason in reasons where matches < bound {
            matches +=
                reason == "running"
                ? try count("stop_reason IS NULL", [], upTo: bound - matches)
                : try count("stop_reason = ?", [reason], upTo: bound - matches)
        }
        var lead: (filter: StopLead, runs: Int) = reasons.count > 1 && matches >= bound ? (.walk, matches) : (.stop, matches)
        if let agent, Glob(agent).isLiteral || Self.globPrefix(agent) != nil {
            let condition = Glob(agent).isLiteral ? "agent = ?" : db.dialect.glob("agent")
            let runs = try count(condition, [agent], upTo: lead.runs)
            if runs < lead.runs { lead = (.agent, runs) }
        }
        if let forksOf {
            let runs = try count("forked_from = ?", [forksOf], upTo: lead.runs)
            if runs < lead.runs { lead = (.parent, runs) }
        }
        return lead.filter
    }

    /// Which filter's index leads a query with a stop reason (`stopLead(in:)`).
    enum StopLead: Hashable {
        /// `logs_by_stop`.
        case stop
        /// `logs_by_agent`.
        case agent
        /// `logs_by_parent`.
        case parent
        /// None: every run walked newest first (`logs_by_start`).
        case walk
    }

    /// The literal start of a glob (before its first `*`, `?` or `[`), when it has one.
    static func globPrefix(_ pattern: String) -> String? {
        let prefix = pattern.prefix { $0 != "*" && $0 != "?" && $0 != "[" }
        return prefix.isEmpty ? nil : String(prefix)
    }

    /// Whether the agent glob matches so many runs that walking them newest first finds a page
    /// sooner than `logs_by_agent` would (counted in that index, up to a bound, so asking is cheap).
    func agentGlobIsCommon(in db: any SQLConnection) throws -> Bool {
        guard let agent, !Glob(agent).isLiteral, db.dialect == .sqlite else { return false }
        let bound = max(1, limit).multipliedSaturating(by: 20)
        return try Self.countRuns(where: db.dialect.glob("agent"), [agent], upTo: bound, in: db) >= bound
    }

    /// How many runs meet `condition`, counting no further than `bound` (so that asking costs
    /// at most that many rows of the index that answers it): what chooses between an index and
    /// the walk.
    static func countRuns(
        where condition: String, _ arguments: [(any SQLArgument)?], upTo bound: Int, in db: any SQLConnection
    ) throws -> Int {
        try db.value(
            "SELECT COUNT(*) FROM (SELECT 1 FROM logs WHERE \(condition) LIMIT ?) AS found", arguments + [max(0, bound)], as: Int.self)
            ?? 0
    }
}

extension Catalog {
    /// The indexed runs `query` selects, newest first (runs that never started last). With
    /// `looksAtFiles`, each says whether its file still holds the bytes it was read from
    /// (`RunRow.file`: a `stat` and a read of the 4 KiB tail per row, and a hash of the whole
    /// file where only its modification time changed), for what shows rows to people.
    public func runs(_ query: RunQuery, looksAtFiles: Bool = false) throws(CatalogError) -> [RunRow] {
        try runs(query, shape: nil, looksAtFiles: looksAtFiles)
    }

    /// The runs in a given shape (nil: the one `shape(in:)` chooses); the shapes must agree.
    func runs(_ query: RunQuery, shape: RunQuery.Shape?, looksAtFiles: Bool = false) throws(CatalogError) -> [RunRow] {
        let listed = try read { db -> [(RunRow, LogFileRecord?, Bool, Bool)] in
            let toolSets = try query.toolSets(in: db)
            // No set of tools qualifies: no run can.
            if toolSets?.isEmpty == true { return [] }
            let chosen = try shape ?? query.shape(in: db, toolSets: toolSets)
            let (walksAgents, stopLead) = (try query.agentGlobIsCommon(in: db), try query.stopLead(in: db))
            let (sql, arguments) = query.statement(
                chosen, dialect: db.dialect, walksAgents: walksAgents, stopLead: stopLead, toolSets: toolSets)
            var rows = try db.rows(sql, arguments)
            // The scan kept as many matches as it may: they are common, and the newest may be
            // among those it did not reach. Walked newest first, they come soon.
            if case .scannedFirst(let bound) = chosen, let first = rows.first, (first["scanned"] as Int) >= bound {
                let (sql, arguments) = query.statement(
                    .newestFirst, dialect: db.dialect, walksAgents: walksAgents, stopLead: stopLead, toolSets: toolSets)
                rows = try db.rows(sql, arguments)
            }
            // The files' records (`log_files`), looked up for the page's rows alone: the content
            // hash, where the row was read from the bytes the record names, and whether the file
            // still holds them.
            var records: [Int64: LogFileRecord] = [:]
            for chunk in SQLList.chunks(of: rows.compactMap { $0["file_id"] as Int? }) {
                try db.run(
                    "SELECT \(LogFileRecord.columns) FROM log_files f WHERE f.file_id IN (\(SQLList.placeholders(chunk.count)))",
                    bind: { binder in for id in chunk { binder.bind(id) } }
                ) { row in
                    let record = LogFileRecord(row, from: 0)
                    records[record.id] = record
                }
            }
            let looksHere = Self.seenHere(db)
            return rows.map { row in
                let file: Int? = row["file_id"]
                let generation: Int? = row["generation"]
                let record = file.flatMap { records[Int64($0)] }
                let isCurrent = record != nil && record?.generation == generation
                let seenOn: String? = row["seen_on"]
                let listed = RunRow(
                    path: row["path"], runId: row["run_id"], agent: row["agent"], model: row["model"],
                    status: LogStatus(rawValue: row["status"]) ?? .damaged, problem: row["problem"], stopReason: row["stop_reason"],
                    limit: row["stop_limit"], steps: row["steps"], toolCalls: row["tool_calls"], executedCalls: row["executed_calls"],
                    deniedCalls: row["denied_calls"], tokens: row["tokens"], costUSD: row["cost_usd"], startedAtUs: row["started_at_us"],
                    endedAtUs: row["ended_at_us"], forkedFrom: row["forked_from"], forkStep: row["fork_step"],
                    contentHash: isCurrent ? record?.contentHash : nil, seenOn: seenOn)
                // A shared catalog's row seen last on another machine names a file of that one.
                let isElsewhere = !looksHere.condition.isEmpty && seenOn != nil && seenOn != Catalog.seenOn
                return (listed, record, isCurrent, isElsewhere)
            }
        }
        guard looksAtFiles else { return listed.map(\.0) }
        // The files are looked at outside the read (no transaction held open meanwhile).
        return listed.map { row, record, isCurrent, isElsewhere in
            var row = row
            if isElsewhere {
                row.file = .elsewhere
            } else {
                let state = Self.fileState(path: row.path, file: record, isCurrent: isCurrent)
                // A row that says the log vanished, of a file that is there, is not what the file is.
                row.file = row.status == .vanished && state != .vanished ? .changed : state
            }
            return row
        }
    }

    /// The store's plan for `query`, one line per step, in the shape `runs` would choose now:
    /// SQLite's `EXPLAIN QUERY PLAN`, PostgreSQL's `EXPLAIN`.
    public func plan(_ query: RunQuery) throws(CatalogError) -> [String] { try plan(query, shape: nil) }

    /// The plan in a given shape (nil: the one `shape(in:)` chooses).
    func plan(_ query: RunQuery, shape: RunQuery.Shape?) throws(CatalogError) -> [String] {
        return try read { db in
            let toolSets = try query.toolSets(in: db)
            let (sql, arguments) = query.statement(
                try shape ?? query.shape(in: db, toolSets: toolSets), dialect: db.dialect,
                walksAgents: try query.agentGlobIsCommon(in: db), stopLead: try query.stopLead(in: db), toolSets: toolSets)
            return try db.plan(sql, arguments)
        }
    }
}
