import Foundation
import TestSupport
import TestTags
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Whether process `pid` still runs: it exists and is not a zombie (ended, waiting for a
/// reaper: dead either way).
func isRunning(_ pid: Int32, startedAt start: String? = nil) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
    let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
    let state = fields.first
    // A pid the kernel gave to a new process (pids are reused, and thread ids share their space)
    // is not the one watched: its start time differs.
    if let start, startTime(of: pid) != start { return false }
    return state != "Z" && state != "X"
}

/// The start time of `pid` (field 22 of /proc/PID/stat, clock ticks since boot), while it runs.
func startTime(of pid: Int32) -> String? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
    // Fields after the command's closing parenthesis start at field 3 (state).
    let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
    return fields.count > 19 ? String(fields[19]) : nil
}

/// Waits (bounded: up to `seconds`, polling) until `condition` holds; returns whether it did.
func eventually(seconds: Int = 20, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let end = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// The pid a file holds, once it holds one.
func pid(in file: String) -> Int32? {
    (try? String(contentsOfFile: file, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
}

/// Children of agent-eval die with it (issue 53, finding 6): an MCP server or a command tool
/// when agent-eval is killed with SIGKILL; a server's `setsid` daemon when a run ends normally
/// or on SIGTERM.
@Suite("Processes agent-eval starts do not outlive it", .ownThread)
struct ProcessLifetimeTests {
    /// An agent whose tools come from the failure server, started with `flags`; its script
    /// calls `tool` and then answers.
    static func writeAgent(in directory: TemporaryDirectory, flags: [String], tool: String) async throws -> String {
        let server = try await MCPTestServers.failureServer(flags).map { "\"\($0)\"" }.joined(separator: ", ")
        try """
        name: lifetimes
        model: {script: lifetimes.model.yaml}
        mcp_servers:
          failing:
            command: [\(server)]
            timeout_ms: 600000
        policy: {default: allow}
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        let arguments = tool == "echo" ? "{text: hi}" : "{}"
        try "name: s\ndecisions:\n  - tool_calls: [{name: \(tool), arguments: \(arguments)}]\n  - answer: done\n".write(
            toFile: directory.path("lifetimes.model.yaml"), atomically: true, encoding: .utf8)
        return directory.path("agent.yaml")
    }

    /// Kills (SIGKILL) whatever of `pids` still runs: a failing test leaves nothing behind.
    static func cleanUp(_ files: [String]) {
        for file in files { if let pid = pid(in: file), isRunning(pid) { kill(pid, SIGKILL) } }
    }

    @Test("kill -9 of exec while an MCP server's call is in progress: the server dies with it", .tags(.python), .needsPython)
    func serverDiesWithKilledExec() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (serverFile, hangFile) = (directory.path("server.pid"), directory.path("hang.pid"))
        defer { Self.cleanUp([serverFile, hangFile]) }
        let agent = try await Self.writeAgent(in: directory, flags: ["--pid-file", serverFile, "--hang-file", hangFile], tool: "hang")
        let (process, _) = try startAgentEval(
            ["exec", agent, "--input", "x", "--log", directory.path("run.jsonl.gz")], in: directory.url)
        #expect(await eventually { FileManager.default.fileExists(atPath: hangFile) }, "the hang call never started")
        kill(process.processIdentifier, SIGKILL)
        await wait(for: process)
        let server = try #require(pid(in: serverFile))
        #expect(await eventually { !isRunning(server) }, "the MCP server (pid \(server)) outlived the killed exec")
    }

    @Test("kill -9 of exec while a command tool runs: the tool dies with it")
    func toolDiesWithKilledExec() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let marker = directory.path("tool.pid")
        defer { Self.cleanUp([marker]) }
        try "#!/bin/sh\necho $$ > \(marker).tmp\nmv \(marker).tmp \(marker)\nexec sleep 600\n".write(
            toFile: directory.path("hang.sh"), atomically: true, encoding: .utf8)
        #expect(chmod(directory.path("hang.sh"), 0o755) == 0)
        try """
        name: hanger
        model: {script: hang.model.yaml}
        tools:
          - {name: hang, description: Hangs., side_effect: read, command: [./hang.sh], timeout_ms: 600000}
        policy: {default: allow}
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        try "name: s\ndecisions:\n  - tool_calls: [{name: hang, arguments: {}}]\n  - answer: never\n".write(
            toFile: directory.path("hang.model.yaml"), atomically: true, encoding: .utf8)
        let (process, _) = try startAgentEval(
            ["exec", directory.path("agent.yaml"), "--input", "x", "--log", directory.path("run.jsonl.gz")], in: directory.url)
        #expect(await eventually { pid(in: marker) != nil }, "the tool never started")
        kill(process.processIdentifier, SIGKILL)
        await wait(for: process)
        let tool = try #require(pid(in: marker))
        #expect(await eventually { !isRunning(tool) }, "the tool (pid \(tool)) outlived the killed exec")
    }

    @Test("a run that ends normally leaves nothing running: not even a setsid daemon its MCP server started", .tags(.python), .needsPython)
    func daemonGoneAfterNormalRun() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (serverFile, orphanFile) = (directory.path("server.pid"), directory.path("orphan.pid"))
        defer { Self.cleanUp([serverFile, orphanFile]) }
        let agent = try await Self.writeAgent(
            in: directory, flags: ["--pid-file", serverFile, "--orphan-pid-file", orphanFile], tool: "echo")
        let exec = try await agentEval(["exec", agent, "--input", "x", "--log", directory.path("run.jsonl.gz")])
        #expect(exec.status == 0, "\(exec.stderr)")
        let server = try #require(pid(in: serverFile))
        let orphan = try #require(pid(in: orphanFile))
        #expect(await eventually { !isRunning(server) }, "the MCP server (pid \(server)) outlived the run")
        #expect(await eventually { !isRunning(orphan) }, "the server's setsid daemon (pid \(orphan)) outlived the run")
    }

    /// Whether process `pid` has a thread that has not ended: its main thread may have ended (the
    /// process shows as a zombie) while another still runs.
    static func hasLiveThread(_ pid: Int32) -> Bool {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.contains { task in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8) else { return false }
            let state = stat.split(separator: ")").last?.split(separator: " ").first
            return state != "Z" && state != "X"
        }
    }

    @Test("a process whose main thread ended while another runs is swept at exit, and what it started with it")
    func dyingProcessSweptAtExit() async throws {
        // Seen by the sweep as a zombie, such a process is still dying: until its last thread ends,
        // what it started names it as the parent and is not handed on. A multi-threaded MCP server
        // killed just before agent-eval exits is one (a CI run left its setsid daemon running).
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (holderFile, daemonFile) = (directory.path("holder.pid"), directory.path("daemon.pid"))
        defer { Self.cleanUp([daemonFile]) }
        defer { if let holder = pid(in: holderFile) { kill(holder, SIGKILL) } }
        // The tool starts, in a session of its own (out of the tool's process group), a holder
        // that starts a daemon (in a session of its own too), then ends its main thread alone
        // (the raw exit system call) while a second thread sleeps.
        try """
        import ctypes, os, platform, subprocess, sys, threading, time
        def write(path, text):
            with open(path + ".tmp", "w") as file:
                file.write(text)
            os.rename(path + ".tmp", path)
        if sys.argv[1:] == ["holder"]:
            daemon = subprocess.Popen(["sleep", "600"], start_new_session=True)
            write(\(String(reflecting: daemonFile)), f"{daemon.pid}\\n")
            # exit(2) ends the calling thread alone; known here for these two (else no pid file: the test fails).
            exit_thread = {"x86_64": 60, "aarch64": 93}[platform.machine()]
            threading.Thread(target=lambda: time.sleep(600)).start()
            write(\(String(reflecting: holderFile)), f"{os.getpid()}\\n")
            ctypes.CDLL(None).syscall(exit_thread, 0)
        subprocess.Popen([sys.executable, sys.argv[0], "holder"], start_new_session=True)
        for _ in range(3000):
            if os.path.exists(\(String(reflecting: holderFile))):
                break
            time.sleep(0.01)
        print('{"started": true}')
        """.write(toFile: directory.path("tool.py"), atomically: true, encoding: .utf8)
        try """
        name: holder
        model: {script: holder.model.yaml}
        tools:
          - {name: start, description: Starts a holder., side_effect: read, command: [python3, tool.py]}
        policy: {default: allow}
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        try "name: s\ndecisions:\n  - tool_calls: [{name: start, arguments: {}}]\n  - answer: done\n".write(
            toFile: directory.path("holder.model.yaml"), atomically: true, encoding: .utf8)
        let exec = try await agentEval(["exec", directory.path("agent.yaml"), "--input", "x", "--log", directory.path("run.jsonl.gz")])
        #expect(exec.status == 0, "\(exec.stderr)")
        let holder = try #require(pid(in: holderFile), "the tool never started its holder: \(exec.stdoutText)")
        let daemon = try #require(pid(in: daemonFile))
        #expect(await eventually { !Self.hasLiveThread(holder) }, "the holder (pid \(holder)) outlived the run in its second thread")
        #expect(await eventually { !isRunning(daemon) }, "the holder's daemon (pid \(daemon)) outlived the run")
    }

    @Test("SIGTERM to exec during an MCP call: exit 143, and the server and its setsid daemon are gone", .tags(.python), .needsPython)
    func nothingLeftAfterSIGTERM() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (serverFile, orphanFile, hangFile) = (directory.path("server.pid"), directory.path("orphan.pid"), directory.path("hang.pid"))
        defer { Self.cleanUp([serverFile, orphanFile, hangFile]) }
        let agent = try await Self.writeAgent(
            in: directory, flags: ["--pid-file", serverFile, "--orphan-pid-file", orphanFile, "--hang-file", hangFile], tool: "hang")
        let (process, errors) = try startAgentEval(
            ["exec", agent, "--input", "x", "--log", directory.path("run.jsonl.gz")], in: directory.url)
        #expect(await eventually { FileManager.default.fileExists(atPath: hangFile) }, "the hang call never started")
        // The daemon as it is now, before the signal: its pid and start time, so that a pid reused later is not taken for it
        // (on a loaded machine its pid file may come after the hang call started).
        #expect(await eventually { pid(in: orphanFile).flatMap(startTime(of:)) != nil }, "the server's daemon never started")
        let orphanStart = pid(in: orphanFile).flatMap(startTime(of:))
        kill(process.processIdentifier, SIGTERM)
        await wait(for: process)
        #expect(process.terminationStatus == 143, "\((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")")
        let server = try #require(pid(in: serverFile))
        let orphan = try #require(pid(in: orphanFile))
        #expect(await eventually { !isRunning(server) }, "the MCP server (pid \(server)) outlived SIGTERM")
        #expect(
            await eventually { !isRunning(orphan, startedAt: orphanStart) }, "the server's setsid daemon (pid \(orphan)) outlived SIGTERM")
    }
}
