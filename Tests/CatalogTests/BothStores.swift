import TestSupport
import Testing

@testable import Catalog

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

    /// Makes at `location` a catalog as an agent-eval of schema `version` left it: this build's
    /// first `version` migrations, then `rows` (SQL), run by the store's own client program.
    func makeCatalog(at location: String, version: Int, rows: String) async throws {
        switch self {
        case .sqlite:
            let schema =
                CatalogSchema.migrations.prefix(version).joined(separator: "\n") + "\nPRAGMA user_version = \(version);\n" + rows
            let made = try await Subprocess.run("/usr/bin/env", ["sqlite3", location, schema])
            try #require(made.status == 0, "\(made.stderr)")
        case .postgres:
            let schema =
                PostgresSchema.migrations.prefix(version).joined(separator: "\n")
                + "\nCREATE TABLE agent_eval_schema (version INTEGER NOT NULL); INSERT INTO agent_eval_schema VALUES (\(version));\n"
                + rows
            let made = try await Subprocess.run(
                Subprocess.which("psql") ?? "/usr/bin/psql", [location, "-v", "ON_ERROR_STOP=1", "-q", "-c", schema])
            try #require(made.status == 0, "\(made.stderr)")
        }
    }
}
