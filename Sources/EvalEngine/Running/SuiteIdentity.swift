public import TraceCore

/// Which suite a report belongs to: how many cases the run selected (after `--filter`, before
/// `--shard`) and a digest of their ids. Every shard of one suite run carries the same
/// identity, so `results merge` can tell a report of another suite (or another selection)
/// apart, and can tell whether the shards it was given hold the whole suite.
///
/// ```swift
/// let suite = SuiteIdentity(caseIds: ["support-refund", "research-budget"])
/// // suite.caseCount == 2; suite.digest == "sha256:…", whatever order the ids came in
/// ```
public struct SuiteIdentity: Sendable, Hashable, JSONEncodable {
    /// The number of cases in the whole suite (every shard's together).
    public var caseCount: Int
    /// `sha256:<hex>` of the case ids sorted by their UTF-8 bytes, each followed by a newline:
    /// `LC_ALL=C sort` then `sha256sum` gives the same hex (case ids hold no newline).
    public var digest: String

    /// The identity of the suite made of the cases `caseIds` (in any order).
    public init(caseIds: some Sequence<String>) {
        let sorted = caseIds.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        caseCount = sorted.count
        digest = ContentHash.sha256(Array(sorted.map { $0 + "\n" }.joined().utf8))
    }

    public init(caseCount: Int, digest: String) {
        self.caseCount = caseCount
        self.digest = digest
    }

    /// `{"cases": n, "digest": "sha256:…"}`, the report's `suite` member (docs/eval-results.md).
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("cases", caseCount)
        object.set("digest", digest)
        return object.json
    }

    /// Reads a report's `suite` member; nil when it is not `{"cases": n ≥ 0, "digest": string}`.
    public init?(json: JSONValue) {
        guard let count = json["cases"]?.intValue, count >= 0, let digest = json["digest"]?.stringValue, !digest.isEmpty else {
            return nil
        }
        self.init(caseCount: count, digest: digest)
    }
}
