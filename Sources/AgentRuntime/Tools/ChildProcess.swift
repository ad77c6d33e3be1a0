import CProcess
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs a command in its own process group, feeds it stdin, collects bounded stdout and
/// stderr, and kills the whole group on timeout, or once the command has exited if a process
/// it left behind still holds its streams open (after `lingeringStreamGraceMs`). The blocking
/// wait runs on its own thread, so concurrent tools never tie up the cooperative thread pool.
///
/// The timeout is `Deadline.run` on `clock`, like every other deadline: when it passes, the
/// waiting task is cancelled, which wakes the blocking thread at once (a byte down a pipe its
/// `poll` watches) to kill the group.
public struct ChildProcess: Sendable {
    public struct Result: Sendable {
        /// The exit status, when the process exited.
        public var exitStatus: Int32?
        /// The signal that ended it, when one did.
        public var signal: Int32?
        public var stdout: [UInt8]
        public var stderr: [UInt8]
        /// stdout went past the limit; the group was killed.
        public var isOutputTruncated: Bool
        /// The deadline passed; the group was killed.
        public var isTimedOut: Bool
        /// The task waiting for it was cancelled (the run was interrupted): the group was killed.
        public var isCancelled = false
    }

    public struct SpawnFailure: Error {
        public var message: String
    }

    public var command: [String]
    public var directory: String?
    /// The child's whole environment as `NAME=value` entries; nil passes this process's on.
    public var environment: [String]?
    public var input: [UInt8]
    /// Standard input given while the command runs (a conversation's user turns, one line each),
    /// after `input`; nil closes it once `input` is written. Closing the feed closes the command's
    /// standard input.
    public var inputFeed: InputFeed?
    public var timeoutMs: Int
    /// Bytes of stdout kept; more kills the process. stderr keeps its last `stderrLimit` bytes.
    public var outputLimit: Int
    public var stderrLimit = 16 * 1024
    /// Where the started process's `ProcessIdentity` is written while it runs (removed once it
    /// has ended and its group is killed): a process that continues the work after this one
    /// died can tell whether the command still runs. A record that cannot be written stops the
    /// command before it is waited for.
    public var recordPath: String?
    /// Writes the command's stdout and stderr to these descriptors of this process as they
    /// arrive (a command the user watches, `agent-eval record`): stdout then keeps only its last
    /// `stderrLimit` bytes, like stderr, and never counts against `outputLimit`.
    public var forwardsOutput: (stdout: Int32, stderr: Int32)?
    /// The clock the timeout is kept on (tests inject one they advance).
    public var clock: any Clock<Duration> = ContinuousClock()

    /// A pipe that wakes the child's thread from `poll`: the thread polls `readFD`; `wake()`
    /// writes a byte to the other end. Both ends close-on-exec from the start, as every pipe here
    /// (a process spawned at the same moment on another thread must not inherit them), and
    /// non-blocking. Without a pipe (out of descriptors) the thread still looks at what it is
    /// woken for within 100 ms. Also what wakes `agent-eval serve`'s file watcher.
    public final class WakePipe: Sendable {
        public let readFD: Int32
        private let writeFD: Int32

        public init() {
            var ends: [Int32] = [-1, -1]
            if cprocess_pipe_cloexec(&ends) == 0 {
                for fd in ends { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
            } else {
                ends = [-1, -1]
            }
            (readFD, writeFD) = (ends[0], ends[1])
        }

        deinit {
            for fd in [readFD, writeFD] where fd >= 0 { close(fd) }
        }

        public func wake() {
            guard writeFD >= 0 else { return }
            var byte: UInt8 = 1
            _ = write(writeFD, &byte, 1)
        }

        /// Empties the pipe (the thread was woken; what woke it says why).
        public func drain() {
            guard readFD >= 0 else { return }
            var bytes = [UInt8](repeating: 0, count: 64)
            while bytes.withUnsafeMutableBytes({ read(readFD, $0.baseAddress, $0.count) }) > 0 {}
        }
    }

    /// Set when the waiting task is cancelled (the run was interrupted, or the deadline passed);
    /// its pipe wakes the child's thread from `poll` at once.
    final class CancellationFlag: Sendable {
        private let flag = Mutex(false)
        private let pipe = WakePipe()
        /// What the thread polls.
        var wakeFD: Int32 { pipe.readFD }

        func cancel() {
            flag.withLock { $0 = true }
            pipe.wake()
        }

        var isCancelled: Bool { flag.withLock { $0 } }
    }

