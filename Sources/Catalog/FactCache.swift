public import EvalEngine
import Foundation
import Synchronization
import TraceCore
import TraceLog

/// The eval fact cache: a recorded log's facts (`LogFacts`: its folded state, tear and digest
/// check) kept per log identity, so a suite run over logs that did not change reads none of
/// them.
///
/// An entry is used only when the log's size, modification time and the hash of its last
/// complete member are what they were when it was read, and it was made by this
/// `LogFacts.extractorVersion`; anything else reads the log again and replaces the entry. A
/// log that changed while it was read is not stored. A log that cannot be read is never
/// cached: its error comes from reading it, every time.
///
/// A log the cache holds no entry for at its path (or whose stamp changed) is looked up by its
/// content (`LogFingerprint.contentHash`, the SHA-256 of its bytes) before it is read: the
/// same log at another path, on another machine sharing the catalog, or given a new
/// modification time by a checkout has the entry, and the check results, made from it there.
///
/// New entries are written a batch at a time (`logsPerWrite` logs' facts and results in one
/// transaction, fewer when their states add up to `bytesPerWrite`), and the rest by `flush()`,
/// which the eval runner calls when a suite run ends; until then the cache answers from the
/// batch in memory. A transaction per log made the first run over a thousand logs nearly twice
/// as long as one without the catalog.
public struct FactCache: LogFactSource {
    public let catalog: Catalog
    private let counts = Counts()
    private let kept = KeptResults()
    private let pending = PendingWrites()

    /// Logs whose new entries are written in one transaction.
    public static let logsPerWrite = 32
    /// The most state (as its snapshot's JSON bytes) a batch holds: a batch keeps its logs'
    /// states in memory, and one long run's state can take hundreds of MB.
    public static let bytesPerWrite = 8 << 20
    private let limits: (logs: Int, stateBytes: Int)

    public init(catalog: Catalog, logsPerWrite: Int = FactCache.logsPerWrite, bytesPerWrite: Int = FactCache.bytesPerWrite) {
        self.catalog = catalog
        limits = (max(1, logsPerWrite), max(1, bytesPerWrite))
    }

    /// A catalog on a PostgreSQL server: every lookup is a round trip.
    public var waitsOnNetwork: Bool { Catalog.isServer(catalog.path) }

    /// Logs answered from the cache, and logs read, so far.
    public var usage: (cached: Int, read: Int) { counts.value.withLock { ($0.cached, $0.read) } }

    /// Checks answered with a kept result (neither facts nor a check needed), so far.
    public var reusedResults: Int { counts.value.withLock { $0.reused } }

    public func facts(for log: String) throws -> LogFacts {
        var content = LazyContentHash()
        return try facts(for: log, content: &content)
    }

    /// The facts of `log`; `content`, its content hash once computed (nil: not yet), shared
    /// with the caller so that a log is hashed once.
    private func facts(for log: String, content: inout LazyContentHash) throws -> LogFacts {
        let path = Catalog.absolute(log)
        guard let before = FileStamp(path: path) else { return try LogFacts.read(log) }
        if let cached = pending.facts(for: path, stamp: before) ?? (try? cached(path, stamp: before)) {
            counts.value.withLock { $0.cached += 1 }
            return cached
        }
        let hash = content.resolve(path, before)
        if let hash, let cached = try? cached(content: hash) {
            counts.value.withLock { $0.cached += 1 }
            // A pointer to the entry is stored under this path, so that the result checked from
            // these facts can be kept beside it (and next time the path finds both).
            pending.add(PendingWrites.Link(path: path, stamp: before, contentHash: hash))
            flushIfFull()
            return cached
        }
        counts.value.withLock { $0.read += 1 }
        // The facts' state is written whole to the catalog below: its outputs stay in memory.
        let facts = try LogFacts.read(log, storesOutputs: false)
        if let hash, FileStamp(path: path) == before { try? store(facts, path: path, stamp: before, contentHash: hash) }
        return facts
    }

