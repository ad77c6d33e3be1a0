// The web UI benchmark (docs/serve.md, docs/performance.md):
//
//   swift run -c release serve-benchmark [--runs 1000000] [--repetitions 20] [--steps 2000] [--memory-rounds 3] [--dir PATH] [--keep]
//       [--agent-eval PATH] [--long-events 100000] [--browser] [--store sqlite|postgres]
//
// Runs the `agent-eval serve` beside this benchmark (or --agent-eval's) as a child process, over
// a catalog of `runs` indexed runs (1,000 synthetic logs indexed, their rows copied under other
// paths: by the sqlite3 program, or with --store postgres in a PostgreSQL server the benchmark
// starts with scripts/postgres_server, durable, and stops at the end, by psql), and asks it as a
// browser would, over HTTP on 127.0.0.1:
//
// 1. the runs list's first page (`/api/runs`, and the HTML page `/`), unfiltered and with the
//    filters that read the runs' own rows (agent, stop, text), medians of `repetitions`
//    (target < 100 ms each);
// 2. a run written while a page follows it: from a step's end (its durability point, flushed)
//    to the page's connection receiving it, for 200 steps written 50 ms apart (p50 target <
//    250 ms);
// 3. the server's resident memory: idle after start, after the list pages, and after each of
//    `memory-rounds` rounds (3) of `steps` more steps (6 events each: 12,000 events a round by
//    default) streamed to a page that reads them and to one that connects and never reads
//    (target: idle < 60 MB, and flat);
// 4. a run of `long-events` events (100,000): its page (its first 25 steps) made and sent, the
//    other steps' outlines over the page's stream until the run's state came, and the last 25
//    steps fetched as a reader who jumps there (the first fetch makes the log's step table and
//    keeps it in the catalog, the second uses it); with --browser, the page opened in headless
//    Chromium (scripts/serve_browser.py, `scripts/python_venv browser`) until first drawn
//    (target < 2 s), until every step is in its list, and the jump to its last step.
//
// Prints medians.
import Catalog
import Foundation
import Synchronization
import TestSupport
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

struct Settings {
    var runs = 1_000_000
    var repetitions = 20
    var steps = 2_000
    var memoryRounds = 3
    var directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-serve-bench").path
    var keep = false
    var agentEval = (CommandLine.arguments[0] as NSString).deletingLastPathComponent + "/agent-eval"
    var longEvents = 100_000
    var browser = false
    var store = "sqlite"
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        if argument == "--keep" {
            settings.keep = true
            continue
        }
        if argument == "--browser" {
            settings.browser = true
            continue
        }
        guard let value = arguments.next() else { fail("\(argument) needs a value") }
        switch argument {
        case "--runs": settings.runs = Int(value) ?? settings.runs
        case "--repetitions": settings.repetitions = max(1, Int(value) ?? settings.repetitions)
        case "--steps": settings.steps = max(1, Int(value) ?? settings.steps)
        case "--memory-rounds": settings.memoryRounds = max(1, Int(value) ?? settings.memoryRounds)
        case "--dir": settings.directory = value
        case "--agent-eval": settings.agentEval = value
        case "--long-events": settings.longEvents = max(1_000, Int(value) ?? settings.longEvents)
        case "--store":
            guard ["sqlite", "postgres"].contains(value) else { fail("--store takes sqlite or postgres") }
            settings.store = value
        default:
            fail(
                "usage: serve-benchmark [--runs N] [--repetitions N] [--steps N] [--memory-rounds N] [--dir PATH] [--keep] [--agent-eval PATH] [--long-events N] [--browser] [--store sqlite|postgres]"
            )
        }
    }
    return settings
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("serve-benchmark: \(message)\n".utf8))
    exit(1)
}

