import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

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
