import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the catalog is, for every command that uses it.
struct CatalogArguments: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The catalog file, or a team's PostgreSQL catalog as postgres://USER@HOST:PORT/DATABASE (password from PGPASSWORD; docs/catalog.md) (default: $AGENT_EVAL_CATALOG, else `catalog:` in .agent-eval/settings.yaml, else .agent-eval/catalog.sqlite, both in the project root: the nearest folder up from here with .agent-eval/ or .git, else the current directory).",
            valueName: "path-or-url"))
    var catalog: String?

    /// Where the catalog is: --catalog, else AGENT_EVAL_CATALOG, else the project's setting
    /// (`catalog:` in .agent-eval/settings.yaml, `Catalog.projectSetting`), else the default
    /// file. Throws when the settings file cannot be read or holds a mistake (its line named);
    /// a command that needs the catalog stops there, one that can do without it warns.
    func resolvedPath() throws(ConfigError) -> String {
        if let catalog { return catalog }
        return try Catalog.projectSetting() ?? Catalog.defaultPath()
    }

    /// `resolvedPath()` once it is known to resolve (a catalog opened from it), for messages.
    var path: String { (try? resolvedPath()) ?? catalog ?? Catalog.defaultPath() }

    /// Opens the catalog (creating it on first use), or prints why not and exits 2.
    func open(readOnly: Bool = false) throws -> Catalog {
        do {
            return try Catalog(path: try resolvedPath(), readOnly: readOnly)
        } catch {
            throw diagnose(error)
        }
    }

    /// The location, or nil with a warning when the project's settings hold a mistake: for a
    /// command whose catalog is a cache it can do without.
    func pathOrWarn() -> String? {
        do {
            return try resolvedPath()
        } catch {
            warn(error)
            printError("warning: going on without the catalog (--no-catalog silences this)")
            return nil
        }
    }
}

/// `exec` and `run`: index what they write, unless told not to.
struct CatalogUse: ParsableArguments {
    @OptionGroup var location: CatalogArguments

    @Flag(help: "Do not index the logs written (or use the eval fact cache) in the catalog.")
    var noCatalog = false

    /// The catalog, or nil with --no-catalog. A catalog that cannot be opened is a warning
    /// here, not a failure: the run itself does not need it.
    func openIfWanted() -> Catalog? {
        noCatalog ? nil : location.openOrWarn()
    }

    /// What indexes the logs a command writes as their runs close them, or nil with
    /// --no-catalog (or no catalog to be had); a log that cannot be indexed is a warning.
    func indexingSink() -> IndexingSink? {
        openIfWanted().map(IndexingSink.warning)
    }
}

extension IndexingSink {
    /// The sink for `catalog` whose failures are warnings.
    static func warning(_ catalog: Catalog) -> IndexingSink {
        IndexingSink(catalog: catalog, failed: { _, error in warn(error) })
    }
}

extension CatalogArguments {
    /// The catalog, for a command that can do without it: one that cannot be opened is a
    /// warning, and nil.
    func openOrWarn() -> Catalog? {
        guard let path = pathOrWarn() else { return nil }
        // Where a command leaves data it found on its own is worth saying once: it may be a
        // parent folder. A path the user gave (--catalog, AGENT_EVAL_CATALOG) needs no note.
        let isFound = catalog == nil && (ProcessInfo.processInfo.environment["AGENT_EVAL_CATALOG"] ?? "").isEmpty
        let isNew = isFound && !FileManager.default.fileExists(atPath: path)
        do {
            let catalog = try Catalog(path: path)
            if isNew { printError("note: created the catalog \(displayPath(path)) (docs/catalog.md says where it goes)") }
            return catalog
        } catch {
            warn(error)
            printError("warning: going on without the catalog (--no-catalog silences this)")
            return nil
        }
    }
}

/// A log path as people want to see it: relative to the current directory when under it.
func displayPath(_ path: String) -> String {
    // A team catalog's URL may hold its password: never shown.
    if Catalog.isServer(path) { return Catalog.redacted(path) }
    let directory = FileManager.default.currentDirectoryPath + "/"
    return path.hasPrefix(directory) ? String(path.dropFirst(directory.count)) : path
}

