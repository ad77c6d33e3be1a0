import Foundation
import Recording
import Synchronization
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// `agent-eval serve` as a real process on 127.0.0.1, asked by a real HTTP client (a socket,
/// `HTTPTestClient`): the runs list and its filters, run pages that fill in while a log is
/// written, reconnects, the bounds on what may be read and who may ask, and approvals.
@Suite("serve: the live web UI", .ownThread)
struct ServeCommandTests {
    /// A running `agent-eval serve --listen 127.0.0.1:0 --json`.
    struct Server {
        let process: Process
        let output: String
        let errors: String
        let url: String
        let port: Int

        static func start(_ arguments: [String], in directory: TemporaryDirectory, port: Int = 0, workingIn folder: String? = nil)
            async throws
            -> Server
        {
            let output = directory.path("serve-\(UUID().uuidString).out")
            let errors = output + ".err"
            for file in [output, errors] { _ = FileManager.default.createFile(atPath: file, contents: nil) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try agentEvalBinary())
            process.arguments =
                ["serve", "--listen", "127.0.0.1:\(port)", "--json", "--catalog", directory.path("catalog.sqlite")] + arguments
            process.currentDirectoryURL = folder.map { URL(fileURLWithPath: $0) } ?? directory.url
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
            try process.run()
            for _ in 0..<600 {
                let lines = (try? String(contentsOfFile: output, encoding: .utf8))?.split(separator: "\n") ?? []
                if let first = lines.first, let listening = try? JSONParser.parse(Array(first.utf8)),
                    let url = listening["url"]?.stringValue,
                    let port = listening["port"]?.intValue
                {
                    return Server(process: process, output: output, errors: errors, url: url, port: port)
                }
                if !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            process.terminate()
            let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            throw CLITestError.unexpected("agent-eval serve did not say where it listens within 30 s: \(said)")
        }

        func get(_ target: String, headers: [String: String] = [:]) async throws -> HTTPTestClient.Answer {
            try await HTTPTestClient.request(port: port, "GET", target, headers: headers)
        }

        func json(_ target: String) async throws -> JSONValue {
            let answer = try await get(target)
            try #require(answer.status == 200, "GET \(target): \(answer.status) \(answer.text)")
            return try answer.json()
        }

        /// The runs the catalog lists, once `count` of them with a run id are there (the index runs
        /// in the background; a log indexed the moment it was made holds no run yet).
        func runs(count: Int, _ query: String = "") async throws -> [JSONValue] {
            var rows: [JSONValue] = []
            for _ in 0..<600 {
                rows = try await json("/api/runs" + query)["runs"]?.arrayValue ?? []
                if rows.count { $0["run_id"]?.stringValue != nil } >= count { return rows }
                try await Task.sleep(for: .milliseconds(50))
            }
            return rows
        }

        /// Stops it with `signal`: its exit status and what it printed.
        func stop(_ signal: Int32 = SIGTERM) async -> (status: Int32, stdout: String, stderr: String) {
            let status = await stopped(process, with: signal)
            return (
                status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "",
                (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            )
        }
    }

    /// A run written a step at a time, as a runtime writes it: each step is a lookup call, and a
    /// step's end is a durability point (flushed), so a reader sees it once it is written.
    final class GrowingRun {
        let recorder: RunRecorder
        let path: String

        init(path: String, runId: String, agent: String = "support-agent") throws {
            self.path = path
            let clock = SteppingClock()
            recorder = RunRecorder(writer: try LogWriter.create(at: path, runId: runId), clock: { clock.now() })
            var start = SampleRun.supportStart()
            start.agent.name = agent
            try recorder.record(.runStarted(start))
            try recorder.endStep()
        }

        func step(_ number: Int) throws {
            let call = ToolCall(id: "call-\(number)", name: "lookup_order", arguments: ["order_id": .string("A-\(number)")])
            try recorder.record(
                .decisionMade(
                    DecisionMade(raw: "lookup \(number)", outcome: .valid(.toolCalls([call])), usage: TokenUsage(input: 10, output: 2))))
            try recorder.record(.verdictGiven(VerdictGiven(callId: call.id, tool: call.name, verdict: .allow, rule: "reads")))
            try recorder.record(.toolIntended(ToolIntended(callId: call.id, tool: call.name, arguments: call.arguments, attempt: 1)))
            try recorder.record(
                .toolCompleted(
                    ToolCompleted(callId: call.id, tool: call.name, attempt: 1, status: .ok, output: ["n": .int(number)], durationUs: 5)))
            try recorder.endStep()
        }

        func finish() throws {
            try recorder.record(
                .decisionMade(DecisionMade(raw: "done", outcome: .valid(.answer("done")), usage: TokenUsage(input: 10, output: 1))))
            try recorder.endStep()
            try recorder.record(.runStopped(RunStopped(reason: .success, answer: "done")))
            try recorder.writer.close()
        }

        var eventCount: Int { recorder.state.eventCount }
    }

    /// Writes a finished support run (SampleRun's) at `path`.
    static func writeSupportRun(_ path: String, runId: String, refundCents: Int = 4999) throws {
        try LogWriter.withWriter(creating: path, runId: runId) { writer in
            _ = try SampleRun.recordSupportRun(into: writer, refundCents: refundCents)
        }
    }

    @Test(
        "catalog rebuild while serve has the catalog open: exit 2 naming serve's pid, the catalog as it was; once serve stops, it rebuilds")
    func rebuildBesideServe() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        try Self.writeSupportRun(runs + "/support-1.jsonl.gz", runId: "run-support-1")
        let catalog = directory.path("catalog.sqlite")
        let server = try await Server.start([runs], in: directory)
        #expect(try await server.runs(count: 1).count == 1)
        let refused = try await agentEval(["catalog", "rebuild", "--catalog", catalog, runs], in: directory.url)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("pid \(server.process.processIdentifier)"), "\(refused.stderr)")
        #expect(refused.stderr.contains("open for writing") && refused.stderr.contains("nothing was changed"), "\(refused.stderr)")
        #expect(try await server.runs(count: 1).count == 1, "serve lost its catalog")
        let stopped = await server.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        let rebuilt = try await agentEval(["catalog", "rebuild", "--catalog", catalog, runs], in: directory.url)
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
    }

