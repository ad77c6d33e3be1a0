import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization
import TraceCore

/// A catalog in a PostgreSQL database, shared by a team's CI runners and developers
/// (docs/catalog.md, "A team's catalog"). Reached through PostgresNIO, its calls waited for on
/// the calling thread (the catalog's API is synchronous; NIO's own threads do the I/O).
///
/// Writers take turns as on SQLite: each write transaction first takes a transaction-scoped
/// advisory lock (`writeLock`), so two processes indexing at once never interleave their rows
/// or fail each other's transactions, and a migration runs once however many processes open a
/// new database together. Reads run in a read-only REPEATABLE READ transaction: one snapshot.
final class PostgresStore: CatalogStore {
    let location: String
    private let configuration: PostgresConnection.Configuration
    private let readOnly: Bool
    private let idle = Mutex<[PostgresConnection]>([])
    private let nextId = Atomic<Int>(1)
    private let numbered = Mutex<[String: String]>([:])
    static let logger = Logger(label: "agent-eval.catalog", factory: { _ in SwiftLogNoOpLogHandler() })

    var dialect: SQLDialect { .postgres }

    /// The key of the advisory lock every write transaction takes first ("agent-eval" in ASCII,
    /// truncated to 64 bits): other programs' advisory locks in the same database do not meet it.
    static let writeLock: Int64 = 0x6167_656E_742D_6576

    /// How a write transaction begins: READ COMMITTED whatever the server's default, so each
    /// statement after the lock is granted sees what the writer before committed (a REPEATABLE
    /// READ snapshot taken while waiting would not, and the writer would insert a log twice).
    static let beginWrite = "BEGIN ISOLATION LEVEL READ COMMITTED"

    /// How long a writer waits for another's transaction (`lock_timeout`), as SQLite's busy timeout.
    static var lockTimeout: TimeInterval { Catalog.busyTimeout }

    /// Why a connection failed, in words: the system's reason for a refused or reset connection,
    /// a name that does not resolve, a connection that took too long; never the networking
    /// library's own description of its types.
    static func plainCause(_ error: any Error) -> String {
        if let failure = error as? NIOConnectionError {
            if failure.dnsAError != nil || failure.dnsAAAAError != nil {
                return "the host name \(failure.host) does not resolve"
            }
            let reasons = failure.connectionErrors.map { plainCause($0.error) }
            return reasons.isEmpty ? "no address of \(failure.host) could be reached" : Array(Set(reasons)).sorted().joined(separator: "; ")
        }
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
        if let channel = error as? ChannelError {
            switch channel {
            case .connectTimeout(let amount): return "no connection within \(amount.nanoseconds / 1_000_000_000) s"
            case .ioOnClosedChannel, .alreadyClosed, .eof: return "the connection closed"
            default: return "the connection failed"
            }
        }
        return (error as? any Diagnostic)?.message ?? "the connection failed"
    }

    /// How long a statement's answer is waited for, at most (`AGENT_EVAL_CATALOG_ANSWER_TIMEOUT`,
    /// seconds; 180 by default: past the lock wait of a busy catalog, far past any statement of
    /// agent-eval's own). A server that stops or is cut off mid-statement may never answer, and
    /// a wait without end left `index` hung, printing nothing, even after the server came back:
    /// at the deadline the connection is closed and the command ends with an error naming the
    /// server. `sql` waits its own `--timeout` (the server's `statement_timeout`) and this besides.
    nonisolated(unsafe) static var answerWait: TimeInterval = {
        // A finite number of seconds, from 0.1 to a year; anything else is the default.
        let given = ProcessInfo.processInfo.environment["AGENT_EVAL_CATALOG_ANSWER_TIMEOUT"].flatMap(Double.init)
        guard let given, given.isFinite else { return 180 }
        return min(max(0.1, given), 365 * 86_400)
    }()

    /// What `answerWait` passing is, before `describe` says it with the server's name.
    struct AnswerDeadlinePassed: Error {
        var seconds: TimeInterval
    }

