public import Foundation

/// A fresh directory under the system's temporary directory, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let url: URL

    public init(_ label: String = "agent-eval-tests") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// Runs `body` with a new directory and removes it afterwards.
    public static func with<T>(_ body: (TemporaryDirectory) throws -> T) throws -> T {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        return try body(directory)
    }

    /// Runs async `body` with a new directory and removes it afterwards.
    public static func with<T>(_ body: (TemporaryDirectory) async throws -> T) async throws -> T {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        return try await body(directory)
    }
}
