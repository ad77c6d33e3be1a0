import Foundation
public import TraceLog

extension Catalog {
    /// The threads async code hands the catalog's work to. Every statement waits — on SQLite's
    /// file, or on a PostgreSQL server (`EventLoopFuture.wait()`) — and a task of the cooperative
    /// pool must never wait (docs/architecture.md, "Blocking work"): an async command opens the
    /// catalog (`opening`) and asks it everything (`work`) through these, and `IndexingSink`
    /// indexes on them. A few threads, reused from call to call.
    public static let threads = JobThreads(
        count: max(2, ProcessInfo.processInfo.activeProcessorCount), name: "agent-eval catalog", stackSize: 1 << 20)

    /// `init(path:readOnly:)` on the catalog's threads: opening connects to a server, or opens
    /// and migrates a file.
    public static func opening(path: String, readOnly: Bool = false) async throws(CatalogError) -> Catalog {
        do {
            return try await threads.run { try Catalog(path: path, readOnly: readOnly) }
        } catch {
            throw Self.rethrown(error)
        }
    }

    /// Runs `body` with this catalog on the catalog's threads and hands back what it returns:
    /// how async code asks the catalog anything.
    public func work<T: Sendable>(_ body: @escaping @Sendable (Catalog) throws(CatalogError) -> T) async throws(CatalogError) -> T {
        do {
            return try await Self.threads.run { [self] in try body(self) }
        } catch {
            throw Self.rethrown(error)
        }
    }

    private static func rethrown(_ error: any Error) -> CatalogError {
        error as? CatalogError ?? CatalogError(.queryFailed, "the catalog's work failed: \(error)")
    }
}