    /// The answer to `query`, waited for at most `answerWait` (plus `extra`): past it the wait
    /// ends (`AnswerDeadlinePassed`) and the connection is closed. The wait ends at the deadline
    /// itself, not when the close fails the statement: a close may wait for the statement in
    /// flight, which a stopped server never answers (CI of stop 97: a test hung for good there).
    static func answer(
        to query: PostgresQuery, on connection: PostgresConnection, extra: TimeInterval = 0
    ) throws -> PostgresQueryResult {
        let seconds = min(answerWait + extra, 2 * 365 * 86_400)
        let passed = Atomic<Bool>(false)
        let answered = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
        connection.query(query, logger: logger).cascade(to: answered)
        let deadline = connection.eventLoop.scheduleTask(in: .milliseconds(Int64(seconds * 1000))) {
            passed.store(true, ordering: .relaxed)
            // The first to complete the promise wins; the statement's late answer is dropped.
            answered.fail(AnswerDeadlinePassed(seconds: seconds))
            let closing: EventLoopFuture<Void> = connection.close()
            _ = closing
        }
        defer { deadline.cancel() }
        do {
            return try answered.futureResult.wait()
        } catch {
            if passed.load(ordering: .relaxed) { throw AnswerDeadlinePassed(seconds: seconds) }
            throw error
        }
    }

    /// Whether `text` names a PostgreSQL catalog rather than a file.
    static func isURL(_ text: String) -> Bool { text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") }

    /// Opens the catalog `url` names, with what it leaves out taken from the standard `PG*`
    /// variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE), and creates or
    /// migrates its tables.
    init(url: String, readOnly: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) throws(CatalogError) {
        let target = try PostgresTarget(url: url, environment: environment)
        location = target.location
        configuration = try target.configuration()
        self.readOnly = readOnly
        do {
            try migrate()
        } catch {
            throw describe(error)
        }
    }

    // MARK: Transactions

    func write<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T {
        switch try writeRollingBack(body) {
        case .success(let value): return value
        case .failure(let failure):
            throw CatalogError(.queryFailed, "the catalog at \(location) refused the rows of \(failure.path): \(failure.problem)")
        }
    }

    func writeRollingBack<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> Result<T, Catalog.StoreFailure> {
        if readOnly {
            throw CatalogError(.readOnly, "the catalog at \(location) was opened read-only and refuses writes")
        }
        return try transaction(begin: Self.beginWrite) { connection -> (Result<T, Catalog.StoreFailure>, commit: Bool) in
            try connection.execute("SELECT pg_advisory_xact_lock(?)", [Self.writeLock])
            do {
                return (.success(try body(connection)), true)
            } catch let failure as Catalog.StoreFailure {
                return (.failure(failure), false)
            }
        }
    }

    func read<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T {
        try transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { connection in (try body(connection), true) }
    }

    /// Runs `body` after `begin` on a connection of the store's, then commits, or rolls back
    /// when it says so or throws. A connection that failed is closed, never handed out again.
    private func transaction<T>(begin: String, _ body: (PostgresSQLConnection) throws -> (T, commit: Bool)) throws(CatalogError) -> T {
        var (connection, reused) = try take()
        var sql = PostgresSQLConnection(connection: connection, store: self)
        do {
            do {
                try sql.execute(begin)
            } catch  where reused && Self.isConnectionLost(error) {
                // A kept connection the server or a proxy dropped while it was idle: once more
                // on a new one.
                _ = try? connection.close().wait()
                (connection, reused) = try take(reusing: false)
                sql = PostgresSQLConnection(connection: connection, store: self)
                try sql.execute(begin)
            }
            let (value, commit) = try body(sql)
            try sql.execute(commit ? "COMMIT" : "ROLLBACK")
            give(back: connection)
            return value
        } catch {
            if !connection.isClosed, (try? sql.execute("ROLLBACK")) != nil {
                give(back: connection)
            } else {
                _ = try? connection.close().wait()
            }
            throw describe(error)
        }
    }

    /// A connection: a kept one when there is one (`reused`), else a new one.
    private func take(reusing: Bool = true) throws(CatalogError) -> (PostgresConnection, reused: Bool) {
        while reusing, let connection = idle.withLock({ $0.popLast() }) {
            if !connection.isClosed { return (connection, true) }
        }
        do {
            let connection = try PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration,
                id: nextId.wrappingAdd(1, ordering: .relaxed).oldValue, logger: Self.logger
            ).wait()
            let timeout = Int(Self.lockTimeout * 1000)
            do {
                for setting in ["lock_timeout = \(timeout)", "application_name = 'agent-eval'"] {
                    _ = try Self.answer(to: PostgresQuery(unsafeSQL: "SET " + setting), on: connection)
                }
            } catch {
                _ = try? connection.close().wait()
                throw error
            }
            return (connection, false)
        } catch {
            throw describe(error, connecting: true)
        }
    }

