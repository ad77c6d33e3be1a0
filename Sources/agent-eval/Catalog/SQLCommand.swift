import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `agent-eval sql`: read-only SQL for power users.
struct SQLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Run one read-only SQL statement over the catalog.",
        discussion: """
            The connection is opened read-only: a statement that would change the catalog is refused. One statement \
            per call: text with a second one is refused before anything runs. A statement still running after \
            --timeout seconds is stopped (exit 2). Tables, views and example queries: docs/catalog.md.

            Example:
              agent-eval sql "SELECT path, step, arguments FROM unapproved_calls WHERE tool = 'refund_order'"
            """
    )

    @Argument(help: "The SQL statement.")
    var statement: String

    @Flag(help: "Print the rows as a JSON array of objects.")
    var json = false

    @Option(help: ArgumentHelp("Stop the statement after this many seconds (0: no limit; at most 31536000, a year).", valueName: "seconds"))
    var timeout: Double = Catalog.defaultQueryTimeout

    @OptionGroup var location: CatalogArguments

    func validate() throws {
        // At most a year: the deadline is counted in nanoseconds and milliseconds, which a larger
        // number of seconds would overflow.
        guard timeout >= 0, timeout <= 365 * 86_400 else {
            throw ValidationError("--timeout must be a number of seconds from 0 (no limit) to 31536000 (a year), got \(timeout)")
        }
    }

    func run() throws {
        let catalog = try location.open(readOnly: true)
        let result: QueryResult
        do {
            result = try catalog.query(statement, timeout: timeout > 0 ? timeout : nil)
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(result.json)
        } else {
            for line in table([result.columns] + result.rows.map { $0.map(\.description) }) { say(line) }
            say("(\(result.rows.count) row\(result.rows.count == 1 ? "" : "s"))")
        }
    }
}