    /// Bytes for a running command's standard input, given as they come (`inputFeed`): `send`
    /// queues them and wakes the child's thread (a byte down a pipe its `poll` watches), which
    /// writes them as the pipe takes them; `close` ends the stream once they are written.
    public final class InputFeed: Sendable {
        private struct Queue {
            var pending: [UInt8] = []
            var isClosed = false
            /// The command closed its standard input (or exited): nothing more reaches it.
            var isBroken = false
        }

        // Guarded by the mutex.
        private let queue = Mutex(Queue())
        private let pipe = WakePipe()
        /// What the child's thread polls; `send` and `close` wake it.
        var wakeFD: Int32 { pipe.readFD }

        public init() {}

        /// Queues `bytes` for the command; false when its standard input is closed or broken.
        @discardableResult
        public func send(_ bytes: [UInt8]) -> Bool {
            let taken = queue.withLock { queue in
                guard !queue.isClosed, !queue.isBroken else { return false }
                queue.pending += bytes
                return true
            }
            if taken { pipe.wake() }
            return taken
        }

        /// Ends the command's standard input once what is queued is written.
        public func close() {
            queue.withLock { $0.isClosed = true }
            pipe.wake()
        }

        /// Whether the command can no longer be given anything (it closed its standard input,
        /// or ended).
        public var isBroken: Bool { queue.withLock { $0.isBroken } }

        /// The child's thread takes what is queued, and whether the feed is closed.
        func take() -> (bytes: [UInt8], isClosed: Bool) {
            queue.withLock { queue in
                defer { queue.pending = [] }
                return (queue.pending, queue.isClosed)
            }
        }

        func markBroken() { queue.withLock { $0.isBroken = true } }

        /// Empties the wake pipe (the thread was woken; the queue says why).
        func drainWakes() { pipe.drain() }
    }

    public init(
        command: [String], directory: String? = nil, environment: [String]? = nil, input: [UInt8] = [], timeoutMs: Int, outputLimit: Int
    ) {
        self.command = command
        self.directory = directory
        self.environment = environment
        self.input = input
        self.timeoutMs = timeoutMs
        self.outputLimit = outputLimit
    }

    /// Runs the command to its end (or its timeout, or the waiting task's cancellation); throws
    /// `SpawnFailure` when it cannot start.
    public func run() async throws -> Result {
        let cancellation = CancellationFlag()
        let (ended, timedOut) = await Deadline.run(within: .milliseconds(timeoutMs), on: clock) {
            () async -> Swift.Result<Result, any Error> in
            do {
                return .success(
                    try await withTaskCancellationHandler {
                        try await OwnThread.run(stackSize: 256 * 1024) { try self.runBlocking(cancellation: cancellation) }
                    } onCancel: {
                        cancellation.cancel()
                    })
            } catch {
                return .failure(error)
            }
        }
        var result = try ended.get()
        // Killed because the deadline passed, not because the caller was cancelled: a timeout.
        // (A command that ended by itself as the deadline passed keeps its own ending.)
        if timedOut && result.isCancelled && !Task.isCancelled {
            result.isCancelled = false
            result.isTimedOut = true
        }
        return result
    }

    /// Runs the command to its end on the calling thread, with no deadline (`timeoutMs` is not
    /// kept): for a program with nothing else to run, such as a benchmark's main code; never in a
    /// task, whose thread belongs to the cooperative pool.
    public func runOnThisThread() throws -> Result {
        try runBlocking(cancellation: CancellationFlag())
    }

    private func runBlocking(cancellation: CancellationFlag) throws -> Result {
        let process: SpawnedProcess
        // A missing working directory fails the start as a missing program would (ENOENT): say which.
        var isFolder: ObjCBool = false
        if let directory, !(FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder) && isFolder.boolValue) {
            throw SpawnFailure(message: "its working directory \"\(directory)\" is not a directory that exists")
        }
        do {
            process = try SpawnedProcess.start(command: command, directory: directory, environment: environment)
        } catch {
            throw SpawnFailure(message: error.message)
        }
        let pid = process.pid
        if let recordPath {
            do throws(ProcessIdentity.Failure) {
                guard let identity = ProcessIdentity(pid: pid) else {
                    throw ProcessIdentity.Failure(message: "it was reaped by another thread")
                }
                try identity.write(to: recordPath)
            } catch {
                process.killGroup()
                for fd in [process.stdin, process.stdout, process.stderr] { close(fd) }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                unlink(recordPath)
                throw SpawnFailure(message: "cannot record the process: \(error.message)")
            }
        }
        defer { if let recordPath { unlink(recordPath) } }
        var result = Result(exitStatus: nil, signal: nil, stdout: [], stderr: [], isOutputTruncated: false, isTimedOut: false)
        // Whether a stream's start was cut away to keep its tail.
        var isStderrCut = false
        var isStdoutTailCut = false
        var inputFD = process.stdin
        var outputFD = process.stdout
        var errorFD = process.stderr
        for fd in [inputFD, outputFD, errorFD] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        // What is still to be written to stdin: `input`, then what the feed gives.
        var pendingInput = input
        var written = 0
        var isFeedClosed = inputFeed == nil
        /// Takes what the feed queued; closes stdin once nothing more will come.
        func refillInput() {
            if let inputFeed, !isFeedClosed {
                inputFeed.drainWakes()
                let (bytes, closed) = inputFeed.take()
                if !bytes.isEmpty {
                    pendingInput.removeFirst(written)
                    written = 0
                    pendingInput += bytes
                }
                isFeedClosed = closed
            }
            if inputFD >= 0 && isFeedClosed && written == pendingInput.count {
                close(inputFD)
                inputFD = -1
            }
        }
        defer { inputFeed?.markBroken() }
        refillInput()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var killed = false
        var waitStatus: Int32 = 0
        /// When the command itself exited while its streams were still open.
        var exitedAtMs: Int?

