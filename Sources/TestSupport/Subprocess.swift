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
    /// Runs `executable` with `arguments`, feeding `input` on standard input.
    ///
    /// The waiting is done on a thread of its own (`OwnThread`): a test waiting for a program
    /// never holds a thread of the cooperative pool, which the tests running beside it need (a
    /// model stream's chunks queued behind it for a minute made a test time out). And the
    /// program runs in one of the `TestLoad` slots: the test runner starts every test together,
    /// and hundreds of CLI runs sharing two cores would stretch every test that measures a
    /// deadline. `queued: false` skips the queue, for a quick look taken while timing a process
    /// the test started itself (a poll that waited its turn would come too late).
    public static func run(
        _ executable: String, _ arguments: [String], input: [UInt8] = [], in directory: URL? = nil, environment: [String: String] = [:],
        queued: Bool = true
    ) async throws -> ProcessResult {
        try await waiting(queued: queued) {
            try runBlocking(executable, arguments, input: input, in: directory, environment: environment)
        }
    }

    /// `body`, which starts a program and waits for it, run on a thread of its own once a slot
    /// is free (at once when `queued` is false).
    static func waiting<T: Sendable>(queued: Bool = true, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        guard queued else { return try await OwnThread.run(stackSize: 512 * 1024, body) }
        return try await TestLoad.withSlot { try await OwnThread.run(stackSize: 512 * 1024, body) }
    }

    /// The same, waiting on the calling thread: for a program with nothing else to run (a
    /// benchmark's main code), never for a test or a task.
    public static func runBlocking(
        _ executable: String, _ arguments: [String], input: [UInt8] = [], in directory: URL? = nil, environment: [String: String] = [:]
    ) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        if let directory { process.currentDirectoryURL = directory }
        let outPipe = Pipe()
        let inPipe = Pipe()
        // Standard error goes to a file, so that only one pipe needs draining while it runs.
        let errURL = FileManager.default.temporaryDirectory.appendingPathComponent("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errURL) }
        let errHandle = try FileHandle(forWritingTo: errURL)
        process.standardOutput = outPipe
        process.standardError = errHandle
        process.standardInput = inPipe
        let started = ContinuousClock.now
        try process.run()
        if !input.isEmpty { inPipe.fileHandleForWriting.write(Data(input)) }
        try? inPipe.fileHandleForWriting.close()
        let outData = outPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try? errHandle.close()
        let errData = (try? Data(contentsOf: errURL)) ?? Data()
        return ProcessResult(
            status: process.terminationStatus, stdout: Array(outData), stderr: String(decoding: errData, as: UTF8.self),
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