    /// Whether `error` says the connection itself is gone, not that a statement failed.
    static func isConnectionLost(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        return [.connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection].contains(error.code)
    }

    private func give(back connection: PostgresConnection) {
        idle.withLock { $0.append(connection) }
    }

    func close() throws(CatalogError) {
        let connections = idle.withLock { idle in
            defer { idle.removeAll() }
            return idle
        }
        for connection in connections { _ = try? connection.close().wait() }
    }

    deinit {
        // PostgresNIO wants every connection closed before it goes.
        for connection in idle.withLock({ $0 }) { _ = try? connection.close().wait() }
    }

    // MARK: Schema

    /// Brings the schema up to `PostgresSchema.version` under the write lock, one transaction
    /// for all of it, refusing a database of a newer schema or one that holds tables of
    /// something else.
    private func migrate() throws(CatalogError) {
        let current = try transaction(begin: "BEGIN") { connection -> (Int?, commit: Bool) in
            guard try Self.hasSchemaTable(connection) else { return (nil, true) }
            return (try connection.value("SELECT version FROM agent_eval_schema"), true)
        }
        if let current, current > PostgresSchema.version { throw newerSchema(current) }
        if current == PostgresSchema.version { return }
        if readOnly && current == nil {
            throw CatalogError(
                .cannotOpen, "there is no catalog in the database at \(location) yet",
                hint: "index some logs first; the catalog is created then")
        }
        if readOnly {
            throw CatalogError(
                .cannotOpen,
                "the catalog at \(location) has schema version \(current ?? 0); this agent-eval needs \(PostgresSchema.version)",
                hint: "open it once for writing (index some logs) to migrate it")
        }
        try transaction(begin: Self.beginWrite) { connection in
            try connection.execute("SELECT pg_advisory_xact_lock(?)", [Self.writeLock])
            // Read again under the lock: another process may have migrated meanwhile.
            var version = 0
            if try Self.hasSchemaTable(connection) {
                version = try connection.value("SELECT version FROM agent_eval_schema") ?? 0
            } else {
                let tables: Int =
                    try connection.value(
                        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name IN ('logs', 'calls', 'suite_runs')"
                    ) ?? 0
                if tables > 0 {
                    throw CatalogError(
                        .notACatalog,
                        "the database at \(location) has tables named as the catalog's, but no agent-eval schema version",
                        hint: "point --catalog at another database (or another schema through the URL's options)")
                }
                try connection.script("CREATE TABLE agent_eval_schema (version INTEGER NOT NULL); INSERT INTO agent_eval_schema VALUES (0)")
            }
            if version > PostgresSchema.version { throw newerSchema(version) }
            for number in version..<PostgresSchema.version {
                let migration = PostgresSchema.migrations[number]
                if !migration.isEmpty { try connection.script(migration) }
            }
            try connection.execute("UPDATE agent_eval_schema SET version = ?", [PostgresSchema.version])
            return ((), true)
        }
    }

    /// Whether the schema version's table exists, as a query sees it now: a plain query of
    /// `information_schema`, whose snapshot is taken after the write lock was granted (a name
    /// lookup such as `to_regclass` may still miss a table another process just committed).
    private static func hasSchemaTable(_ connection: PostgresSQLConnection) throws -> Bool {
        try connection.value(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'agent_eval_schema'",
            as: Int.self) ?? 0 > 0
    }

