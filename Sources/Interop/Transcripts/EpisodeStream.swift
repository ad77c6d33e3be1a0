import Foundation
import TraceCore

/// A JSON Lines file of episodes (each line an episode, or a result object holding episodes),
/// imported a line at a time: memory follows the longest line, not the file. Other transcript
/// files (one JSON document; JSON Lines of single messages, which are one episode together)
/// are read whole, as is every other format.
struct EpisodeStream {
    let path: String
    let options: ImportOptions

    /// The stream for `path`, or nil when it is not JSON Lines whose first line holds episodes
    /// (then the whole-file path decides what it is and reports what is wrong with it).
    static func open(_ path: String, options: ImportOptions) throws(ImportError) -> EpisodeStream? {
        guard !path.hasSuffix(".eval"), options.format == .auto || options.format == .messages else { return nil }
        guard let reader = LineReader(path: path) else { return nil }
        var firstValue: JSONValue?
        var lines = 0
        while lines < 2, let line = try reader.next() {
            guard !SourceFile.isBlank(line) else { continue }
            lines += 1
            // A first line that is not a value on its own: one JSON document (or not JSON).
            if lines == 1 { firstValue = try? JSONParser.parse(line) }
        }
        guard lines == 2, let first = firstValue else { return nil }
        if first["resourceSpans"] != nil || first["batches"] != nil { return nil }
        if options.episodesPath == nil, EpisodeFinder.isMessage(first) { return nil }
        let episodes = try? EpisodeFinder.episodesIn(
            first, path: options.episodesPath, file: path, place: "line 1", messagesKey: options.messagesKey)
        guard episodes?.contains(where: { (try? $0.get()) != nil }) == true else { return nil }
        return EpisodeStream(path: path, options: options)
    }

    /// Imports each episode in file order; a line that is not JSON, or holds no episode, is one
    /// failure and the next lines still import.
    func forEachRun(_ body: (Result<ImportedRun, ImportError>) -> Void) throws(ImportError) {
        guard let reader = LineReader(path: path) else {
            throw ImportError(.unreadable, "cannot open \(path)", location: SourceLocation(path: path))
        }
        // The importer takes the file's path and time, not its bytes.
        let file = SourceFile(path: path, bytes: [], modifiedUs: SourceFile.modifiedUs(of: path))
        var number = 0
        while let line = try reader.next() {
            number += 1
            guard !SourceFile.isBlank(line) else { continue }
            let value: JSONValue
            do {
                value = try JSONParser.parse(line)
            } catch {
                let cut = reader.isAtEnd ? " (the file may be cut short)" : ""
                let message = (error as? TraceCoreError)?.message ?? "\(error)"
                body(
                    .failure(
                        ImportError(
                            .invalidJSON, "\(path): line \(number) of the JSON Lines file is not valid JSON\(cut): \(message)",
                            location: SourceLocation(path: path, line: number, column: ((error as? TraceCoreError)?.byteOffset ?? 0) + 1))))
                continue
            }
            // A failure names its line (the finder knows only the place inside the line's value).
            let atLine = { (error: ImportError) -> ImportError in
                var error = error
                if (error.location?.line ?? 0) == 0 { error.location = SourceLocation(path: path, line: number) }
                return error
            }
            do {
                let episodes = try EpisodeFinder.episodesIn(
                    value, path: options.episodesPath, file: path, place: "line \(number)", messagesKey: options.messagesKey)
                for episode in episodes {
                    body(
                        Result { () throws(ImportError) in try TranscriptImporter(file: file, episode: try episode.get()).run() }.mapError(
                            atLine))
                }
            } catch {
                body(.failure(atLine(error)))
            }
        }
    }
}

/// The lines of a file through `getline`, without their newline.
final class LineReader {
    private let path: String
    private let file: UnsafeMutablePointer<FILE>
    private var buffer: UnsafeMutablePointer<CChar>?
    private var capacity = 0

    init?(path: String) {
        guard let file = fopen(path, "rb") else { return nil }
        self.path = path
        self.file = file
    }

    deinit {
        free(buffer)
        fclose(file)
    }

    /// Whether the last line read was the file's last.
    var isAtEnd: Bool {
        let next = getc(file)
        if next == EOF { return true }
        ungetc(next, file)
        return false
    }

    /// The next line, or nil at the end of the file.
    func next() throws(ImportError) -> [UInt8]? {
        let count = getline(&buffer, &capacity, file)
        guard count >= 0, let buffer else {
            if ferror(file) != 0 {
                throw ImportError(
                    .unreadable, "cannot read \(path): \(String(cString: strerror(errno)))", location: SourceLocation(path: path))
            }
            return nil
        }
        let length = count > 0 && buffer[count - 1] == 0x0A ? count - 1 : count
        return buffer.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }
}