/// `2026-11-22 10:04:05` (UTC) for microseconds since 1970.
func utcTime(_ microseconds: Int?) -> String {
    guard let microseconds else { return "-" }
    var seconds = time_t(microseconds / 1_000_000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    return String(
        format: "%04d-%02d-%02d %02d:%02d:%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour),
        Int(parts.tm_min), Int(parts.tm_sec))
}

/// Columns padded to their widest cell; the last is not padded.
func table(_ rows: [[String]]) -> [String] {
    guard let first = rows.first else { return [] }
    var widths = [Int](repeating: 0, count: first.count)
    for row in rows { for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) } }
    return rows.map { row in
        row.enumerated().map { index, cell in
            index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
        }.joined(separator: "  ")
    }
}

/// `agent-eval index`: add logs to the catalog, reading only what changed.
struct IndexCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Index logs into the catalog: runs, tool calls, verdicts, approvals, tokens, cost.",
        discussion: """
            Directories are searched recursively for *.jsonl.gz; globs work in the last path component. A log whose \
            size, modification time and last gzip member are unchanged is not read again; a log that grew on the same \
            prefix (a run still being written, a run resumed after an approval) is read only from its last member on. \
            Logs the catalog knows under a directory given that are gone are marked vanished. With no paths, every log \
            the catalog knows is checked again.

            A damaged log is indexed with its status and problem (what was read before the damage is kept); a torn \
            one (a crash, or a run still being written) with where it was cut. Each log stands on its own: one that \
            cannot be read or stored (damage, a gzip member over --max-member-mib, which bounds the memory a log \
            can take) is reported by name with its reason and the others are indexed. Lines are printed once their \
            batch is committed, so a slow reader of the output never holds the catalog's write lock.

            The catalog is derived from the logs and can always be rebuilt (`agent-eval catalog rebuild`). \
            Schema, views and example queries: docs/catalog.md.

            Exit codes: 0 indexed (whatever the logs' status: a damaged or oversized log is reported, not fatal); \
            2 a path does not exist or a glob matches nothing, or the catalog cannot be used. A folder with no log \
            in it is indexed (0 logs): the logs the catalog knew under it are marked vanished.

            Examples:
              agent-eval index runs/
              agent-eval index 'runs/eval-*' --json
            """
    )

    @Argument(help: "Logs, directories of logs, or globs.")
    var paths: [String] = []

    @OptionGroup var location: CatalogArguments

    @Flag(help: "Print one JSON object per log, then a summary object.")
    var json = false

    @Flag(name: [.short, .long], help: "Print only the summary line.")
    var quiet = false

    @Option(help: "Threads reading logs while SQLite writes on another (default: the number of cores).")
    var jobs: Int?

    @OptionGroup var limits: LogReadLimits

    func validate() throws { try validateReadingJobs(jobs) }

    func run() throws {
        let catalog = try location.open()
        let isTerminal = isatty(2) == 1
        let summary: IndexSummary
        do {
            summary = try catalog.index(paths: paths, jobs: readingJobs(jobs), memberLimit: limits.memberLimit) { log, done, total in
                if json {
                    var object = ObjectBuilder()
                    object.set("path", log.path)
                    object.set("change", log.change.rawValue)
                    object.set("status", log.status.rawValue)
                    object.set("problem", log.problem)
                    object.set("events_read", log.eventsRead)
                    printJSON(object.json)
                } else if !quiet && (log.change != .unchanged || log.status == .damaged) {
                    if isTerminal { FileHandleStream.standardError.write("\r\u{1B}[K") }
                    var line =
                        "\(log.change.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(log.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(displayPath(log.path))"
                    if log.eventsRead > 0 { line += " (\(log.eventsRead) event\(log.eventsRead == 1 ? "" : "s") read)" }
                    say(line)
                    if let problem = log.problem, log.status == .damaged { say("          problem: \(problem)") }
                    if log.problemCode == "log.event_too_large" {
                        say("          hint: a log you trust may be indexed with a higher --max-member-mib (now \(limits.maxMemberMib))")
                    }
                }
                if isTerminal && !json && !quiet && done < total {
                    FileHandleStream.standardError.write("\r\u{1B}[K[\(done)/\(total)] indexing…")
                }
            }
        } catch {
            throw diagnose(error)
        }
        if isTerminal && !json && !quiet { FileHandleStream.standardError.write("\r\u{1B}[K") }
        let line =
            "\(summary.logs.count) log\(summary.logs.count == 1 ? "" : "s"): \(summary.count(.added)) added, \(summary.count(.grew)) grew, "
            + "\(summary.count(.reindexed)) reindexed, \(summary.count(.unchanged)) unchanged, \(summary.count(IndexedLog.Change.vanished)) vanished; "
            + "\(summary.count(.torn)) torn, \(summary.count(.damaged)) damaged; \(summary.eventsRead) events read → \(displayPath(catalog.path))"
        if json {
            var object = ObjectBuilder()
            object.set("summary", line)
            object.set("logs", summary.logs.count)
            for change in [IndexedLog.Change.added, .grew, .reindexed, .unchanged, .vanished] {
                object.set(change.rawValue, summary.count(change))
            }
            object.set("events_read", summary.eventsRead)
            object.set("catalog", catalog.path)
            printJSON(object.json)
        } else {
            say(line)
        }
    }
}

/// The filters `runs` and `stats` share.
struct RunFilters: ParsableArguments {
    @Option(
        help: """
            Runs with a call of this tool that ran (repeatable: all of them). Per call: with --approval or --denied, \
            a call of this tool in that state.
            """)
    var tool: [String] = []

    @Option(
        help:
            "Runs in which no call of this tool ran (repeatable). Per run, whatever the call filters say; only runs whose logs were read whole (intact) to their stop."
    )
    var notTool: [String] = []

    @Option(help: "Runs that stopped for this reason (repeatable: any of them); `running` for runs without a stop.")
    var stop: [String] = []

    @Option(help: "Runs of this agent (a glob).")
    var agent: String?

    @Option(help: "Runs of this model, provider:name (a glob, e.g. 'openai:*').")
    var model: String?

    @Option(help: "Runs that started at or after this time: 2026-11-01, 2026-11-01T09:30:00Z, or 7d / 12h / 30m ago.")
    var since: String?

    @Option(help: "Runs that started before this time (same forms as --since).")
    var until: String?

    @Option(help: "Logs in this state: intact, torn, damaged or vanished (repeatable).")
    var status: [String] = []

    @Flag(help: "Runs with a call denied by policy or refused by a human. Per call (with --tool, a call of that tool).")
    var denied = false

    @Option(
        help: """
            Runs with a call whose approval was granted, refused, is pending, or none (the call ran with no human approval). \
            Per call (with --tool, a call of that tool).
            """)
    var approval: String?

    @Option(help: "Runs that cost at least this many US dollars.")
    var minCost: Double?

    @Option(help: ArgumentHelp("Forks of this run (agent-eval fork), by its run id.", valueName: "run-id"))
    var forksOf: String?

    func validate() throws { _ = try query(limit: 1) }