    /// A check result kept under `key` for the log as it is now, or the result of `check` over
    /// its facts (cached or read), kept when it has no error and the log did not change meanwhile.
    public func result(for log: String, key: CheckKey?, check: (LogFacts) -> RunResult) throws -> RunResult {
        let path = Catalog.absolute(log)
        guard let key, let before = FileStamp(path: path) else { return check(try facts(for: log)) }
        func reused(_ text: String) -> RunResult? {
            guard let json = try? JSONParser.parse(Array(text.utf8)), let result = RunResult(cached: json, log: log, repeatIndex: 0) else {
                return nil
            }
            counts.value.withLock { $0.reused += 1 }
            return result
        }
        let kept = checkResults(for: key)
        if let entry = kept.byPath[path], entry.identity.matches(path, now: before), let result = reused(entry.result) {
            return result
        }
        // The same bytes checked at another path, on another machine, or before a checkout.
        var content = LazyContentHash()
        if !kept.byContent.isEmpty, let hash = content.resolve(path, before), let text = kept.byContent[hash],
            let result = reused(text)
        {
            // Nothing is written for this path: the next run here hashes the log again (about
            // 10 µs for 20 KB), which costs less than writing a pointer and the result for every
            // log of a checkout that may run once (a CI runner's): 0.026 s against 0.089 s for
            // 1,000 logs, and a round trip each on PostgreSQL.
            return result
        }
        let result = check(try facts(for: log, content: &content))
        guard result.error == nil, FileStamp(path: path) == before else { return result }
        pending.add(PendingWrites.Result(path: path, key: key, stamp: before, text: JSONWriter.encodeString(result.cacheJSON)))
        flushIfFull()
        return result
    }

    /// Writes the entries still waiting (see the type's summary). A failure to write loses
    /// them, as a cache may: those logs are read again next time.
    public func flush() {
        pending.flushing.withLock { _ in
            let (facts, links, results) = pending.take()
            guard !facts.isEmpty || !links.isEmpty || !results.isEmpty else { return }
            let stored = try? catalog.write { db in try Self.write(facts, links, results, in: db) }
            kept.value.withLock { kept in
                for (key, path, identity, text) in stored ?? [] { kept[key]?.byPath[path] = (identity, text) }
            }
        }
    }

    private func flushIfFull() {
        let (logs, bytes) = pending.size
        if logs >= limits.logs || bytes >= limits.stateBytes { flush() }
    }

    /// One log's facts as the cache keeps them: the compressed snapshot, under the identity of
    /// the file they were read from and its content hash.
    struct Entry: Sendable {
        var path: String
        var identity: LogFingerprint
        var blob: [UInt8]
        var contentHash: String

        /// The entry for the facts the indexer made in its read of the log at `path` (`row`, the
        /// log's row from that read: its stamp and, for a log that no longer grows, its content
        /// hash); nil without facts, or when the file cannot be read for its identity.
        init?(_ facts: LogFacts?, path: String, row: LogRow) {
            let stamp = FileStamp(size: row.size, mtimeNs: row.mtimeNs)
            guard let facts, let identity = facts.identity(path, stamp: stamp),
                let contentHash = row.contentHash ?? LogFingerprint.contentHash(path, length: row.size),
                let blob = try? GzipData.compressQuickly(facts.cachedBytes)
            else { return nil }
            (self.path, self.identity, self.blob, self.contentHash) = (path, identity, blob, contentHash)
        }

        init(path: String, identity: LogFingerprint, blob: [UInt8], contentHash: String) {
            (self.path, self.identity, self.blob, self.contentHash) = (path, identity, blob, contentHash)
        }
    }

    /// Writes one log's facts entry in `db`, replacing the entry and the check results kept for
    /// the file before (they were made from other bytes, or are made again from these), under
    /// the file's record (`LogFileRecord.claim`; `file`, the record as the caller has it). Nothing
    /// is written when the file no longer holds the bytes the facts were read from.
    static func write(_ entry: Entry, file: LogFileRecord? = nil, in db: any SQLConnection) throws {
        guard
            let file = try LogFileRecord.claim(
                path: entry.path, identity: entry.identity, contentHash: entry.contentHash, known: file, authoritative: false, in: db)
        else { return }
        try db.execute("DELETE FROM check_results WHERE file_id = ?", [file.id])
        try db.execute(
            """
            INSERT INTO facts (file_id, generation, extractor_version, facts) VALUES (?, ?, ?, ?)
            ON CONFLICT (file_id) DO UPDATE SET generation = excluded.generation, extractor_version = excluded.extractor_version,
                facts = excluded.facts
            """,
            [file.id, file.generation, LogFacts.extractorVersion, entry.blob])
    }

