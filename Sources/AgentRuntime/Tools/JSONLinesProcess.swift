import CProcess
public import Foundation
import Synchronization
public import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A process that speaks one JSON message a line on its stdin and stdout (an MCP server over
/// stdio: the MCP tools' servers and the servers behind `agent-eval mcp-proxy`), and its three
/// pipes. Two threads of its own read stdout and stderr (the last 16 KiB kept, for error
/// messages), so a server that writes a lot never ties up the cooperative pool; writes go
/// through one writer thread (TraceLog's `JobThreads`).
///
/// Anything that ends the conversation — the server exits or closes stdout, writes a line
/// that is not JSON, a line longer than `lineLimit` — is a *failure*: recorded once, with a
/// sentence that says what happened, and told to every waiter, so no call waits for an answer
/// that cannot come.
public final class JSONLinesProcess: Sendable {
    /// The protocol's messages, one per line, as they came; finishes with an error at the
    /// failure (`ServerClosed`; `failure` says what happened).
    public let messages: AsyncThrowingStream<Data, any Error>
    public let process: SpawnedProcess
    /// The server's name for messages (an agent file's key).
    public let name: String
    /// A descriptor of this process that the server's stderr is copied to as it comes (the
    /// proxy passes it on, so the client sees its server's messages); nil keeps only the tail.
    let forwardsStderr: Int32?
    public static let lineLimit = 64 << 20
    static let stderrLimit = 16 * 1024

    /// How `messages` ends: the server closed its output or failed (`failure` says how).
    public struct ServerClosed: Error {
        public init() {}
    }

    /// A message could not be written: the server was stopped, failed, or stopped reading.
    public struct WriteFailure: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    private struct State {
        var failure: String?
        var waiters: [Int: @Sendable (String) -> Void] = [:]
        var nextWaiter = 0
        var stderr: [UInt8] = []
        /// Bytes of stderr written so far, kept or not: a call's share is what came after its start.
        var stderrTotal = 0
        /// The stderr reader reached the end and closes the descriptor (`settleStderr` then
        /// asks it nothing more).
        var stderrEnded = false
        var exited = false
        var stdinClosed = false
    }

    /// Its changes (the exit above all) wake `stop`'s wait.
    private let state = WatchedState(State())
    /// What `stop`'s grace period is kept on.
    private let clock: any Clock<Duration>
    private let continuation: AsyncThrowingStream<Data, any Error>.Continuation
    /// Made once the server started: a server that cannot be started leaves no thread behind.
    private let writer: JobThreads
    private let inputStallLimitMs: Int
    /// Woken by `fail`: what a send waiting on a server that does not read polls besides its pipe.
    private let stopWake = ChildProcess.WakePipe()
    /// The thread that reads stderr to its end, which the stdout reader waits for (bounded).
    private let stderrReader: JobThreads

    /// How long a message may wait for a server that does not read its input (its pipe full):
    /// past it the server is taken for stuck, failed and stopped, and the send throws.
    public static let inputStallLimitMs = 60_000

    public init(
        command: [String], directory: String, environment: [String: String], name: String,
        forwardsStderrTo forwardsStderr: Int32? = nil, clock: any Clock<Duration> = RuntimeEnvironment.live.clock,
        inputStallLimitMs: Int = JSONLinesProcess.inputStallLimitMs
    ) throws(SpawnedProcess.Failure) {
        self.clock = clock
        self.inputStallLimitMs = inputStallLimitMs
        process = try SpawnedProcess.start(
            command: command, directory: directory, environment: environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        // Written without blocking (`send`): a server that stops reading (stuck in a handler, its
        // pipe full) cannot hold the writer, and the requests behind it, past the stall limit or
        // its own stop.
        _ = fcntl(process.stdin, F_SETFL, fcntl(process.stdin, F_GETFL) | O_NONBLOCK)
        writer = JobThreads(name: "agent-eval mcp stdin", stackSize: 128 * 1024)
        self.name = name
        self.forwardsStderr = forwardsStderr
        (messages, continuation) = AsyncThrowingStream.makeStream(of: Data.self)
        stderrReader = JobThreads(name: "agent-eval mcp stderr", stackSize: 128 * 1024)
        stderrReader.submit { [self] in readErrors() }
        stderrReader.finish()
        // The reader parses each line the server writes, nested as deep as a reader allows (512
        // levels; `JSONParser` recurses per level): 512 KiB overflowed at that depth in a debug
        // build (what `swift run` gives), so a server could crash the process with one line.
        JobThreads.once(name: "agent-eval mcp stdout", stackSize: 4 << 20) { [self] in readMessages() }
    }

    deinit { writer.finish() }

    // MARK: Failure

    /// Why the conversation ended, once it has.
    public var failure: String? { state.withLock { $0.failure } }

    /// Records the failure (the first one only) and tells every waiter.
    public func fail(_ message: String) {
        let waiters = state.withLock { state -> [@Sendable (String) -> Void] in
            guard state.failure == nil else { return [] }
            state.failure = message
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        // A send waiting for room in the server's pipe gives up at once.
        stopWake.wake()
        for waiter in waiters { waiter(message) }
    }

    /// Calls `handler` at the failure (at once when it already happened); returns a token for
    /// `removeWaiter`.
    public func onFailure(_ handler: @escaping @Sendable (String) -> Void) -> Int {
        let (token, failure) = state.withLock { state -> (Int, String?) in
            if let failure = state.failure { return (-1, failure) }
            state.nextWaiter += 1
            state.waiters[state.nextWaiter] = handler
            return (state.nextWaiter, nil)
        }
        if let failure { handler(failure) }
        return token
    }

    public func removeWaiter(_ token: Int) {
        _ = state.withLock { $0.waiters.removeValue(forKey: token) }
    }

    // MARK: stderr

    public var stderrMark: Int { state.withLock { $0.stderrTotal } }

    /// What the server wrote to stderr since `mark` (at most the kept tail), or nil for nothing.
    public func stderr(since mark: Int) -> String? {
        state.withLock { state in
            let count = min(state.stderrTotal - mark, state.stderr.count)
            guard count > 0 else { return nil }
            var kept = Array(state.stderr.suffix(count))
            // Its start cut away to keep the tail: the partial word at the cut goes too (it may be
            // what is left of a secret, matched by nothing that redacts).
            if count < state.stderrTotal - mark { ChildProcess.dropPartialWord(atStartOf: &kept) }
            return kept.isEmpty ? nil : String(decoding: kept, as: UTF8.self)
        }
    }

    /// Waits, at most `duration`, until what the server wrote to stderr so far is read — none of
    /// it still in the pipe (`FIONREAD`) — so that a call's share (`stderr(since:)`), taken when
    /// its answer came on stdout, holds what the server wrote before it answered: the reader's
    /// thread may not have read it yet, and it would count to the next call.
    public func settleStderr(within duration: Duration = .milliseconds(250)) async {
        let fd = process.stderr
        await state.wait(within: duration, on: clock) { state in
            guard !state.stderrEnded else { return true }
            var pending: Int32 = 0
            return ioctl(fd, UInt(FIONREAD), &pending) != 0 || pending == 0
        }
    }

    /// The last line the server wrote to stderr, for error messages ("Traceback…" is less useful
    /// than "ModuleNotFoundError: No module named 'x'").
    public var lastErrorLine: String? {
        stderr(since: 0)?.split(whereSeparator: \.isNewline).last.map { String($0.prefix(400)) }
    }

    // MARK: Writing

    /// Writes one message and a newline; throws when the server no longer reads.
    public func send(_ data: Data) async throws {
        let bytes = Array(data) + [0x0A]
        let fd = process.stdin
        try await writer.run { [self] () throws in
            // Nothing goes to a server that was stopped or failed: the request fails at once,
            // so a request made after a deadline gave up on the server cannot wait for an
            // answer that will never come.
            if let why = state.withLock({ $0.stdinClosed ? "its input is closed" : $0.failure }) {
                throw WriteFailure(message: "the server cannot be written to: \(why)")
            }
            let wake = Wake(fd: stopWake.readFD) { self.state.withLock { $0.failure } }
            switch Self.writeOut(bytes, to: fd, stallLimitMs: inputStallLimitMs, wake: wake) {
            case nil: break
            case .failed(let reason)?:
                // A pipe broken because the server was stopped meanwhile says that, not "Broken pipe".
                if let why = state.withLock({ $0.failure }) { throw WriteFailure(message: "the server cannot be written to: \(why)") }
                throw WriteFailure(message: "cannot write to the server: \(reason)")
            case .stopped(let why)?: throw WriteFailure(message: "the server cannot be written to: \(why)")
            case .stalled(let waiting)?:
                let limit = inputStallLimitMs >= 1_000 ? "\(inputStallLimitMs / 1_000) s" : "\(inputStallLimitMs) ms"
                let why = "it has not read its input for \(limit) (\(waiting) bytes of a message waiting); it was stopped"
                fail(why)
                process.killGroup()
                throw WriteFailure(message: "the server cannot be written to: \(why)")
            }
        }
    }

    // MARK: Stopping

    /// Asks the server to stop the way the protocol says (close its input), waits up to
    /// `graceMs` for it to exit, then kills its process group.
    public func stop(graceMs: Int = 2_000) async {
        writer.submit { [self] in
            let close = state.withLock { state -> Bool in
                defer { state.stdinClosed = true }
                return !state.stdinClosed
            }
            if close { _ = closeDescriptor(process.stdin) }
        }
        await state.wait(within: .milliseconds(graceMs), on: clock) { $0.exited }
        kill()
    }

    /// Kills the server's process group. The conversation is over from this moment: `failure`
    /// says so at once, so the next call starts another server instead of writing to this one
    /// before its end has been read (which, on a busy machine, came after that call began).
    public func kill() {
        fail("it was stopped")
        if !state.withLock({ $0.exited }) { process.killGroup() }
    }

    // MARK: The reading threads

    private func readMessages() {
        // The server's end, told apart from its output's: a process it started (a daemon, a
        // helper in the background) may hold stdout open after the server died, and its calls
        // would otherwise wait for their timeouts to learn that no answer comes.
        let endedFD = cprocess_pidfd_open(process.pid)
        let end = Self.readLines(from: process.stdout, limit: Self.lineLimit, endedFD: endedFD) { deliver($0) }
        if endedFD >= 0 { close(endedFD) }
        if end == .tooLong {
            fail("the server wrote a message longer than \(Self.lineLimit >> 20) MiB; it was stopped")
        }
        close(process.stdout)
        // The server closed its output or ended: it exited, or is about to. Kill what is left
        // of it (a server that closed stdout cannot answer) and reap it.
        process.killGroup()
        var status: Int32 = 0
        while waitpid(process.pid, &status, 0) < 0 && errno == EINTR {}
        state.withLock { $0.exited = true }
        // Its last words may still be in the stderr pipe: let the reader drain it (bounded —
        // the group is dead, so the pipe's end comes at once unless something escaped it).
        _ = stderrReader.waitUntilEnded(within: .seconds(2))
        let how = SpawnedProcess.describe(waitStatus: status)
        fail("the server \(how)" + (lastErrorLine.map { " (its last words on stderr: \($0))" } ?? ""))
        continuation.finish(throwing: ServerClosed())
    }

    /// Hands one line to the client; false when the line ends the conversation.
    private func deliver(_ rawLine: [UInt8]) -> Bool {
        var line = rawLine[...]
        while let last = line.last, last == 0x0D || last == 0x20 || last == 0x09 { line.removeLast() }
        while let first = line.first, first == 0x20 || first == 0x09 { line.removeFirst() }
        if line.isEmpty { return true }
        let message: JSONValue
        do {
            message = try JSONParser.parse(line)
        } catch {
            // A string cut inside a character (a lone surrogate escape, as JavaScript's `slice`
            // leaves) is read with U+FFFD in its place; any other line that is no JSON ends it.
            guard let repaired = JSONParser.replacingLoneSurrogates(in: Array(line)), let read = try? JSONParser.parse(repaired) else {
                let reason = (error as? TraceCoreError)?.message ?? "\(error)"
                fail("the server wrote a line that is not a JSON-RPC message: \(Self.excerpt(line)) (\(reason)); it was stopped")
                process.killGroup()
                return false
            }
            message = read
            line = repaired[...]
        }
        guard case .object(let object) = message else {
            if case .array = message {
                continuation.yield(Data(line))
                return true
            }
            fail("the server wrote \(message.typeDescription), not a JSON-RPC message: \(Self.excerpt(line)); it was stopped")
            process.killGroup()
            return false
        }
        // JSON that is not JSON-RPC 2.0 (no version, neither a method nor an answer, or an answer
        // that says both: a result and an error, neither null) is a server talking past the
        // protocol: the conversation cannot go on, as for a line that is no JSON. A client that
        // read the result would see a success where the log, reading the error, says a failure.
        let isBoth = (object["result"].map { $0 != .null } ?? false) && (object["error"].map { $0 != .null } ?? false)
        guard object["jsonrpc"]?.stringValue == "2.0",
            object["method"] != nil || (object["id"] != nil && (object["result"] != nil || object["error"] != nil) && !isBoth)
        else {
            fail("the server wrote a JSON object that is not a JSON-RPC 2.0 message: \(Self.excerpt(line)); it was stopped")
            process.killGroup()
            return false
        }
        continuation.yield(Data(line))
        return true
    }

    private func readErrors() {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        let fd = process.stderr
        while true {
            // Waits for bytes (or the end) outside the lock, then reads and keeps them under it:
            // `settleStderr`, which looks at the pipe under the same lock, never finds bytes read
            // and not yet kept. (A read of a pipe that has bytes, or has ended, does not block.)
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&entry, 1, -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            let (count, error) = state.withLock { state -> (Int, Int32) in
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                let error = errno
                if count > 0 {
                    state.stderr.append(contentsOf: buffer[0..<count])
                    state.stderrTotal += count
                    if state.stderr.count > 2 * Self.stderrLimit { state.stderr.removeFirst(state.stderr.count - Self.stderrLimit) }
                }
                return (count, error)
            }
            if count < 0 && error == EINTR { continue }
            if count <= 0 { break }
            if let forwardsStderr { _ = Self.writeAll(Array(buffer[0..<count]), to: forwardsStderr) }
        }
        state.withLock { $0.stderrEnded = true }
        close(fd)
    }

    // MARK: Lines over descriptors

    /// How `readLines` ended.
    public enum LinesEnd: Sendable, Hashable {
        /// The descriptor's end (or an error reading it).
        case end
        /// `deliver` asked to stop.
        case stopped
        /// A line grew past the limit without its newline.
        case tooLong
        /// The writer's process ended (`endedFD` became readable) and the descriptor held
        /// nothing more; something it started still holds the descriptor open.
        case writerEnded
    }

    /// Reads `fd` (blocking) until its end, handing each line to `deliver` without its newline;
    /// stops when `deliver` returns false or a line passes `limit` bytes. The one line reader of
    /// the JSON-lines conversations: a server's stdout here, a client's stdin in the MCP proxy.
    ///
    /// With `endedFD` (`cprocess_pidfd_open` of the writer), the read waits on `poll` for the
    /// data or the writer's end: what the writer wrote before it ended is read first, then the
    /// read ends as `.writerEnded` though a process it left behind holds `fd` open.
    public static func readLines(from fd: Int32, limit: Int, endedFD: Int32 = -1, _ deliver: ([UInt8]) -> Bool) -> LinesEnd {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var line: [UInt8] = []
        while true {
            if endedFD >= 0 {
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: endedFD, events: Int16(POLLIN), revents: 0)]
                let ready = poll(&fds, 2, -1)
                if ready < 0 && errno == EINTR { continue }
                // Data first: only a descriptor with nothing to read after the writer's end ends it.
                if ready > 0 && fds[0].revents == 0 && fds[1].revents != 0 { return .writerEnded }
            }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return .end }
            var start = 0
            for index in 0..<count where buffer[index] == 0x0A {
                line.append(contentsOf: buffer[start..<index])
                start = index + 1
                if !deliver(line) { return .stopped }
                line.removeAll(keepingCapacity: true)
            }
            line.append(contentsOf: buffer[start..<count])
            if line.count > limit { return .tooLong }
        }
    }

    /// Writes all of `bytes` to `fd` (blocking); nil when done, else what went wrong.
    public static func writeAll(_ bytes: [UInt8], to fd: Int32) -> String? {
        switch writeOut(bytes, to: fd, stallLimitMs: nil, wake: nil) {
        case .failed(let reason)?, .stopped(let reason)?: return reason
        case .stalled?, nil: return nil
        }
    }

    /// Why a write did not take every byte.
    enum WriteProblem {
        case failed(String)
        /// The wake came with a reason (the server was stopped or failed meanwhile).
        case stopped(String)
        /// No byte was taken for the stall limit; the count of bytes still waiting.
        case stalled(Int)
    }

    /// What wakes a write waiting for room (a `ChildProcess.WakePipe`'s end), and the reason to
    /// give up it was woken for.
    struct Wake {
        var fd: Int32
        var reason: () -> String?
    }

    /// Writes all of `bytes` to `fd`, or says why not. On a non-blocking `fd` a write that would
    /// block waits on `poll` for room or for `wake`, at most what is left of `stallLimitMs` since
    /// the last byte was taken (then the write is stalled); without a wake pipe (out of
    /// descriptors) it looks at `wake`'s reason every 100 ms.
    static func writeOut(_ bytes: [UInt8], to fd: Int32, stallLimitMs: Int?, wake: Wake?) -> WriteProblem? {
        var written = 0
        var stalledMs = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return write(fd, base + written, buffer.count - written)
            }
            if count >= 0 {
                written += count
                stalledMs = 0
                continue
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK:
                if let why = wake?.reason() { return .stopped(why) }
                if let limit = stallLimitMs, stalledMs >= limit { return .stalled(bytes.count - written) }
                var fds = [pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)]
                if let wake, wake.fd >= 0 { fds.append(pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)) }
                var wait = stallLimitMs.map { $0 - stalledMs } ?? -1
                if wake.map({ $0.fd < 0 }) ?? false { wait = wait < 0 ? 100 : min(wait, 100) }
                let ready = poll(&fds, nfds_t(fds.count), Int32(clamping: wait))
                if ready == 0 { stalledMs += max(wait, 0) }
            default: return .failed(String(cString: strerror(errno)))
            }
        }
        return nil
    }

    /// A request id as a key (`JSONRPCPeer`'s, the proxy's): `"7"` for 7, `"\"a\""` for "a".
    public static func key(_ id: JSONValue) -> String { JSONWriter.encodeString(id) }

    public static func excerpt(_ line: some Collection<UInt8>) -> String {
        let text = String(decoding: line.prefix(200), as: UTF8.self)
        return "\"\(text)\(line.count > 200 ? "…" : "")\""
    }
}

/// `close(2)`, under a name no method shadows.
private func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }
