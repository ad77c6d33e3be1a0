/// When the writer pushes compressed bytes to the file (a zlib sync flush plus `write(2)`),
/// and when it also asks the disk to keep them (`fsync(2)`).
///
/// Whatever the policy, durability points — after `tool_intended`, `approval_recorded`,
/// `step_ended` and `run_stopped` — are always flushed: an event something was done on is in
/// the file before the runtime acts. The policy only adds flushes.
public struct Durability: Sendable, Hashable, CustomStringConvertible {
    /// When to sync-flush.
    public enum Flush: Sendable, Hashable {
        /// After every event: the most robust, about 19 bytes per event of extra size.
        case everyEvent
        /// At durability points only (the default).
        case durabilityPoints
        /// At durability points and after every `n` events.
        case batch(Int)
    }

    /// When to fsync.
    public enum Sync: String, Sendable, Hashable, CaseIterable {
        /// Never: a process crash loses nothing flushed, a power loss may.
        case never
        /// At durability points.
        case durabilityPoints = "durability-points"
        /// After every flush.
        case everyFlush = "every-flush"
    }

    public var flush: Flush
    public var sync: Sync

    public init(flush: Flush = .durabilityPoints, sync: Sync = .never) {
        self.flush = flush
        self.sync = sync
    }

    /// Flush at durability points, never fsync.
    public static let standard = Durability()

    public var description: String {
        let flushText: String
        switch flush {
        case .everyEvent: flushText = "flush every event"
        case .durabilityPoints: flushText = "flush at durability points"
        case .batch(let count): flushText = "flush every \(count) events and at durability points"
        }
        return "\(flushText), fsync \(sync.rawValue)"
    }
}