    private func newerSchema(_ version: Int) -> CatalogError {
        CatalogError(
            .newerSchema,
            "the catalog at \(location) has schema version \(version), newer than this agent-eval knows (\(PostgresSchema.version))",
            hint: "use the newer agent-eval that wrote it")
    }

    // MARK: `sql`

    /// The rights a READ ONLY transaction does not take away, by the role that has them: a
    /// superuser's, or those of the predefined roles that run programs on the server, read or
    /// write its files, or end other sessions. `sql` refuses to run as a role with any.
    static let privilegesCheck = """
        SELECT concat_ws(', ',
            CASE WHEN r.rolsuper THEN 'it is a superuser' END,
            CASE WHEN EXISTS (SELECT 1 FROM pg_roles s WHERE s.rolsuper AND s.oid <> r.oid AND pg_has_role(r.oid, s.oid, 'MEMBER'))
                THEN 'it may become a superuser (SET ROLE)' END,
            (SELECT string_agg(CASE g.rolname
                    WHEN 'pg_execute_server_program' THEN 'it may run programs on the server'
                    WHEN 'pg_read_server_files' THEN 'it may read the server''s files'
                    WHEN 'pg_write_server_files' THEN 'it may write the server''s files'
                    ELSE 'it may end other sessions' END, ', ' ORDER BY g.rolname)
                FROM pg_roles g
                WHERE g.rolname IN ('pg_execute_server_program', 'pg_read_server_files', 'pg_write_server_files', 'pg_signal_backend')
                    AND pg_has_role(r.oid, g.oid, 'MEMBER')))
        FROM pg_roles r WHERE r.rolname = current_user
        """

    /// `Catalog.query` on PostgreSQL: the statement runs in a READ ONLY transaction with
    /// `statement_timeout`, so a write is refused by the server and a statement past `timeout`
    /// is stopped by it; a text of two statements is refused by the extended protocol. A READ
    /// ONLY transaction does not hold back a superuser (`COPY … TO PROGRAM` runs a shell
    /// command) or the predefined roles with server rights, so `sql` refuses to run as such a
    /// role (`privilegesCheck`); docs/catalog.md says which role to give it.
    func query(_ sql: String, arguments: [CatalogValue], timeout: Double?) throws(CatalogError) -> QueryResult {
        let privileges: String
        do {
            privileges = try read { db in try db.column(Self.privilegesCheck, as: String.self).first ?? "" }
        }
        if !privileges.isEmpty {
            throw CatalogError(
                .privilegedRole,
                "sql does not run as the PostgreSQL role \(configuration.username) of \(location): \(privileges), which a read-only "
                    + "transaction does not hold back (COPY … TO PROGRAM, server files, other sessions)",
                hint: "give sql a role that may only read the catalog (docs/catalog.md, \"A role for sql\"): "
                    + "CREATE ROLE agent_eval_reader LOGIN; GRANT USAGE ON SCHEMA public TO agent_eval_reader; "
                    + "GRANT SELECT ON ALL TABLES IN SCHEMA public TO agent_eval_reader")
        }
        do {
            return try transaction(begin: "BEGIN READ ONLY") { connection -> (QueryResult, commit: Bool) in
                let milliseconds = timeout.map { max(1, Int(($0 * 1000).rounded())) } ?? 0
                try connection.execute("SET LOCAL statement_timeout = \(milliseconds)")
                // The statement's own time, then the wait for any answer; without a time, a year.
                connection.extraWait = timeout ?? 365 * 86_400
                var result = QueryResult(columns: [], rows: [])
                try connection.run(sql, bind: { $0.bind(all: arguments) }) { row in
                    if result.columns.isEmpty { result.columns = (0..<row.columnCount).map(row.name) }
                    result.rows.append((0..<row.columnCount).map(row.value))
                }
                if result.rows.isEmpty { result.columns = Self.columnNames(of: sql, arguments: arguments, on: connection) }
                return (result, false)
            }
        } catch {
            guard let cause = error as CatalogError?, cause.code == .queryFailed || cause.code == .readOnly else { throw error }
            throw explain(error, sql: sql, timeout: timeout)
        }
    }

