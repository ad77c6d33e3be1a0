import TestSupport
import Testing

/// The two stores a catalog test runs against: a SQLite file in the test's directory, and a
/// database on a PostgreSQL server of the test's own (scripts/postgres_server).
enum CatalogStoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// Runs `body` with a temporary directory and the location of a new, empty catalog of this
    /// kind.
    func withCatalog<T>(_ body: (TemporaryDirectory, String) async throws -> T) async throws -> T {
        try await TemporaryDirectory.with { directory in
            switch self {
            case .sqlite: return try await body(directory, directory.path("catalog.sqlite"))
            case .postgres: return try await PostgresTestServer.with { try await body(directory, $0.url) }
            }
        }
    }
}
