import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

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