func psql(_ url: String, _ sql: String) throws {
    let result = try Subprocess.runBlocking(Subprocess.which("psql") ?? "/usr/bin/psql", [url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
    if result.status != 0 { fail("psql failed: \(result.stderr)") }
}

func sqlite(_ database: String, _ sql: String) throws {
    let result = try Subprocess.runBlocking(Subprocess.which("sqlite3") ?? "/usr/bin/sqlite3", [database, sql])
    if result.status != 0 { fail("sqlite3 failed: \(result.stderr)") }
}

/// A field of /proc/PID/status in MB.
func memory(_ pid: Int32, _ field: String) -> Double {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
    return (Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) / 1024
}

/// The CPU seconds (user and system) the process has used so far.
func cpuSeconds(_ pid: Int32) -> Double {
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    guard let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A query value, percent-escaped.
func escaped(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text }

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
}

let settings = parseSettings()
guard FileManager.default.isExecutableFile(atPath: settings.agentEval) else {
    fail("there is no agent-eval at \(settings.agentEval): build it (swift build -c release) or give --agent-eval")
}
try? FileManager.default.removeItem(atPath: settings.directory)
let logs = settings.directory + "/logs"
let live = settings.directory + "/live"
for folder in [logs, live] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
defer { if !settings.keep { try? FileManager.default.removeItem(atPath: settings.directory) } }

// The catalog: 1,000 synthetic runs indexed, their rows copied until it holds `runs`.
let database = settings.directory + "/catalog.sqlite"
var corpus = SyntheticCorpus()
let clock = SteppingClock(startUs: 1_795_000_000_000_000, incrementUs: 1_000)
let originals = min(1_000, settings.runs)
for index in 0..<originals {
    let run = corpus.run(index: index, steps: 20)
    try LogWriter.withWriter(creating: "\(logs)/\(run.runId).jsonl.gz", runId: run.runId) { writer in
        try SyntheticCorpus.record(run, into: writer, clock: clock)
    }
}
/// The PostgreSQL server the benchmark started (`--store postgres`).
nonisolated(unsafe) var postgresServer: PostgresTestServer?
var location = database
if settings.store == "postgres" {
    do {
        postgresServer = try await PostgresTestServer.start(durable: true)
    } catch {
        fail("cannot start a PostgreSQL server: \(error)")
    }
    location = postgresServer?.url ?? ""
}
defer {
    if let server = postgresServer {
        _ = try? Subprocess.runBlocking("/bin/bash", [PythonEnvironment.scriptPath("postgres_server"), "stop", server.directory])
    }
}
let built = try seconds {
    let catalog = try Catalog(path: location)
    _ = try catalog.index(paths: [logs], jobs: 2)
    try catalog.close()
    let copies = max(0, settings.runs / originals - 1)
    guard copies > 0 else { return }
    if let server = postgresServer {
        try psql(
            server.adminURL,
            """
            BEGIN;
            SET LOCAL session_replication_role = replica;
            CREATE TEMP TABLE originals ON COMMIT DROP AS
                SELECT *, row_number() OVER (ORDER BY log_id) AS rank, (SELECT MAX(log_id) FROM logs) AS top FROM logs;
            INSERT INTO logs (log_id, path, status, problem, run_id, agent,
                agent_version, model, input, started_at_us, ended_at_us, stop_reason, stop_limit, events, steps, decisions,
                invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd,
                anomalies, indexed_at_us)
            SELECT top + (n - 1) * \(originals) + rank, path || '#' || n, status, problem, run_id || '-' || n, agent, agent_version,
                model, input, started_at_us + n * 1000000, ended_at_us, stop_reason, stop_limit, events, steps, decisions,
                invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd,
                anomalies, indexed_at_us
            FROM originals, generate_series(1, \(copies)) AS n;
            SELECT setval(pg_get_serial_sequence('logs', 'log_id'), (SELECT MAX(log_id) FROM logs));
            COMMIT;
            """)
        try psql(server.url, "VACUUM ANALYZE")
    } else {
        try sqlite(
            database,
            """
            PRAGMA journal_mode = WAL;
            CREATE TEMP TABLE copies (n INTEGER PRIMARY KEY);
            WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < \(copies)) INSERT INTO copies SELECT n FROM c;
            CREATE TEMP TABLE originals AS SELECT * FROM logs;
            INSERT INTO logs (path, status, problem, run_id, agent, agent_version, model,
                input, started_at_us, ended_at_us, stop_reason, stop_limit, events, steps, decisions, invalid_decisions, tool_calls,
                executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd, anomalies, indexed_at_us, resume)
            SELECT o.path || '#' || c.n, status, problem, run_id || '-' || c.n, agent, agent_version,
                model, input, started_at_us + c.n * 1000000, ended_at_us, stop_reason, stop_limit, events, steps, decisions,
                invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd,
                anomalies, indexed_at_us, NULL
            FROM originals o, copies c;
            ANALYZE;
            """)
    }
}

// The server, over that catalog, watching `live`.
let output = settings.directory + "/serve.out"
FileManager.default.createFile(atPath: output, contents: nil)
let server = Process()
server.executableURL = URL(fileURLWithPath: settings.agentEval)
server.arguments = ["serve", "--catalog", location, "--listen", "127.0.0.1:0", "--json", live]
server.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
FileManager.default.createFile(atPath: settings.directory + "/serve.err", contents: nil)
server.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: settings.directory + "/serve.err"))
try server.run()
defer { if server.isRunning { server.terminate() } }
var port = 0
for _ in 0..<600 where port == 0 {
    if let line = (try? String(contentsOfFile: output, encoding: .utf8))?.split(separator: "\n").first,
        let value = try? JSONParser.parse(Array(line.utf8)), let number = value["port"]?.intValue
    {
        port = number
    } else {
        usleep(50_000)
    }
}
guard port > 0 else { fail("agent-eval serve did not say where it listens") }
let pid = server.processIdentifier
try await Task.sleep(for: .milliseconds(500))
let idle = memory(pid, "VmRSS")
let counting = try Catalog(path: location)
let total = try counting.query("SELECT COUNT(*) FROM logs").rows.first?.first?.int ?? 0
try counting.close()
print(
    "serve-benchmark: \(total) indexed runs in \(settings.store == "postgres" ? "PostgreSQL" : "SQLite") (catalog made in \(String(format: "%.1f", built)) s), release build, agent-eval serve at 127.0.0.1:\(port)"
)

