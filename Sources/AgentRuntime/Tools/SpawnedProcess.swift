import CProcess

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A command started in a process group of its own, with pipes to its stdin, stdout and
/// stderr. The one place processes are started: one-shot tools (`ChildProcess`) and
/// long-lived tool servers (the `MCPTools` module) both start theirs here, so both get the
/// same isolation — a group that can be killed as a whole, default signal handling, no
/// inherited descriptors.
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

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
        // Only stdin, stdout and stderr: a long-lived server that kept a copy of another pipe's
        // write end (a descriptor opened without close-on-exec elsewhere in this process) would
        // keep that pipe's reader from ever seeing its end.
        _ = cprocess_addclosefrom(&actions, 3)
        if let directory, cprocess_addchdir(&actions, directory) != 0 {
            for fd in stdinPipe + stdoutPipe + stderrPipe { close(fd) }
            throw Failure(message: "cannot run in \(directory): this C library cannot set a child's directory")
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A group of its own, so a timeout kills the command and everything it started.
        posix_spawnattr_setpgroup(&attributes, 0)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var pid: pid_t = 0
        let arguments = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        let environmentEntries = environment.map { $0.map { strdup($0) } + [nil] }
        defer { for entry in environmentEntries ?? [] { free(entry) } }
        let status =
            if let environmentEntries {
                posix_spawnp(&pid, executable, &actions, &attributes, arguments, environmentEntries)
            } else {
                posix_spawnp(&pid, executable, &actions, &attributes, arguments, cprocess_environment())
            }
        close(stdinPipe[0])
        close(stdoutPipe[1])
        close(stderrPipe[1])
        guard status == 0 else {
            close(stdinPipe[1])
            close(stdoutPipe[0])
            close(stderrPipe[0])
            throw Failure(message: "cannot start \(executable): \(String(cString: strerror(status)))")
        }
        return SpawnedProcess(pid: pid, stdin: stdinPipe[1], stdout: stdoutPipe[0], stderr: stderrPipe[0])
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
