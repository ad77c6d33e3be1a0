public import Foundation

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
    /// peak resident memory. `wait4` reports that child's usage alone — unlike
    /// `RUSAGE_CHILDREN`, which is the largest of every child this test process ever waited for.
    /// Absolute paths only: the child starts in this process's working directory.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> MeasuredProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("peak-memory-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outPath = directory.appendingPathComponent("stdout").path
        let errPath = directory.appendingPathComponent("stderr").path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else { throw PeakMemoryError.spawnFailed(executable, spawned) }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw PeakMemoryError.waitFailed(errno) }
        }
        // Linux reports ru_maxrss in KiB, macOS in bytes.
        #if os(Linux)
            let peak = Int(usage.ru_maxrss) * 1024
        #else
            let peak = Int(usage.ru_maxrss)
        #endif
        let exited = status & 0x7F == 0
        let result = ProcessResult(
            status: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F),
            stdout: Array((try? Data(contentsOf: URL(fileURLWithPath: outPath))) ?? Data()),
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
        return MeasuredProcess(result: result, peakResidentBytes: peak)
    }
}

public enum PeakMemoryError: Error {
    case spawnFailed(String, Int32)
    case waitFailed(Int32)
}
