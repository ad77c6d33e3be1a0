import CProcess

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A command started in a process group of its own, with pipes to its stdin, stdout and
/// stderr. The one place processes are started: one-shot tools (`ChildProcess`), pipeline
/// command tasks (through `ChildProcess`) and long-lived tool servers (the `MCPTools` module)
/// all start theirs here, so all get the same isolation — a group that can be killed as a
/// whole, every signal at its default, no inherited descriptors — and the same lifetime:
///
/// - **Linux**: the child gets `PR_SET_PDEATHSIG` = SIGKILL before it execs, so it dies with
///   this process however this process ends (kill -9 too). A program that calls
///   `adoptOrphans()` also becomes a child subreaper: what a child leaves behind (a `setsid`
///   daemon) becomes this process's child and is killed at exit.
/// - **macOS**: no parent-death signal exists; the groups are killed by their owners, and by
///   `adoptOrphans()`'s sweep at exit. A kill -9 leaves them running.
///
/// See docs/mcp.md, "Processes and their lifetime".
public struct SpawnedProcess: Sendable {
    public struct Failure: Error, Sendable {
        public var message: String
    }

    public let pid: Int32
    /// Our ends of the pipes: write to `stdin`, read `stdout` and `stderr`. The caller closes them.
    public let stdin: Int32
    public let stdout: Int32
    public let stderr: Int32

    private static let ignoreSigpipe: Void = {
        // Writing to a child that closed its stdin must be an error, not the end of us.
        signal(SIGPIPE, SIG_IGN)
    }()

    /// Starts `command` (found on PATH when it has no slash) in `directory`, with exactly
    /// `environment` (`NAME=value` entries; nil passes this process's on).
    public static func start(command: [String], directory: String?, environment: [String]?) throws(Failure) -> SpawnedProcess {
        _ = ignoreSigpipe
        guard let executable = command.first else { throw Failure(message: "the command is empty") }
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        var stderrPipe: [Int32] = [-1, -1]
        guard cprocess_pipe_cloexec(&stdinPipe) == 0, cprocess_pipe_cloexec(&stdoutPipe) == 0,
            cprocess_pipe_cloexec(&stderrPipe) == 0
        else {
            for fd in stdinPipe + stdoutPipe + stderrPipe where fd >= 0 { close(fd) }
            throw Failure(message: "cannot create pipes: \(String(cString: strerror(errno)))")
        }
        var pid: pid_t = 0
        let arguments = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        let environmentEntries = environment.map { $0.map { strdup($0) } + [nil] }
        defer { for entry in environmentEntries ?? [] { free(entry) } }
        let status = arguments.withUnsafeBufferPointer { argv in
            if let environmentEntries {
                environmentEntries.withUnsafeBufferPointer { envp in
                    cprocess_spawn(
                        executable, argv.baseAddress, envp.baseAddress, directory, stdinPipe[0], stdoutPipe[1], stderrPipe[1], &pid)
                }
            } else {
                cprocess_spawn(executable, argv.baseAddress, nil, directory, stdinPipe[0], stdoutPipe[1], stderrPipe[1], &pid)
            }
        }
        close(stdinPipe[0])
        close(stdoutPipe[1])
        close(stderrPipe[1])
        guard status == 0 else {
            close(stdinPipe[1])
            close(stdoutPipe[0])
            close(stderrPipe[0])
            if status == ENOSYS, let directory {
                throw Failure(message: "cannot run in \(directory): this C library cannot set a child's directory")
            }
            throw Failure(message: "cannot start \(executable): \(String(cString: strerror(status)))")
        }
        return SpawnedProcess(pid: pid, stdin: stdinPipe[1], stdout: stdoutPipe[0], stderr: stderrPipe[0])
    }

    /// Makes this program the keeper of everything its children start, for programs (the CLI)
    /// rather than libraries: on Linux it becomes a child subreaper, so a descendant whose
    /// parent dies (a `setsid` daemon of a tool or an MCP server, which escapes its group)
    /// becomes its child; at exit — a normal one, or after SIGINT or SIGTERM were handled —
    /// every child still running is killed with its group, and the orphans that hands over in
    /// turn. Idempotent. (A subreaper's adopted orphans stay zombies until it exits, which a
    /// long-lived program embedding the runtime may not want.)
    public static func adoptOrphans() {
        cprocess_adopt_orphans()
    }

    /// Kills the whole process group.
    public func killGroup() {
        kill(-pid, SIGKILL)
    }

    /// How a process ended, from a `waitpid` status: a sentence such as "exited with status 1"
    /// or "was killed by signal 9".
    public static func describe(waitStatus: Int32) -> String {
        waitStatus & 0x7f == 0 ? "exited with status \((waitStatus >> 8) & 0xff)" : "was killed by signal \(waitStatus & 0x7f)"
    }
}