    func query(limit: Int) throws -> RunQuery {
        var query = RunQuery()
        query.tools = tool
        query.notTools = notTool
        let reasons = Set(StopReason.allCases.map(\.rawValue) + ["running"])
        for reason in stop where !reasons.contains(reason) {
            throw ValidationError("--stop \(reason) is not a stop reason (one of: \(reasons.sorted().joined(separator: ", ")))")
        }
        query.stopReasons = stop
        query.agent = agent
        query.model = model
        query.sinceUs = try since.map { try Self.time($0, option: "--since") }
        query.untilUs = try until.map { try Self.time($0, option: "--until") }
        query.statuses = try status.map { text in
            guard let value = LogStatus(rawValue: text) else {
                throw ValidationError("--status \(text) is not one of: \(LogStatus.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return value
        }
        query.hasDenied = denied
        if let approval {
            guard let value = RunQuery.ApprovalFilter(rawValue: approval) else {
                throw ValidationError(
                    "--approval \(approval) is not one of: \(RunQuery.ApprovalFilter.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.approval = value
        }
        if let minCost, !minCost.isFinite || minCost < 0 {
            throw ValidationError("--min-cost must be a number of US dollars, 0 or more (got \(minCost))")
        }
        query.minCostUSD = minCost
        query.forksOf = forksOf
        query.limit = limit
        return query
    }

    /// Microseconds since 1970 for `2026-11-01`, `2026-11-01T09:30:00Z` or `7d` (ago).
    static func time(_ text: String, option: String, now: Date = Date()) throws -> Int {
        if let unit = text.last, let amount = Int(text.dropLast()), amount >= 0 {
            let seconds: Int? = ["d": 86_400, "h": 3_600, "m": 60, "s": 1][unit].map { amount * $0 }
            if let seconds { return Int(now.timeIntervalSince1970 * 1_000_000) - seconds * 1_000_000 }
        }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return Int(date.timeIntervalSince1970 * 1_000_000) }
        formatter.formatOptions = [.withFullDate]
        if let date = formatter.date(from: text) { return Int(date.timeIntervalSince1970 * 1_000_000) }
        throw ValidationError("\(option) \(text) is not a time: give 2026-11-01, 2026-11-01T09:30:00Z, or 7d, 12h, 30m (ago)")
    }
}

/// `agent-eval runs`: find indexed runs.
struct RunsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runs",
        abstract: "List indexed runs that match filters, newest first, each with the command that replays it.",
        discussion: """
            Every filter given must hold. Filters about a call hold for the same call: --tool, --approval and \
            --denied. `--tool refund_order --approval none` lists runs in which a refund_order call ran with no human \
            approval, not runs whose refund was approved while some other call ran without; with several --tool, each \
            tool needs such a call. The other filters are about the run: --not-tool (no call of the tool ran; only an intact log read to its \
            run's stop can show that, so damaged, torn and running logs are left out), --stop, \
            --agent, --model, --since, --until, --status, --min-cost, --forks-of (forks of a run, agent-eval fork).

            Index logs first (`agent-eval index runs/`; `exec` and `run` index what they write). For questions the \
            filters do not cover, `agent-eval sql` runs read-only SQL over the catalog (docs/catalog.md).

            Examples:
              agent-eval runs --tool refund_order --approval none  # refunds run unapproved
              agent-eval runs --stop budget_exhausted --since 7d
              agent-eval runs --tool lookup_order --not-tool refund_order --json
            """
    )

    @OptionGroup var filters: RunFilters

    @Option(help: "Show at most this many runs.")
    var limit = 50

    @Flag(help: "Print the runs as a JSON array.")
    var json = false

    @OptionGroup var location: CatalogArguments

    func validate() throws {
        if limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let query = try filters.query(limit: limit)
        let catalog = try location.open(readOnly: true)
        let rows: [RunRow]
        do {
            rows = try catalog.runs(query)
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(.array(rows.map(\.json)))
            return
        }
        guard !rows.isEmpty else {
            say("no indexed run matches")
            return
        }
        var cells = [["STARTED (UTC)", "AGENT", "MODEL", "STOP", "STEPS", "CALLS", "TOKENS", "COST $", "STATUS", "REPLAY"]]
        for row in rows {
            var stop = row.stopReason ?? "running"
            if let limit = row.limit { stop += " (\(limit))" }
            let agent = (row.agent ?? "?") + (row.forkedFrom.map { " (fork of \($0) at \(row.forkStep ?? 0))" } ?? "")
            cells.append([
                utcTime(row.startedAtUs), agent, row.model ?? "?", stop, "\(row.steps)",
                "\(row.executedCalls)" + (row.deniedCalls > 0 ? "+\(row.deniedCalls)d" : ""), "\(row.tokens)",
                String(format: "%.4f", row.costUSD), row.status.rawValue, EvalReport.replayCommand(log: displayPath(row.path), step: nil),
            ])
        }
        for line in table(cells) { say(line) }
        if rows.count == limit { say("(the first \(limit); --limit N for more)") }
    }
}

/// `agent-eval history CASE`: a case across suite runs.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show a case's outcome in each recorded suite run, with the commit, and how stable it is.",
        discussion: """
            Every `agent-eval run` records its results in the catalog (unless --no-catalog), with the commit and a \
            digest of each case's file (the CASE FILE column). CASE may be a glob.

            Flaky means mixed outcomes for the same case definition on the same code: a case is flaky when, among \
            the suite runs shown, it passed and did not pass with the same case file and the same commit, or when \
            one suite run's repeats disagreed. An edited case file or another commit starts a new series: a case \
            that passed, then failed after its file was edited, is not flaky but failing since that edit, and the \
            line says so. Runs outside a git repository have no commit and count as the same code.

            Exit codes: 0 shown; 1 a case shown is flaky; 2 no history for CASE.

            Example:
              agent-eval history refund-needs-approval --last 20
            """
    )

    @Argument(help: "The case id (a glob matches several).")
    var caseId: String

    @Option(help: "How many suite runs to look back over.")
    var last = 10

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var location: CatalogArguments

    func run() throws {
        let catalog = try location.open(readOnly: true)
        let histories: [CaseStability]
        do {
            histories = try catalog.caseIds(matching: caseId).map { id throws(CatalogError) in try catalog.history(caseId: id, limit: last)
            }
        } catch {
            throw diagnose(error)
        }
        guard !histories.isEmpty else {
            throw diagnose(
                CommandError(
                    "no_such_case", "the catalog has no suite run of a case matching \"\(caseId)\"",
                    hint:
                        "`agent-eval run` records results in the catalog; check the id with `agent-eval sql \"SELECT DISTINCT case_id FROM case_results\"`"
                ))
        }
        if json {
            printJSON(.array(histories.map(\.json)))
        } else {
            for history in histories {
                say(
                    "\(history.caseId): \(history.sentence)" + (history.isFlaky ? " — FLAKY" : "")
                        + (history.lastChange.map { " — " + $0 } ?? ""))
                var cells = [["SUITE RUN", "STARTED (UTC)", "COMMIT", "BRANCH", "CASE FILE", "OUTCOME", "RUNS PASSED"]]
                for entry in history.entries {
                    cells.append([
                        "#\(entry.suiteRunId)", utcTime(entry.startedAtUs), entry.gitCommit.map { String($0.prefix(10)) } ?? "-",
                        entry.gitBranch ?? "-", entry.fileDigest.map { String($0.dropFirst("sha256:".count).prefix(10)) } ?? "-",
                        entry.outcome, "\(entry.passedRuns)/\(entry.runs)",
                    ])
                }
                for line in table(cells) { say("  " + line) }
            }
        }
        if histories.contains(where: \.isFlaky) { throw Exit.failure }
    }
}

