public import Foundation

/// Runs a real program and collects what it did.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: [UInt8]
    public var stderr: String

    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
}

public enum Subprocess {
    /// Runs `executable` with `arguments`, feeding `input` on standard input.
    public static func run(
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
        try process.run()
        if !input.isEmpty { inPipe.fileHandleForWriting.write(Data(input)) }
        try? inPipe.fileHandleForWriting.close()
        let outData = outPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try? errHandle.close()
        let errData = (try? Data(contentsOf: errURL)) ?? Data()
        return ProcessResult(status: process.terminationStatus, stdout: Array(outData), stderr: String(decoding: errData, as: UTF8.self))
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
