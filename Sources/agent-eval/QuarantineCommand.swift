import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

/// `agent-eval quarantine`: set cases aside while they are fixed, with an owner and an end.
struct QuarantineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quarantine",
        abstract: "Set failing cases aside while they are fixed: they still run and are reported, and do not fail the gate.",
        discussion: """
            A quarantined case runs and is reported as usual; its failures and regressions do not fail `agent-eval run` \
            (they are counted as quarantined). Every entry has an owner, a reason (or an issue link) and an `until` \
            date: after that day `run` fails the case and `check` reports the entry, so nothing stays set aside by \
            accident. Entries live in the project's quarantine file, .agent-eval/quarantine.yaml in the project root \
            (docs/eval-cases.md, "Quarantine"; schema: docs/quarantine.schema.json), or as `quarantine:` in a case file.

            Examples:
              agent-eval quarantine add refund-flow --owner alice --reason https://github.com/acme/agents/issues/42 --days 14
              agent-eval quarantine list
              agent-eval quarantine release refund-flow
            """,
        subcommands: [QuarantineAddCommand.self, QuarantineListCommand.self, QuarantineReleaseCommand.self]
    )
}

/// Where the quarantine file is.
struct QuarantineFileArgument: ParsableArguments {
    @Option(
        help: ArgumentHelp("The quarantine file (default: .agent-eval/quarantine.yaml in the project root).", valueName: "file"))
    var file: String?

    var path: String { file ?? QuarantineFile.defaultPath() }

    /// The file (empty when there is none), or its problems printed and exit 2. A file given
    /// with --file that is not there is an error where the command only reads it (`mustExist`):
    /// a misspelt path would list no entry and pass the expiry gate.
    func load(mustExist: Bool = false) throws -> QuarantineFile {
        if mustExist, let file, !FileManager.default.fileExists(atPath: file) {
            throw diagnose(
                CommandError(
                    "no_quarantine_file", "the quarantine file \(file) does not exist", at: SourceLocation(path: file),
                    hint: "check the path, or leave --file out for the project's .agent-eval/quarantine.yaml"))
        }
        do {
            return try QuarantineFile.load(path: path)
        } catch {
            for problem in error.errors { diagnose(problem) }
            throw Exit.unusable
        }
    }
}

struct QuarantineAddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Quarantine a case (or change its entry): its owner, why, and until when.",
        discussion: """
            Writes the entry into the quarantine file (creating it) and prints it. An entry for the same case is \
            replaced. The file is rewritten whole, entries sorted by case id: comments in it are not kept.

            Exit codes: 0 written; 2 the file cannot be read or written; 64 usage error.
            """)

    @Argument(help: "The caseId to quarantine.")
    var caseId: String

    @Option(help: "Who fixes it: a name, a handle or an address.")
    var owner: String

    @Option(help: "Why, or the issue that tracks the fix.")
    var reason: String

    @Option(help: ArgumentHelp("The last day the quarantine holds, YYYY-MM-DD (UTC).", valueName: "date"))
    var until: String?

    @Option(help: "Or: the quarantine holds this many days from today (14 when neither is given).")
    var days: Int?

    @OptionGroup var location: QuarantineFileArgument

    @Flag(help: "Print the entry as JSON.")
    var json = false

    func validate() throws {
        if until != nil && days != nil { throw ValidationError("give --until or --days, not both") }
        if let until, !QuarantineEntry.isDate(until) { throw ValidationError("--until must be a date written YYYY-MM-DD, got \(until)") }
        if let days, days < 1 || days > 3650 { throw ValidationError("--days must be between 1 and 3650") }
        if !EvalCase.isValidId(caseId) {
            throw ValidationError("\(caseId) is not a caseId: case ids hold letters, digits, \"-\", \"_\", \".\" and \":\"")
        }
        if owner.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--owner must not be empty") }
        if reason.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--reason must not be empty") }
    }

    func run() throws {
        var file = try location.load()
        let end = until ?? QuarantineEntry.today(Date().addingTimeInterval(Double(days ?? 14) * 86_400))
        let replaced = file.entry(for: caseId) != nil
        file.entries.removeAll { $0.caseId == caseId }
        let entry = QuarantineEntry(caseId: caseId, owner: owner, reason: reason, until: end, location: SourceLocation(path: file.path))
        file.entries.append(entry)
        do {
            try file.save()
        } catch {
            throw diagnose(error)
        }
        if json {
            var object = ObjectBuilder()
            object.set("case_id", caseId)
            object.set("action", replaced ? "replaced" : "added")
            object.set("owner", owner)
            object.set("reason", reason)
            object.set("until", end)
            object.set("file", file.path)
            printJSON(object.json)
        } else {
            say("\(replaced ? "changed" : "quarantined") \(caseId) in \(displayPath(file.path)): \(entry.sentence)")
            if entry.isExpiredNow { printError("warning: \(end) is in the past: `run` fails the case until the entry is extended") }
        }
    }
}