/// `agent-eval stats`: numbers over the indexed runs.
struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Per tool: calls, error rate, p50/p95 duration. Per agent and model: runs, tokens, cost, stop reasons.",
        discussion: """
            Over every indexed run, or those the filters select (the same filters as `runs`, and as there --tool, \
            --approval and --denied hold for the same call).

            Example:
              agent-eval stats --since 7d --agent 'support-*'
            """
    )

    @OptionGroup var filters: RunFilters

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var location: CatalogArguments

    func run() throws {
        let query = try filters.query(limit: Int(Int32.max))
        let catalog = try location.open(readOnly: true)
        let stats: (tools: [ToolStats], agents: [AgentStats])
        do {
            stats = try catalog.stats(query)
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(["tools": .array(stats.tools.map(\.json)), "agents": .array(stats.agents.map(\.json))])
            return
        }
        guard !stats.agents.isEmpty else {
            say("no indexed run matches")
            return
        }
        var tools = [["TOOL", "CALLS", "RAN", "FAILED", "ERROR RATE", "DENIED", "P50 MS", "P95 MS"]]
        for tool in stats.tools {
            tools.append([
                tool.tool, "\(tool.calls)", "\(tool.executed)", "\(tool.failed)", String(format: "%.1f%%", tool.errorRate * 100),
                "\(tool.denied)", String(format: "%.1f", Double(tool.p50Us) / 1000), String(format: "%.1f", Double(tool.p95Us) / 1000),
            ])
        }
        for line in table(tools) { say(line) }
        say("")
        var agents = [["AGENT", "MODEL", "RUNS", "TOKENS", "COST $", "STOP REASONS"]]
        for agent in stats.agents {
            agents.append([
                agent.agent, agent.model, "\(agent.runs)", "\(agent.tokens)", String(format: "%.4f", agent.costUSD),
                agent.stopReasons.map { "\($0.reason) \($0.runs)" }.joined(separator: ", "),
            ])
        }
        for line in table(agents) { say(line) }
    }
}

