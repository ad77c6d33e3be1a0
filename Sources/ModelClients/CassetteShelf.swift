import Foundation
import Synchronization

/// The cassettes a suite run opened, by directory: one `Cassette` (and so one index writer) per
/// directory however many cases (agent files and commands) name it.
public final class CassetteShelf: Sendable {
    // Guarded by the mutex: the cassettes opened, by standardized path.
    private let opened = Mutex<[String: Cassette]>([:])

    public init() {}

    public func cassette(_ directory: String, mode: Cassette.Mode) throws -> Cassette {
        let path = URL(fileURLWithPath: directory).standardizedFileURL.path
        return try opened.withLock { opened in
            if let cassette = opened[path] { return cassette }
            let cassette = try Cassette(directory: directory, mode: mode)
            opened[path] = cassette
            return cassette
        }
    }

    /// Each cassette opened that holds recordings nothing asked for, in path order.
    public func unused() -> [(directory: String, files: [String])] {
        opened.withLock { $0 }.sorted { $0.key < $1.key }.compactMap { _, cassette in
            let files = cassette.unusedFiles
            return files.isEmpty ? nil : (cassette.directory, files)
        }
    }
}