struct QuarantineListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the quarantine file's entries: each one's owner, reason, end, and whether it is ready to release.",
        discussion: """
            With the catalog (the default), each entry says how many of the case's last recorded suite runs passed in \
            a row; a case that passed its last --release-after runs (default 5) is ready to release. Entries written \
            as `quarantine:` in case files show in `run`'s report and in `check`.

            Exit codes: 0 listed (with --fail-on-expired: and none expired); 1 an entry expired, with \
            --fail-on-expired; 2 the file cannot be read, or a file given with --file does not exist; 64 usage error.
            """)

    @OptionGroup var location: QuarantineFileArgument

    @OptionGroup(title: "Catalog")
    var catalog: CatalogUse

    @Option(help: "A case that passed this many recorded suite runs in a row is ready to release (as `run` says).")
    var releaseAfter = QuarantineEntry.releaseStreak

    @Flag(help: "Exit 1 when an entry is past its date.")
    var failOnExpired = false

    @Flag(help: "Print the entries as JSON.")
    var json = false

    func validate() throws {
        if releaseAfter < 1 { throw ValidationError("--release-after must be at least 1") }
    }

    func run() throws {
        let file = try location.load(mustExist: true)
        let catalog = self.catalog.openIfWanted()
        var entries: [JSONValue] = []
        var expired = 0
        for entry in file.entries {
            var streak: Int?
            if let catalog {
                do {
                    streak = try catalog.history(caseId: entry.caseId, limit: releaseAfter).passingStreak
                } catch {
                    warn(error)
                }
            }
            if entry.isExpiredNow { expired += 1 }
            let ready = streak.map { $0 >= releaseAfter }
            var object = ObjectBuilder()
            object.set("case_id", entry.caseId)
            object.set("owner", entry.owner)
            object.set("reason", entry.reason)
            object.set("until", entry.until)
            object.set("expired", entry.isExpiredNow)
            object.set("passing_streak", streak)
            object.set("ready_to_release", ready)
            entries.append(object.json)
            if !json {
                var line = "\(entry.caseId): \(entry.sentence)"
                if entry.isExpiredNow { line += "  EXPIRED" }
                if let streak {
                    line +=
                        ready == true
                        ? "  READY TO RELEASE (passed its last \(streak) suite runs)" : "  (passing streak \(streak) of \(releaseAfter))"
                }
                say(line)
            }
        }
        if json {
            var object = ObjectBuilder()
            object.set("file", file.path)
            object.set("release_after", releaseAfter)
            object.set("entries", JSONValue.array(entries))
            printJSON(object.json)
        } else {
            say(
                "\(counted(file.entries.count, "quarantined case")) in \(displayPath(file.path))"
                    + (expired > 0 ? ", \(expired) expired" : ""))
        }
        if failOnExpired && expired > 0 { throw ExitCode(1) }
    }
}

struct QuarantineReleaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "release",
        abstract: "End a case's quarantine: remove its entry from the quarantine file.",
        discussion: """
            Exit codes: 0 released; 2 the case has no entry in the file, or the file cannot be read or written; 64 usage \
            error. An entry written as `quarantine:` in a case file is released by deleting it there.
            """)

    @Argument(help: "The caseIds to release.")
    var caseIds: [String]

    @OptionGroup var location: QuarantineFileArgument

    func validate() throws {
        if caseIds.isEmpty { throw ValidationError("give the caseId to release") }
    }

    func run() throws {
        var file = try location.load(mustExist: true)
        let missing = caseIds.filter { file.entry(for: $0) == nil }
        if !missing.isEmpty {
            throw diagnose(
                CommandError(
                    "not_quarantined", "\(missing.joined(separator: ", ")) \(missing.count == 1 ? "has" : "have") no entry in \(file.path)",
                    hint:
                        "`agent-eval quarantine list` shows the entries; one written in a case file is released by deleting its quarantine: key"
                ))
        }
        file.entries.removeAll { caseIds.contains($0.caseId) }
        do {
            try file.save()
        } catch {
            throw diagnose(error)
        }
        var said = Set<String>()
        for caseId in caseIds where said.insert(caseId).inserted { say("released \(caseId) from \(displayPath(file.path))") }
    }
}
