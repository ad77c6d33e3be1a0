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
            abstract: "Report catalog rows whose log changed or vanished since it was indexed.",
            discussion:
                "Reads only each log's last member. Exit codes: 0 all current; 1 some rows are stale (index again); 2 the catalog cannot be used."
        )

        @OptionGroup var location: CatalogArguments

        @Flag(help: "Print JSON.")
        var json = false

        func run() throws {
            let catalog = try location.open(readOnly: true)
            let result: (checked: Int, stale: [StaleLog])
            do {
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