    /// The names of the columns of `sql`, a statement that returned no row: the row-level API
    /// gives names only with rows (its synchronous calls have no row description), so the
    /// statement is planned once more as a subquery that returns nothing (`LIMIT 0`), joined to
    /// one row, which gives a row of NULLs under its columns. Empty when the statement cannot be
    /// a subquery (the last statement of this read-only transaction, so its failure changes
    /// nothing).
    private static func columnNames(of sql: String, arguments: [CatalogValue], on connection: PostgresSQLConnection) -> [String] {
        var statement = Substring(sql)
        while let last = statement.last, last == ";" || last.isWhitespace { statement.removeLast() }
        // The newline ends a `--` comment the statement may end with. `LIMIT 0` returns before
        // running the statement: its columns cost its planning, not its rows again.
        let wrapped = "SELECT q.* FROM (VALUES (1)) AS one (x) LEFT JOIN (SELECT * FROM (\(statement)\n) AS s LIMIT 0) AS q ON true"
        var names: [String] = []
        try? connection.run(wrapped, bind: { $0.bind(all: arguments) }) { row in
            if names.isEmpty { names = (0..<row.columnCount).map(row.name) }
        }
        return names
    }

    /// The `sql` command's own errors, from what the server said of the statement.
    private func explain(_ error: CatalogError, sql: String, timeout: Double?) -> CatalogError {
        let message = error.message
        if message.contains("SQLSTATE 57014") {
            return CatalogError(
                .timedOut, "the statement ran for more than \(QueryDeadline.describe(timeout ?? 0)) and was stopped",
                hint: "narrow it (a WHERE on an indexed column, a LIMIT), or give it longer")
        }
        if message.contains("SQLSTATE 25006") {
            return CatalogError(
                .readOnly, "the catalog's query connection is read-only; this statement would change it: \(sql)",
                hint: "the catalog is derived from logs: change the logs and index them again")
        }
        if message.contains("cannot insert multiple commands into a prepared statement") {
            return CatalogError(
                .severalStatements, "sql runs one statement; this text has more than one", hint: "run each statement on its own")
        }
        if message.contains("SQLSTATE 42") {
            let names =
                (try? read { db in
                    try db.column(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'agent_eval_schema' ORDER BY table_name",
                        as: String.self)
                }) ?? []
            let reason = message.components(separatedBy: " failed: ").dropFirst().joined(separator: " failed: ")
            return CatalogError(
                .queryFailed, "the statement cannot run: \(reason.isEmpty ? message : reason)",
                hint: "its tables and views: \(names.joined(separator: ", ")) (docs/catalog.md describes each)")
        }
        return error
    }

    // MARK: Statements

    /// `sql` with its `?`s numbered `$1`, `$2`, … as PostgreSQL wants them; a `?` inside a
    /// string, a quoted name or a comment is left alone.
    func numberedParameters(_ sql: String) -> String {
        if let known = numbered.withLock({ $0[sql] }) { return known }
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var count = 0
        var quote: Character?
        var lineComment = false
        var blockComment = false
        var previous: Character = " "
        for character in sql {
            defer { previous = character }
            if lineComment {
                if character == "\n" { lineComment = false }
            } else if blockComment {
                if previous == "*" && character == "/" { blockComment = false }
            } else if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if previous == "-" && character == "-" {
                lineComment = true
            } else if previous == "/" && character == "*" {
                blockComment = true
            } else if character == "?" {
                count += 1
                result += "$\(count)"
                continue
            }
            result.append(character)
        }
        numbered.withLock { $0[sql] = result }
        return result
    }

    // MARK: Errors

    func isAboutTheRows(_ error: any Error) -> Bool {
        guard let state = Self.sqlState(of: error) else { return false }
        // Data exceptions (a value too long, out of range, a NUL in text), integrity
        // constraints, and a program limit (a row or index entry too big).
        return state.hasPrefix("22") || state.hasPrefix("23") || state.hasPrefix("54")
    }