    /// Writes facts entries, then pointers to entries found by content, then results; returns
    /// the results written with the identity of the facts they sit beside.
    private static func write(
        _ facts: [PendingWrites.Facts], _ links: [PendingWrites.Link], _ results: [PendingWrites.Result], in db: any SQLConnection
    ) throws -> [(CheckKey, String, LogFingerprint, String)] {
        // Results checked against the facts being replaced go with them.
        for pending in facts { try write(pending.entry, in: db) }
        for link in links {
            // A pointer to an entry made from the same bytes elsewhere, under this path and
            // stamp: the same size and tail, and an empty state, which `cached` reads from the
            // entry of the same content (a state can take megabytes; one copy is enough). The
            // results of the entry it replaces go with it.
            let source = try db.row(
                """
                SELECT f.tail_offset, f.tail_end, f.tail_hash FROM log_files f
                JOIN facts x ON x.file_id = f.file_id AND x.generation = f.generation
                WHERE f.content_hash = ? AND x.extractor_version = ? AND f.size = ? AND f.path <> ? AND length(x.facts) > 0
                LIMIT 1
                """,
                [link.contentHash, LogFacts.extractorVersion, link.stamp.size, link.path])
            guard let source else { continue }
            let identity = LogFingerprint(
                stamp: link.stamp, tailOffset: source["tail_offset"], tailEnd: source["tail_end"], tailHash: source["tail_hash"])
            guard
                let file = try LogFileRecord.claim(
                    path: link.path, identity: identity, contentHash: link.contentHash, authoritative: false, in: db)
            else { continue }
            try db.execute("DELETE FROM check_results WHERE file_id = ?", [file.id])
            try db.execute(
                """
                INSERT INTO facts (file_id, generation, extractor_version, facts) VALUES (?, ?, ?, \(db.dialect.emptyBlob))
                ON CONFLICT (file_id) DO UPDATE SET generation = excluded.generation, extractor_version = excluded.extractor_version,
                    facts = excluded.facts
                """,
                [file.id, file.generation, LogFacts.extractorVersion])
        }
        var stored: [(CheckKey, String, LogFingerprint, String)] = []
        for result in results {
            // Kept only beside the facts entry of the log as it was checked: a facts entry that
            // another process replaced meanwhile (the log changed) does not get it.
            try db.execute(
                """
                INSERT INTO check_results (file_id, case_key, generation, result)
                SELECT x.file_id, ?, f.generation, ? FROM log_files f JOIN facts x ON x.file_id = f.file_id AND x.generation = f.generation
                WHERE f.path = ? AND f.size = ? AND f.mtime_ns = ? AND x.extractor_version = ?
                ON CONFLICT (file_id, case_key) DO UPDATE SET generation = excluded.generation, result = excluded.result
                """,
                [result.key.digest, result.text, result.path, result.stamp.size, result.stamp.mtimeNs, LogFacts.extractorVersion])
            guard db.changes > 0 else { continue }
            if let file = try LogFileRecord.fetch(db, path: result.path) {
                stored.append((result.key, result.path, file.identity, result.text))
            }
        }
        return stored
    }

    /// Every check result kept under `key`, by log path, with the identity of the facts it was
    /// made from, and by content hash: read in one query the first time a key is asked for (a
    /// suite checks many logs with one case), so each log then costs a stat and a tail hash
    /// (and a content hash when its path has none), not a database round trip.
    private func checkResults(for key: CheckKey) -> KeptResults.ForKey {
        kept.value.withLock { kept in
            if let results = kept[key] { return results }
            var results = KeptResults.ForKey()
            do {
                try catalog.read { db in
                    let bind: (inout any SQLBinder) -> Void = { $0.bind(key.digest) }
                    try db.run(Self.keptResultsSQL, bind: bind) { row in
                        let identity = LogFingerprint(
                            stamp: FileStamp(size: row.int(1), mtimeNs: row.int(2)), tailOffset: row.int(3), tailEnd: row.int(4),
                            tailHash: row.text(5))
                        results.byPath[row.text(0)] = (identity, row.text(6))
                        if let content = row.optionalText(7) { results.byContent[content] = row.text(6) }
                    }
                }
            } catch {
                // Without them every log is checked from its facts; nothing kept is trusted.
                results = KeptResults.ForKey()
            }
            kept[key] = results
            return results
        }
    }

    /// A case's kept results with the identities of the files their facts were made from:
    /// driven by `check_results_by_case`, each result's file by its record. A result holds the
    /// generation of the facts it was checked from (they are deleted together when the facts
    /// are replaced), and its key the extractor's version, so the rows of `facts`, which hold
    /// the state blobs, are not read.
    static let keptResultsSQL = """
        SELECT f.path, f.size, f.mtime_ns, f.tail_offset, f.tail_end, f.tail_hash, r.result, f.content_hash
        FROM check_results r JOIN log_files f ON f.file_id = r.file_id
        WHERE r.case_key = ? AND r.generation = f.generation
        """

