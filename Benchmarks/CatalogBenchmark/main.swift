// The catalog benchmark (docs/catalog.md, docs/performance.md):
//
//   swift run -c release catalog-benchmark [--runs 1000] [--steps 20] [--repetitions 3] [--jobs 2]
//       [--query-runs 100000] [--big-events 1000000] [--dir PATH] [--agent-eval PATH]
//       [--store postgres [--postgres URL] [--postgres-runs 1000000] [--postgres-suites 100000]]
//
// 1. index `runs` logs × `steps` steps into a fresh catalog, against read + fold of the same logs
//    on one thread (the ratio is index rate / read+fold rate, target >= 0.8): indexing with one
//    thread reading while SQLite writes on another (`index --jobs 1`), and with `jobs` threads
//    reading;
// 2. `runs --tool X --not-tool Y` over `query-runs` indexed runs (the 1,000 logs' rows copied
//    under other paths with the sqlite3 program), in process (target < 50 ms);
// 3. an eval suite over the `runs` logs: first run (cache empty) against a second (every log
//    unchanged and cached; target >= 20x faster) and a third over a copy of the case and logs
//    elsewhere (another checkout: answered by content), in process and through the `agent-eval` beside
//    this benchmark or the one --agent-eval names (`.build-static/release/agent-eval`, what
//    scripts/install builds, starts in half the time); and the cached run again once the catalog
//    holds `history` suite runs (recording a suite run must not cost more as history grows);
// 4. catalog bytes per indexed event, and the peak memory of indexing one log of `big-events`
//    events against one a tenth that size (each in a child process: flat means close);
// 5. with --store postgres (a server of its own that the benchmark starts with
//    scripts/postgres_server, PostgreSQL's durability settings kept, and stops at the end; or
//    --postgres URL, an empty database the benchmark may fill): the same logs indexed into that
//    PostgreSQL catalog, `index --jobs 1` and `--jobs N` (`catalog rebuild`: the rows deleted,
//    the logs indexed again) against read + fold, and four `agent-eval index` processes at
//    once, each a quarter of the logs, against one process indexing them all;
// 6. then, in that PostgreSQL catalog, `runs --tool X --not-tool Y` over `postgres-runs`
//    indexed runs (the 1,000 logs' rows copied under other paths by SQL in the server) and
//    `history CASE` over `postgres-suites` suite runs of ten cases each (target < 100 ms each,
//    with the schema's indexes; the plans are printed).
//
// Prints medians of the repetitions.
import Catalog
import EvalEngine
import Foundation
import Synchronization
import TestSupport
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

