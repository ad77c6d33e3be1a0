public import TraceLog

/// Indexes run logs in the catalog as the runs that wrote them close them: the catalog's
/// `FinishedLogSink`, which `exec`, `run`, `record` and `import` pass to what writes their logs.
/// With `keepsFacts` (what `run` asks for its live runs, which it grades next), a log's facts for
/// the fact cache are made in the same read, so the grading reads them instead of the log. A log
/// that cannot be indexed is reported to `failed` and left as it is: the log is the record, and
/// `agent-eval index` can read it again later.
public struct IndexingSink: FinishedLogSink {
    public let catalog: Catalog
    /// Whether a log's facts are kept too (`Catalog.index(log:keepsFacts:)`).
    public let keepsFacts: Bool
    private let failed: @Sendable (_ log: String, CatalogError) -> Void

    public init(catalog: Catalog, keepsFacts: Bool = false, failed: @escaping @Sendable (_ log: String, CatalogError) -> Void) {
        self.catalog = catalog
        self.keepsFacts = keepsFacts
        self.failed = failed
    }

    /// Reads and writes off the cooperative pool (`Catalog.threads`): indexing reads the log and
    /// waits for the database, which a task of the pool must never do.
    public func logsFinished(_ logs: [String]) async {
        let (catalog, keepsFacts, failed) = (self.catalog, self.keepsFacts, self.failed)
        await Catalog.threads.run {
            for log in logs {
                do throws(CatalogError) {
                    _ = try catalog.index(log: log, keepsFacts: keepsFacts)
                } catch {
                    failed(log, error)
                }
            }
        }
    }
}