        func killGroup() {
            if !killed {
                kill(-pid, SIGKILL)
                killed = true
            }
        }

        /// Reads once from `fd` (stdout or stderr) without waiting: the bytes read, 0 at the
        /// stream's end or when stdout passed the limit, -1 when nothing is there now.
        func readOnce(_ fd: Int32) -> Int {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 { return errno == EAGAIN || errno == EINTR ? -1 : 0 }
            if count == 0 { return 0 }
            if let forwardsOutput {
                buffer.withUnsafeBytes { bytes in
                    guard let base = bytes.baseAddress else { return }
                    var done = 0
                    while done < count {
                        let wrote = write(
                            fd == outputFD ? forwardsOutput.stdout : forwardsOutput.stderr, base + done, count - done)
                        if wrote < 0 && errno == EINTR { continue }
                        if wrote <= 0 { break }
                        done += wrote
                    }
                }
                if fd == outputFD {
                    result.stdout.append(contentsOf: buffer[0..<count])
                    if result.stdout.count > 2 * stderrLimit {
                        result.stdout.removeFirst(result.stdout.count - stderrLimit)
                        isStdoutTailCut = true
                    }
                    return count
                }
            }
            if fd == outputFD {
                let room = outputLimit - result.stdout.count
                result.stdout.append(contentsOf: buffer[0..<min(count, room)])
                if count > room {
                    result.isOutputTruncated = true
                    return 0
                }
            } else {
                result.stderr.append(contentsOf: buffer[0..<count])
                if result.stderr.count > 2 * stderrLimit {
                    result.stderr.removeFirst(result.stderr.count - stderrLimit)
                    isStderrCut = true
                }
            }
            return count
        }

