public import TraceCore

/// The one error type of the catalog.
public struct CatalogError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// The file is not a SQLite database (or not one of ours).
        case notACatalog = "not_a_catalog"
        /// SQLite reports the database damaged.
        case corrupt
        /// The catalog was written by a newer agent-eval (its schema version is higher).
        case newerSchema = "newer_schema"
        /// The catalog cannot be opened or created (permissions, a directory in the way).
        case cannotOpen = "cannot_open"
        /// A statement failed (SQL syntax in `sql`, a write refused, a lock held too long).
        case queryFailed = "query_failed"
        /// `sql` was given a statement that would change the catalog.
        case readOnly = "read_only"
        /// A path given to `index` matches no file.
        case missingPath = "missing_path"
        /// A results file given to `results merge` cannot be read.
        case badResults = "bad_results"
        /// `catalog rebuild` cannot read the old catalog's suite history, which the logs do not hold.
        case historyUnreadable = "history_unreadable"
        /// A `sql` statement ran past its time limit and was stopped.
        case timedOut = "timed_out"
        /// `sql` was given more than one statement.
        case severalStatements = "several_statements"
        /// The PostgreSQL server of a team's catalog cannot be reached, or went away mid-command.
        case unreachable
        /// `sql` on PostgreSQL was asked to run as a role whose rights a read-only transaction
        /// does not hold back (a superuser, a member of `pg_execute_server_program`, …).
        case privilegedRole = "privileged_role"
        /// The catalog file is in use in a way that rules the command out: `catalog rebuild`
        /// while another process has it open for writing, or a write while a rebuild runs.
        case inUse = "in_use"
    }

    public var code: Code
    public var message: String
    public var location: SourceLocation?
    public var hint: String?

    public init(_ code: Code, _ message: String, location: SourceLocation? = nil, hint: String? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.hint = hint
    }

    public var diagnosticCode: String { "catalog." + code.rawValue }
    public var place: SourceLocation? { location }

    /// The hint for a catalog that cannot be used as it is: it is derived data.
    static let rebuildHint = "the catalog holds only what the logs hold: move the file away and rebuild it from the logs"
}