// 1. The runs list's first page.
func timed(_ target: String) async throws -> (ms: Double, rows: Int) {
    var times: [Double] = []
    var rows = 0
    for _ in 0..<settings.repetitions {
        let start = ContinuousClock.now
        let answer = try await HTTPTestClient.request(port: port, "GET", target)
        times.append(seconds(ContinuousClock.now - start) * 1000)
        guard answer.status == 200 else { fail("GET \(target): \(answer.status) \(answer.text)") }
        rows =
            target.hasPrefix("/api/")
            ? try answer.json()["runs"]?.arrayValue?.count ?? 0 : answer.text.components(separatedBy: "\"page\":\"/run?log=").count - 1
    }
    return (median(times), rows)
}
for (name, target) in [
    ("first page, JSON", "/api/runs"), ("first page, HTML", "/"), ("agent=bench-*", "/api/runs?agent=bench-*"),
    ("stop=success", "/api/runs?stop=success"), ("the 20th page (after=…)", ""),
    // The worst cases: a filter no row meets walks every row; text matches inside values (no index can help).
    ("stop=budget_exhausted (no row)", "/api/runs?stop=budget_exhausted"), ("text=no-such-run (no row)", "/api/runs?text=no-such-run"),
] {
    var path = target
    if path.isEmpty {
        // Nineteen pages in by cursor, then the next one timed.
        var next: String? = nil
        for _ in 0..<19 {
            let page = try await HTTPTestClient.request(
                port: port, "GET",
                "/api/runs" + (next.map { "?after=" + escaped($0) } ?? ""))
            next = try page.json()["next"]?.stringValue
        }
        path = "/api/runs?after=" + escaped(next ?? "")
    }
    let (ms, rows) = try await timed(path)
    print(String(format: "  runs list, %@: %.1f ms median of %d (%d rows; target < 100 ms)", name, ms, settings.repetitions, rows))
}
let afterList = memory(pid, "VmRSS")