    func storeProblem(_ error: any Error) -> String {
        "the catalog could not store what was read from this log (PostgreSQL: \(Self.serverMessage(of: error) ?? "\(error)"))"
    }

    static func sqlState(of error: any Error) -> String? {
        guard let error = error as? PSQLError, error.code == .server else { return nil }
        return error.serverInfo?[.sqlState]
    }

    static func serverMessage(of error: any Error) -> String? {
        guard let error = error as? PSQLError, error.code == .server, let info = error.serverInfo else { return nil }
        let message = info[.message] ?? "an error"
        return info[.sqlState].map { "\(message) (SQLSTATE \($0))" } ?? message
    }

    /// The catalog's error for what PostgreSQL or the connection to it said. Never names the
    /// password: `location` has none, and neither has what the server says.
    func describe(_ error: any Error, connecting: Bool = false) -> CatalogError {
        var described = describeWithoutPlace(error, connecting: connecting)
        // The catalog is the place of every error here, named without its password.
        if described.location == nil { described.location = SourceLocation(path: location) }
        return described
    }

    private func describeWithoutPlace(_ error: any Error, connecting: Bool) -> CatalogError {
        if let error = error as? CatalogError { return error }
        if let passed = error as? AnswerDeadlinePassed {
            return CatalogError(
                .unreachable,
                "the PostgreSQL server at \(location) did not answer within \(Int(passed.seconds.rounded())) s: it may have stopped, or the "
                    + "network to it gone; the connection was closed and nothing more was sent",
                hint: "check that the server is running and reachable; a catalog this slow on purpose gets longer with "
                    + "AGENT_EVAL_CATALOG_ANSWER_TIMEOUT=SECONDS")
        }
        guard let error = error as? PSQLError else {
            return CatalogError(.queryFailed, "the catalog at \(location) failed: \(error)")
        }
        let unreachableHint =
            "check that the PostgreSQL server is running and reachable, and the host and port (the URL, or PGHOST and PGPORT)"
        switch error.code {
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            let message = Self.serverMessage(of: error) ?? "an error"
            if state.hasPrefix("28") {
                return CatalogError(
                    .cannotOpen, "the PostgreSQL server at \(location) refused the login: \(message)",
                    hint: "check the user and password (the URL, or PGUSER and PGPASSWORD)")
            }
            if state == "3D000" {
                return CatalogError(
                    .cannotOpen, "the PostgreSQL server at \(location) has no such database: \(message)",
                    hint: "create it first (createdb), or name another in the URL")
            }
            if state == "55P03" {
                return CatalogError(
                    .queryFailed,
                    "the catalog at \(location) stayed locked by another agent-eval for \(Int(Self.lockTimeout)) s (\(message))",
                    hint: "wait for the other agent-eval to finish, or use another catalog")
            }
            if state == "25006" {
                return CatalogError(.readOnly, "the catalog refuses writes here (\(message))")
            }
            if state.hasPrefix("57P") || state.hasPrefix("08") {
                return CatalogError(
                    .unreachable, "the PostgreSQL server at \(location) ended the connection: \(message)", hint: unreachableHint)
            }
            return CatalogError(.queryFailed, "the catalog at \(location) failed: \(message)")
        case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection:
            let cause = error.underlying.map { " (\(Self.plainCause($0)))" } ?? ""
            return CatalogError(
                .unreachable,
                connecting
                    ? "cannot connect to the PostgreSQL server at \(location)\(cause)"
                    : "lost the connection to the PostgreSQL server at \(location)\(cause); the transaction in progress was not committed",
                hint: unreachableHint)
        case .sslUnsupported:
            return CatalogError(
                .cannotOpen, "the PostgreSQL server at \(location) does not offer TLS, which the URL requires (sslmode)",
                hint: "drop sslmode=require from the URL, or turn on ssl in the server")
        default:
            return CatalogError(
                .queryFailed,
                "the catalog at \(location) failed: the PostgreSQL client stopped on \(error.code)"
                    + (error.underlying.map { " (\(Self.plainCause($0)))" } ?? ""))
        }
    }
}