/// `agent-eval sql`: read-only SQL for power users.
struct SQLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Run one read-only SQL statement over the catalog.",
        discussion: """
            The connection is opened read-only: a statement that would change the catalog is refused. One statement \
            per call: text with a second one is refused before anything runs. A statement still running after \
            --timeout seconds is stopped (exit 2). Tables, views and example queries: docs/catalog.md.

            Example:
              agent-eval sql "SELECT path, step, arguments FROM unapproved_calls WHERE tool = 'refund_order'"
            """
    )

    @Argument(help: "The SQL statement.")
    var statement: String

    @Flag(help: "Print the rows as a JSON array of objects.")
    var json = false

    @Option(help: ArgumentHelp("Stop the statement after this many seconds (0: no limit).", valueName: "seconds"))
    var timeout: Double = Catalog.defaultQueryTimeout

    @OptionGroup var location: CatalogArguments

    func validate() throws {
        guard timeout >= 0, timeout.isFinite else { throw ValidationError("--timeout must be a number of seconds, 0 or more") }
    }

    func run() throws {
        let catalog = try location.open(readOnly: true)
        let result: QueryResult
        do {
            result = try catalog.query(statement, timeout: timeout > 0 ? timeout : nil)
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(result.json)
        } else {
            for line in table([result.columns] + result.rows.map { $0.map(\.description) }) { say(line) }
            say("(\(result.rows.count) row\(result.rows.count == 1 ? "" : "s"))")
        }
    }
}

/// `agent-eval catalog`: look after the catalog itself.
struct CatalogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog",
        abstract: "Rebuild the catalog from the logs, check it against them, or push it into a team's catalog.",
        subcommands: [Rebuild.self, Check.self, Push.self]
    )

    struct Rebuild: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rebuild",
            abstract: "Build the catalog again from the logs (those named, or every log it knows).",
            discussion: """
                Gives exactly the rows incremental indexing gives. Suite runs and their results are carried over from \
                the old catalog when it can be read (the logs do not hold them); the eval fact cache starts empty. \
                The new catalog replaces the old one only when it is complete. Run it when nothing else uses the \
                catalog. Use it when the catalog is damaged, from a newer agent-eval, or out of date.

                The history is carried from a catalog of any schema version (an older one is read as it is, not \
                migrated). When it cannot be read (a damaged catalog), the rebuild stops and changes nothing unless \
                --discard-history is given. A file that is not a catalog (a log, a text file, another program's \
                database) is never replaced.

                Exit codes: 0 rebuilt; 2 the file is not a catalog, its history cannot be read, or a path matches nothing.
                """
        )

        @Argument(help: "Logs, directories or globs (default: every log the old catalog knows).")
        var paths: [String] = []

        @OptionGroup var location: CatalogArguments

        @Flag(help: "Print a JSON summary.")
        var json = false

        @Option(help: "Threads reading logs while SQLite writes on another (default: the number of cores).")
        var jobs: Int?

        @OptionGroup var limits: LogReadLimits

        @Flag(
            help: """
                Go on when the old catalog's suite history cannot be read (a damaged catalog): that history is lost. \
                Without it, such a rebuild stops and changes nothing.
                """)
        var discardHistory = false

        func validate() throws { try validateReadingJobs(jobs) }

        func run() throws {
            let result: RebuildOutcome
            do {
                result = try Catalog.rebuild(
                    at: try location.resolvedPath(), from: paths, jobs: readingJobs(jobs), memberLimit: limits.memberLimit,
                    discardingUnreadableHistory: discardHistory)
            } catch {
                throw diagnose(error)
            }
            var line =
                "rebuilt \(displayPath(location.path)): \(result.summary.logs.count) logs (\(result.summary.eventsRead) events read), "
                + "\(result.suiteRuns) suite runs kept"
            if let version = result.fromSchemaVersion, version != result.toSchemaVersion {
                line += " (from schema version \(version))"
            }
            if let discarded = result.discardedHistory { printError("warning: the old suite history was discarded: \(discarded)") }
            if json {
                printJSON([
                    "logs": .int(result.summary.logs.count), "suite_runs": .int(result.suiteRuns), "summary": .string(line),
                    "discarded_history": result.discardedHistory.map(JSONValue.string) ?? .null,
                ])
            } else {
                say(line)
            }
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Report catalog rows whose log changed or vanished since it was indexed.",
            discussion:
                "Reads only each log's last member. Exit codes: 0 all current; 1 some rows are stale (index again); 2 the catalog cannot be used."
        )

        @OptionGroup var location: CatalogArguments

        @Flag(help: "Print JSON.")
        var json = false

        func run() throws {
            let catalog = try location.open(readOnly: true)
            let result: (checked: Int, stale: [StaleLog])
            do {
                result = try catalog.check()
            } catch {
                throw diagnose(error)
            }
            if json {
                printJSON(["checked": .int(result.checked), "stale": .array(result.stale.map(\.json))])
            } else {
                for stale in result.stale {
                    say("\(stale.reason.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(displayPath(stale.path))")
                }
                say(
                    "\(result.checked) log\(result.checked == 1 ? "" : "s") checked: \(result.stale.count) stale"
                        + (result.stale.isEmpty ? "" : " (run `agent-eval index` to bring them up to date)"))
            }
            if !result.stale.isEmpty { throw Exit.failure }
        }
    }
}

