import AgentRuntime
import Foundation
import TestSupport
import TestTags
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The one place processes start (`SpawnedProcess`) and how a later process recognises one
/// (`ProcessIdentity`), with real processes.
@Suite("Starting processes", .ownThread)
struct SpawnedProcessTests {
    /// Runs `command` to its end and returns its stdout.
    func output(of command: [String]) async throws -> String {
        let result = try await ChildProcess(command: command, timeoutMs: 10_000, outputLimit: 1 << 20).run()
        #expect(result.exitStatus == 0)
        return String(decoding: result.stdout, as: UTF8.self)
    }

    /// The set of signals a process ignores, from its /proc status ("SigIgn:" in hex).
    static func ignoredSignals(inStatus status: String) -> UInt64? {
        let line = status.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }
        return line.flatMap { UInt64($0.dropFirst("SigIgn:".count).trimmingCharacters(in: .whitespaces), radix: 16) }
    }

    @Test("an input feed gives a running command its standard input line by line; closing the feed ends it")
    func inputFeed() async throws {
        let feed = ChildProcess.InputFeed()
        // The first line as `input`, two more through the feed while the command runs.
        var process = ChildProcess(
            command: ["sh", "-c", "while read line; do echo \"got $line\"; done; echo done"], input: Array("one\n".utf8),
            timeoutMs: 20_000, outputLimit: 1 << 16)
        process.inputFeed = feed
        let running = Task { [process] in try await process.run() }
        #expect(feed.send(Array("two\n".utf8)))
        #expect(feed.send(Array("three\n".utf8)))
        feed.close()
        let result = try await running.value
        #expect(result.exitStatus == 0)
        #expect(String(decoding: result.stdout, as: UTF8.self) == "got one\ngot two\ngot three\ndone\n")
        #expect(!feed.send(Array("four\n".utf8)), "a closed feed takes nothing more")
    }

    @Test("a command that closes its standard input breaks the feed: what is sent then is refused, never a SIGPIPE")
    func brokenInputFeed() async throws {
        let feed = ChildProcess.InputFeed()
        var process = ChildProcess(
            command: ["sh", "-c", "exec 0<&-; sleep 0.3; echo closed"], timeoutMs: 20_000, outputLimit: 1 << 16)
        process.inputFeed = feed
        let running = Task { [process] in try await process.run() }
        for _ in 0..<50 where !feed.isBroken {
            feed.send(Array(String(repeating: "x", count: 4096).utf8 + [0x0A]))
            try await Task.sleep(for: .milliseconds(20))
        }
        let result = try await running.value
        #expect(result.exitStatus == 0)
        #expect(String(decoding: result.stdout, as: UTF8.self) == "closed\n")
        #expect(feed.isBroken)
        #expect(!feed.send(Array("more\n".utf8)))
    }

    @Test("a child process's timeout is kept on the injected clock: it is killed when that clock passes it")
    func timeoutOnInjectedClock() async throws {
        let clock = ManualClock()
        var process = ChildProcess(command: ["sleep", "30"], timeoutMs: 60_000, outputLimit: 1 << 10)
        process.clock = clock
        let running = Task { [process] in try await process.run() }
        await clock.waitForSleepers()
        clock.advance(by: .seconds(61))
        let result = try await running.value
        // Killed (SIGKILL) when the injected clock passed 60 s, long before `sleep 30` would
        // have exited by itself (status 0).
        #expect(result.isTimedOut)
        #expect(!result.isCancelled)
        #expect(result.signal == SIGKILL)
        #expect(result.exitStatus == nil)
    }

    // The CLI ignores SIGINT and SIGTERM while a run is interrupted gracefully (withInterruption):
    // a child that inherited that would shrug off the SIGTERM meant to stop it.
    @Test("a child gets every signal at its default, even ones this process ignores")
    func defaultSignals() async throws {
        let previous = signal(SIGTERM, SIG_IGN)
        defer { signal(SIGTERM, previous) }
        let status = try await output(of: ["cat", "/proc/self/status"])
        let ignored = try #require(Self.ignoredSignals(inStatus: status), "\(status)")
        #expect(ignored & (1 << UInt64(SIGTERM - 1)) == 0, "the child ignores SIGTERM (SigIgn \(String(ignored, radix: 16)))")
        #expect(ignored == 0, "the child ignores signals: SigIgn \(String(ignored, radix: 16))")
    }

    @Test("a child's working directory, environment and PATH search are as asked")
    func directoryAndEnvironment() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await ChildProcess(
                command: ["sh", "-c", "pwd; echo $ONLY; echo ${HOME:-none}"], directory: directory.url.path, environment: ["ONLY=this"],
                timeoutMs: 10_000, outputLimit: 1 << 20
            ).run()
            let lines = String(decoding: result.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
            #expect(lines.count == 3)
            #expect(URL(fileURLWithPath: lines.first ?? "").resolvingSymlinksInPath().path == directory.url.resolvingSymlinksInPath().path)
            #expect(lines.dropFirst() == ["this", "none"])
        }
        await #expect(throws: ChildProcess.SpawnFailure.self) {
            try await ChildProcess(command: ["true"], directory: "/nonexistent/dir", timeoutMs: 1_000, outputLimit: 1).run()
        }
    }

    @Test("a process identity tells a process from a later one, and finds what an ended command left in its group")
    func identity() throws {
        // The command starts a process in its group, prints its pid and ends.
        let process = try SpawnedProcess.start(command: ["sh", "-c", "sleep 600 & echo $!"], directory: nil, environment: nil)
        close(process.stdin)
        let identity = try #require(ProcessIdentity(pid: process.pid))
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = read(process.stdout, &bytes, bytes.count)
        let leftover = try #require(
            Int32(String(decoding: bytes.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        defer { kill(leftover, SIGKILL) }
        var status: Int32 = 0
        while waitpid(process.pid, &status, 0) < 0 && errno == EINTR {}
        close(process.stdout)
        close(process.stderr)

        let record = try #require(ProcessIdentity(json: identity.json))
        #expect(record == identity)
        #expect(record.survivor() == leftover, "the command ended; the process it left in its group still runs")
        var later = record
        later.startTime += 1_000_000
        #expect(later.survivor() == nil, "a process that started later is not the recorded one, nor of its making")
        var otherBoot = record
        otherBoot.boot = "another boot"
        #expect(otherBoot.survivor() == nil)
        kill(leftover, SIGKILL)
        var gone = false
        for _ in 0..<500 where !gone {
            gone = record.survivor() == nil
            if !gone { usleep(10_000) }
        }
        #expect(gone, "the killed process still counts as running")
    }
}
