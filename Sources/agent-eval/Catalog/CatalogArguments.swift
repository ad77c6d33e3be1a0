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

/// Where the catalog is, for every command that uses it.
struct CatalogArguments: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The catalog file, or a team's PostgreSQL catalog as postgres://USER@HOST:PORT/DATABASE (password from PGPASSWORD; docs/catalog.md) (default: $AGENT_EVAL_CATALOG, else `catalog:` in .agent-eval/settings.yaml, else .agent-eval/catalog.sqlite, both in the project root: the nearest folder up from here with .agent-eval/ or .git, else the current directory).",
            valueName: "path-or-url"))
    var catalog: String?

    /// Where the catalog is: --catalog, else AGENT_EVAL_CATALOG, else the project's setting
    /// (`catalog:` in .agent-eval/settings.yaml, `Catalog.projectSetting`), else the default
    /// file. Throws when the settings file cannot be read or holds a mistake (its line named);
    /// a command that needs the catalog stops there, one that can do without it warns.
    func resolvedPath() throws(ConfigError) -> String {
        if let catalog { return catalog }
        return try Catalog.projectSetting() ?? Catalog.defaultPath()
    }

    /// `resolvedPath()` once it is known to resolve (a catalog opened from it), for messages.
    var path: String { (try? resolvedPath()) ?? catalog ?? Catalog.defaultPath() }

    /// `open`, for an async command: on the catalog's threads (`Catalog.opening`).
    func open(readOnly: Bool = false) async throws -> Catalog {
        do {
            return try await Catalog.opening(path: try resolvedPath(), readOnly: readOnly)
        } catch {
            throw diagnose(error)
        }
    }

    /// Opens the catalog (creating it on first use), or prints why not and exits 2.
    func open(readOnly: Bool = false) throws -> Catalog {
        do {
            return try Catalog(path: try resolvedPath(), readOnly: readOnly)
        } catch {
            throw diagnose(error)
        }
    }

    /// The location, or nil with a warning when the project's settings hold a mistake: for a
    /// command whose catalog is a cache it can do without.
    func pathOrWarn() -> String? {
        do {
            return try resolvedPath()
        } catch {
            warn(error)
            printError("warning: going on without the catalog (--no-catalog silences this)")
            return nil
        }
    }
}

/// `exec` and `run`: index what they write, unless told not to.
struct CatalogUse: ParsableArguments {
    @OptionGroup var location: CatalogArguments

    @Flag(help: "Do not index the logs written (or use the eval fact cache) in the catalog.")
    var noCatalog = false

    /// The catalog, or nil with --no-catalog. A catalog that cannot be opened is a warning
    /// here, not a failure: the run itself does not need it.
    func openIfWanted() -> Catalog? {
        noCatalog ? nil : location.openOrWarn()
    }

    /// `openIfWanted`, for an async command: opened on the catalog's threads.
    func openIfWanted() async -> Catalog? {
        noCatalog ? nil : await location.openOrWarn()
    }

    /// What indexes the logs a command writes as their runs close them, or nil with
    /// --no-catalog (or no catalog to be had); a log that cannot be indexed is a warning.
    func indexingSink() async -> IndexingSink? {
        await openIfWanted().map { IndexingSink.warning($0) }
    }
}

extension IndexingSink {
    /// The sink for `catalog` whose failures are warnings.
    static func warning(_ catalog: Catalog, keepsFacts: Bool = false) -> IndexingSink {
        IndexingSink(catalog: catalog, keepsFacts: keepsFacts, failed: { _, error in warn(error) })
    }
}

extension CatalogArguments {
    /// The catalog, for a command that can do without it: one that cannot be opened is a
    /// warning, and nil.
    func openOrWarn() -> Catalog? {
        guard let path = pathOrWarn() else { return nil }
        let isNew = isNew(path)
        return opened(path, isNew: isNew, Result { () throws(CatalogError) in try Catalog(path: path) })
    }

    /// `openOrWarn`, for an async command: opened on the catalog's threads.
    func openOrWarn() async -> Catalog? {
        guard let path = pathOrWarn() else { return nil }
        let isNew = isNew(path)
        do throws(CatalogError) {
            return opened(path, isNew: isNew, .success(try await Catalog.opening(path: path)))
        } catch {
            return opened(path, isNew: isNew, .failure(error))
        }
    }

    /// Whether opening `path` makes a catalog the user did not name. Where a command leaves data
    /// it found on its own is worth saying once: it may be a parent folder. A path the user gave
    /// (--catalog, AGENT_EVAL_CATALOG) needs no note.
    private func isNew(_ path: String) -> Bool {
        let isFound = catalog == nil && (ProcessInfo.processInfo.environment["AGENT_EVAL_CATALOG"] ?? "").isEmpty
        return isFound && !FileManager.default.fileExists(atPath: path)
    }

