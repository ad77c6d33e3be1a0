import TraceCore

/// How much one archive may inflate to: the guard against decompression bombs, and the one
/// place that owns the archive limits (docs/interop.md, Limits).
///
/// Two limits, both checked on the sizes the archive's central directory declares, before an
/// entry is inflated, so a bomb is refused without inflating it; inflating then stops one byte
/// past the declared size, so an entry cannot bring more than it declared:
/// - `maxBytes`: the total of the entries read from one archive (each entry alone too);
/// - `maxRatio`: inflated size to compressed size, for entries larger than `ratioFloor` (a
///   small entry of repeated text compresses far better than 1000:1 and costs nothing).
///
/// ```swift
/// var budget = ArchiveBudget.standard
/// budget.maxBytes = try ArchiveBudget.byteCount("2GiB")
/// let options = ImportOptions(format: .inspect, archiveBudget: budget)
/// ```
public struct ArchiveBudget: Sendable, Hashable {
    /// The most bytes the entries read from one archive may inflate to, together.
    public var maxBytes: Int
    /// The most an entry larger than `ratioFloor` may inflate to per compressed byte.
    public var maxRatio: Int

    /// Entries up to this size (1 MiB) are not held to `maxRatio`.
    public static let ratioFloor = 1 << 20

    /// 512 MiB in all, 1000:1: a real Inspect log compresses its samples well under 100:1, and
    /// the importer holds the runs of a whole archive at once.
    public static let standard = ArchiveBudget(maxBytes: 512 << 20, maxRatio: 1000)

    public init(maxBytes: Int, maxRatio: Int) {
        self.maxBytes = maxBytes
        self.maxRatio = maxRatio
    }

    /// Checks, before `entry` of `archive` is inflated, that it fits: `used` bytes of the
    /// archive are inflated already. Throws an error naming the archive and the entry.
    func admit(_ entry: ZipArchive.Entry, after used: Int, archive: String) throws(ImportError) {
        let (ratioBound, overflows) = entry.compressedSize.multipliedReportingOverflow(by: maxRatio)
        if entry.size > Self.ratioFloor, !overflows, entry.size > ratioBound {
            let ratio = entry.compressedSize == 0 ? "from nothing" : "\(entry.size / entry.compressedSize):1"
            throw ImportError(
                .overLimit,
                "\(archive): the entry \(entry.name) would inflate to \(Self.text(entry.size)) from \(Self.text(entry.compressedSize)) "
                    + "(\(ratio)), over the limit of \(maxRatio):1 for entries over \(Self.text(Self.ratioFloor)): "
                    + "a decompression bomb, or a damaged archive; nothing of it was inflated",
                location: SourceLocation(path: archive),
                hint: "if you trust the archive, raise the limit: agent-eval import inspect --max-archive-ratio N …")
        }
        if entry.size > maxBytes - used {
            let before = used == 0 ? "" : " after the \(Self.text(used)) of the entries before it"
            throw ImportError(
                .overLimit,
                "\(archive): the entry \(entry.name) would inflate to \(Self.text(entry.size))\(before), over the limit of "
                    + "\(Self.text(maxBytes)) for one archive; nothing of it was inflated",
                location: SourceLocation(path: archive),
                hint: "if you trust the archive, raise the limit: agent-eval import inspect --max-archive-bytes 2GiB …")
        }
    }

    /// A byte count as people write it: `1048576`, `512KiB`, `100MiB`, `2GiB` (`K`, `M`, `G`,
    /// `KB`, `MB`, `GB` mean the same powers of 1024). Nil when it is none of these.
    public static func byteCount(_ text: String) -> Int? {
        let units: [(suffix: String, shift: Int)] = [
            ("KiB", 10), ("MiB", 20), ("GiB", 30), ("KB", 10), ("MB", 20), ("GB", 30), ("K", 10), ("M", 20), ("G", 30), ("B", 0),
        ]
        for unit in units where text.uppercased().hasSuffix(unit.suffix.uppercased()) {
            guard let value = Int(text.dropLast(unit.suffix.count)), value >= 0, value <= Int.max >> unit.shift else { return nil }
            return value << unit.shift
        }
        guard let value = Int(text), value >= 0 else { return nil }
        return value
    }

    /// `bytes` for people: `512 MiB`, `1 GiB` when whole, else `32782 bytes`.
    static func text(_ bytes: Int) -> String {
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] where bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift) \(unit)"
        }
        return "\(bytes) byte\(bytes == 1 ? "" : "s")"
    }
}