/// One connection of a `PostgresStore`, inside one of its transactions.
final class PostgresSQLConnection: SQLConnection {
    let connection: PostgresConnection
    let store: PostgresStore
    private(set) var changes = 0
    /// Waited for an answer beyond `PostgresStore.answerWait`: a `sql` statement's own time.
    var extraWait: TimeInterval = 0

    init(connection: PostgresConnection, store: PostgresStore) {
        self.connection = connection
        self.store = store
    }

    var dialect: SQLDialect { .postgres }

    func run(_ sql: String, bind: (inout any SQLBinder) -> Void, each body: (any SQLRowView) throws -> Void) throws {
        var binder: any SQLBinder = PostgresBinder()
        bind(&binder)
        // swift-format-ignore: NeverForceUnwrap
        let bindings = (binder as! PostgresBinder).bindings
        // A statement with no values bound is sent as written: `sql`'s text may use `?` as
        // PostgreSQL's own JSON operator.
        let text = bindings.count == 0 ? sql : store.numberedParameters(sql)
        let query = PostgresQuery(unsafeSQL: text, binds: bindings)
        let result = try PostgresStore.answer(to: query, on: connection, extra: extraWait)
        changes = result.metadata.rows ?? 0
        for row in result.rows {
            try body(PostgresRowView(row: row.makeRandomAccess()))
        }
    }

    /// Runs a text of several statements (a migration), one at a time: the extended protocol
    /// takes one command per message. The catalog's own scripts hold no `;` in a string.
    func script(_ sql: String) throws {
        for statement in sql.split(separator: ";") where !statement.allSatisfy(\.isWhitespace) {
            try execute(String(statement))
        }
    }
}

/// Bindings for one PostgreSQL statement.
struct PostgresBinder: SQLBinder {
    var bindings = PostgresBindings()

    mutating func bind(_ value: Int?) {
        if let value { bindings.append(Int64(value)) } else { bindings.appendNull() }
    }

    mutating func bind(_ value: Int64) { bindings.append(value) }

    mutating func bind(_ value: Double?) {
        if let value { bindings.append(value) } else { bindings.appendNull() }
    }

    mutating func bind(_ value: [UInt8]?) {
        if let value { bindings.append(ByteBuffer(bytes: value)) } else { bindings.appendNull() }
    }

    mutating func bind(_ value: String?) {
        if let value { bindings.append(value) } else { bindings.appendNull() }
    }
}

/// A PostgreSQL row, read by position.
struct PostgresRowView: SQLRowView {
    let row: PostgresRandomAccessRow

    var columnCount: Int { row.count }

    func name(_ column: Int) -> String { row[column].columnName }

    func isNull(_ column: Int) -> Bool { row[column].bytes == nil }

    func value(_ column: Int) -> CatalogValue {
        let cell = row[column]
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .int2, .int4, .int8, .oid:
            return (try? cell.decode(Int64.self)).map(CatalogValue.integer) ?? .null
        case .float4, .float8:
            return (try? cell.decode(Double.self)).map(CatalogValue.real) ?? .null
        case .bool:
            return (try? cell.decode(Bool.self)).map { .integer($0 ? 1 : 0) } ?? .null
        case .numeric:
            guard let decimal = try? cell.decode(Decimal.self) else { return .null }
            let number = NSDecimalNumber(decimal: decimal)
            if decimal == Decimal(number.int64Value) { return .integer(number.int64Value) }
            return .real(number.doubleValue)
        case .bytea:
            return .blob((try? cell.decode(ByteBuffer.self)).map { Array($0.readableBytesView) } ?? [])
        case .timestamp, .timestamptz, .date:
            // As ISO 8601 text (UTC), for what `sql` shows of PostgreSQL's own tables.
            return (try? cell.decode(Date.self)).map { .text(ISO8601DateFormatter().string(from: $0)) } ?? .null
        default:
            if let text = try? cell.decode(String.self) { return .text(text) }
            return .blob(cell.bytes.map { Array($0.readableBytesView) } ?? [])
        }
    }

    func int(_ column: Int) -> Int { Int(column: value(column)) }

    func text(_ column: Int) -> String { String(column: value(column)) }

    func blob(_ column: Int) -> [UInt8]? {
        switch value(column) {
        case .null: return nil
        case .blob(let bytes): return bytes
        case .text(let text): return Array(text.utf8)
        case let other: return Array(other.description.utf8)
        }
    }
}

