import Synchronization

/// The facts of logs that several checks of one suite run use (cases over the same recorded
/// log), read once: a decorator on the suite's `LogFactSource` that keeps a shared log's facts
/// from its first read until its last use, so a suite of many cases over one log reads it once
/// instead of once per case.
///
/// At most `maximumKept` logs' facts are held at a time (one long run's state can take hundreds
/// of MB); a log beyond that is read by its source as before. A check answered from kept facts
/// does not go through the source, so a cache (the catalog's) keeps that case's result only
/// from the next suite run on, when it answers from its own facts.
final class SharedLogFacts: LogFactSource {
    private struct Entry {
        /// Uses not yet made.
        var remaining: Int
        var facts: LogFacts?
    }

    static let maximumKept = 64

    let base: any LogFactSource
    // Guarded by the mutex: the shared logs, by path, with what is kept of them.
    private let entries: Mutex<(byLog: [String: Entry], kept: Int)>

    /// `uses`: how many times each log will be asked for; logs used once are not kept.
    init(base: any LogFactSource, uses: [String: Int]) {
        self.base = base
        entries = Mutex((uses.filter { $0.value > 1 }.mapValues { Entry(remaining: $0) }, 0))
    }

    func facts(for log: String) throws -> LogFacts {
        if let kept = take(log) { return kept }
        let facts = try base.facts(for: log)
        keep(facts, for: log)
        return facts
    }

    func result(for log: String, key: CheckKey?, check: (LogFacts) -> RunResult) throws -> RunResult {
        if let kept = take(log) { return check(kept) }
        // The source may answer from its own cache without reading; when it reads, the facts
        // are kept for the log's next use.
        return try base.result(for: log, key: key) { facts in
            keep(facts, for: log)
            return check(facts)
        }
    }

    func flush() { base.flush() }

    var waitsOnNetwork: Bool { base.waitsOnNetwork }

    /// Counts a use of `log`; its facts when they are kept (dropped at the last use).
    private func take(_ log: String) -> LogFacts? {
        entries.withLock { entries in
            guard var entry = entries.byLog[log] else { return nil }
            entry.remaining -= 1
            let facts = entry.facts
            if entry.remaining <= 0 {
                entries.byLog[log] = nil
                if facts != nil { entries.kept -= 1 }
            } else {
                entries.byLog[log] = entry
            }
            return facts
        }
    }

    /// Keeps `facts` for the later uses of `log`, when it has some and there is room.
    private func keep(_ facts: LogFacts, for log: String) {
        entries.withLock { entries in
            guard var entry = entries.byLog[log], entry.remaining > 0, entry.facts == nil, entries.kept < Self.maximumKept else {
                return
            }
            entry.facts = facts
            entries.byLog[log] = entry
            entries.kept += 1
        }
    }
}
