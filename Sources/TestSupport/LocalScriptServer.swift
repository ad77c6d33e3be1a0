import Foundation

/// A test's server on 127.0.0.1 that is a script of the repository (`scripts/model_server.py`,
/// `scripts/mcp_http_server.py`, `scripts/mcp_legacy_server.py --http`): started with its
/// command, it prints "PORT <n>" once it listens, and ends when its standard input closes (so
/// a test process that dies takes it along).
public final class LocalScriptServer: Sendable {
    public let port: Int
    private let process: Process
    private let input: Pipe

    /// Starts `command` with `environment` added to this process's; throws with a clear message
    /// when it cannot start or does not say its port.
    public init(_ command: [String], environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = command
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        do {
            try process.run()
        } catch {
            throw ServerError(message: "cannot start \(command.joined(separator: " ")): \(error)")
        }
        // Its "PORT <n>" line, within a minute: a script that hangs before it listens fails the
        // test, never holds it (a read without a time limit would wait for ever).
        var line: [UInt8] = []
        let descriptor = output.fileHandleForReading.fileDescriptor
        let deadline = ContinuousClock.now + .seconds(60)
        reading: while line.last != 0x0A {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { break }
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(left.components.seconds * 1000 + 1)) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(descriptor, &byte, 1) == 1 else { break reading }
            line.append(byte)
        }
        let text = String(decoding: line.prefix { $0 != 0x0A }, as: UTF8.self)
        guard line.last == 0x0A, text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else {
            process.terminate()
            throw ServerError(
                message:
                    "\(command.joined(separator: " ")) did not start (it printed \"\(text)\"\(line.last == 0x0A ? "" : ", and no whole line within 60 s"))"
            )
        }
        self.port = port
        self.process = process
        self.input = input
    }

    /// Closes the server's input, which ends it; if it is still there after 5 s (something else
    /// holds its input open), terminates it, and kills it 5 s later. Polls rather than
    /// `waitUntilExit`, which spins a thread of the cooperative pool on Linux and can wait for
    /// ever; every wait here is bounded, so a stop never holds the test run open.
    public func stop() {
        try? input.fileHandleForWriting.close()
        if process.waitForEnd(within: .seconds(5)) { return }
        process.terminate()
        if process.waitForEnd(within: .seconds(5)) { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitForEnd(within: .seconds(5))
    }

    deinit {
        if process.isRunning { stop() }
    }

    public struct ServerError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }
}
