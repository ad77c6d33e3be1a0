import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a program measured by `PeakMemory.run` did, and the most memory it held.
public struct MeasuredProcess: Sendable {
    public var result: ProcessResult
    /// The child's peak resident set (its own `ru_maxrss`, from `wait4`), in bytes.
    public var peakResidentBytes: Int
}

public enum PeakMemory {
    /// Runs `executable` with `arguments` to its end (standard input empty, standard output and
    /// error collected through files) and returns what it printed, its exit status and its own
    /// peak resident memory. The child starts in `directory` (this process's working directory
    /// when nil).
    ///
    /// The child is started by a small Python process that forks it and reads its usage with
    /// `wait4`. Measured directly, a child started from this process would report this process's
    /// own peak: `posix_spawn` shares this process's memory until the exec, and Linux carries
    /// the peak of the memory an exec leaves behind into the new program's `ru_maxrss`. A child
    /// forked by a small process inherits that process's peak instead (about 10 MB).
    public static func run(
        _ executable: String, _ arguments: [String], in directory: String? = nil, environment: [String: String] = [:]
    ) async throws -> MeasuredProcess {
        try await Subprocess.waiting { try runBlocking(executable, arguments, in: directory, environment: environment) }
    }

    private static func runBlocking(
        _ executable: String, _ arguments: [String], in workingDirectory: String?, environment: [String: String]
    ) throws -> MeasuredProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("peak-memory-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outPath = directory.appendingPathComponent("stdout").path
        let errPath = directory.appendingPathComponent("stderr").path
        let peakPath = directory.appendingPathComponent("peak").path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        let python = "/usr/bin/python3"
        let argv =
            ([python, "-c", Self.forkAndMeasure, peakPath, workingDirectory ?? "", executable] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let started = ContinuousClock.now
        let spawned = posix_spawn(&pid, python, &actions, nil, argv, envp)
        guard spawned == 0 else { throw PeakMemoryError.spawnFailed(python, spawned) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw PeakMemoryError.waitFailed(errno) }
        }
        // The Python process writes the child's ru_maxrss in KiB on Linux (bytes on macOS).
        let reported = Int((try? String(contentsOfFile: peakPath, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
        guard let reported else { throw PeakMemoryError.notMeasured(executable) }
        #if os(Linux)
            let peak = reported * 1024
        #else
            let peak = reported
        #endif
        let exited = status & 0x7F == 0
        let result = ProcessResult(
            status: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F),
            stdout: Array((try? Data(contentsOf: URL(fileURLWithPath: outPath))) ?? Data()),
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "", elapsed: ContinuousClock.now - started)
        return MeasuredProcess(result: result, peakResidentBytes: peak)
    }
}

public enum PeakMemoryError: Error {
    case spawnFailed(String, Int32)
    case waitFailed(Int32)
    /// The measuring Python process wrote no figure (the program could not be started).
    case notMeasured(String)
}

extension PeakMemory {
    /// argv: the file for the figure, the working directory ("": this one), the program, its
    /// arguments. Exits as the program did
    /// (128 + the signal when one ended it), so the caller sees the program's status.
    static let forkAndMeasure = """
        import os, sys
        pid = os.fork()
        if pid == 0:
            try:
                if sys.argv[2]:
                    os.chdir(sys.argv[2])
                os.execv(sys.argv[3], sys.argv[3:])
            finally:
                os._exit(127)
        _, status, usage = os.wait4(pid, 0)
        with open(sys.argv[1], "w") as out:
            out.write(str(usage.ru_maxrss))
        sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
        """
}
