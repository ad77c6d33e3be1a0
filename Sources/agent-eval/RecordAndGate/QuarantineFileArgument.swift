import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

/// Where the quarantine file is.
struct QuarantineFileArgument: ParsableArguments {
    @Option(
        help: ArgumentHelp("The quarantine file (default: .agent-eval/quarantine.yaml in the project root).", valueName: "file"))
    var file: String?

    var path: String { file ?? QuarantineFile.defaultPath() }

    /// The file (empty when there is none), or its problems printed and exit 2. A file given
    /// with --file that is not there is an error where the command only reads it (`mustExist`):
    /// a misspelt path would list no entry and pass the expiry gate.
    func load(mustExist: Bool = false) throws -> QuarantineFile {
        if mustExist, let file, !FileManager.default.fileExists(atPath: file) {
            throw diagnose(
                CommandError(
                    "no_quarantine_file", "the quarantine file \(file) does not exist", at: SourceLocation(path: file),
                    hint: "check the path, or leave --file out for the project's .agent-eval/quarantine.yaml"))
        }
        do {
            return try QuarantineFile.load(path: path)
        } catch {
            for problem in error.errors { diagnose(problem) }
            throw Exit.unusable
        }
    }
}
