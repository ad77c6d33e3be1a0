import TestSupport
import Testing

/// The two stores a catalog test runs against: a SQLite file in the test's directory, and a
/// database on a PostgreSQL server of the test's own (scripts/postgres_server).
enum CatalogStoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// Runs `body` with the location of a new, empty catalog of this kind.
    func withCatalog<T>(in directory: TemporaryDirectory, _ body: (String) async throws -> T) async throws -> T {
        switch self {
        case .sqlite: return try await body(directory.path("catalog.sqlite"))
        case .postgres: return try await PostgresTestServer.with { try await body($0.url) }
        }
    }
}