struct Settings {
    var runs = 1000
    var steps = 20
    var repetitions = 3
    var jobs = 2
    var queryRuns = 100_000
    var bigEvents = 1_000_000
    /// Suite runs in the catalog before the cached run is timed again.
    var history = 100
    var directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-catalog-bench").path
    /// Keep the logs and catalogs afterwards (to look at them with `sqlite3`).
    var keep = false
    /// The `agent-eval` whose runs are timed (default: the one beside this benchmark).
    var agentEval = (CommandLine.arguments[0] as NSString).deletingLastPathComponent + "/agent-eval"
    /// A PostgreSQL catalog's URL to index into as well (parts 5 and 6); nil: SQLite only,
    /// unless `store` is `postgres` (then a server of the benchmark's own).
    var postgres: String?
    /// The server's superuser URL, for part 6's bulk load (foreign keys off while it copies):
    /// the benchmark's own server's; `--postgres` URLs are used for both.
    var postgresAdmin: String?
    /// `sqlite` (parts 1–4), or `postgres` (parts 5 and 6 as well).
    var store = "sqlite"
    /// Indexed runs in the PostgreSQL catalog when its queries are timed (part 6).
    var postgresRuns = 1_000_000
    /// Suite runs (of ten cases each) in the PostgreSQL catalog when `history` is timed.
    var postgresSuites = 100_000
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        if argument == "--keep" {
            settings.keep = true
            continue
        }
        let value = arguments.next() ?? ""
        switch argument {
        case "--runs": settings.runs = Int(value) ?? settings.runs
        case "--steps": settings.steps = Int(value) ?? settings.steps
        case "--repetitions": settings.repetitions = Int(value) ?? settings.repetitions
        case "--jobs": settings.jobs = Int(value) ?? settings.jobs
        case "--query-runs": settings.queryRuns = Int(value) ?? settings.queryRuns
        case "--big-events": settings.bigEvents = Int(value) ?? settings.bigEvents
        case "--history": settings.history = Int(value) ?? settings.history
        case "--dir": settings.directory = value
        case "--agent-eval": settings.agentEval = value
        case "--postgres":
            settings.postgres = value
            settings.store = "postgres"
        case "--store" where ["sqlite", "postgres"].contains(value): settings.store = value
        case "--postgres-runs": settings.postgresRuns = Int(value) ?? settings.postgresRuns
        case "--postgres-suites": settings.postgresSuites = Int(value) ?? settings.postgresSuites
        default:
            FileHandle.standardError.write(
                Data(
                    ("usage: catalog-benchmark [--runs N] [--steps N] [--repetitions N] [--jobs N] [--query-runs N] "
                        + "[--big-events N] [--history N] [--dir PATH] [--agent-eval PATH] [--store sqlite|postgres] "
                        + "[--postgres URL] [--postgres-runs N] [--postgres-suites N] [--keep]\n").utf8))
            exit(argument == "--help" ? 0 : 64)
        }
    }
    return settings
}

/// The PostgreSQL server the benchmark started (`--store postgres` without `--postgres`).
nonisolated(unsafe) var startedServer: PostgresTestServer?

/// Stops the server the benchmark started, if any.
func stopServer() {
    guard let server = startedServer else { return }
    _ = try? Subprocess.runBlocking("/bin/bash", [PythonEnvironment.scriptPath("postgres_server"), "stop", server.directory])
    startedServer = nil
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("catalog-benchmark: \(message)\n".utf8))
    stopServer()
    exit(1)
}

func sqlite(_ database: String, _ sql: String) throws {
    let result = try Subprocess.runBlocking(Subprocess.which("sqlite3") ?? "/usr/bin/sqlite3", [database, sql])
    if result.status != 0 { fail("sqlite3 failed: \(result.stderr)") }
}

