import Foundation
import TraceCore

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
        // A device or a pipe (`--json-out /dev/null`, `/dev/stdout`) is written into as it is:
        // renaming a file over it would replace the device with a file.
        if let special = FileHandle.special(at: path) {
            do {
                try special.write(contentsOf: Data(bytes))
                try special.close()
            } catch {
                throw EvalError(.writeFailed, "cannot write \(path): \(error.localizedDescription)")
            }
            return
        }
        if let input = inputInTheWay(at: path, replacesYAML: replacesYAML) {
            throw EvalError(
                .writeFailed, "\(path) is \(input): an output never replaces it, and it was left as it was",
                hint: "give the output another path")
        }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        } catch {
            throw EvalError(
                .writeFailed,
                "cannot write \(path): its directory \(directory) cannot be made (\(FileProblem.writing(path) ?? error.localizedDescription))",
                hint: "give a path in a directory you can write to")
        }
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw EvalError(
                .writeFailed, "cannot write \(path): \(FileProblem.writing(path) ?? error.localizedDescription)",
                hint: "give a path in a directory you can write to")
        }
    }

    /// What the file at `path` is, when it is an input a report must not replace.
    static func inputInTheWay(at path: String, replacesYAML: Bool) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 2)) ?? Data()
        if head == Data([0x1F, 0x8B]) { return "a gzip file (a log?)" }
        let name = path.lowercased()
        if !replacesYAML && (name.hasSuffix(".yaml") || name.hasSuffix(".yml")) { return "a YAML file (a case, an agent or a policy?)" }
        return nil
    }
}

extension FileHandle {
    /// A handle for writing to `path` when it is not a regular file (a character device such
    /// as /dev/null, a FIFO); nil for a regular file, a folder, or nothing there.
    static func special(at path: String) -> FileHandle? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFCHR || kind == S_IFIFO else { return nil }
        return FileHandle(forWritingAtPath: path)
    }
}
