import AgentRuntime
public import Foundation

/// Runs a real program and collects what it did.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: [UInt8]
    public var stderr: String
    /// From the program's start to its end (not the time it waited for a slot).
    public var elapsed: Duration

    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
}

public enum Subprocess {
    /// A program that ran past its time (`Subprocess.run`'s `timeout`): its whole process group
    /// was killed, and the test fails naming it, instead of waiting for it for ever.
    public struct TimedOut: Error, CustomStringConvertible {
        public var command: [String]
        public var timeout: Duration
        /// The last of what it wrote to standard error.
        public var stderr: String
        public var description: String {
            "\(command.joined(separator: " ")) did not end within \(timeout) and was killed"
                + (stderr.isEmpty ? "" : "; its standard error ended with: \(stderr.suffix(2_000))")
        }
    }

    /// Runs `executable` with `arguments`, feeding `input` on standard input, within `timeout`
    /// (past it, the program's process group is killed and `TimedOut` thrown).
    ///
    /// The program is started and waited for by the house's `ChildProcess` (its own `waitpid`, on
    /// a thread of its own), not Foundation's `Process`: `Process.waitUntilExit` off the main
    /// thread can wait for ever for a program that has ended (a run loop that is never woken), and
    /// reading a pipe to its end waits as long as anything the program left behind holds it open —
    /// either would hold the test run open past CI's time with nothing said. A test waiting for a
    /// program never holds a thread of the cooperative pool, which the tests running beside it need.
    /// And the program runs in one of the `TestLoad` slots: the test runner starts every test
    /// together, and hundreds of CLI runs sharing two cores would stretch every test that measures
    /// a deadline. `queued: false` skips the queue, for a quick look taken while timing a process
    /// the test started itself (a poll that waited its turn would come too late).
    public static func run(
        _ executable: String, _ arguments: [String], input: [UInt8] = [], in directory: URL? = nil, environment: [String: String] = [:],
        queued: Bool = true, timeout: Duration = .seconds(600)
    ) async throws -> ProcessResult {
        guard queued else {
            return try await runNow(executable, arguments, input: input, in: directory, environment: environment, timeout: timeout)
        }
        return try await TestLoad.withSlot {
            try await runNow(executable, arguments, input: input, in: directory, environment: environment, timeout: timeout)
        }
    }

    private static func runNow(
        _ executable: String, _ arguments: [String], input: [UInt8], in directory: URL?, environment: [String: String], timeout: Duration
    ) async throws -> ProcessResult {
        let started = ContinuousClock.now
        let result = try await child(executable, arguments, input: input, in: directory, environment: environment, timeout: timeout).run()
        if result.isTimedOut {
            throw TimedOut(command: [executable] + arguments, timeout: timeout, stderr: String(decoding: result.stderr, as: UTF8.self))
        }
        if result.isCancelled { throw CancellationError() }
        return processResult(result, since: started)
    }

    /// `body`, which starts a program and waits for it, run on a thread of its own once a slot
    /// is free (at once when `queued` is false).
    static func waiting<T: Sendable>(queued: Bool = true, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        guard queued else { return try await OwnThread.run(stackSize: 512 * 1024, body) }
        return try await TestLoad.withSlot { try await OwnThread.run(stackSize: 512 * 1024, body) }
    }

    /// The same as `run`, waiting on the calling thread with no time limit: for a program with
    /// nothing else to run (a benchmark's main code), never for a test or a task.
    public static func runBlocking(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult
    {
        let started = ContinuousClock.now
        let result = try child(executable, arguments, input: [], in: nil, environment: environment, timeout: .zero).runOnThisThread()
        return processResult(result, since: started)
    }

    /// The house's runner for a program run here: everything it writes is kept (a test reads
    /// whole outputs and error texts).
    private static func child(
        _ executable: String, _ arguments: [String], input: [UInt8], in directory: URL?, environment: [String: String], timeout: Duration
    ) -> ChildProcess {
        let variables =
            environment.isEmpty ? nil : ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        var child = ChildProcess(
            command: [executable] + arguments, directory: directory?.path, environment: variables, input: input,
            timeoutMs: Int(timeout / .milliseconds(1)), outputLimit: Int.max / 2)
        child.stderrLimit = Int.max / 4
        return child
    }

    /// As Foundation's `terminationStatus` said it: the exit status, or the signal that ended it.
    private static func processResult(_ result: ChildProcess.Result, since started: ContinuousClock.Instant) -> ProcessResult {
        ProcessResult(
            status: result.exitStatus ?? result.signal ?? -1, stdout: result.stdout, stderr: String(decoding: result.stderr, as: UTF8.self),
            elapsed: ContinuousClock.now - started)
    }

    /// The path of a program on PATH.
    public static func which(_ name: String) -> String? {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        for directory in paths {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// The real gzip program, for checking logs with the tool users have.
public let gzipPath = Subprocess.which("gzip") ?? "/usr/bin/gzip"