/// A PostgreSQL catalog's URL, with what it leaves out taken from the `PG*` variables, as
/// libpq reads them: `postgres://[user[:password]@][host][:port][/database][?sslmode=…&host=…]`.
struct PostgresTarget: Sendable {
    var user: String
    var password: String?
    var host: String
    var port: Int
    var database: String
    var sslMode: String

    init(url: String, environment: [String: String]) throws(CatalogError) {
        guard let components = URLComponents(string: url), PostgresStore.isURL(url) else {
            throw CatalogError(
                .cannotOpen, "the catalog URL is not one agent-eval can read: \(Self.redacted(url))",
                hint: "write it as postgres://USER@HOST:PORT/DATABASE (the password from PGPASSWORD)")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        func nonEmpty(_ value: String?) -> String? { value.flatMap { $0.isEmpty ? nil : $0 } }
        user = nonEmpty(components.user) ?? nonEmpty(environment["PGUSER"]) ?? ProcessInfo.processInfo.userName
        password = components.password ?? nonEmpty(environment["PGPASSWORD"])
        host = nonEmpty(components.host) ?? nonEmpty(query["host"]) ?? nonEmpty(environment["PGHOST"]) ?? "localhost"
        let portText = components.port.map(String.init) ?? nonEmpty(query["port"]) ?? nonEmpty(environment["PGPORT"]) ?? "5432"
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw CatalogError(.cannotOpen, "the catalog URL's port is not a port: \(portText)")
        }
        self.port = port
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = nonEmpty(path) ?? nonEmpty(query["dbname"]) ?? nonEmpty(environment["PGDATABASE"]) ?? user
        sslMode = nonEmpty(query["sslmode"]) ?? nonEmpty(environment["PGSSLMODE"]) ?? "prefer"
        guard ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"].contains(sslMode) else {
            throw CatalogError(
                .cannotOpen, "the catalog URL's sslmode is \(sslMode)",
                hint: "use disable, prefer, require, verify-ca or verify-full")
        }
    }

    /// The URL as messages show it: everything but the password.
    var location: String {
        let server = host.hasPrefix("/") ? "localhost" : host.contains(":") ? "[\(host)]" : host
        var text = "postgres://\(user)@\(server):\(port)/\(database)"
        if host.hasPrefix("/") { text += "?host=\(host)" }
        return text
    }

    /// `url` with any password replaced by `***`: whatever stands between the user's name and
    /// the last `@` before the host, found by hand (a password with a space or a `#` in it is
    /// not a URL `URLComponents` reads).
    static func redacted(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "?" }) ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return url }
        let credentials = rest[..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return String(url[..<scheme.upperBound]) + credentials[..<colon] + ":***" + rest[at...]
    }

    func configuration() throws(CatalogError) -> PostgresConnection.Configuration {
        if host.hasPrefix("/") {
            return PostgresConnection.Configuration(
                unixSocketPath: host + "/.s.PGSQL.\(port)", username: user, password: password, database: database)
        }
        let tls: PostgresConnection.Configuration.TLS
        do {
            switch sslMode {
            case "disable", "allow":
                tls = .disable
            case "prefer", "require":
                var settings = TLSConfiguration.makeClientConfiguration()
                // libpq's prefer and require encrypt without checking the server's certificate.
                settings.certificateVerification = .none
                let context = try NIOSSLContext(configuration: settings)
                tls = sslMode == "require" ? .require(context) : .prefer(context)
            default:
                var settings = TLSConfiguration.makeClientConfiguration()
                settings.certificateVerification = sslMode == "verify-ca" ? .noHostnameVerification : .fullVerification
                tls = .require(try NIOSSLContext(configuration: settings))
            }
        } catch {
            throw CatalogError(.cannotOpen, "cannot set up TLS for the catalog at \(location): \(error)")
        }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = .seconds(10)
        return configuration
    }
}