        while outputFD >= 0 || errorFD >= 0 {
            // What the feed gave since the last look (woken by its pipe, or within 100 ms).
            if inputFeed != nil { refillInput() }
            if cancellation.isCancelled {
                result.isCancelled = true
                killGroup()
                break
            }
            // The command exited but something it started holds its stdout or stderr open (a
            // background process): its result is decided. Take what the streams hold after a
            // short grace, and kill the group instead of waiting for the leftovers.
            if exitedAtMs == nil && waitpid(pid, &waitStatus, WNOHANG) == pid { exitedAtMs = Self.nowMs() }
            if let exitedAtMs, Self.nowMs() >= exitedAtMs + Self.lingeringStreamGraceMs {
                killGroup()
                for fd in [outputFD, errorFD] where fd >= 0 { while readOnce(fd) > 0 {} }
                break
            }
            // Woken by output, the wake pipe, or every 100 ms to see whether the command exited.
            let wait = exitedAtMs.map { min($0 + Self.lingeringStreamGraceMs - Self.nowMs(), 100) } ?? 100
            var fds: [pollfd] = []
            if cancellation.wakeFD >= 0 { fds.append(pollfd(fd: cancellation.wakeFD, events: Int16(POLLIN), revents: 0)) }
            if let inputFeed, !isFeedClosed, inputFeed.wakeFD >= 0 {
                fds.append(pollfd(fd: inputFeed.wakeFD, events: Int16(POLLIN), revents: 0))
            }
            if inputFD >= 0 && written < pendingInput.count { fds.append(pollfd(fd: inputFD, events: Int16(POLLOUT), revents: 0)) }
            if outputFD >= 0 { fds.append(pollfd(fd: outputFD, events: Int16(POLLIN), revents: 0)) }
            if errorFD >= 0 { fds.append(pollfd(fd: errorFD, events: Int16(POLLIN), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(max(wait, 0)))
            if ready < 0 {
                if errno == EINTR { continue }
                killGroup()
                break
            }
            for entry in fds where entry.revents != 0 && entry.fd != cancellation.wakeFD {
                // The feed's wake: taken at the top of the loop.
                if entry.fd == inputFeed?.wakeFD { continue }
                if entry.fd == inputFD {
                    let count = pendingInput.withUnsafeBytes { bytes -> Int in
                        guard let base = bytes.baseAddress else { return 0 }
                        return write(inputFD, base + written, bytes.count - written)
                    }
                    if count > 0 { written += count }
                    if count < 0 && errno != EAGAIN && errno != EINTR {
                        // The command closed its standard input: nothing more reaches it.
                        close(inputFD)
                        inputFD = -1
                        inputFeed?.markBroken()
                        continue
                    }
                    refillInput()
                    continue
                }
                if readOnce(entry.fd) == 0 {
                    close(entry.fd)
                    if entry.fd == outputFD { outputFD = -1 } else { errorFD = -1 }
                    if result.isOutputTruncated { killGroup() }
                }
            }
        }
        for fd in [inputFD, outputFD, errorFD] where fd >= 0 { close(fd) }
        // Its standard input is closed now: nothing more reaches it.
        inputFeed?.markBroken()
        if result.stderr.count > stderrLimit {
            result.stderr.removeFirst(result.stderr.count - stderrLimit)
            isStderrCut = true
        }
        if forwardsOutput != nil && result.stdout.count > stderrLimit {
            result.stdout.removeFirst(result.stdout.count - stderrLimit)
            isStdoutTailCut = true
        }
        // A cut can split a secret, and the part left matches no pattern and no known value (the
        // `sk-` gone from a key, the end of a password): the partial word at the cut goes with it.
        if isStderrCut { Self.dropPartialWord(atStartOf: &result.stderr) }
        if isStdoutTailCut { Self.dropPartialWord(atStartOf: &result.stdout) }
        if result.isOutputTruncated { Self.dropPartialWord(atEndOf: &result.stdout) }

        // The streams are closed; the process may still run (it closed them itself). Wait for
        // it until the wait is cancelled (the deadline passed, or the run was interrupted), then
        // kill it.
        // A process that closed its streams is usually exiting: look again soon, then less
        // often (50 µs doubling to 5 ms), so a short command is not charged a fixed 5 ms.
        var pauseUs: UInt32 = 50
        while exitedAtMs == nil {
            let reaped = waitpid(pid, &waitStatus, WNOHANG)
            if reaped == pid || (reaped < 0 && errno != EINTR) { break }
            if reaped == 0 && cancellation.isCancelled && !killed {
                result.isCancelled = true
                killGroup()
            }
            usleep(killed ? min(pauseUs, 1_000) : pauseUs)
            pauseUs = min(pauseUs * 2, 5_000)
        }
        // Whatever the tool left running in its group goes with it.
        kill(-pid, SIGKILL)
        if waitStatus & 0x7f == 0 {
            result.exitStatus = (waitStatus >> 8) & 0xff
        } else {
            result.signal = waitStatus & 0x7f
        }
        return result
    }

    /// How long the streams of a command that exited are still read when a process it left
    /// behind holds them open, before its group is killed.
    static let lingeringStreamGraceMs = 100

    private static func nowMs() -> Int {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return time.tv_sec * 1000 + time.tv_nsec / 1_000_000
    }
}

extension ChildProcess {
    /// Bytes that end a word: white space and the punctuation around values in text and JSON.
    static func isWordBoundary(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x09, 0x0A, 0x0D, 0x20, UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: ";"),
            UInt8(ascii: "="), UInt8(ascii: "&"), UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "["), UInt8(ascii: "]"),
            UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "<"), UInt8(ascii: ">"):
            return true
        default:
            return false
        }
    }

    /// Drops what comes before the first word boundary of bytes whose start was cut away (all of
    /// them when there is none): the word the cut went through.
    static func dropPartialWord(atStartOf bytes: inout [UInt8]) {
        guard let boundary = bytes.firstIndex(where: isWordBoundary) else {
            bytes.removeAll()
            return
        }
        bytes.removeFirst(boundary + 1)
    }

    /// Drops what comes after the last word boundary of bytes whose end was cut away (all of
    /// them when there is none).
    static func dropPartialWord(atEndOf bytes: inout [UInt8]) {
        guard let boundary = bytes.lastIndex(where: isWordBoundary) else {
            bytes.removeAll()
            return
        }
        bytes.removeSubrange((boundary + 1)...)
    }
}