// 2. A run followed as it is written: step end → the page's connection has it.
let path = live + "/followed.jsonl.gz"
let writer = try LogWriter.create(at: path, runId: "run-followed")
let recorder = RunRecorder(writer: writer, clock: { clock.now() })
var liveCorpus = SyntheticCorpus(seed: 5)
try SyntheticCorpus.record([(.runStarted(liveCorpus.start(steps: 200 + settings.steps * settings.memoryRounds)), 0)], with: recorder)
let written = Mutex<[Int: ContinuousClock.Instant]>([:])
let received = Mutex<[Int: ContinuousClock.Instant]>([:])
let target = "/events/run?log=" + escaped(path)
let lastStep = 200
let follower = Task.detached {
    try await HTTPTestClient.events(port: port, target, timeout: 600) { events in
        guard let last = events.last, let cursor = try? last.json()["cursor"]?.stringValue,
            let step = Int(cursor.split(separator: ".").first ?? "")
        else { return false }
        let now = ContinuousClock.now
        received.withLock { if $0[step] == nil { $0[step] = now } }
        return step >= lastStep
    }
}
try await Task.sleep(for: .milliseconds(500))
for step in 1...lastStep {
    try SyntheticCorpus.record(liveCorpus.step(step).map { ($0.payload, $0.step) }, with: recorder)
    let now = ContinuousClock.now
    written.withLock { $0[step] = now }
    try await Task.sleep(for: .milliseconds(50))
}
_ = try await follower.value
let latencies = (1...lastStep).compactMap { step -> Double? in
    guard let at = written.withLock({ $0[step] }) else { return nil }
    // An update that brought a later step brought this one too.
    let came = received.withLock { $0.filter { $0.key >= step }.map(\.value).min() }
    return came.map { seconds($0 - at) * 1000 }
}
print(
    String(
        format:
            "  live: step end → the page's connection: p50 %.1f ms, p95 %.1f ms over %d steps written 50 ms apart (target p50 < 250 ms)",
        percentile(latencies, 0.5), percentile(latencies, 0.95), latencies.count))

