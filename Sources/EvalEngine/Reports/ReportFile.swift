import Foundation
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#endif

/// Writes a report file (JSON, JUnit, Markdown, an HTML page, an exported trace) whole, making
/// its directory: it is written beside its path and renamed into place, so a reader (a CI step
/// collecting artefacts, a dashboard polling the file) never sees half of it.
public enum ReportFile {
    public static func write(_ text: String, to path: String, replacesYAML: Bool = false) throws(EvalError) {
        try write(bytes: Array(text.utf8), to: path, replacesYAML: replacesYAML)
    }

    /// Writes `bytes` to `path`. A report never replaces a log (a gzip file) or, unless
    /// `replacesYAML` (case files written again on purpose), a YAML file (a case, an agent, a
    /// policy): an output path that names an input is a slip that would destroy it.
    public static func write(bytes: [UInt8], to path: String, replacesYAML: Bool = false) throws(EvalError) {
        if let input = inputInTheWay(at: path, replacesYAML: replacesYAML) {
            throw EvalError(
                .writeFailed, "\(path) is \(input): an output never replaces it, and it was left as it was",
                hint: "give the output another path")
        }
        // A device, a pipe or a link (`--json-out /dev/null`, `/dev/stdout`) is written into as
        // it is: renaming a file over it would replace it with a file.
        if isWrittenInPlace(path) {
            let descriptor = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw EvalError(.writeFailed, "cannot write \(path): \(String(cString: strerror(errno)))")
            }
            defer { close(descriptor) }
            var written = 0
            while written < bytes.count {
                let count = bytes.withUnsafeBytes { buffer in
                    buffer.baseAddress.map { Glibc.write(descriptor, $0 + written, buffer.count - written) } ?? 0
                }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { throw EvalError(.writeFailed, "cannot write \(path): \(String(cString: strerror(errno)))") }
                written += count
            }
            return
        }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        } catch {
            throw EvalError(
                .writeFailed,
                "cannot write \(path): its directory \(directory) cannot be made (\(FileProblem.writing(path) ?? FileProblem.reason(of: error)))",
                hint: "give a path in a directory you can write to")
        }
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw EvalError(
                .writeFailed, "cannot write \(path): \(FileProblem.writing(path) ?? FileProblem.reason(of: error))",
                hint: "give a path in a directory you can write to")
        }
    }

    /// What the file at `path` is, when it is an input a report must not replace.
    static func inputInTheWay(at path: String, replacesYAML: Bool) -> String? {
        // Only a regular file is opened to look: a pipe would block the read.
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 2)) ?? Data()
        if head == Data([0x1F, 0x8B]) { return "a gzip file (a log?)" }
        let name = path.lowercased()
        if !replacesYAML && (name.hasSuffix(".yaml") || name.hasSuffix(".yml")) { return "a YAML file (a case, an agent or a policy?)" }
        return nil
    }
}

extension ReportFile {
    /// Whether `path` is written into as it is rather than replaced by a rename: a device or a
    /// pipe (`/dev/null`, a FIFO), or a symbolic link (`/dev/stdout`, a link to a file), which a
    /// rename would replace by a file.
    public static func isWrittenInPlace(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        let kind = info.st_mode & S_IFMT
        return kind == S_IFCHR || kind == S_IFIFO || kind == S_IFLNK || kind == S_IFBLK
    }
}