    /// The catalog opened, with the note that it was made; nil with a warning when it could not be.
    private func opened(_ path: String, isNew: Bool, _ result: Result<Catalog, CatalogError>) -> Catalog? {
        switch result {
        case .success(let catalog):
            if isNew { printError("note: created the catalog \(displayPath(path)) (docs/catalog.md says where it goes)") }
            return catalog
        case .failure(let error):
            warn(error)
            printError("warning: going on without the catalog (--no-catalog silences this)")
            return nil
        }
    }
}

/// A log path as people want to see it: relative to the current directory when under it.
func displayPath(_ path: String) -> String {
    // A team catalog's URL may hold its password: never shown.
    if Catalog.isServer(path) { return Catalog.redacted(path) }
    let directory = FileManager.default.currentDirectoryPath + "/"
    return path.hasPrefix(directory) ? String(path.dropFirst(directory.count)) : path
}

/// `2026-11-22 10:04:05` (UTC) for microseconds since 1970.
func utcTime(_ microseconds: Int?) -> String {
    guard let microseconds else { return "-" }
    var seconds = time_t(microseconds / 1_000_000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    return String(
        format: "%04d-%02d-%02d %02d:%02d:%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour),
        Int(parts.tm_min), Int(parts.tm_sec))
}

/// Columns padded to their widest cell; the last is not padded.
func table(_ rows: [[String]]) -> [String] {
    guard let first = rows.first else { return [] }
    var widths = [Int](repeating: 0, count: first.count)
    for row in rows { for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) } }
    return rows.map { row in
        row.enumerated().map { index, cell in
            index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
        }.joined(separator: "  ")
    }
}

/// The filters `runs` and `stats` share.
struct RunFilters: ParsableArguments {
    @Option(
        help: """
            Runs with a call of this tool that ran (repeatable: all of them). Per call: with --approval or --denied, \
            a call of this tool in that state.
            """)
    var tool: [String] = []

    @Option(
        help:
            "Runs in which no call of this tool ran (repeatable). Per run, whatever the call filters say; only runs whose logs were read whole (intact) to their stop."
    )
    var notTool: [String] = []

    @Option(help: "Runs that stopped for this reason (repeatable: any of them); `running` for runs without a stop.")
    var stop: [String] = []

    @Option(help: "Runs of this agent (a glob).")
    var agent: String?

    @Option(help: "Runs of this model, provider:name (a glob, e.g. 'openai:*').")
    var model: String?

    @Option(help: "Runs that started at or after this time: 2026-11-01, 2026-11-01T09:30:00Z, or 7d / 12h / 30m ago.")
    var since: String?

    @Option(help: "Runs that started before this time (same forms as --since).")
    var until: String?

    @Option(help: "Logs in this state: intact, torn, damaged or vanished (repeatable).")
    var status: [String] = []

    @Flag(help: "Runs with a call denied by policy or refused by a human. Per call (with --tool, a call of that tool).")
    var denied = false

    @Option(
        help: """
            Runs with a call whose approval was granted, refused, is pending, or none (the call ran with no human approval). \
            Per call (with --tool, a call of that tool).
            """)
    var approval: String?

    @Option(help: "Runs that cost at least this many US dollars.")
    var minCost: Double?

    @Option(help: ArgumentHelp("Forks of this run (agent-eval fork), by its run id.", valueName: "run-id"))
    var forksOf: String?

    func validate() throws { _ = try query(limit: 1) }

    @Option(
        help:
            "Runs whose log path, run id, agent, model or input holds this text (the case of ASCII letters ignored; % and _ are themselves)."
    )
    var text: String?

    /// The query, read by the catalog's one reader of run filters (`RunQuery(filters:)`, which
    /// `serve` uses for a page's address too).
    func query(limit: Int) throws -> RunQuery {
        var pairs: [(name: String, value: String)] = []
        pairs += tool.map { ("tool", $0) }
        pairs += notTool.map { ("not-tool", $0) }
        pairs += stop.map { ("stop", $0) }
        if let agent { pairs.append(("agent", agent)) }
        if let model { pairs.append(("model", model)) }
        if let since { pairs.append(("since", since)) }
        if let until { pairs.append(("until", until)) }
        pairs += status.map { ("status", $0) }
        if denied { pairs.append(("denied", "true")) }
        if let approval { pairs.append(("approval", approval)) }
        if let minCost { pairs.append(("min-cost", String(minCost))) }
        if let forksOf { pairs.append(("forks-of", forksOf)) }
        if let text { pairs.append(("text", text)) }
        do {
            return try RunQuery(filters: pairs, limit: limit)
        } catch {
            throw ValidationError(error.message)
        }
    }
}

/// `--jobs` of `index` and `catalog rebuild`: the number of cores when not given.
func readingJobs(_ jobs: Int?) -> Int { max(1, jobs ?? ProcessInfo.processInfo.activeProcessorCount) }

/// Refuses a `--jobs` below 1.
func validateReadingJobs(_ jobs: Int?) throws {
    if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
}
