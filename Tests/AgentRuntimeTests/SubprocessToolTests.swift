import AgentRuntime
import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

#if canImport(Glibc)
    import Glibc
#endif

/// Real subprocesses through /bin/sh: tools that work, hang, crash, fail or print garbage.
@Suite("Subprocess tools", .ownThread)
struct SubprocessToolTests {
    func invoke(_ script: String, arguments: JSONValue = ["q": "x"], timeoutMs: Int = 5_000, outputLimit: Int = 1 << 20) async throws
        -> ToolOutcome
    {
        let host = SubprocessToolHost(command: ["/bin/sh", "-c", script], outputLimit: outputLimit)
        return try await host.invoke(ToolRequest(callId: "call-1", tool: "sh", arguments: arguments, attempt: 1, timeoutMs: timeoutMs))
    }

    @Test("reads its JSON arguments on stdin and returns the JSON it prints")
    func success() async throws {
        let outcome = try await invoke(#"read line; printf '{"got": %s}' "$line""#, arguments: ["order_id": "A-1", "n": 2])
        #expect(outcome.status == .ok)
        #expect(outcome.output == ["got": ["n": 2, "order_id": "A-1"]])
        #expect(outcome.stderr == nil)
    }

    // Without the kill the tool would sleep 10 minutes, and the test fail on the time it took.
    // (No `.timeLimit`: it counts the wait for a `TestLoad` slot, which in a full run on two
    // cores exceeded 5 minutes while hundreds of CLI runs queued ahead.)
    @Test("a tool that hangs is killed with its whole process group at the timeout")
    func hangKillsGroup() async throws {
        try await TemporaryDirectory.with { directory in
            let pidFile = directory.path("child.pid")
            let started = ContinuousClock.now
            // The tool starts a grandchild in the background, then hangs itself.
            let outcome = try await invoke("sleep 600 & echo $! > \(pidFile); sleep 600", timeoutMs: 300)
            // Far below the hour the tool would run, far above what a test waits for a thread of
            // the shared pool when other suites keep it busy (45 s was seen once on a loaded machine).
            #expect(ContinuousClock.now - started < .seconds(240))
            #expect(outcome.status == .error)
            #expect(outcome.isRetryable)
            #expect(outcome.error == "/bin/sh did not finish within 300 ms; its process group was killed")
            // The grandchild is gone too.
            #expect(try await isGone(pidIn: pidFile))
        }
    }

    // A tool that is waited for until its leftovers end (10 minutes) fails on the time it took;
    // its timeout (15 minutes) is beyond that.
    @Test("a tool that exits while a process it started holds its output open is done when it exits")
    func leftoverHoldsOutputOpen() async throws {
        try await TemporaryDirectory.with { directory in
            let pidFile = directory.path("child.pid")
            let started = ContinuousClock.now
            let outcome = try await invoke(
                #"read line; sleep 600 & echo $! > \#(pidFile); printf '{"found": true}'"#, timeoutMs: 900_000)
            #expect(ContinuousClock.now - started < .seconds(240))
            #expect(outcome.status == .ok)
            #expect(outcome.output == ["found": true])
            // What it left behind went with its process group.
            #expect(try await isGone(pidIn: pidFile))

            let failed = try await invoke("echo 'no such order' >&2; sleep 600 & exit 3", timeoutMs: 900_000)
            #expect(failed.error == "/bin/sh exited with status 3: no such order")
            #expect(failed.stderr == "no such order\n")
        }
    }

    // A tool that is not stopped sleeps 10 minutes, and the test fails on the time it took.
    @Test("a tool that closes its output but keeps running is still stopped at the timeout")
    func closesStreamsAndHangs() async throws {
        let started = ContinuousClock.now
        let outcome = try await invoke("exec >/dev/null 2>&1; sleep 600", timeoutMs: 300)
        #expect(ContinuousClock.now - started < .seconds(240))
        #expect(outcome.status == .error)
        #expect(outcome.error?.contains("did not finish within 300 ms") == true)
    }

    @Test("a crash is reported with the signal and the last line of stderr")
    func crash() async throws {
        let outcome = try await invoke("echo 'segfault in parser' >&2; kill -SEGV $$")
        #expect(outcome.status == .error)
        #expect(outcome.error == "/bin/sh was killed by signal 11: segfault in parser")
        #expect(outcome.stderr == "segfault in parser\n")
    }

    @Test("a non-zero exit is a failure; exit 75 asks for a retry")
    func exitStatus() async throws {
        let failed = try await invoke("echo 'no such order' >&2; exit 3")
        #expect(failed.status == .error)
        #expect(failed.error == "/bin/sh exited with status 3: no such order")
        #expect(!failed.isRetryable)
        let temporary = try await invoke("echo 'rate limited' >&2; exit 75")
        #expect(temporary.isRetryable)
    }

    @Test("output that is not JSON is a failure, and the output is kept")
    func garbage() async throws {
        let outcome = try await invoke("echo 'Traceback (most recent call last):'; echo '  oops'")
        #expect(outcome.status == .error)
        #expect(outcome.error == #"/bin/sh printed output that is not JSON: "Traceback (most recent call last):\n  oops\n""#)
        #expect(outcome.rawOutput.map { String(decoding: $0, as: UTF8.self) } == "Traceback (most recent call last):\n  oops\n")
        let silent = try await invoke("true")
        #expect(silent.error == "/bin/sh printed nothing on stdout; a tool must print its result as JSON")
    }

    // `yes` never stops by itself: without the output limit, the tool's 5 s timeout ends it, and
    // the test fails on the error it gives.
    @Test("huge output stops the tool at the limit instead of filling memory")
    func hugeOutput() async throws {
        let started = ContinuousClock.now
        let outcome = try await invoke("yes '\"aaaaaaaaaaaaaaaaaaaa\"'", outputLimit: 64 * 1024)
        // Far above what a test waits for a thread of the shared pool when other suites keep it busy.
        #expect(ContinuousClock.now - started < .seconds(240))
        #expect(outcome.status == .error)
        #expect(outcome.error == "/bin/sh printed more than 65536 bytes; its process group was killed")
        // What is kept ends where a word ends: the partial one at the cut is dropped.
        let kept = outcome.rawOutput ?? []
        #expect(kept.count <= 64 * 1024 && kept.count > 60 * 1024 && [0x0A, 0x22].contains(kept.last), "\(kept.count)")
    }

    @Test("a cut through a secret keeps none of it: the partial word at the limit of stdout and at the start of stderr's tail is dropped")
    func cutsKeepNoPartialWord() async throws {
        // stdout cut inside a password member: its value would be left whole but for its end, and unredactable.
        let member = try await invoke(
            #"printf '{"user": "bob", "password": "correct-horse-battery-staple-9931", "pad": "%0500d"}' 0"#, outputLimit: 60)
        #expect(member.rawOutput.map { String(decoding: $0, as: UTF8.self) } == #"{"user": "bob", "password": ""#)
        // stderr keeps its last 16 KiB: the cut takes the key's "sk-pr", and the rest matches no pattern.
        let tail = try await invoke(
            "head -c 50 /dev/zero | tr '\\0' x >&2; printf 'sk-proj-Q7vR2mXk9LpT4wZs8NcY3bHd6JfGa1Ue5KoPiVqW\\n' >&2; "
                + "yes aaaaaaaaa | head -c 16340 >&2; echo '{\"ok\": true}'")
        #expect(tail.status == .ok)
        let stderr = tail.stderr ?? ""
        #expect(!stderr.contains("Q7vR2mXk9LpT4wZs8NcY3bHd6JfGa1Ue") && stderr.hasPrefix("aaaaaaaaa\n"), "\(stderr.prefix(80))")
    }

    @Test("a command that does not exist is a failure with the reason")
    func missingProgram() async throws {
        let host = SubprocessToolHost(command: ["/nonexistent/tool"])
        let outcome = try await host.invoke(ToolRequest(callId: "c", tool: "t", arguments: [:], attempt: 1, timeoutMs: 1_000))
        #expect(outcome.status == .error)
        #expect(outcome.error == "cannot start /nonexistent/tool: No such file or directory")
    }

    @Test("a run with a subprocess tool records its result, its failure and its stderr in the log")
    func inARun() async throws {
        try await TemporaryDirectory.with { directory in
            let ok = try Tool(
                spec: ToolSpec(name: "upper", description: "", inputSchema: objectSchema, sideEffect: .read),
                host: SubprocessToolHost(command: ["/bin/sh", "-c", #"echo 'working' >&2; tr a-z A-Z"#]))
            let bad = try Tool(
                spec: ToolSpec(name: "bad", description: "", inputSchema: objectSchema, sideEffect: .read),
                host: SubprocessToolHost(command: ["/bin/sh", "-c", "echo 'not json'"]))
            let agent = makeAgent(decisions: [calls(("upper", ["word": "hello"]), ("bad", [:])), answer("ok")], tools: [ok, bad])
            let (outcome, folded, _) = try await record(agent, in: directory)
            #expect(outcome.state == folded)
            let upper = try #require(folded.call(id: "call-1")?.lastResult)
            #expect(upper.output == ["WORD": "HELLO"])
            #expect(upper.stderr == "working\n")
            let broken = try #require(folded.call(id: "call-2")?.lastResult)
            #expect(broken.status == .error)
            #expect(broken.contentHash != nil)
        }
    }

    /// Whether the process whose pid `file` holds has ended (reaped by init, so it is given a
    /// moment to disappear).
    private func isGone(pidIn file: String) async throws -> Bool {
        let pid = try #require(Int32(String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        for _ in 0..<100 {
            if kill(pid, 0) != 0 || isZombie(pid) { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    private func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }
}
