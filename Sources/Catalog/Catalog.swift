public import ConfigFile
import Foundation
import TraceCore

/// The catalog: every indexed run, its tool calls, every suite run and its results, and the
/// eval fact cache. It is derived data — the logs are the truth — so it can always be rebuilt
/// from them (docs/catalog.md). It lives in a SQLite file beside the logs (`SQLiteStore`, the
/// default) or in a team's PostgreSQL database (`PostgresStore`), behind one SQL seam.
///
/// Several processes may use one catalog at once (writers take turns under the store's write
/// lock): `run --jobs N`, CI shards, an `index` beside a `run`.
public final class Catalog: Sendable {
    /// Where the catalog is: its file, or its PostgreSQL URL without the password.
    public let path: String
    let store: any CatalogStore
    public let isReadOnly: Bool

    /// `AGENT_EVAL_CATALOG` when set, else `.agent-eval/catalog.sqlite` in the project root of
    /// `directory` (this process's working directory when nil): see `projectRoot(of:)`.
    public static func defaultPath(in directory: String? = nil) -> String {
        if let path = ProcessInfo.processInfo.environment["AGENT_EVAL_CATALOG"], !path.isEmpty { return path }
        let root = projectRoot(of: directory ?? FileManager.default.currentDirectoryPath)
        return (root as NSString).appendingPathComponent(".agent-eval/catalog.sqlite")
    }

    /// The project's catalog setting: `catalog:` in `.agent-eval/settings.yaml` in the project
    /// root of `directory` (this process's working directory when nil) — a team's PostgreSQL
    /// URL, or a file (relative to the project root) — so that every command in the project,
    /// on every machine, uses it without a flag. Nil when there is no such file or key, and
    /// when `AGENT_EVAL_CATALOG` is set (it wins, as `--catalog` wins over both). The file is
    /// meant to be committed, so a URL with a password in it is refused: the password comes
    /// from `PGPASSWORD` (or `~/.pgpass`-style secrets the CI injects as that variable).
    public static func projectSetting(in directory: String? = nil) throws(ConfigError) -> String? {
        if let path = ProcessInfo.processInfo.environment["AGENT_EVAL_CATALOG"], !path.isEmpty { return nil }
        guard let settings = try ProjectSettings.load(in: directory), let node = settings.catalog else { return nil }
        let location = try node.nonEmptyString("catalog")
        guard isServer(location) else { return ConfigPath.resolve(location, from: settings.root) }
        guard redacted(location) == location else {
            throw ConfigError(
                .invalidValue, "the catalog URL in \(settingsFile) holds a password, and this file is meant to be committed",
                at: node.location, hint: "write it as postgres://USER@HOST:PORT/DATABASE and give the password in PGPASSWORD")
        }
        return location
    }

    /// The project settings file, relative to the project root.
    public static let settingsFile = ProjectSettings.file

    /// The folder a project's catalog lives in: `ConfigPath.projectRoot(of:)`.
    public static func projectRoot(of directory: String) -> String { ConfigPath.projectRoot(of: directory) }

    /// How long a writer waits for another process's write to finish before giving up.
    static let busyTimeout: TimeInterval = 30

    /// Opens the catalog at `path` — a SQLite file, or a PostgreSQL database when it is a
    /// `postgres://` or `postgresql://` URL (docs/catalog.md, "A team's catalog") — creating it
    /// on first use and migrating an older schema. `readOnly` opens an existing catalog with a
    /// connection that refuses every write.
    public init(path: String, readOnly: Bool = false) throws(CatalogError) {
        self.isReadOnly = readOnly
        if PostgresStore.isURL(path) {
            let store = try PostgresStore(url: path, readOnly: readOnly)
            self.store = store
            self.path = store.location
        } else {
            self.store = try SQLiteStore(path: path, readOnly: readOnly)
            self.path = path
        }
    }

    /// Whether `location` names a catalog on a PostgreSQL server (`postgres://…`) rather than a file.
    public static func isServer(_ location: String) -> Bool { PostgresStore.isURL(location) }

    /// `location` as messages may show it: a PostgreSQL URL without its password.
    public static func redacted(_ location: String) -> String { PostgresTarget.redacted(location) }

    /// The SQL the store speaks.
    var dialect: SQLDialect { store.dialect }

    /// The SQLite store, when the catalog is one (the file's own operations: checkpoint,
    /// merge, rebuild in place).
    var sqlite: SQLiteStore? { store as? SQLiteStore }

    /// Runs `body` in a write transaction that holds the catalog's write lock from its start
    /// (so other writers wait for it, instead of failing half-way).
    func write<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T { try store.write(body) }

    /// `write`, for a body that may find one log's rows refused (`StoreFailure`): then nothing
    /// it wrote is kept, and the failure is returned for the caller to record that log and
    /// write the others again.
    func writeRollingBack<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> Result<T, StoreFailure> {
        try store.writeRollingBack(body)
    }

    /// Runs `body` on a read-only snapshot.
    func read<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T { try store.read(body) }

    /// Lowers SQLite's limit on the length of one value on the writing connection (a test's
    /// way to reach it with small logs); nothing on PostgreSQL.
    func limitValueLength(to bytes: Int32) { sqlite?.limitValueLength(to: bytes) }
}