func psql(_ url: String, _ sql: String) throws {
    let result = try Subprocess.runBlocking(Subprocess.which("psql") ?? "/usr/bin/psql", [url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
    if result.status != 0 { fail("psql failed: \(result.stderr)") }
}

/// Writes one log of about `events` events, a step at a time (never the whole run in memory).
func writeBigLog(_ path: String, events: Int) throws {
    var corpus = SyntheticCorpus(seed: 77)
    let steps = max(1, (events - 2) / 6)
    let writer = try LogWriter.create(at: path, runId: "bench-big")
    let clock = SteppingClock()
    let recorder = RunRecorder(writer: writer, clock: { clock.now() })
    try SyntheticCorpus.record([(.runStarted(corpus.start(steps: steps)), 0)], with: recorder)
    for step in 1...steps { try SyntheticCorpus.record(corpus.step(step), with: recorder) }
    try SyntheticCorpus.record([(.runStopped(corpus.stop()), steps)], with: recorder)
    try writer.close()
}

/// The child-process mode: index one log into a new catalog, print the events read and the
/// process's own peak resident memory in KiB, and exit. The peak is `VmHWM` from
/// /proc/self/status: `ru_maxrss` of a spawned child also counts the parent's memory (the kernel
/// carries the high-water mark of the address space the child had before its exec over, and a
/// spawned child starts in its parent's), so it measured this benchmark instead of the index.
if CommandLine.arguments.count == 4 && CommandLine.arguments[1] == "--index-one" {
    let catalog = try Catalog(path: CommandLine.arguments[3])
    let indexed = try catalog.index(log: CommandLine.arguments[2])
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?.split(separator: " ").dropFirst().first ?? "0"
    print(indexed.eventsRead, peak)
    exit(0)
}

/// Peak resident memory of indexing `log` in a child process, in MB.
func peakMemoryOfIndexing(_ log: String, catalog: String) throws -> (megabytes: Double, events: Int) {
    var pid: pid_t = 0
    let output = catalog + ".out"
    let arguments = [CommandLine.arguments[0], "--index-one", log, catalog]
    var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    guard posix_spawn(&pid, arguments[0], &actions, nil, argv, environ) == 0 else { fail("cannot start \(arguments[0])") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let fields = (try String(contentsOfFile: output, encoding: .utf8)).split(whereSeparator: \.isWhitespace)
    guard status == 0, fields.count == 2, let events = Int(fields[0]), let peakKiB = Double(fields[1]) else {
        fail("indexing \(log) in a child process failed (status \(status), output \(fields))")
    }
    return (peakKiB / 1024, events)
}

/// 6. `runs` and `history` over many rows in the PostgreSQL catalog at `url`, which holds the
/// benchmark's logs indexed once: their rows copied by SQL in the server until it holds
/// `postgresRuns` runs (with every 97th call a call of tool_3, so that it is in about a fifth of
/// the runs, and every 997th one of tool_4, in about one in fifty), and
/// `postgresSuites` suite runs of ten cases each.
func postgresQueries(_ url: String, settings: Settings) throws {
    let catalog = try Catalog(path: url)
    defer { try? catalog.close() }
    let indexed = try catalog.query("SELECT COUNT(*) FROM logs").rows.first?.first?.int ?? 0
    guard indexed > 0 else { fail("the PostgreSQL catalog holds no runs to copy") }
    let copies = max(0, settings.postgresRuns / indexed - 1)
    let suites = settings.postgresSuites
    let loaded = try seconds {
        // One transaction; foreign keys unchecked while the copies load (their targets are
        // made in the same statement order), then the identities moved past the copies.
        try psql(
            settings.postgresAdmin ?? url,
            """
            BEGIN;
            SET LOCAL session_replication_role = replica;
            DELETE FROM case_results; DELETE FROM eval_results; DELETE FROM suite_runs;
            CREATE TEMP TABLE originals ON COMMIT DROP AS
                SELECT *, row_number() OVER (ORDER BY log_id) AS rank, (SELECT MAX(log_id) FROM logs) AS top FROM logs;
            INSERT INTO logs (log_id, path, status, problem, run_id, agent,
                agent_version, model, input, started_at_us, ended_at_us, stop_reason, stop_limit, events, steps, decisions,
                invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd,
                anomalies, indexed_at_us)
            SELECT top + (n - 1) * \(indexed) + rank, path || '#' || n, status,
                problem, run_id, agent, agent_version, model, input, started_at_us + n, ended_at_us, stop_reason, stop_limit, events,
                steps, decisions, invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens,
                output_tokens, cost_usd, anomalies, indexed_at_us
            FROM originals, generate_series(1, \(copies)) AS n;
            INSERT INTO calls
            SELECT o.top + (n - 1) * \(indexed) + o.rank, k.ordinal, k.run_id, k.step, k.call_id,
                CASE WHEN (o.top + (n - 1) * \(indexed) + o.rank + k.ordinal) % 997 = 0 THEN 'tool_4'
                    WHEN (o.top + (n - 1) * \(indexed) + o.rank + k.ordinal) % 97 = 0 THEN 'tool_3' ELSE k.tool END,
                k.arguments, k.verdict, k.rule, k.approval, k.approver, k.attempts, k.status, k.duration_us, k.error
            FROM calls k JOIN originals o USING (log_id), generate_series(1, \(copies)) AS n;
            SELECT setval(pg_get_serial_sequence('logs', 'log_id'), (SELECT MAX(log_id) FROM logs));
            INSERT INTO suite_runs (suite_run_id, started_at_us, duration_ms, git_commit, git_branch, command_line, origin, cases,
                passed, failed, errors, k, runner, ci_job)
            SELECT n, 1795000000000000 + n::bigint * 60000000, 1000, md5(n::text), 'main', 'agent-eval run EvalCases/', 'run', 10, 9, 1, 0,
                1, 'runner-' || (n % 8), 'job-' || n
            FROM generate_series(1, \(suites)) AS n;
            INSERT INTO case_results (suite_run_id, case_id, file, source, outcome, runs, passed_runs, pass_rate, stability,
                file_digest)
            SELECT n, 'case-' || c, 'EvalCases/case-' || c || '.yaml', 'recorded',
                CASE WHEN (n + c) % 10 = 0 THEN 'fail' ELSE 'pass' END, 1, CASE WHEN (n + c) % 10 = 0 THEN 0 ELSE 1 END,
                CASE WHEN (n + c) % 10 = 0 THEN 0.0 ELSE 1.0 END, 'stable', md5(c::text)
            FROM generate_series(1, \(suites)) AS n, generate_series(0, 9) AS c;
            SELECT setval(pg_get_serial_sequence('suite_runs', 'suite_run_id'), GREATEST(\(suites), 1));
            COMMIT;
            """)
        // The copies' calls were changed in the server: their runs' sets of tools follow them.
        try catalog.deriveToolSets()
        try psql(url, "VACUUM ANALYZE")
    }
    let total = try catalog.query("SELECT COUNT(*) FROM logs").rows.first?.first?.int ?? 0
    let calls = try catalog.query("SELECT COUNT(*) FROM calls").rows.first?.first?.int ?? 0
    print(String(format: "postgres: %d runs (%d calls), %d suite runs loaded by SQL in %.0f s", total, calls, suites, loaded))
    func timed(_ body: () throws -> Int) throws -> (ms: Double, rows: Int) {
        var times: [Double] = []
        var rows = 0
        for _ in 0..<max(5, settings.repetitions * 5) { times.append(try seconds { rows = try body() }) }
        return (median(times) * 1000, rows)
    }
    /// `runs --tool tool --not-tool other`.
    func runs(_ tool: String, not other: String) -> RunQuery {
        var query = RunQuery()
        (query.tools, query.notTools) = ([tool], [other])
        return query
    }
    let (rare, broad) = (runs("tool_3", not: "tool_1"), runs("tool_1", not: "tool_3"))
    let (rarer, rarerFound) = (runs("tool_4", not: "tool_1"), runs("tool_4", not: "tool_3"))
    let rareTime = try timed { try catalog.runs(rare).count }
    let broadTime = try timed { try catalog.runs(broad).count }
    let rarerTime = try timed { try catalog.runs(rarer).count }
    let rarerFoundTime = try timed { try catalog.runs(rarerFound).count }
    print(
        String(
            format:
                "postgres: runs --tool tool_3 --not-tool tool_1 over %d runs: %.1f ms (%d rows); --tool tool_1 --not-tool tool_3: %.1f ms (%d rows) (target < 100 ms)",
            total, rareTime.ms, rareTime.rows, broadTime.ms, broadTime.rows))
    print(
        String(
            format:
                "postgres: runs --tool tool_4 --not-tool tool_1 (tool_4 in about 2%% of the runs, each ruled out): %.1f ms (%d rows); --tool tool_4 --not-tool tool_3: %.1f ms (%d rows)",
            rarerTime.ms, rarerTime.rows, rarerFoundTime.ms, rarerFoundTime.rows))
    print("  plan (tool_3): " + (try catalog.plan(rare)).joined(separator: " | "))
    print("  plan (tool_1): " + (try catalog.plan(broad)).joined(separator: " | "))
    let history = try timed { try catalog.history(caseId: "case-3").entries.count }
    print(
        String(
            format: "postgres: history case-3 over %d suite runs (%d case results): %.1f ms (%d entries) (target < 100 ms)", suites,
            suites * 10, history.ms, history.rows))
    print("  plan (history): " + (try catalog.plan(historyOf: "case-3")).joined(separator: " | "))
}

var settings = parseSettings()
let logs = settings.directory + "/logs"
try? FileManager.default.removeItem(atPath: settings.directory)
try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
defer { if !settings.keep { try? FileManager.default.removeItem(atPath: settings.directory) } }

var corpus = SyntheticCorpus()
var events = 0
var logBytes = 0
let clock = SteppingClock(startUs: 1_795_000_000_000_000, incrementUs: 1_000)
var paths: [String] = []
for index in 0..<settings.runs {
    let run = corpus.run(index: index, steps: settings.steps)
    let path = "\(logs)/\(run.runId).jsonl.gz"
    try LogWriter.withWriter(creating: path, runId: run.runId) { writer in
        try SyntheticCorpus.record(run, into: writer, clock: clock)
        logBytes += writer.bytesWritten
    }
    events += run.events.count
    paths.append(path)
}
print(
    "catalog-benchmark: \(settings.runs) logs × \(settings.steps) steps (\(events) events, "
        + String(format: "%.1f MB gzip", Double(logBytes) / 1e6) + "), \(settings.repetitions) repetitions")

// 1. Index against read + fold on one thread.
var foldTimes: [Double] = []
var indexTimes: [Double] = []
var parallelTimes: [Double] = []
var catalogBytes = 0
for repetition in 0..<settings.repetitions {
    // Read (chain checked) and fold, as the indexer does (context packets' text checked, not
    // made), without the digest checks `run` adds.
    foldTimes.append(
        try seconds {
            for path in paths {
                var state = RunState()
                _ = try LogReader(path: path, options: .init(keepsPacketText: false)).forEachEvent {
                    RunState.reduce(into: &state, $0.event)
                }
            }
        })
    let database = settings.directory + "/index-\(repetition).sqlite"
    let catalog = try Catalog(path: database)
    indexTimes.append(try seconds { _ = try catalog.index(paths: [logs], jobs: 1) })
    try catalog.checkpoint()
    catalogBytes = (try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int) ?? 0
    try catalog.close()
    let parallel = try Catalog(path: settings.directory + "/index-jobs-\(repetition).sqlite")
    parallelTimes.append(try seconds { _ = try parallel.index(paths: [logs], jobs: settings.jobs) })
    try parallel.close()
}
let foldRate = Double(settings.runs) / median(foldTimes)
let indexRate = Double(settings.runs) / median(indexTimes)
let parallelRate = Double(settings.runs) / median(parallelTimes)
print(
    String(
        format:
            "index --jobs 1 (one thread reading, SQLite writing on another): %.0f logs/s; read + fold alone, one thread: %.0f logs/s; ratio %.2f (target >= 0.8)",
        indexRate, foldRate, indexRate / foldRate))
print(
    String(
        format: "  --jobs %d (%d threads reading): %.0f logs/s, %.2fx one thread's read + fold", settings.jobs, settings.jobs, parallelRate,
        parallelRate / foldRate))
print(
    String(
        format: "catalog size: %.1f MB for %d events: %.0f bytes per indexed event (logs: %.0f bytes per event gzip)",
        Double(catalogBytes) / 1e6, events, Double(catalogBytes) / Double(events), Double(logBytes) / Double(events)))

// 5. The same logs into a PostgreSQL catalog.
if settings.store == "postgres" && settings.postgres == nil {
    do {
        startedServer = try await PostgresTestServer.start(durable: true)
    } catch {
        fail("cannot start a PostgreSQL server: \(error)")
    }
    settings.postgres = startedServer?.url
    settings.postgresAdmin = startedServer?.adminURL
}
if let url = settings.postgres {
    var serverTimes: [Double] = []
    var serverParallelTimes: [Double] = []
    for _ in 0..<settings.repetitions {
        serverTimes.append(try seconds { _ = try Catalog.rebuild(at: url, from: [logs], jobs: 1) })
        serverParallelTimes.append(try seconds { _ = try Catalog.rebuild(at: url, from: [logs], jobs: settings.jobs) })
    }
    let serverRate = Double(settings.runs) / median(serverTimes)
    let serverParallelRate = Double(settings.runs) / median(serverParallelTimes)
    print(
        String(
            format: "postgres: index --jobs 1 (catalog rebuild): %.0f logs/s, ratio %.2f to read + fold; --jobs %d: %.0f logs/s, %.2f",
            serverRate, serverRate / foldRate, settings.jobs, serverParallelRate, serverParallelRate / foldRate))
    // Four processes, a quarter of the logs each, against one process with all of them.
    let quarters = (0..<4).map { settings.directory + "/quarter-\($0)" }
    for (number, quarter) in quarters.enumerated() {
        try? FileManager.default.removeItem(atPath: quarter)
        try FileManager.default.createDirectory(atPath: quarter, withIntermediateDirectories: true)
        for (index, path) in paths.enumerated() where index % 4 == number {
            try FileManager.default.linkItem(atPath: path, toPath: quarter + "/" + (path as NSString).lastPathComponent)
        }
    }
    // The catalog's log rows deleted before each timed index.
    let emptied =
        """
        DELETE FROM steps; DELETE FROM step_logs; DELETE FROM check_results; DELETE FROM facts; DELETE FROM calls; DELETE FROM logs;
        DELETE FROM log_files;
        """
    var oneTimes: [Double] = []
    var fourTimes: [Double] = []
    for _ in 0..<settings.repetitions {
        try psql(url, emptied)
        oneTimes.append(
            try seconds {
                let result = try Subprocess.runBlocking(settings.agentEval, ["index", "--catalog", url] + quarters)
                if result.status != 0 { fail("agent-eval index failed: \(result.stderr)") }
            })
        try psql(url, emptied)
        let group = DispatchGroup()
        let failures = Mutex(0)
        let agentEval = settings.agentEval
        fourTimes.append(
            seconds {
                for quarter in quarters {
                    DispatchQueue.global().async(group: group) {
                        let result = try? Subprocess.runBlocking(agentEval, ["index", "--catalog", url, quarter])
                        if result?.status != 0 { failures.withLock { $0 += 1 } }
                    }
                }
                group.wait()
            })
        if failures.withLock({ $0 }) > 0 { fail("an agent-eval index of the four failed") }
    }
    let oneRate = Double(settings.runs) / median(oneTimes)
    let fourRate = Double(settings.runs) / median(fourTimes)
    print(
        String(
            format: "postgres: 4 index processes at once: %.0f logs/s in all; one process: %.0f logs/s; %.2fx",
            fourRate, oneRate, fourRate / oneRate))
    do {
        try postgresQueries(url, settings: settings)
    } catch {
        fail("the PostgreSQL queries failed: \(error)")
    }
    stopServer()
}

// 2. runs --tool X --not-tool Y over many indexed runs.
let queryDatabase = settings.directory + "/index-0.sqlite"
let copies = max(0, settings.queryRuns / settings.runs - 1)
if copies > 0 {
    try sqlite(
        queryDatabase,
        """
        PRAGMA journal_mode = WAL;
        CREATE TEMP TABLE copies (n INTEGER PRIMARY KEY);
        WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < \(copies)) INSERT INTO copies SELECT n FROM c;
        CREATE TEMP TABLE originals AS SELECT * FROM logs;
        INSERT INTO logs (path, status, problem, run_id, agent, agent_version, model,
            input, started_at_us, ended_at_us, stop_reason, stop_limit, events, steps, decisions, invalid_decisions, tool_calls,
            executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd, anomalies, indexed_at_us, resume)
        SELECT o.path || '#' || c.n, status, problem, run_id, agent, agent_version,
            model, input, started_at_us + c.n, ended_at_us, stop_reason, stop_limit, events, steps, decisions, invalid_decisions,
            tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd, anomalies, indexed_at_us, NULL
        FROM originals o, copies c;
        INSERT INTO calls SELECT l.log_id, k.ordinal, k.run_id, k.step, k.call_id,
            CASE WHEN (l.log_id + k.ordinal) % 97 = 0 THEN 'tool_3' ELSE k.tool END,
            k.arguments, k.verdict, k.rule, k.approval, k.approver, k.attempts, k.status, k.duration_us, k.error
        FROM logs l JOIN logs o ON o.path = substr(l.path, 1, instr(l.path, '#') - 1) JOIN calls k ON k.log_id = o.log_id
        WHERE instr(l.path, '#') > 0;
        ANALYZE;
        """)
}
let queryCatalog = try Catalog(path: queryDatabase)
if copies > 0 {
    // The copies' calls were changed by SQL: their runs' sets of tools follow them.
    let derived = try seconds {
        try queryCatalog.deriveToolSets()
        _ = try queryCatalog.query("SELECT COUNT(*) FROM logs")
    }
    try sqlite(queryDatabase, "ANALYZE;")
    print(String(format: "the copies' sets of tools derived from their calls in %.1f s", derived))
}
var query = RunQuery()
query.tools = ["tool_3"]
query.notTools = ["tool_1"]
query.limit = 50
let total = try queryCatalog.query("SELECT COUNT(*) FROM logs").rows.first?.first?.int ?? 0
var queryTimes: [Double] = []
var found = 0
for _ in 0..<max(5, settings.repetitions * 5) { queryTimes.append(try seconds { found = try queryCatalog.runs(query).count }) }
var broad = RunQuery()
broad.tools = ["tool_1"]
broad.notTools = ["tool_3"]
var broadTimes: [Double] = []
for _ in 0..<max(5, settings.repetitions * 5) { broadTimes.append(try seconds { _ = try queryCatalog.runs(broad) }) }
print(
    String(
        format:
            "runs --tool tool_3 --not-tool tool_1 over %d runs: %.1f ms (%d rows); --tool tool_1 --not-tool tool_3: %.1f ms (target < 50 ms)",
        total, median(queryTimes) * 1000, found, median(broadTimes) * 1000))
print("  plan: " + (try queryCatalog.plan(query)).joined(separator: " | "))
try queryCatalog.close()

// 3. An eval suite over the logs: first run, then every log unchanged.
let caseFile = settings.directory + "/bench.yaml"
try """
caseId: bench
logs: logs/*.jsonl.gz
expected:
  toolsCalled: [tool_1]
  toolsNotCalled: [tool_3]
  stopReason: success
""".write(toFile: caseFile, atomically: true, encoding: .utf8)
let (cases, caseErrors) = EvalSuite.load(paths: [caseFile])
guard caseErrors.isEmpty else { fail("cannot load the benchmark case: \(caseErrors)") }
// Another checkout of the same case and logs (another runner's, say): the same bytes at other
// paths, with new modification times.
let checkout = settings.directory + "/checkout"
try FileManager.default.createDirectory(atPath: checkout + "/logs", withIntermediateDirectories: true)
try FileManager.default.copyItem(atPath: caseFile, toPath: checkout + "/bench.yaml")
for path in paths {
    try FileManager.default.copyItem(atPath: path, toPath: checkout + "/logs/" + (path as NSString).lastPathComponent)
}
let checkoutCases = EvalSuite.load(paths: [checkout + "/bench.yaml"]).cases
var firstTimes: [Double] = []
var secondTimes: [Double] = []
var checkoutTimes: [Double] = []
for repetition in 0..<settings.repetitions {
    // Each pass opens the catalog anew, as another `agent-eval run` process would.
    let database = settings.directory + "/eval-\(repetition).sqlite"
    var caches: [FactCache] = []
    for pass in 0..<3 {
        let started = ContinuousClock.now
        let cache = FactCache(catalog: try Catalog(path: database))
        var options = EvalOptions(jobs: settings.jobs)
        options.facts = cache
        let results = await EvalRunner(options: options).run(pass == 2 ? checkoutCases : cases)
        let elapsed = seconds(ContinuousClock.now - started)
        guard results.first?.passed == true, results.first?.runs.count == settings.runs else { fail("the benchmark case did not pass") }
        switch pass {
        case 0: firstTimes.append(elapsed)
        case 1: secondTimes.append(elapsed)
        default: checkoutTimes.append(elapsed)
        }
        caches.append(cache)
    }
    if caches[0].usage != (0, settings.runs) || caches[1].reusedResults != settings.runs || caches[2].reusedResults != settings.runs {
        fail(
            "the cache was not used as expected: \(caches[0].usage), \(caches[1].reusedResults) and \(caches[2].reusedResults) results reused"
        )
    }
    for cache in caches { try cache.catalog.close() }
}
print(
    String(
        format: "eval over %d logs (--jobs %d), in process: first run %.3f s, unchanged and cached %.3f s: %.1fx faster (target >= 20x)",
        settings.runs, settings.jobs, median(firstTimes), median(secondTimes), median(firstTimes) / median(secondTimes)))
print(
    String(
        format:
            "  the same logs in another checkout (other paths, new modification times; known by content): %.3f s, %.1fx faster than the first run",
        median(checkoutTimes), median(firstTimes) / median(checkoutTimes)))

// The same through the command line, when the release `agent-eval` sits beside this benchmark
// (`swift build -c release` builds both) or --agent-eval names one: process start, case loading
// and recording included.
let binary = settings.agentEval
if FileManager.default.isExecutableFile(atPath: binary) {
    var cliFirst: [Double] = []
    var cliSecond: [Double] = []
    for repetition in 0..<settings.repetitions {
        let database = settings.directory + "/cli-\(repetition).sqlite"
        for pass in 0..<2 {
            let elapsed = try seconds {
                // Reads the output to its end before waiting, so the wait does not spin beside the run.
                let result = try Subprocess.runBlocking(binary, ["run", caseFile, "--catalog", database, "--jobs", "\(settings.jobs)"])
                if result.status != 0 { fail("agent-eval run exited with \(result.status): \(result.stderr)") }
            }
            if pass == 0 { cliFirst.append(elapsed) } else { cliSecond.append(elapsed) }
        }
    }
    print(
        String(
            format: "agent-eval run over %d logs (--jobs %d): first run %.3f s, unchanged and cached %.3f s: %.1fx faster (target >= 20x; ",
            settings.runs, settings.jobs, median(cliFirst), median(cliSecond), median(cliFirst) / median(cliSecond)) + binary + ")")
    // The same cached run once the catalog keeps a longer history: every run records a suite run
    // with one result row per log.
    if settings.history > 2 {
        let database = settings.directory + "/cli-0.sqlite"
        func cachedRun() throws {
            let result = try Subprocess.runBlocking(binary, ["run", caseFile, "--catalog", database, "--jobs", "\(settings.jobs)"])
            if result.status != 0 { fail("agent-eval run exited with \(result.status): \(result.stderr)") }
        }
        for _ in 2..<settings.history { try cachedRun() }
        var cliLater: [Double] = []
        for _ in 0..<settings.repetitions { cliLater.append(try seconds { try cachedRun() }) }
        print(
            String(
                format: "  the cached run once the catalog holds %d suite runs: %.3f s (%.2fx the cached run above)",
                settings.history, median(cliLater), median(cliLater) / median(cliSecond)))
    }
} else {
    print("agent-eval run: skipped (no \(binary); build it first: swift build -c release)")
}

// 4. Peak memory of indexing one big log, against one a tenth of its size.
if settings.bigEvents > 0 {
    let big = settings.directory + "/big.jsonl.gz"
    let small = settings.directory + "/small.jsonl.gz"
    try writeBigLog(big, events: settings.bigEvents)
    try writeBigLog(small, events: settings.bigEvents / 10)
    let smallPeak = try peakMemoryOfIndexing(small, catalog: settings.directory + "/small.sqlite")
    let bigPeak = try peakMemoryOfIndexing(big, catalog: settings.directory + "/big.sqlite")
    let bigSize = Double((try FileManager.default.attributesOfItem(atPath: big)[.size] as? Int) ?? 0) / 1e6
    print(
        String(
            format: "peak memory indexing one log: %d events %.1f MB; %d events (%.0f MB gzip) %.1f MB", smallPeak.events,
            smallPeak.megabytes,
            bigPeak.events, bigSize, bigPeak.megabytes))
}
