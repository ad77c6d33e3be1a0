public import TraceLog

/// Indexes run logs in the catalog as the runs that wrote them close them, with their facts for
/// the fact cache (made in the same read, so a suite grading such a log reads it once): the catalog's
/// `FinishedLogSink`, which `exec`, `run`, `record` and `import` pass to what writes their logs.
/// A log that cannot be indexed is reported to `failed` and left as it is: the log is the record,
/// and `agent-eval index` can read it again later.
public struct IndexingSink: FinishedLogSink {
    public let catalog: Catalog
    private let failed: @Sendable (_ log: String, CatalogError) -> Void

    public init(catalog: Catalog, failed: @escaping @Sendable (_ log: String, CatalogError) -> Void) {
        self.catalog = catalog
        self.failed = failed
    }

    /// Reads and writes off the cooperative pool (`Catalog.threads`): indexing reads the log and
    /// waits for the database, which a task of the pool must never do.
    public func logsFinished(_ logs: [String]) async {
        let (catalog, failed) = (self.catalog, self.failed)
        await Catalog.threads.run {
            for log in logs {
                do throws(CatalogError) {
                    // A log just written: its facts are kept too, for the suite that grades it.
                    _ = try catalog.index(log: log, keepsFacts: true)
                } catch {
                    failed(log, error)
                }
            }
        }
    }
}
