public import EvalEngine
import Foundation
import GRDB
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
public struct FactCache: LogFactSource {
    public let catalog: Catalog
    private let counts = Counts()

    public init(catalog: Catalog) {
        self.catalog = catalog
    }

    /// Logs answered from the cache, and logs read, so far.
    public var usage: (cached: Int, read: Int) { counts.value.withLock { $0 } }

    public func facts(for log: String) throws -> LogFacts {
        let path = Catalog.absolute(log)
        guard let before = FileStamp(path: path) else { return try LogFacts.read(log) }
        if let cached = try? cached(path, stamp: before) {
            counts.value.withLock { $0.cached += 1 }
            return cached
        }
        counts.value.withLock { $0.read += 1 }
        let facts = try LogFacts.read(log)
        if FileStamp(path: path) == before { try? store(facts, path: path, stamp: before) }
        return facts
    }

    /// The entry for `path` if it is still valid.
    func cached(_ path: String, stamp: FileStamp) throws -> LogFacts? {
        let entry = try catalog.read { db in
            try Row.fetchOne(
                db, sql: "SELECT extractor_version, size, mtime_ns, tail_offset, tail_end, tail_hash, facts FROM facts WHERE path = ?",
                arguments: [path])
        }
        guard let entry, entry["extractor_version"] == LogFacts.extractorVersion else { return nil }
        let identity = LogIdentity(
            stamp: FileStamp(size: entry["size"], mtimeNs: entry["mtime_ns"]), tailOffset: entry["tail_offset"],
            tailEnd: entry["tail_end"], tailHash: entry["tail_hash"])
        guard identity.matches(path, now: stamp) else { return nil }
        let compressed: Data = entry["facts"]
        let text = try GzipData.decompress([UInt8](compressed), path: path)
        return try text.withUnsafeBytes { try JSONScanner.scan($0) { try LogFacts(cached: &$0) } }
    }

    func store(_ facts: LogFacts, path: String, stamp: FileStamp) throws {
        let tailEnd = facts.tear?.memberOffset ?? stamp.size
        let tailOffset = facts.lastCompleteMemberOffset ?? 0
        guard let hash = LogIdentity.hash(path, from: tailOffset, to: tailEnd) else { return }
        let blob = try GzipData.compress(JSONWriter.encode(facts.cachedJSON))
        try catalog.write { db in
            try db.execute(
                sql: """
                    INSERT INTO facts (path, extractor_version, size, mtime_ns, tail_offset, tail_end, tail_hash, facts)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (path) DO UPDATE SET extractor_version = excluded.extractor_version, size = excluded.size,
                        mtime_ns = excluded.mtime_ns, tail_offset = excluded.tail_offset, tail_end = excluded.tail_end,
                        tail_hash = excluded.tail_hash, facts = excluded.facts
                    """,
                arguments: [path, LogFacts.extractorVersion, stamp.size, stamp.mtimeNs, tailOffset, tailEnd, hash, Data(blob)])
        }
    }
}

/// The cache's hit and read counts, shared by the copies of one `FactCache`.
private final class Counts: Sendable {
    let value = Mutex((cached: 0, read: 0))
}

extension LogFacts {
    /// The cache's form: `{"state": snapshot, "tear"?, "digest_mismatch"?, "last_complete_member"?}`.
    var cachedJSON: JSONValue {
        var object = ObjectBuilder()
        object.set("state", state.snapshotJSON)
        object.set("tear", tear)
        if let digestMismatch {
            var mismatch = ObjectBuilder()
            mismatch.set("seq", digestMismatch.sequence)
            mismatch.set("step", digestMismatch.step)
            object.set("digest_mismatch", mismatch.json)
        }
        object.set("last_complete_member", lastCompleteMemberOffset)
        return object.json
    }

    init(cached scanner: inout JSONScanner) throws {
        var state: RunState?
        var tear: LogTear?
        var mismatch: DigestMismatch?
        var lastComplete: Int?
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
            default: try scanner.skipValue()
            }
        }
        self.init(state: try required(state, "state"), tear: tear, digestMismatch: mismatch, lastCompleteMemberOffset: lastComplete)
    }
}
