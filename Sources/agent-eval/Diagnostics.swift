import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The CLI's exit codes: a contract for CI.
enum Exit {
    static let success = ExitCode(0)
    /// Damaged, failed or regressed.
    static let failure = ExitCode(1)
    /// Could not run: unreadable input.
    static let unusable = ExitCode(2)
}

/// Writes to standard error.
func printError(_ text: String) {
    FileHandleStream.standardError.write(text + "\n")
}

/// `error: …`, `--> where`, `hint: …`, on standard error.
func report(_ error: LogError) {
    printError("error: \(error.message)")
    var location = "  --> \(error.path)"
    if let offset = error.memberOffset {
        location += " (gzip member at byte \(offset)" + (error.sequence.map { ", seq \($0))" } ?? ")")
    } else if let sequence = error.sequence {
        location += " (seq \(sequence))"
    }
    printError(location)
    if let hint = error.hint { printError("hint: \(hint)") }
}

/// Reports any error a command let through, in the CLI's format, and picks the exit code.
@discardableResult
func reportFailure(_ error: any Error) -> ExitCode {
    if let error = error as? LogError {
        report(error)
        switch error.code {
        case .unreadable, .notGzip, .eventTooLarge: return Exit.unusable
        default: return Exit.failure
        }
    }
    if let error = error as? ConfigError {
        printError("error: \(error.message)")
        printError("  --> \(error.location)")
        if let hint = error.hint { printError("hint: \(hint)") }
        return Exit.unusable
    }
    if let error = error as? RuntimeError {
        if let log = error.log {
            // The run could not be recorded: whatever the log problem, the run could not be done (2).
            report(log)
            return Exit.unusable
        }
        printError("error: \(error.message)")
        printError("  --> \(error.path)")
        if let hint = error.hint { printError("hint: \(hint)") }
        return Exit.unusable
    }
    if let error = error as? ExitCode { return error }
    // Anything else comes from the system (a directory that cannot be made, a file that cannot
    // be written): its own sentence, not its type's dump.
    printError("error: \((error as NSError).localizedDescription)")
    return Exit.unusable
}

/// Unbuffered writes to a file descriptor.
struct FileHandleStream: TextOutputStream {
    let descriptor: Int32

    static let standardError = FileHandleStream(descriptor: 2)

    func write(_ string: String) {
        var text = string
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let wrote = Glibc_write(descriptor, base + offset, buffer.count - offset)
                if wrote <= 0 { return }
                offset += wrote
            }
        }
    }
}

private func Glibc_write(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, pointer, count)
}

/// Buffered standard output for large listings (a `print` per line is slow when piped).
struct OutputBuffer {
    private var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(1 << 16) }

    mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
        bytes.append(0x0A)
        if bytes.count >= 1 << 16 { flush() }
    }

    mutating func append(line: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: line)
        bytes.append(0x0A)
        if bytes.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let wrote = Glibc_write(1, base + offset, buffer.count - offset)
                if wrote <= 0 { return }
                offset += wrote
            }
        }
        bytes.removeAll(keepingCapacity: true)
    }
}

/// Prints a JSON value on standard output in canonical form.
func printJSON(_ value: JSONValue) {
    print(JSONWriter.encodeString(value))
}
