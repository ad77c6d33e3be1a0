import Foundation
public import TraceCore
import TraceLog

/// A JSON document of ours on disk (a results report, a baseline file), read whole: a file that
/// cannot be read, or is not JSON, is an `EvalError` of `code` naming the file, and for bad JSON
/// the line and column (a hand edit, a merge conflict's markers, a report cut short are found by
/// line).
enum JSONFile {
    /// The document at `path`; `what` names what it should be ("a readable baseline"), `hint`
    /// says how to make it again.
    static func read(_ path: String, as what: String, code: EvalError.Code, hint: String) throws(EvalError) -> JSONValue {
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw EvalError(
                code, "cannot read \(path): \(FileProblem.reading(path) ?? FileProblem.reason(of: error))",
                location: SourceLocation(path: path), hint: hint)
        }
        do {
            return try JSONParser.parse(bytes)
        } catch {
            let core = error as? TraceCoreError
            let place = core?.byteOffset.map { SourceLocation(path: path, byteOffset: $0, in: bytes) } ?? SourceLocation(path: path)
            throw EvalError(code, "\(path) is not \(what): \(core?.message ?? "\(error)")", location: place, hint: hint)
        }
    }
}