    @Test("the runs list: filters from the address as `runs` reads them, pages by cursor without a row twice, a bad filter named")
    func runsList() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        for index in 1...5 { try Self.writeSupportRun(runs + "/support-\(index).jsonl.gz", runId: "run-support-\(index)") }
        let growing = try GrowingRun(path: runs + "/lookups.jsonl.gz", runId: "run-lookups", agent: "lookup-agent")
        try growing.step(1)
        try growing.finish()
        let server = try await Server.start([runs], in: directory)
        let all = try await server.runs(count: 6)
        #expect(all.count == 6)
        // The same rows as `agent-eval runs --json` over the same catalog.
        let cli = try await agentEval(["runs", "--json", "--catalog", directory.path("catalog.sqlite")])
        let cliPaths = try JSONParser.parse(Array(cli.stdout)).arrayValue?.compactMap { $0["path"]?.stringValue }
        #expect(all.compactMap { $0["path"]?.stringValue } == cliPaths)
        let refunds = try await server.json("/api/runs?tool=refund_order")["runs"]?.arrayValue ?? []
        #expect(refunds.count == 5)
        let onlyLookups = try await server.json("/api/runs?tool=lookup_order&not-tool=refund_order")["runs"]?.arrayValue ?? []
        #expect(onlyLookups.compactMap { $0["run_id"]?.stringValue } == ["run-lookups"])
        let byAgent = try await server.json("/api/runs?agent=lookup-*")["runs"]?.arrayValue ?? []
        #expect(byAgent.count == 1)
        let byText = try await server.json("/api/runs?text=SUPPORT-3")["runs"]?.arrayValue ?? []
        #expect(byText.compactMap { $0["run_id"]?.stringValue } == ["run-support-3"], "text is matched ignoring case")
        // Pages of two, each from the cursor the last gave: every row once, in order.
        var paged: [String] = []
        var next: String? = nil
        repeat {
            let page = try await server.json("/api/runs?limit=2" + (next.map { "&after=" + Self.escaped($0) } ?? ""))
            paged += page["runs"]?.arrayValue?.compactMap { $0["path"]?.stringValue } ?? []
            next = page["next"]?.stringValue
        } while next != nil && paged.count < 20
        #expect(paged == all.compactMap { $0["path"]?.stringValue })
        // A mistake is named, as `runs` names it.
        let bad = try await server.get("/api/runs?stop=finished")
        #expect(bad.status == 400)
        #expect(try bad.json()["error"]?.stringValue?.hasPrefix("--stop finished is not a stop reason") == true)
        let unknown = try await server.get("/api/runs?tools=x")
        #expect(unknown.status == 400)
        let suites = try await server.get("/suites?before=abc")
        #expect(suites.status == 400 && suites.text.contains("before=abc is not a suite run's number"), "\(suites.text)")
        let noSuchSuite = try await server.get("/suites?before=987654")
        #expect(noSuchSuite.status == 404 && noSuchSuite.text.contains("the catalog holds no suite run 987654"), "\(noSuchSuite.text)")
        // The page: the viewer's page with the rows embedded, under a policy that lets it ask only its own origin.
        let page = try await server.get("/?tool=refund_order")
        #expect(page.status == 200)
        #expect(page.headers["content-security-policy"]?.contains("connect-src 'self'") == true)
        #expect(page.headers["content-security-policy"]?.contains("script-src 'sha256-") == true)
        #expect(page.text.contains("\"view\":\"runs\""))
        let stopped = await server.stop(SIGINT)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(stopped.stdout.contains("\"event\":\"stopped\""))
    }

    @Test(
        "the runs list follows folders: one moved in brings its logs at any depth, one moved away takes its logs along, and a log deleted while no server watched is gone at the next start"
    )
    func runsListFollowsFolders() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        try Self.writeSupportRun(runs + "/kept.jsonl.gz", runId: "run-kept")
        try Self.writeSupportRun(runs + "/deleted.jsonl.gz", runId: "run-deleted")
        try FileManager.default.createDirectory(atPath: directory.path("tree/a/b"), withIntermediateDirectories: true)
        try Self.writeSupportRun(directory.path("tree/a/top.jsonl.gz"), runId: "run-top")
        try Self.writeSupportRun(directory.path("tree/a/b/nested.jsonl.gz"), runId: "run-nested")
        var server = try await Server.start([runs], in: directory)
        #expect(try await server.runs(count: 2).count == 2)
        /// The run ids the list shows as present, once `until` holds of them (at most 30 s).
        func present(until: ([String]) -> Bool) async throws -> [String] {
            var ids: [String] = []
            for _ in 0..<600 {
                let rows = try await server.json("/api/runs")["runs"]?.arrayValue ?? []
                ids = rows.filter { $0["status"]?.stringValue != "vanished" }.compactMap { $0["run_id"]?.stringValue }.sorted()
                if until(ids) { return ids }
                try await Task.sleep(for: .milliseconds(50))
            }
            return ids
        }
        try FileManager.default.moveItem(atPath: directory.path("tree/a"), toPath: runs + "/moved")
        let movedIn = try await present { $0.count == 4 }
        #expect(movedIn == ["run-deleted", "run-kept", "run-nested", "run-top"], "the nested log too")
        try FileManager.default.moveItem(atPath: runs + "/moved", toPath: directory.path("away"))
        let movedOut = try await present { $0.count == 2 }
        #expect(movedOut == ["run-deleted", "run-kept"], "the folder's logs left with it")
        #expect((await server.stop()).status == 0)
        try FileManager.default.removeItem(atPath: runs + "/deleted.jsonl.gz")
        server = try await Server.start([runs], in: directory)
        let restarted = try await present { $0 == ["run-kept"] }
        #expect(restarted == ["run-kept"], "a log deleted while no server watched is not listed as there")
        #expect((await server.stop()).status == 0)
    }

    @Test("a page resumed from its cursor after its log was replaced, by another run or by a shorter copy of its own, starts again")
    func replacedLogStartsThePageAgain() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        /// A finished run of `steps` lookups written at `path` (`finishes` false: left running).
        func write(_ path: String, runId: String, steps: Int, finishes: Bool = true) throws {
            let run = try GrowingRun(path: path, runId: runId)
            for step in 1...steps { try run.step(step) }
            if finishes { try run.finish() }
        }
        let log = runs + "/replaced.jsonl.gz"
        try write(log, runId: "run-a", steps: 6)
        let server = try await Server.start([runs], in: directory)
        /// The page's cursor and run, then the first update a stream resumed from them sends
        /// once `replace` put another log in place.
        func resumed(after replace: () throws -> Void) async throws -> JSONValue? {
            let data = try PageData.json(try await server.get("/run?log=" + Self.escaped(log)).body)
            let cursor = try #require(data["live"]?["cursor"]?.stringValue)
            let run = try #require(data["live"]?["run"]?.stringValue)
            try replace()
            let streamed = try await HTTPTestClient.events(
                port: server.port, "/events/run?log=\(Self.escaped(log))&after=\(cursor)&run=\(run)", timeout: 60
            ) { !$0.isEmpty }
            return try streamed.events.first?.json()
        }
        // Another run, longer: its steps are not the page's steps' sequel.
        let other = try await resumed {
            try write(directory.path("other.jsonl.gz"), runId: "run-b", steps: 9)
            _ = rename(directory.path("other.jsonl.gz"), log)
        }
        #expect(other?["reset"] == true, "\(String(describing: other))")
        #expect(other?["steps"]?.arrayValue?.first?["step"] == 0)
        // The same run, cut back to two of its steps: the page's later steps are no longer the log's.
        let shorter = try await resumed {
            try write(directory.path("short.jsonl.gz"), runId: "run-b", steps: 2, finishes: false)
            _ = rename(directory.path("short.jsonl.gz"), log)
        }
        #expect(shorter?["reset"] == true, "\(String(describing: shorter))")
        _ = await server.stop()
    }

    @Test(
        "an open page whose log is replaced by another file of the same run and as many steps starts again: its steps are the new file's, not the old under the new banner"
    )
    func sameRunReplacedWhileOpen() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let log = runs + "/r.jsonl.gz"
        // The same run id and steps: an edited copy (its chain and digests made again) put in place.
        for (path, seed) in [(log, 1), (directory.path("other.jsonl.gz"), 2)] {
            var corpus = SyntheticCorpus(seed: UInt64(seed))
            var events: [(payload: EventPayload, step: Int)] = [(.runStarted(corpus.start(steps: 3)), 0)]
            for step in 1...3 { events += corpus.step(step) }
            events.append((.runStopped(RunStopped(reason: .success)), 3))
            try DigestedLog.write(events, to: path, runId: "run-same")
        }
        let server = try await Server.start([runs], in: directory)
        let replaced = Mutex(false)
        let other = directory.path("other.jsonl.gz")
        let streamed = try await HTTPTestClient.events(port: server.port, "/events/run?log=\(Self.escaped(log))", timeout: 60) { events in
            // Once the page has the first file's steps, the other file takes its place.
            if !events.isEmpty,
                replaced.withLock({ done in
                    defer { done = true }; return !done
                })
            {
                _ = rename(other, log)
            }
            return events.contains { (try? $0.json()["reset"]) == true }
        }
        #expect(!streamed.timedOut, "no reset came: \(streamed.events.count) updates")
        let reset = try #require(try streamed.events.first { (try? $0.json()["reset"]) == true }?.json())
        #expect(reset["steps"]?.arrayValue?.first?["step"] == 0, "\(reset)")
        _ = await server.stop()
    }

    @Test(
        "a client that asks to close (Connection: close, HTTP/1.0) gets its answer whole, then the end of the connection; one that keeps it alive keeps it"
    )
    func closesWhenAsked() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        try Self.writeSupportRun(runs + "/one.jsonl.gz", runId: "run-one")
        let server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 1)
        let host = "Host: 127.0.0.1:\(server.port)\r\n"
        for (request, closes) in [
            ("GET /api/runs HTTP/1.1\r\n\(host)Connection: close\r\n\r\n", true),
            ("GET /api/runs HTTP/1.0\r\n\(host)\r\n", true),
            ("GET /api/runs HTTP/1.1\r\n\(host)\r\n", false),
        ] {
            let (received, closed) = try await HTTPTestClient.readToTheEnd(port: server.port, request: request, timeout: closes ? 20 : 2)
            #expect(closed == closes, "\(request.prefix(30)): \(closed ? "closed" : "kept open")")
            // The answer whole: as many bytes after its head as its content-length says.
            let text = String(decoding: received, as: UTF8.self)
            let parts = text.components(separatedBy: "\r\n\r\n")
            let length = parts.first?.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
            #expect(
                text.contains(" 200 OK\r\n") && length != nil && parts.dropFirst().joined(separator: "\r\n\r\n").utf8.count == length,
                "\(text.suffix(80))")
        }
        _ = await server.stop()
    }

    /// The last version of each step sent, in step order, as the page merges them.
    static func latest(_ steps: [JSONValue]) -> [JSONValue] {
        var byNumber: [Int: JSONValue] = [:]
        for step in steps { if let number = step["step"]?.intValue { byNumber[number] = step } }
        return byNumber.keys.sorted().compactMap { byNumber[$0] }
    }

    static func escaped(_ text: String) -> String {
        text.addingPercentEncoding(
            withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? text
    }

    @Test(
        "a run being written: it appears in the list, its steps stream to an open page as they are written, and a reconnect from the last id loses and repeats nothing"
    )
    func liveRun() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let server = try await Server.start([runs], in: directory)
        let path = runs + "/live.jsonl.gz"
        let run = try GrowingRun(path: path, runId: "run-live")
        try run.step(1)
        // In the list while it runs, with no stop.
        let listed = try await server.runs(count: 1, "?stop=running")
        #expect(listed.first?["run_id"]?.stringValue == "run-live")
        let target = "/events/run?log=" + Self.escaped(path)
        // Connected from the start: each step written arrives.
        async let streamed = HTTPTestClient.events(port: server.port, target, timeout: 60) { events in
            events.last.flatMap { try? $0.json()["cursor"]?.stringValue } == "3.5"
        }
        try await Task.sleep(for: .milliseconds(300))
        try run.step(2)
        try await Task.sleep(for: .milliseconds(300))
        try run.step(3)
        let first = try await streamed
        #expect(first.status == 200)
        #expect(!first.timedOut, "the third step never arrived: \(first.events.map(\.data))")
        // A step whose events grew is sent whole again: the page keeps the last of each number.
        let firstSteps = Self.latest(try first.events.flatMap { try $0.json()["steps"]?.arrayValue ?? [] })
        #expect(Set(firstSteps.compactMap { $0["step"]?.intValue }) == [0, 1, 2, 3])
        let lastId = try #require(first.events.last?.id)
        #expect(lastId == "3.5", "step 3, whose 5 events the page has")
        #expect(try first.events.last?.json()["status"]?["state"]?.stringValue == "running", "this process holds the log's write lock")
        // The page went away; two more steps and the stop are written meanwhile.
        try run.step(4)
        try run.step(5)
        try run.finish()
        let resumed = try await HTTPTestClient.events(port: server.port, target, headers: ["Last-Event-ID": lastId], timeout: 60) {
            events in
            events.contains { (try? $0.json()["status"]?["state"]?.stringValue) == "stopped" }
        }
        #expect(!resumed.timedOut)
        let resumedSteps = Self.latest(try resumed.events.flatMap { try $0.json()["steps"]?.arrayValue ?? [] })
        #expect(resumedSteps.compactMap { $0["step"]?.intValue } == [4, 5, 6, 7], "only what the page lacked")
        // Nothing lost, nothing twice: the events shown are the log's.
        let shown = (firstSteps + resumedSteps).reduce(0) { $0 + ($1["events"]?.arrayValue?.count ?? 0) }
        #expect(shown == run.eventCount)
        let sequences = (firstSteps + resumedSteps).flatMap { $0["events"]?.arrayValue?.compactMap { $0["seq"]?.intValue } ?? [] }
        #expect(sequences == Array(0..<run.eventCount))
        #expect(try resumed.events.last?.json()["status"]?["text"]?.stringValue == "stopped: success")
        _ = await server.stop()
    }

    @Test("a page that needs a long run from its start gets it in parts of at most 512 KiB, each after the page took the one before")
    func longRunInParts() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let path = runs + "/long.jsonl.gz"
        let run = try GrowingRun(path: path, runId: "run-long")
        for step in 1...800 { try run.step(step) }
        try run.finish()
        let server = try await Server.start([runs], in: directory)
        let streamed = try await HTTPTestClient.events(port: server.port, "/events/run?log=" + Self.escaped(path), timeout: 120) { events in
            (try? events.last?.json()["status"]?["state"]?.stringValue) == "stopped"
        }
        #expect(!streamed.timedOut)
        #expect(streamed.events.count > 1, "one update would hold the whole run")
        for event in streamed.events { #expect(event.data.utf8.count < 600 * 1024) }
        // Only the last carries the run's head and state; together they are every event once.
        #expect(try streamed.events.dropLast().allSatisfy { try $0.json()["status"] == nil })
        let steps = Self.latest(try streamed.events.flatMap { try $0.json()["steps"]?.arrayValue ?? [] })
        #expect(steps.flatMap { $0["events"]?.arrayValue?.compactMap { $0["seq"]?.intValue } ?? [] } == Array(0..<run.eventCount))
        _ = await server.stop()
    }

    @Test(
        "a long run's page comes with its first 25 steps; the others follow over its stream as outlines, each once, then the run's state"
    )
    func longRunPageThenOutlines() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let path = runs + "/long.jsonl.gz"
        var corpus = SyntheticCorpus(seed: 7)
        try corpus.writeLongRun(to: path, jsonBytes: 26 << 20)
        try #require((FileStamp(path: path)?.size ?? 0) >= 4 << 20, "long enough to be outlined")
        let replay = try await agentEval(["replay", path, "--json", "--no-catalog"])
        #expect(replay.status == 0, "\(replay.stderr)")
        let replayed = try JSONParser.parse(replay.stdout)
        let steps = try #require(replayed["steps"]?.arrayValue)
        let server = try await Server.start([runs], in: directory)
        let page = try await server.get("/run?log=" + Self.escaped(path))
        #expect(page.status == 200)
        let data = try PageData.json(page.body)
        let first = try #require(data["run"]?["steps"]?.arrayValue)
        #expect(first == Array(steps.prefix(25)), "the first 25 steps, whole, as replay has them")
        #expect(data["live"]?["status"]?["state"] == "loading")
        // The rest of the log is not read yet: the page must not say it was verified.
        #expect(data["run"]?["verification"]?["partial"] == true)
        #expect(replayed["verification"]?["partial"] == nil)
        let cursor = try #require(data["live"]?["cursor"]?.stringValue)
        #expect(cursor == "\(steps[24]["step"]?.intValue ?? -1).\(steps[24]["events"]?.arrayValue?.count ?? -1)")
        let streamed = try await HTTPTestClient.events(
            port: server.port, "/events/run?log=\(Self.escaped(path))&after=\(cursor)", timeout: 120
        ) {
            events in (try? events.last?.json()["status"]?["state"]?.stringValue) == "stopped"
        }
        #expect(!streamed.timedOut)
        for event in streamed.events { #expect(event.data.utf8.count < 600 * 1024) }
        let sent = try streamed.events.flatMap { try $0.json()["steps"]?.arrayValue ?? [] }
        #expect(
            sent.compactMap { $0["step"]?.intValue } == steps.dropFirst(25).compactMap { $0["step"]?.intValue },
            "every other step once, in order")
        #expect(sent.allSatisfy { $0["outline"] == true })
        #expect(sent.compactMap { $0["event_count"]?.intValue } == steps.dropFirst(25).compactMap { $0["events"]?.arrayValue?.count })
        let head = try #require(streamed.events.last?.json()["head"])
        #expect(head["final_state"] == replayed["final_state"], "the run's state at its end comes last")
        #expect(head["verification"] == replayed["verification"])
        _ = await server.stop()
    }

    @Test("a long run still being written: its backlog comes as outlines, and each step written after the page opened comes whole")
    func longLiveRunNewStepsWhole() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let path = runs + "/long-live.jsonl.gz"
        let writer = try LogWriter.create(at: path, runId: "run-long-live")
        let clock = SteppingClock()
        let recorder = RunRecorder(writer: writer, clock: { clock.now() })
        var corpus = SyntheticCorpus(seed: 11)
        try SyntheticCorpus.record([(.runStarted(corpus.start(steps: 100_000)), 0)], with: recorder)
        var step = 0
        while FileStamp(path: path).map({ $0.size < 4 << 20 }) ?? true {
            step += 1
            try SyntheticCorpus.record(corpus.step(step), with: recorder)
        }
        let backlog = step
        let server = try await Server.start([runs], in: directory)
        let target = "/events/run?log=" + Self.escaped(path)
        let caughtUp = Mutex(false)
        async let streamed = HTTPTestClient.events(port: server.port, target, timeout: 120) { events in
            let sent = events.flatMap { (try? $0.json()["steps"]?.arrayValue) ?? [] }
            if sent.contains(where: { $0["step"]?.intValue == backlog }) { caughtUp.withLock { $0 = true } }
            return sent.contains { $0["step"]?.intValue == backlog + 2 && $0["events"]?.arrayValue?.count == 6 }
        }
        for _ in 0..<1200 where !caughtUp.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(caughtUp.withLock { $0 }, "the backlog never came")
        for next in (backlog + 1)...(backlog + 2) { try SyntheticCorpus.record(corpus.step(next), with: recorder) }
        let result = try await streamed
        #expect(!result.timedOut)
        let sent = Self.latest(try result.events.flatMap { try $0.json()["steps"]?.arrayValue ?? [] })
        let outlined = sent.filter { $0["outline"] == true }.compactMap { $0["step"]?.intValue }
        #expect(outlined == Array(25...backlog), "the backlog past its first 25 steps (0 to 24)")
        for number in [backlog + 1, backlog + 2] {
            let whole = sent.first { $0["step"]?.intValue == number }
            #expect(whole?["outline"] == nil && whole?["events"]?.arrayValue?.count == 6, "step \(number), written after, comes whole")
        }
        // The stream's first head is whole; later ones carry only what changed (the run's id
        // never does, so it is not sent again with every step).
        let heads = try result.events.compactMap { try $0.json() }.filter { $0["head"] != nil }
        #expect(heads.count >= 2, "\(heads.count) updates carried the head")
        #expect(heads.first?["head_whole"] == true)
        #expect(heads.first?["head"]?["run_id"] == "run-long-live")
        for later in heads.dropFirst() {
            #expect(later["head_whole"] == nil)
            #expect(later["head"]?["run_id"] == nil, "\(later["head"]?.objectValue?.keys ?? [])")
        }
        try writer.close()
        _ = await server.stop()
    }

    @Test("only logs the catalog indexes or that lie under the directories given are read: no traversal, no link out, no other file")
    func readsOnlyItsLogs() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        let elsewhere = directory.path("elsewhere")
        for folder in [runs, elsewhere] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try Self.writeSupportRun(runs + "/mine.jsonl.gz", runId: "run-mine")
        try Self.writeSupportRun(elsewhere + "/secret.jsonl.gz", runId: "run-secret")
        try FileManager.default.createSymbolicLink(atPath: runs + "/link.jsonl.gz", withDestinationPath: elsewhere + "/secret.jsonl.gz")
        let server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 1)
        #expect(try await server.get("/run?log=" + Self.escaped(runs + "/mine.jsonl.gz")).status == 200)
        for refused in [
            elsewhere + "/secret.jsonl.gz", runs + "/../elsewhere/secret.jsonl.gz", runs + "/link.jsonl.gz", "/etc/passwd",
            runs + "/../../../../etc/passwd",
        ] {
            let answer = try await server.get("/run?log=" + Self.escaped(refused))
            #expect(answer.status == 404, "\(refused) was served: \(answer.status)")
            #expect(!answer.text.contains("run-secret"))
            let events = try await server.get("/events/run?log=" + Self.escaped(refused))
            #expect(events.status == 404)
        }
        #expect(
            try await server.get("/compare?a=\(Self.escaped(runs + "/mine.jsonl.gz"))&b=\(Self.escaped(elsewhere + "/secret.jsonl.gz"))")
                .status == 404)
        #expect(try await server.get("/nothing").status == 404)
        // A log a served folder could hold but does not: not found, not a damaged log.
        let missing = Self.escaped(runs + "/gone.jsonl.gz")
        #expect(try await server.get("/run?log=" + missing).status == 404)
        #expect(try await server.get("/events/run?log=" + missing).status == 404)
        #expect(try await server.get("/api/run/steps?log=\(missing)&from=0&to=3").status == 404)
        try FileManager.default.createDirectory(atPath: runs + "/folder.jsonl.gz", withIntermediateDirectories: true)
        let folder = try await server.get("/api/run/steps?log=\(Self.escaped(runs + "/folder.jsonl.gz"))&from=0&to=3")
        #expect(folder.status == 404, "\(folder.status) \(folder.text)")
        #expect(folder.text.contains("it is a folder, not a file"), "\(folder.text)")
        try FileManager.default.removeItem(atPath: runs + "/folder.jsonl.gz")
        // Steps from a number whose distance to the last would overflow: refused, the server still up.
        let mine = Self.escaped(runs + "/mine.jsonl.gz")
        #expect(try await server.get("/api/run/steps?log=\(mine)&from=\(Int.min)&to=1").status == 400)
        #expect(try await server.get("/api/run/steps?log=\(mine)&from=0&to=2").status == 200)

        // A log under a served folder through a link to a folder elsewhere, which does not exist
        // (yet): no approval is written there.
        try FileManager.default.createSymbolicLink(atPath: runs + "/away", withDestinationPath: elsewhere)
        try FileManager.default.createDirectory(atPath: elsewhere + "/ghost.jsonl.gz.approvals", withIntermediateDirectories: true)
        try Data(#"{"call_id":"c1","tool":"refund_order","arguments":{}}"#.utf8)
            .write(to: URL(fileURLWithPath: elsewhere + "/ghost.jsonl.gz.approvals/c1.pending.json"))
        let csrf = try #require(Self.csrf(in: try await server.get("/approvals").text))
        let ghost = try await HTTPTestClient.request(
            port: server.port, "POST", "/api/approvals", headers: ["X-Agent-Eval-CSRF": csrf],
            body: JSONWriter.encode(["log": .string(runs + "/away/ghost.jsonl.gz"), "call": "c1", "granted": true]))
        #expect(ghost.status == 404, "\(ghost.text)")
        #expect(!FileManager.default.fileExists(atPath: elsewhere + "/ghost.jsonl.gz.approvals/c1.json"))
        #expect(try await server.get("/run?log=" + Self.escaped(runs + "/away/ghost.jsonl.gz")).status == 404)

        // A log the catalog indexed, then replaced by a link out of the folder: its old row does
        // not let the link be read.
        try FileManager.default.removeItem(atPath: runs + "/mine.jsonl.gz")
        try FileManager.default.createSymbolicLink(atPath: runs + "/mine.jsonl.gz", withDestinationPath: elsewhere + "/secret.jsonl.gz")
        let swapped = try await server.get("/run?log=" + mine)
        #expect(swapped.status == 404, "the link out was read through the old row: \(swapped.status)")
        #expect(!swapped.text.contains("run-secret"))
        #expect(try await server.get("/events/run?log=" + mine).status == 404)
        _ = await server.stop()
    }

    @Test(
        "a small file whose text is large is a long run, a page past 64 MiB is refused, and a long run is compared by diff, not on a page"
    )
    func textLargerThanItsFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        try Self.writeSupportRun(runs + "/mine.jsonl.gz", runId: "run-mine")
        // A goal of 40 MiB that gzip makes some 40 KB of: the file is small, its text is not.
        let wide = runs + "/wide.jsonl.gz"
        try LogWriter.withWriter(creating: wide, runId: "run-wide") { writer in
            let recorder = RunRecorder(writer: writer, clock: { 1_000 })
            try recorder.record(.runStarted(SampleRun.supportStart(goal: String(repeating: "refund ", count: 6 << 20))))
            try recorder.record(.runStopped(RunStopped(reason: .success)))
        }
        #expect((FileStamp(path: wide)?.size ?? .max) < 1 << 20)
        #expect(LogReader.inflatedSize(of: wide, atMost: 32 << 20) == 32 << 20)
        let text = try await Subprocess.run(gzipPath, ["-dc", runs + "/mine.jsonl.gz"])
        #expect(text.status == 0 && LogReader.inflatedSize(of: runs + "/mine.jsonl.gz", atMost: 32 << 20) == text.stdout.count)
        let server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 2)
        let page = try await server.get("/run?log=" + Self.escaped(wide))
        #expect(page.status == 413, "\(page.status)")
        #expect(page.text.contains("agent-eval replay"))
        let compare = try await server.get("/compare?a=\(Self.escaped(wide))&b=\(Self.escaped(runs + "/mine.jsonl.gz"))")
        #expect(compare.status == 413)
        #expect(compare.text.contains("is too long to compare on a page"), "\(compare.text)")
        #expect(compare.text.contains("agent-eval diff"))
        #expect(try await server.get("/run?log=" + Self.escaped(runs + "/mine.jsonl.gz")).status == 200)
        _ = await server.stop()
    }

    @Test(
        "a log replaced by a link out of the served folder: an open page's stream ends without the run it leads to, and the runs list shows the log vanished, not that run — live and at the next start"
    )
    func swappedForALinkOut() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        let elsewhere = directory.path("elsewhere")
        for folder in [runs, elsewhere] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let live = runs + "/live.jsonl.gz"
        try Self.writeSupportRun(live, runId: "run-live")
        try Self.writeSupportRun(elsewhere + "/secret.jsonl.gz", runId: "run-secret")
        // A link out to a log the catalog indexes itself is one the server reads: listed, not vanished.
        try Self.writeSupportRun(elsewhere + "/archived.jsonl.gz", runId: "run-archived")
        try FileManager.default.createSymbolicLink(atPath: runs + "/alias.jsonl.gz", withDestinationPath: elsewhere + "/archived.jsonl.gz")
        for path in [elsewhere + "/archived.jsonl.gz", runs + "/alias.jsonl.gz"] {
            let indexed = try await agentEval(["index", path, "--catalog", directory.path("catalog.sqlite")])
            #expect(indexed.status == 0, "\(indexed.stderr)")
        }
        var server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 3)
        let alias = try await server.json("/api/runs")["runs"]?.arrayValue?.first { $0["path"]?.stringValue == runs + "/alias.jsonl.gz" }
        #expect(alias?["status"] == "intact", "\(String(describing: alias))")
        let port = server.port
        let stream = Task {
            try await HTTPTestClient.events(port: port, "/events/run?log=" + Self.escaped(live), timeout: 30) { events in
                events.contains { $0.data.contains("run-secret") }
            }
        }
        try await Task.sleep(for: .seconds(2))
        try FileManager.default.removeItem(atPath: live)
        try FileManager.default.createSymbolicLink(atPath: live, withDestinationPath: elsewhere + "/secret.jsonl.gz")
        let streamed = try await stream.value
        #expect(streamed.status == 200 && !streamed.events.isEmpty, "the page's first update came: \(streamed)")
        #expect(!streamed.events.contains { $0.data.contains("run-secret") }, "the stream read through the link")
        #expect(!streamed.timedOut, "the stream ended")
        /// The list's rows once `until` holds of them (at most 30 s).
        func rows(until: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
            var rows: [JSONValue] = []
            for _ in 0..<600 {
                rows = try await server.json("/api/runs")["runs"]?.arrayValue ?? []
                if until(rows) { return rows }
                try await Task.sleep(for: .milliseconds(50))
            }
            return rows
        }
        let isVanished: ([JSONValue]) -> Bool = { rows in
            rows.first { $0["path"]?.stringValue == live }?["status"]?.stringValue == "vanished"
        }
        let listed = try await rows(until: isVanished)
        #expect(isVanished(listed), "\(listed)")
        #expect(!listed.contains { $0["run_id"]?.stringValue == "run-secret" }, "\(listed)")
        #expect(try await server.json("/api/runs?text=run-secret")["runs"]?.arrayValue?.isEmpty == true)
        #expect((await server.stop()).status == 0)
        // The next start looks at every log: the link is not read there either.
        server = try await Server.start([runs], in: directory)
        let restarted = try await rows(until: isVanished)
        #expect(isVanished(restarted), "\(restarted)")
        #expect(!restarted.contains { $0["run_id"]?.stringValue == "run-secret" }, "\(restarted)")
        #expect((await server.stop()).status == 0)
    }

    @Test("a stopped run whose recorded state digests its events do not rebuild is never shown as a plain stop")
    func mismatchedRunIsNoPlainStop() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let path = runs + "/edited.jsonl.gz"
        var corpus = SyntheticCorpus(seed: 3)
        var events: [(payload: EventPayload, step: Int)] = [(.runStarted(corpus.start(steps: 3)), 0)]
        for step in 1...3 { events += corpus.step(step) }
        events.append((.runStopped(RunStopped(reason: .success)), 3))
        // Step 2's digest is not its state's: what an edit of an event before it leaves.
        try DigestedLog.write(events, to: path, runId: "run-edited", wrongDigestAt: 2)
        let server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 1)
        let page = try await server.get("/run?log=" + Self.escaped(path))
        #expect(page.status == 200)
        let status = try #require(try PageData.json(page.body)["live"]?["status"])
        #expect(status["state"] == "mismatched", "\(status)")
        #expect(status["text"] == "stopped: success, but 1 of 3 state digests do not match the state its events rebuild")
        _ = await server.stop()
    }

    @Test("a log cut after its recorded stop, which no process writes, is torn on its page, never the green stop it recorded")
    func tornAfterItsStop() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let whole = try Data(contentsOf: ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz"))
        // The gzip trailer's last bytes gone: `log verify` says torn, and a case over it could not run.
        let path = runs + "/cut.jsonl.gz"
        try whole.dropLast(8).write(to: URL(fileURLWithPath: path))
        let server = try await Server.start([runs], in: directory)
        let page = try await server.get("/run?log=" + Self.escaped(path))
        #expect(page.status == 200)
        let status = try #require(try PageData.json(page.body)["live"]?["status"])
        #expect(status["state"] == "torn", "\(status)")
        #expect(
            status["text"]?.stringValue?.hasPrefix("torn, and no process writes it (the writer died?), after it recorded a stop (success)")
                == true)
        _ = await server.stop()
    }

    @Test(
        "a pipeline log's page draws its pipeline, as view does: an edited one shows its digests differ, never a run's page with 0 digests checked and a green banner"
    )
    func pipelineLogPage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: ExampleRuns.fixtures.appendingPathComponent("pipelines/recorded/triage-recovery").path, toPath: runs + "/triage")
        // One task's output changed and the member chain computed again: only the digests tell.
        let path = runs + "/triage/pipeline.jsonl.gz"
        let text = try GzipData.decompress(Array(try Data(contentsOf: URL(fileURLWithPath: path))), path: path)
        var lines = text.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
        #expect(lines[13].contains("\"billing\""))
        lines[13] = lines[13].replacingOccurrences(of: "\"billing\"", with: "\"refunds\"")
        let first = Array(lines[..<14].map { $0 + "\n" }.joined().utf8)
        let previous = try #require(try JSONParser.parse(Array(lines[14].utf8))["prev"]?.stringValue)
        lines[14] = lines[14].replacingOccurrences(of: previous, with: ContentHash.sha256Hex(first))
        let rest = Array(lines[14...].map { $0 + "\n" }.joined().utf8)
        try Data(try GzipData.compress(first) + GzipData.compress(rest)).write(to: URL(fileURLWithPath: path))
        let verify = try await agentEval(["log", "verify", path])
        #expect(verify.status == 1 && verify.stdoutText.contains("EDITED"), "\(verify.stdoutText)")

        let server = try await Server.start([runs], in: directory)
        let page = try await server.get("/run?log=" + Self.escaped(path))
        #expect(page.status == 200)
        let data = try PageData.json(page.body)
        #expect(data["view"] == "pipeline", "\(data)")
        #expect(data["summary"]?["ok"] == false)
        #expect(data["pipeline"]?["digest_mismatches"]?.arrayValue?.count == 1, "\(String(describing: data["pipeline"]))")
        #expect(data["live"] == nil, "no run's live banner")
        let stream = try await server.get("/events/run?log=" + Self.escaped(path))
        #expect(stream.status == 400)
        // A child log linked out of the served folder is left out of the page, as it is refused
        // on its own page: the pipeline page reads no log this server may not show.
        let child = runs + "/triage/tasks/classify_with_agent-1.jsonl.gz"
        try FileManager.default.copyItem(
            atPath: ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path,
            toPath: directory.path("outside.jsonl.gz"))
        try FileManager.default.removeItem(atPath: child)
        try FileManager.default.createSymbolicLink(atPath: child, withDestinationPath: directory.path("outside.jsonl.gz"))
        #expect(try await server.get("/run?log=" + Self.escaped(child)).status == 404)
        let linked = try PageData.json(try await server.get("/run?log=" + Self.escaped(path)).body)
        #expect(
            !(linked["runs"]?.arrayValue ?? []).contains { $0["run"]?["run_id"] == "run-support-refund" },
            "\(String(describing: linked["runs"]))")
        #expect(
            linked["runs_left_out"]?.arrayValue?.contains { $0.stringValue?.hasSuffix("classify_with_agent-1.jsonl.gz") == true } == true)
        _ = await server.stop()
    }

    @Test("a suite's run links work from any folder of the project serve runs in: a report's log paths are taken from where run ran")
    func suiteLinksFromAnotherFolder() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for folder in [".agent-eval", "runs", "cases"] {
            try FileManager.default.createDirectory(atPath: directory.path(folder), withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(
            atPath: ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path,
            toPath: directory.path("runs/support-refund.jsonl.gz"))
        try "caseId: refund\nlogs: ../runs/support-refund.jsonl.gz\nexpected:\n  stopReason: budget_exhausted\n".write(
            toFile: directory.path("cases/refund.yaml"), atomically: true, encoding: .utf8)
        let ran = try await agentEval(["run", "cases", "--catalog", directory.path("catalog.sqlite")], in: directory.url)
        #expect(ran.status == 1, "\(ran.stdoutText)\(ran.stderr)")
        let server = try await Server.start([directory.path("runs")], in: directory, workingIn: directory.path("cases"))
        let page = try await server.get("/suite?id=1")
        #expect(page.status == 200)
        let log = try #require(
            try PageData.json(page.body)["results"]?["cases"]?.arrayValue?.first?["runs"]?.arrayValue?.first?["log"]?.stringValue)
        #expect(log.hasSuffix("/runs/support-refund.jsonl.gz") && log.hasPrefix("/"), "\(log)")
        let run = try await server.get("/run?log=" + Self.escaped(log))
        #expect(run.status == 200, "\(run.text)")
        _ = await server.stop()
    }

    @Test("HEAD is answered as GET is, without the body; a --token-file that cannot be read says so")
    func headAndTokenFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await Server.start([], in: directory)
        for target in ["/", "/api/runs"] {
            let got = try await server.get(target)
            let head = try await HTTPTestClient.request(port: server.port, "HEAD", target)
            #expect(head.status == 200, "\(target): \(head.status)")
            #expect(head.body.isEmpty)
            #expect(head.headers["content-length"] == String(got.body.count), "\(target)")
        }
        _ = await server.stop()
        let missing = try await agentEval(["serve", "--token-file", directory.path("no-such-token")], in: directory.url)
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("no-such-token cannot be read"), "\(missing.stderr)")
    }

    @Test("the audit page: a --policy judges every call of the runs a filter shows, as agent-eval audit judges them")
    func audit() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        for index in 1...2 { try Self.writeSupportRun(runs + "/support-\(index).jsonl.gz", runId: "run-support-\(index)") }
        let policy = """
            policy:
              name: no-refunds
              default: allow
              rules:
                - id: no-refunds
                  when: {tool: refund_order}
                  verdict: deny

            """
        try policy.write(toFile: directory.path("no-refunds.yaml"), atomically: true, encoding: .utf8)
        let server = try await Server.start([runs, "--policy", "no-refunds.yaml"], in: directory)
        _ = try await server.runs(count: 2)
        let page = try await server.get("/audit?policy=no-refunds.yaml&tool=refund_order")
        #expect(page.status == 200)
        let cli = try await agentEval(["audit", "--policy", "no-refunds.yaml", runs, "--json"], in: directory.url)
        #expect(cli.status == 1, "\(cli.stderr)")
        // The same calls, as the command says: each run's refund ran against the policy.
        #expect(page.text.contains("\"violations\":2"))
        #expect(try await server.get("/audit?policy=other.yaml").status == 404)
        #expect(try await server.get("/audit").status == 400)
        // The runs list links to the audit of what it shows.
        #expect(try await server.get("/").text.contains("\"policies\":[\"no-refunds.yaml\"]"))
        _ = await server.stop()
    }

    @Test("who may ask: requests addressed to another host are refused; another address needs a token, and then every request carries it")
    func admission() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await Server.start([], in: directory)
        #expect(try await server.get("/api/runs").status == 200)
        let rebound = try await server.get("/api/runs", headers: ["Host": "attacker.example:\(server.port)"])
        #expect(rebound.status == 403, "a page that renamed itself 127.0.0.1 (DNS rebinding) is refused")
        // Two Host headers (ours first, another site's after it) are no way around it.
        let twoHosts = try await server.get("/api/runs", headers: ["host": "attacker.example:\(server.port)"])
        #expect(twoHosts.status == 400 && twoHosts.text.contains("more than one Host"), "\(twoHosts.status) \(twoHosts.text)")
        _ = await server.stop()

        let open = try await agentEval(["serve", "--listen", "0.0.0.0:0", "--catalog", directory.path("catalog.sqlite")])
        #expect(open.status == 2)
        #expect(open.stderr.contains("needs a token"))

        let token = "0123456789abcdef0123"
        let guarded = try await Server.start(["--token", token], in: directory)
        #expect(guarded.url.hasSuffix("?token=\(token)"))
        #expect(try await guarded.get("/api/runs").status == 401)
        #expect(try await guarded.get("/api/runs", headers: ["Authorization": "Bearer wrong-token-wrong-token"]).status == 401)
        #expect(try await guarded.get("/api/runs", headers: ["Authorization": "Bearer \(token)"]).status == 200)
        let signIn = try await guarded.get("/?token=\(token)")
        #expect(signIn.status == 303)
        #expect(signIn.headers["location"] == "/")
        let cookie = try #require(signIn.headers["set-cookie"])
        #expect(cookie.hasPrefix("agent_eval_token_\(guarded.port)=\(token);"), "the port's own cookie: \(cookie)")
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"))
        #expect(try await guarded.get("/api/runs", headers: ["Cookie": "agent_eval_token_\(guarded.port)=\(token)"]).status == 200)
        #expect(
            try await guarded.get("/api/runs", headers: ["Cookie": "agent_eval_token_1=\(token)"]).status == 401, "another port's cookie")
        // A sign-in address that would lead elsewhere leads here.
        let away = try await guarded.get("//attacker.example/?token=\(token)")
        #expect(away.headers["location"]?.hasPrefix("/attacker.example") == true, "\(away.headers)")
        _ = await guarded.stop()
    }

    @Test("approvals: a change needs the page's CSRF token; an answer is recorded as approve records it, and of two at once one is taken")
    func approvalsNeedTheToken() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let runs = directory.path("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        // A run that waits, as the proxy leaves one: its log, and the call's pending file beside it.
        let log = runs + "/waiting.jsonl.gz"
        let run = try GrowingRun(path: log, runId: "run-waiting")
        try run.step(1)
        try MCPApprovals.ask(
            log: log,
            call: MCPApprovals.PendingCall(
                callId: "mcp-7", tool: "refund_order", arguments: ["amount": 50000], rule: "large-refunds",
                reason: "refunds over 100.00 need a person"))
        let server = try await Server.start([runs], in: directory)
        _ = try await server.runs(count: 1)
        let waiting = try await server.json("/api/approvals")
        #expect(waiting.arrayValue?.first?["calls"]?.arrayValue?.first?["call_id"]?.stringValue == "mcp-7")
        let page = try await server.get("/approvals")
        let csrf = try #require(Self.csrf(in: page.text))
        let answer = JSONWriter.encode(["log": .string(log), "call": "mcp-7", "granted": true, "approver": "maria", "reason": "checked"])
        let forged = try await HTTPTestClient.request(
            port: server.port, "POST", "/api/approvals", headers: ["Content-Type": "application/json"], body: answer)
        #expect(forged.status == 403, "no CSRF token, no change")
        let otherSite = try await HTTPTestClient.request(
            port: server.port, "POST", "/api/approvals", headers: ["X-Agent-Eval-CSRF": csrf, "Origin": "http://attacker.example"],
            body: answer)
        #expect(otherSite.status == 403)
        // Two people answer at once: one answer is taken, the other is told.
        async let one = HTTPTestClient.request(
            port: server.port, "POST", "/api/approvals", headers: ["X-Agent-Eval-CSRF": csrf], body: answer)
        async let two = HTTPTestClient.request(
            port: server.port, "POST", "/api/approvals", headers: ["X-Agent-Eval-CSRF": csrf], body: answer)
        let statuses = [try await one.status, try await two.status].sorted()
        #expect(statuses == [200, 409])
        let written = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: log + ".approvals/mcp-7.json"))))
        #expect(written["granted"] == true && written["approver"] == "maria" && written["reason"] == "checked", "\(written)")
        // The call's proof, which the proxy checks, from where only this user reads.
        #expect(written["proof"]?.stringValue?.isEmpty == false, "\(written)")
        _ = await server.stop()
    }

    static func csrf(in page: String) -> String? {
        guard let range = page.range(of: #""csrf":""#) else { return nil }
        return String(page[range.upperBound...].prefix { $0 != "\"" })
    }
}
