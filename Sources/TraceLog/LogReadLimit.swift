import Synchronization

/// The one memory bound of every reader of a log: the most bytes one gzip member may inflate to.
///
/// A reader holds one member's content at a time, and an event never spans members, so this
/// bounds each event too: it is the per-member and the per-event limit. A log that needs more —
/// a decompression bomb, an endless line, or a run from another writer with one enormous event —
/// stops every reader at that member with `LogError.Code.eventTooLarge`, naming the log, the
/// member's offset and the first event in it, instead of taking the machine's memory.
///
/// The limit is the process's: `LogReader.Options()`, `LogVerifier.verify` and the catalog's
/// indexer take it when not told otherwise. The command line sets it once, before a command
/// runs, from `--max-member-mib` or `maxMemberMib:` in `.agent-eval/settings.yaml`
/// (docs/log-format.md, "Reading limits"). Writers do not follow a raised limit: what
/// agent-eval writes is always readable at the default (`LogWriter.Options.readerMemberLimit`).
public enum LogReadLimit {
    /// 64 MiB: about 256 times the member bound the writer keeps, far above any event the
    /// runtime records (model replies and tool outputs are capped below it).
    public static let defaultMemberBytes = 64 << 20

    /// The values `--max-member-mib` and the setting take, in MiB.
    public static let allowedMiB = 1...1024

    private static let current = Atomic<Int>(defaultMemberBytes)

    /// The limit readers take by default now, in bytes.
    public static var memberBytes: Int { current.load(ordering: .relaxed) }

    /// Sets the process's limit to `mib` MiB (within `allowedMiB`, else unchanged; false).
    @discardableResult
    public static func set(mib: Int) -> Bool {
        guard allowedMiB.contains(mib) else { return false }
        current.store(mib << 20, ordering: .relaxed)
        return true
    }

    /// A limit as messages give it: `64 MiB (67108864 bytes)`, or the bytes alone below 1 MiB.
    public static func describe(_ bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB (\(bytes) bytes)" : "\(bytes) bytes"
    }

    /// What a reader stopped at a member over `limit` bytes says about it. (It names the command
    /// line's option and the project setting: they are how every reader's limit is raised.)
    static func hint(limit: Int) -> String {
        "the limit is \(limit % (1 << 20) == 0 ? "\(limit >> 20) MiB" : "\(limit) bytes") a member; a log you trust can be read with more: --max-member-mib N (up to "
            + "\(allowedMiB.upperBound)) or maxMemberMib: N in .agent-eval/settings.yaml. agent-eval's writer closes members "
            + "at about 256 KiB: a member this large is damage, a decompression bomb or another writer's output"
    }
}
