import AgentRuntime
import Catalog
import Foundation
import TraceLog

/// Keeps the catalog up with the logs under the watched directories: indexes them once at the
/// start, then every log the watcher reports changed, as soon as it is reported (a burst of
/// writes is taken together, at most every `pause`). Each pass that changed the catalog moves
/// `indexed` on, which wakes the open runs lists.
final class LiveIndex: Sendable {
    struct Progress: Sendable {
        /// Passes that changed the catalog.
        var generation = 0
        /// The last pass's failure, if it failed.
        var failure: String?
    }

    let indexed = WatchedState(Progress())

    /// Indexes until cancelled.
    func run(
        catalog: Catalog, directories: [String], watcher: LogWatcher, memberLimit: Int, pause: Duration, clock: any Clock<Duration>
    ) async {
        var seen = 0
        var rescans = -1
        while !Task.isCancelled {
            let current = (seen, rescans)
            if rescans >= 0 {
                await watcher.changes.wait(within: .seconds(3600), on: clock) { $0.generation > current.0 || $0.rescans != current.1 }
            }
            let lost = watcher.changes.withLock { $0.rescans }
            if lost != rescans {
                // At the start, and when the kernel lost changes: every log under the directories.
                // Changes from here on are picked up after, whatever this pass saw of them.
                rescans = lost
                seen = watcher.changes.withLock { $0.generation }
                guard !directories.isEmpty else { continue }
                let done = await pass {
                    try await catalog.work { catalog throws(CatalogError) in
                        // A link out of the directories is not followed: the server reads only what lies under them.
                        let logs = try Catalog.findLogs(directories).filter { LogAccess.liesUnder(directories, $0) }
                        if !logs.isEmpty { _ = try catalog.index(paths: logs, memberLimit: memberLimit) }
                        // The logs it knew there that are gone (deleted while no server watched,
                        // in a folder moved away, lost with the kernel's queue): marked vanished.
                        let present = Set(logs)
                        for gone in try catalog.knownLogs(under: directories) where !present.contains(gone) {
                            try Self.indexGone(gone, directories: directories, catalog: catalog, memberLimit: memberLimit)
                        }
                    }
                }
                if !done { await retryLater(clock: clock, pause: pause, rescans: &rescans) }
                continue
            }
            let (generation, changed) = watcher.changed(after: seen)
            seen = generation
            guard !changed.isEmpty else { continue }
            let done = await pass {
                try await catalog.work { catalog throws(CatalogError) in
                    for log in changed {
                        if LogAccess.liesUnder(directories, log) {
                            _ = try catalog.index(log: log, memberLimit: memberLimit)
                        } else {
                            try Self.indexGone(log, directories: directories, catalog: catalog, memberLimit: memberLimit)
                        }
                    }
                }
            }
            if !done { await retryLater(clock: clock, pause: pause, rescans: &rescans) }
            try? await clock.sleep(for: pause)
        }
    }

    /// A log the catalog knew under the directories that is not there as a log they hold: gone
    /// (marked vanished when the indexer finds nothing at the path), or replaced by a link out of
    /// them — marked vanished without being read through the link, whose target the server does
    /// not show, unless that target is indexed itself (the server reads such a link: `LogAccess`).
    private static func indexGone(_ path: String, directories: [String], catalog: Catalog, memberLimit: Int) throws(CatalogError) {
        if FileManager.default.fileExists(atPath: path) && !LogAccess.liesUnder(directories, path)
            && !LogAccess.isIndexed(LogAccess.resolved(path), in: catalog)
        {
            try catalog.markVanished(log: path, problem: "\(path) is now a link out of the folders this server shows: it is not read")
        } else {
            _ = try catalog.index(log: path, memberLimit: memberLimit)
        }
    }

    /// After a pass that failed (the catalog locked, full): what it was to take in is not lost,
    /// and the next pass, a while later, looks at every log again.
    private func retryLater(clock: any Clock<Duration>, pause: Duration, rescans: inout Int) async {
        rescans = -1
        try? await clock.sleep(for: max(pause, Self.retryPause))
    }

    /// How long after a failed pass the next one starts.
    static let retryPause = Duration.seconds(2)

    /// Runs one pass; whether it did its work.
    private func pass(_ body: () async throws -> Void) async -> Bool {
        do {
            try await body()
            indexed.withLock { progress in
                progress.generation += 1
                progress.failure = nil
            }
            return true
        } catch {
            indexed.withLock { $0.failure = "\(error)" }
            return false
        }
    }
}