extension CatalogCommand {
    struct Push: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push",
            abstract: "Copy a catalog's suite runs and run rows into another catalog, typically a team's PostgreSQL one.",
            discussion: """
                For a CI job that ran with the embedded SQLite catalog: its suite runs (with their case and eval \
                results) and its indexed runs (with their calls) are copied into the catalog --to names, so `history`, \
                `runs` and `stats` there see them. Idempotent: a suite run the target holds already (same start time, \
                command line, runner, commit and shard) is not copied twice, and a run the target knows with the same \
                file identity is left as it is (one it knows with another is replaced). The fact cache and step tables \
                stay behind.

                Examples:
                  agent-eval catalog push --to postgres://ci@db.internal/agent_eval
                  agent-eval catalog push --from job/catalog.sqlite --to "$TEAM_CATALOG" --json

                Exit codes: 0 pushed; 2 a catalog cannot be opened or written.
                """
        )

        @Option(help: ArgumentHelp("The catalog to copy into: a postgres:// URL, or a file.", valueName: "url-or-path"))
        var to: String

        @Option(
            help: ArgumentHelp(
                "The catalog to copy from (default: $AGENT_EVAL_CATALOG, else the project's .agent-eval/catalog.sqlite).",
                valueName: "path-or-url"))
        var from: String?

        @Flag(help: "Print a JSON summary.")
        var json = false

        func run() throws {
            let source = from ?? Catalog.defaultPath()
            let summary: PushSummary
            let target: Catalog
            do {
                let origin = try Catalog(path: source, readOnly: true)
                target = try Catalog(path: to)
                summary = try origin.push(to: target)
            } catch {
                throw diagnose(error)
            }
            let line =
                "pushed \(displayPath(source)) → \(displayPath(target.path)): \(summary.suiteRuns) suite runs copied "
                + "(\(summary.suiteRunsKnown) there already), \(summary.logs) runs copied (\(summary.logsKnown) there already)"
            if json {
                printJSON([
                    "suite_runs": .int(summary.suiteRuns), "suite_runs_known": .int(summary.suiteRunsKnown), "runs": .int(summary.logs),
                    "runs_known": .int(summary.logsKnown), "summary": .string(line),
                ])
            } else {
                say(line)
            }
        }
    }
}

/// What `index` and `catalog rebuild` let one log take when reading it.
struct LogReadLimits: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            """
            The most decompressed data one gzip member of a log may hold, in MiB (1 to 1024). A log with a larger one \
            (a decompression bomb, an endless line) is indexed as damaged at that member; the rows read before it stay. \
            It bounds the memory each log being read can take.
            """, valueName: "mib"))
    var maxMemberMib = Catalog.defaultMemberLimit >> 20

    var memberLimit: Int { maxMemberMib << 20 }

    func validate() throws {
        guard (1...1024).contains(maxMemberMib) else { throw ValidationError("--max-member-mib must be between 1 and 1024") }
    }
}

/// `--jobs` of `index` and `catalog rebuild`: the number of cores when not given.
func readingJobs(_ jobs: Int?) -> Int { max(1, jobs ?? ProcessInfo.processInfo.activeProcessorCount) }

/// Refuses a `--jobs` below 1.
func validateReadingJobs(_ jobs: Int?) throws {
    if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
}