    /// The entry for `path` if it is still valid.
    func cached(_ path: String, stamp: FileStamp) throws -> LogFacts? {
        var found: (file: LogFileRecord, version: Int, blob: [UInt8]?)?
        try catalog.read { db in
            try db.run(
                """
                SELECT \(LogFileRecord.columns), x.extractor_version, x.facts
                FROM log_files f JOIN facts x ON x.file_id = f.file_id AND x.generation = f.generation WHERE f.path = ?
                """, bind: { $0.bind(path) }
            ) { row in found = (LogFileRecord(row, from: 0), row.int(8), row.blob(9)) }
        }
        guard let found, found.version == LogFacts.extractorVersion, found.file.matches(path, now: stamp) else { return nil }
        // A pointer (an empty state): the state is the entry's of the same content.
        guard let compressed = found.blob, !compressed.isEmpty else {
            return try found.file.contentHash.flatMap { try cached(content: $0) }
        }
        return try Self.decode(compressed, path: path)
    }

    /// An entry made from a log with these bytes, at whatever path (`content_hash`).
    func cached(content hash: String) throws -> LogFacts? {
        let entry = try catalog.read { db in
            try db.row(
                """
                SELECT f.path, x.facts FROM log_files f JOIN facts x ON x.file_id = f.file_id AND x.generation = f.generation
                WHERE f.content_hash = ? AND x.extractor_version = ? AND length(x.facts) > 0 LIMIT 1
                """,
                [hash, LogFacts.extractorVersion])
        }
        guard let entry, let compressed = entry.blob("facts") else { return nil }
        return try Self.decode(compressed, path: entry["path"])
    }

    private static func decode(_ compressed: [UInt8], path: String) throws -> LogFacts {
        let text = try GzipData.decompress(compressed, path: path)
        return try text.withUnsafeBytes { try JSONScanner.scan($0) { try LogFacts(cached: &$0) } }
    }

    /// Queues the facts of the log at `path` as read at `stamp`, with its identity taken now
    /// (just after the read that found the file unchanged) and its content hash.
    func store(_ facts: LogFacts, path: String, stamp: FileStamp, contentHash: String) throws {
        guard let identity = facts.identity(path, stamp: stamp) else { return }
        let bytes = facts.cachedBytes
        pending.add(
            PendingWrites.Facts(
                entry: Entry(path: path, identity: identity, blob: try GzipData.compressQuickly(bytes), contentHash: contentHash),
                stateBytes: bytes.count, facts: facts))
        flushIfFull()
    }
}

/// New entries not written yet, shared by the copies of one `FactCache`.
private final class PendingWrites: Sendable {
    struct Facts: Sendable {
        var entry: FactCache.Entry
        /// The size of the state's snapshot, for what the batch holds in memory.
        var stateBytes: Int
        var facts: LogFacts
    }

    struct Result: Sendable {
        var path: String
        var key: CheckKey
        var stamp: FileStamp
        var text: String
    }

    /// A log at `path` answered from an entry made from the same bytes elsewhere: that entry is
    /// copied under this path and stamp.
    struct Link: Sendable {
        var path: String
        var stamp: FileStamp
        var contentHash: String
    }

    private let value = Mutex<(facts: [Facts], links: [Link], results: [Result], stateBytes: Int)>(([], [], [], 0))
    /// Held while a batch is taken and written, so that batches are written in the order they
    /// were made (a result after the facts it sits beside).
    let flushing = Mutex(())

    func add(_ facts: Facts) {
        value.withLock {
            $0.facts.append(facts)
            $0.stateBytes += facts.stateBytes
        }
    }

    func add(_ result: Result) { value.withLock { $0.results.append(result) } }

    func add(_ link: Link) { value.withLock { $0.links.append(link) } }

    /// Logs with something waiting, and the size of the states waiting.
    var size: (logs: Int, stateBytes: Int) {
        value.withLock { (max($0.facts.count + $0.links.count, $0.results.count), $0.stateBytes) }
    }

    func take() -> (facts: [Facts], links: [Link], results: [Result]) {
        value.withLock { pending in
            defer { pending = ([], [], [], 0) }
            return (pending.facts, pending.links, pending.results)
        }
    }

