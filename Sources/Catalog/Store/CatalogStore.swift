/// Where a catalog's rows live: a SQLite file (`SQLiteStore`, the default) or a PostgreSQL
/// database a team shares (`PostgresStore`). The catalog's code reads and writes through
/// `SQLConnection`s these hand out, one statement text for both where their SQL agrees.
protocol CatalogStore: Sendable {
    var dialect: SQLDialect { get }
    /// Where the store is, as messages name it: the file, or the URL without its password.
    var location: String { get }

    /// Runs `body` in a write transaction that holds the catalog's write lock from its start:
    /// writers take turns, so none fails half-way because another wrote first.
    func write<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T

    /// `write`, for a body that may find one log's rows refused (`StoreFailure`): then nothing
    /// it wrote is kept, and the failure is returned.
    func writeRollingBack<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> Result<T, Catalog.StoreFailure>

    /// Runs `body` on a read-only snapshot.
    func read<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T

    /// Whether `error`, thrown by a statement, refused the values it was given (too long, out
    /// of range, a broken constraint) rather than said the catalog cannot be written.
    func isAboutTheRows(_ error: any Error) -> Bool

    /// What to record of a log whose rows the store refused with `error`.
    func storeProblem(_ error: any Error) -> String

    /// Closes the store's connections.
    func close() throws(CatalogError)
}