// 3. Memory while `steps` more steps stream to a page that reads and one that never reads.
let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
var address = sockaddr_in()
address.sin_family = sa_family_t(AF_INET)
address.sin_port = in_port_t(UInt16(port).bigEndian)
address.sin_addr.s_addr = inet_addr("127.0.0.1")
_ = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(silent, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
}
let request = Array("GET \(target)&after=0.0 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
_ = request.withUnsafeBytes { send(silent, $0.baseAddress, $0.count, 0) }
// In `memoryRounds` rounds of `steps` steps each, the memory after each round once the reading
// page has it: growth that goes on round after round is memory held per event; growth in the
// first round only is the working set (and the allocator's arenas) settling.
let finalStep = lastStep + settings.steps * settings.memoryRounds
let reached = Mutex(0)
let reader = Task.detached {
    try await HTTPTestClient.events(port: port, target, timeout: 1800) { events in
        guard let cursor = try? events.last?.json()["cursor"]?.stringValue, let step = Int(cursor.split(separator: ".").first ?? "") else {
            return false
        }
        reached.withLock { $0 = step }
        return step >= finalStep
    }
}
try await Task.sleep(for: .milliseconds(300))
let before = memory(pid, "VmRSS")
var streamedEvents = 0
var rounds: [Double] = []
var roundCPU: [Double] = []
var streaming = 0.0
for round in 0..<settings.memoryRounds {
    let cpuBefore = cpuSeconds(pid)
    let first = lastStep + settings.steps * round + 1
    let last = lastStep + settings.steps * (round + 1)
    streaming += try seconds {
        for step in first...last {
            let events = liveCorpus.step(step)
            streamedEvents += events.count
            try SyntheticCorpus.record(events.map { ($0.payload, $0.step) }, with: recorder)
            if step % 100 == 0 { usleep(20_000) }
        }
    }
    while reached.withLock({ $0 }) < last { try await Task.sleep(for: .milliseconds(20)) }
    try await Task.sleep(for: .milliseconds(200))
    rounds.append(memory(pid, "VmRSS"))
    roundCPU.append(cpuSeconds(pid) - cpuBefore)
}
_ = try await reader.value
let after = memory(pid, "VmRSS")
let peak = memory(pid, "VmHWM")
try writer.close()
close(silent)
print(
    String(
        format:
            "  memory: idle %.1f MB (target < 60 MB), after the list pages %.1f MB; %d more events streamed in %.1f s to a page reading and one never reading: %.1f MB before, after each %d steps %@ MB, peak %.1f MB; the server's CPU per round %@ s",
        idle, afterList, streamedEvents, streaming, before, settings.steps,
        rounds.map { String(format: "%.1f", $0) }.joined(separator: ", "),
        peak, roundCPU.map { String(format: "%.2f", $0) }.joined(separator: ", ")))

// 4. A long run's page, and its last steps fetched.
let longLog = live + "/long.jsonl.gz"
var longCorpus = SyntheticCorpus(seed: 9)
let longState = try longCorpus.writeLongRun(to: longLog, events: settings.longEvents)
let longBytes = FileStamp(path: longLog)?.size ?? 0
var pageTimes: [Double] = []
var pageBytes = 0
var pageCursor = ""
for _ in 0..<3 {
    let start = ContinuousClock.now
    let answer = try await HTTPTestClient.request(port: port, "GET", "/run?log=" + escaped(longLog), timeout: 300)
    pageTimes.append(seconds(ContinuousClock.now - start))
    guard answer.status == 200 else { fail("the long run's page: \(answer.status) \(answer.text)") }
    pageBytes = answer.body.count
    pageCursor = try PageData.json(answer.body)["live"]?["cursor"]?.stringValue ?? ""
}
// The rest of its steps, as outlines over the page's stream, until the run's state came.
var restTimes: [Double] = []
var restCPU: [Double] = []
var restBytes = 0
for _ in 0..<3 {
    let start = ContinuousClock.now
    let cpuBefore = cpuSeconds(pid)
    let streamed = try await HTTPTestClient.events(
        port: port, "/events/run?log=\(escaped(longLog))&after=\(pageCursor)", timeout: 300
    ) { events in (try? events.last?.json()["status"]?["state"]?.stringValue) == "stopped" }
    restTimes.append(seconds(ContinuousClock.now - start))
    restCPU.append(cpuSeconds(pid) - cpuBefore)
    guard !streamed.timedOut else { fail("the long run's stream never said it stopped") }
    restBytes = streamed.events.reduce(0) { $0 + $1.data.utf8.count }
}
let lastSteps = "/api/run/steps?log=\(escaped(longLog))&from=\(max(0, longState.step - 24))&to=\(longState.step)"
var fetchTimes: [Double] = []
for _ in 0..<3 {
    let start = ContinuousClock.now
    let answer = try await HTTPTestClient.request(port: port, "GET", lastSteps, timeout: 300)
    fetchTimes.append(seconds(ContinuousClock.now - start))
    guard answer.status == 200 else { fail("the long run's steps: \(answer.status) \(answer.text)") }
}
print(
    String(
        format:
            "  a run of %d events (%d steps, log %.1f MB): its page %.3f s median of 3 (%.2f MB, the first 25 steps whole); the other steps' outlines over its stream %.2f s (%.1f MB, the server's CPU %.2f s); its last 25 steps: %.2f s the first time (the step table made and kept), then %.3f s",
        longState.eventCount, longState.step + 1, Double(longBytes) / 1_048_576, median(pageTimes), Double(pageBytes) / 1_048_576,
        median(restTimes), Double(restBytes) / 1_048_576, median(restCPU), fetchTimes[0], median(Array(fetchTimes.dropFirst()))))
if settings.browser {
    let python = ".build/browser-venv/bin/python"
    guard FileManager.default.isExecutableFile(atPath: python) else {
        fail("--browser needs Chromium and Selenium: bash scripts/python_venv browser")
    }
    var painted: [Double] = []
    var drawn: [Double] = []
    var jumps: [Double] = []
    for _ in 0..<3 {
        let result = try Subprocess.runBlocking(
            python,
            [
                PythonEnvironment.scriptPath("serve_browser.py"), settings.directory + "/shots", settings.directory, "long",
                "http://127.0.0.1:\(port)/", longLog,
            ])
        let seen = try JSONParser.parse(result.stdout)
        guard let paint = seen["first_paint_seconds"]?.doubleValue, let load = seen["load_seconds"]?.doubleValue,
            let jump = seen["jump_seconds"]?.doubleValue
        else {
            fail("serve_browser.py long: \(result.stderr) \(result.stdoutText)")
        }
        painted.append(paint)
        drawn.append(load)
        jumps.append(jump)
    }
    print(
        String(
            format:
                "  Chromium: the long run's page first drawn in %.2f s (target < 2 s), every step in its list %.2f s, the jump to its last step %.2f s (medians of 3)",
            median(painted), median(drawn), median(jumps)))
}
server.terminate()
server.waitUntilExit()
