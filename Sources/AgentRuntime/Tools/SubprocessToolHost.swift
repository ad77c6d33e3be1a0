import Foundation
import TraceCore

/// A tool that is a command: the arguments go to its stdin as one JSON object, it prints its
/// result as JSON on stdout and exits 0.
///
/// Exit status 75 (`EX_TEMPFAIL`) marks a failure worth retrying; any other non-zero status
/// is a plain failure. The command runs in its own process group, which is killed as a whole
/// on timeout, when stdout passes `outputLimit`, or when the command exits leaving a process
/// that holds its output open. The tail of stderr is kept for the record.
public struct SubprocessToolHost: ToolHost {
    public var command: [String]
    /// The working directory, or nil for the current one.
    public var directory: String?
    /// The tool's whole environment; nil passes this process's on (agent files always give one:
    /// see `minimalEnvironment`).
    public var environment: [String: String]?
    public var outputLimit: Int
    /// How results and errors name the program: the path as the agent file wrote it, while
    /// `command` holds the absolute path the process is started from. Nil: the command's first word.
    public var programName: String?
    /// The clock the command's timeout is kept on: this host's own `LiveClock` (one watchdog for
    /// all its calls, no timer per call).
    public var clock: any Clock<Duration> = LiveClock()

    /// Variables a tool gets from the caller's environment unless its agent file says more.
    public static let baseEnvironmentNames = ["PATH", "HOME", "LANG"]

    /// The status a tool exits with to ask for a retry.
    public static let retryableExitStatus: Int32 = 75

    /// The process group is killed at the timeout here, and the host reports it with the
    /// tool's stderr: the runtime waits this long for that report before cancelling.
    public var timeoutGraceMs: Int { 2_000 }

    public init(
        command: [String], directory: String? = nil, environment: [String: String]? = nil, outputLimit: Int = 1 << 20,
        programName: String? = nil
    ) {
        self.command = command
        self.programName = programName
        self.directory = directory
        self.environment = environment
        self.outputLimit = outputLimit
    }

    public func invoke(_ request: ToolRequest) async throws -> ToolOutcome {
        var process = ChildProcess(
            command: command, directory: directory,
            environment: environment.map { $0.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } },
            input: JSONWriter.encode(request.arguments) + [0x0A], timeoutMs: request.timeoutMs, outputLimit: outputLimit)
        process.clock = clock
        let result: ChildProcess.Result
        do {
            result = try await process.run()
        } catch let failure as ChildProcess.SpawnFailure {
            var message = failure.message
            if let programName, let program = command.first { message = message.replacingOccurrences(of: program, with: programName) }
            return .failure(message)
        }
        return Self.outcome(
            of: result, name: programName ?? command.first ?? "the command", timeoutMs: request.timeoutMs, outputLimit: outputLimit)
    }

    static func outcome(of result: ChildProcess.Result, name: String, timeoutMs: Int, outputLimit: Int) -> ToolOutcome {
        let stderr = result.stderr.isEmpty ? nil : String(decoding: result.stderr, as: UTF8.self)
        let lastLine = stderr?.split(whereSeparator: \.isNewline).last.map { ": \($0)" } ?? ""
        var outcome = ToolOutcome(status: .error, stderr: stderr)
        if result.isCancelled {
            outcome.error = "\(name) was stopped because the run was interrupted; its process group was killed"
            return outcome
        }
        if result.isTimedOut {
            outcome.error = "\(name) did not finish within \(timeoutMs) ms; its process group was killed"
            outcome.isRetryable = true
            outcome.rawOutput = result.stdout.isEmpty ? nil : result.stdout
            return outcome
        }
        if result.isOutputTruncated {
            outcome.error = "\(name) printed more than \(outputLimit) bytes; its process group was killed"
            outcome.rawOutput = result.stdout
            return outcome
        }
        if let signal = result.signal {
            outcome.error = "\(name) was killed by signal \(signal)\(lastLine)"
            outcome.rawOutput = result.stdout.isEmpty ? nil : result.stdout
            return outcome
        }
        let status = result.exitStatus ?? -1
        let parsed = try? JSONParser.parse(result.stdout)
        guard status == 0 else {
            outcome.error = "\(name) exited with status \(status)\(lastLine)"
            outcome.isRetryable = status == retryableExitStatus
            if let parsed { outcome.output = parsed } else if !result.stdout.isEmpty { outcome.rawOutput = result.stdout }
            return outcome
        }
        guard let parsed else {
            if result.stdout.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
                outcome.error = "\(name) printed nothing on stdout; a tool must print its result as JSON"
            } else {
                let preview = String(decoding: result.stdout.prefix(80), as: UTF8.self) + (result.stdout.count > 80 ? "…" : "")
                outcome.error = "\(name) printed output that is not JSON: \(JSONWriter.encodeString(.string(preview)))"
                outcome.rawOutput = result.stdout
            }
            return outcome
        }
        outcome.status = .ok
        outcome.output = parsed
        return outcome
    }
}
