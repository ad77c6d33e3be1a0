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

extension CatalogCommand {
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Report catalog rows whose log changed or vanished since it was indexed, and damage to the catalog's file.",
            discussion:
                "Reads only each log's last member; checks a SQLite catalog's own pages and indexes first (PRAGMA quick_check). "
                + "Exit codes: 0 all current; 1 some rows are stale (index again); 2 the catalog is damaged (catalog rebuild) or cannot be used."
        )

        @OptionGroup var location: CatalogArguments

        @Flag(help: "Print JSON.")
        var json = false

        func run() throws {
            let catalog = try location.open(readOnly: true)
            let result: (checked: Int, stale: [StaleLog])
            do {
                // A damaged file first: its rows cannot be trusted to say what is stale.
                let damage = try catalog.damage()
                if !damage.isEmpty {
                    throw CatalogError(
                        .queryFailed,
                        "the catalog \(displayPath(location.path)) is damaged: "
                            + damage.prefix(3).joined(separator: "; ") + (damage.count > 3 ? " (and \(damage.count - 3) more)" : ""),
                        hint: "agent-eval catalog rebuild makes it again from the logs (and keeps the suite history it can read)")
                }
                result = try catalog.check()
            } catch {
                throw diagnose(error)
            }
            if json {
                printJSON(["checked": .int(result.checked), "stale": .array(result.stale.map(\.json))])
            } else {
                for stale in result.stale {
                    say("\(stale.reason.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(displayPath(stale.path))")
                }
                say(
                    "\(result.checked) log\(result.checked == 1 ? "" : "s") checked: \(result.stale.count) stale"
                        + (result.stale.isEmpty ? "" : " (run `agent-eval index` to bring them up to date)"))
            }
            if !result.stale.isEmpty { throw Exit.failure }
        }
    }
}