    /// The waiting facts of the log at `path`, if they are of the file as it is now.
    func facts(for path: String, stamp: FileStamp) -> LogFacts? {
        let pending = value.withLock { pending in pending.facts.last { $0.entry.path == path } }
        guard let pending, pending.entry.identity.matches(path, now: stamp) else { return nil }
        return pending.facts
    }
}

/// Check results read for a key, shared by the copies of one `FactCache`.
private final class KeptResults: Sendable {
    /// One key's results: by path with the identity of the facts they were made from, and by
    /// the content hash of those facts.
    struct ForKey: Sendable {
        var byPath: [String: (identity: LogFingerprint, result: String)] = [:]
        var byContent: [String: String] = [:]
    }

    let value = Mutex<[CheckKey: ForKey]>([:])
}

/// A log's content hash, computed when first needed (`resolve`) and then kept for the stamp it
/// was computed at.
private struct LazyContentHash {
    private var computed: (stamp: FileStamp, hash: String?)?

    /// The content hash of the log at `path` (its first `stamp.size` bytes), computed once per
    /// stamp: a log that changed between two looks is hashed again.
    mutating func resolve(_ path: String, _ stamp: FileStamp) -> String? {
        if let computed, computed.stamp == stamp { return computed.hash }
        let hash = LogFingerprint.contentHash(path, length: stamp.size)
        computed = (stamp, hash)
        return hash
    }
}

/// The cache's hit and read counts, shared by the copies of one `FactCache`.
private final class Counts: Sendable {
    let value = Mutex((cached: 0, read: 0, reused: 0))
}

/// The cache's form of a log's facts: `{"digest_mismatch"?, "last_complete_member"?, "state":
/// snapshot, "tear"?}`, written straight to bytes (`LogFacts.cachedBytes`).
private struct CachedFacts: JSONObjectEncodable {
    let facts: LogFacts

    /// The state's snapshot, written without building its tree.
    struct Snapshot: JSONEncodable {
        let state: RunState
        var json: JSONValue { state.snapshotJSON }
        func write(to writer: inout JSONWriter) { state.writeSnapshot(to: &writer) }
    }

    struct Mismatch: JSONObjectEncodable {
        let mismatch: LogFacts.DigestMismatch
        func members(into object: inout some JSONMemberSink) {
            object.set("seq", mismatch.sequence)
            object.set("step", mismatch.step)
        }
    }

    func members(into object: inout some JSONMemberSink) {
        object.set("digest_mismatch", facts.digestMismatch.map(Mismatch.init))
        object.set("end_signed", facts.endIsSigned ? true : nil)
        object.set("last_complete_member", facts.lastCompleteMemberOffset)
        object.set("state", Snapshot(state: facts.state))
        object.set("tear", facts.tear)
    }
}

extension LogFacts {
    /// The identity of the log at `path`, as `stamp` found it, that these facts were read from:
    /// known by the end of its last complete member, as the indexer knows it.
    func identity(_ path: String, stamp: FileStamp) -> LogFingerprint? {
        LogFingerprint.of(path, stamp: stamp, lastCompleteMember: lastCompleteMemberOffset ?? 0, end: tear?.memberOffset ?? stamp.size)
    }

    /// The cache's form (`CachedFacts`) as canonical JSON bytes, written without building a tree.
    var cachedBytes: [UInt8] {
        var writer = JSONWriter(capacity: 16 * 1024)
        CachedFacts(facts: self).write(to: &writer)
        return writer.bytes
    }

    init(cached scanner: inout JSONScanner) throws {
        var state: RunState?
        var tear: LogTear?
        var mismatch: DigestMismatch?
        var lastComplete: Int?
        var endIsSigned = false
        try scanner.readObject { scanner, key in
            switch key {
            case "state": state = try RunState(snapshot: &scanner)
            case "tear": tear = try scanner.readOptional()
            case "digest_mismatch":
                let value: JSONValue = try scanner.read()
                guard case .int(let sequence)? = value["seq"], case .int(let step)? = value["step"] else {
                    throw missingField("digest_mismatch")
                }
                mismatch = DigestMismatch(sequence: sequence, step: step)
            case "last_complete_member": lastComplete = try scanner.readOptional()
            case "end_signed": endIsSigned = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.init(state: try required(state, "state"), tear: tear, digestMismatch: mismatch, lastCompleteMemberOffset: lastComplete)
        self.endIsSigned = endIsSigned
    }
}
