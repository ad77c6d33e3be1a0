import Foundation
public import TraceCore
import TraceLog

/// An input file, read whole, with errors that name the file and the line and column.
public struct SourceFile: Sendable {
    /// A JSON document, or JSON Lines (one value per non-empty line).
    public enum Document: Sendable {
        case json(JSONValue)
        case lines([(line: Int, value: JSONValue)])
    }

    public let path: String
    public let bytes: [UInt8]
    /// The file's modification time in microseconds since the epoch: the time of events whose
    /// source gives none.
    public let modifiedUs: Int

    public init(path: String, bytes: [UInt8], modifiedUs: Int = 0) {
        self.path = path
        self.bytes = bytes
        self.modifiedUs = modifiedUs
    }

    public static func read(_ path: String) throws(ImportError) -> SourceFile {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ImportError(.unreadable, "\(path) does not exist", location: SourceLocation(path: path))
        }
        guard !isDirectory.boolValue else {
            throw ImportError(.unreadable, "\(path) is a directory", location: SourceLocation(path: path), hint: "give the files in it")
        }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            return SourceFile(path: path, bytes: Array(data), modifiedUs: modifiedUs(of: path))
        } catch {
            throw ImportError(
                .unreadable, "cannot read \(path): \(FileProblem.reading(path) ?? (error as NSError).localizedDescription)",
                location: SourceLocation(path: path))
        }
    }

    /// The modification time of `path` in microseconds since the epoch (0 when unknown).
    static func modifiedUs(of path: String) -> Int {
        let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? nil
        return Int((modified?.timeIntervalSince1970 ?? 0) * 1_000_000)
    }

    /// The file as one JSON document or, when it is not one but its lines are, as JSON Lines.
    public func document() throws(ImportError) -> Document {
        let whole: TraceCoreError
        do {
            return .json(try JSONParser.parse(bytes))
        } catch let error as TraceCoreError {
            whole = error
        } catch {
            throw ImportError(.invalidJSON, "\(path) is not valid JSON", location: SourceLocation(path: path))
        }
        // JSON Lines: the first line is a whole value on its own.
        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        guard lines.count > 1, let first = lines.first(where: { !Self.isBlank($0) }), (try? JSONParser.parse(first)) != nil else {
            throw invalidJSON(whole, at: whole.byteOffset ?? 0)
        }
        var values: [(line: Int, value: JSONValue)] = []
        var offset = 0
        for (index, line) in lines.enumerated() {
            defer { offset += line.count + 1 }
            if Self.isBlank(line) { continue }
            do {
                values.append((index + 1, try JSONParser.parse(line)))
            } catch let error as TraceCoreError {
                let cut = index == lines.count - 1 ? " (the file may be cut short)" : ""
                throw ImportError(
                    .invalidJSON, "\(path): line \(index + 1) of the JSON Lines file is not valid JSON\(cut): \(error.message)",
                    location: SourceLocation(path: path, line: index + 1, column: (error.byteOffset ?? 0) + 1))
            } catch {
                throw ImportError(
                    .invalidJSON, "\(path): line \(index + 1) is not valid JSON", location: SourceLocation(path: path, line: index + 1))
            }
        }
        return .lines(values)
    }

    /// The file as one JSON document.
    public func json() throws(ImportError) -> JSONValue {
        do {
            return try JSONParser.parse(bytes)
        } catch let error as TraceCoreError {
            throw invalidJSON(error, at: error.byteOffset ?? 0)
        } catch {
            throw ImportError(.invalidJSON, "\(path) is not valid JSON", location: SourceLocation(path: path))
        }
    }

    private func invalidJSON(_ error: TraceCoreError, at offset: Int) -> ImportError {
        let cut = offset >= bytes.count - 1 ? " (the file ends too early: was it cut short?)" : ""
        return ImportError(
            .invalidJSON, "\(path) is not valid JSON\(cut): \(error.message)",
            location: SourceLocation(path: path, byteOffset: offset, in: bytes))
    }

    static func isBlank(_ line: some Collection<UInt8>) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    }
}
