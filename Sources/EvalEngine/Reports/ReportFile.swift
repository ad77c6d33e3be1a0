import Foundation
import TraceCore

/// Writes a report file (JSON, JUnit, Markdown, an HTML page, an exported trace) whole, making
/// its directory: it is written beside its path and renamed into place, so a reader (a CI step
/// collecting artefacts, a dashboard polling the file) never sees half of it.
public enum ReportFile {
    public static func write(_ text: String, to path: String) throws(EvalError) {
        try write(bytes: Array(text.utf8), to: path)
    }

    public static func write(bytes: [UInt8], to path: String) throws(EvalError) {
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
}
