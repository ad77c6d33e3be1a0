import ArgumentParser
import ConfigFile
import TraceCore
import TraceLog

extension LogCommand {
    struct Repair: ParsableCommand, ReadsLogs {
        static let configuration = CommandConfiguration(
            commandName: "repair",
            abstract: "Seal a torn tail in place so gzip and zcat read the log again.",
            discussion: """
                A log cut off by a crash ends inside a gzip member. Repair cuts it back to the last complete event \
                and finishes the member, in place: afterwards `gzip -t` passes and `zcat` prints exactly the \
                complete events. No complete event is ever dropped. The rewrite is crash-safe: the sealed member \
                goes to <file>.seal first, and an interrupted repair is finished by the next one.

                Repair refuses anything but a torn tail — a damaged member in the middle, an edited or missing \
                event — and explains: rewriting those would hide what happened. An intact log is left as it is.

                A <file>.seal that is not a seal of this log as it is now (made for another log, or not a side \
                file at all) is stray: it is never applied, readers ignore it, and repair leaves it where it is \
                with a warning to remove it (and refuses to seal a torn log while it is in the way).

                Exit codes: 0 sealed or already intact, 1 refused (other damage, or a stray <file>.seal in the way), 2 unreadable.

                Example:
                  agent-eval log repair runs/crashed.jsonl.gz
                """
        )

        @Argument(help: "The log file (.jsonl.gz), changed in place.")
        var file: String

        @Flag(help: "Print the result as JSON.")
        var json = false

        @OptionGroup var limits: LogReadLimits

        func run() throws {
            let result: RepairReport?
            let stray: LogError?
            do {
                result = try LogRepair.seal(path: file)
                stray = LogRepair.straySeal(of: file)
            } catch let error as LogError where error.code == .notRepairable || error.code == .straySeal {
                // Refused: the log is damaged in a way repair does not touch (1, as documented).
                throw diagnose(error, exit: Exit.failure)
            } catch {
                throw diagnose(error)
            }
            if json {
                printJSON(RepairReport.json(path: file, report: result, warnings: stray.map { [$0] } ?? []))
                return
            }
            if let stray { warn(stray) }
            guard let result else {
                say("\(file): intact, nothing to repair")
                return
            }
            if result.finishedInterruptedSeal {
                say(
                    "\(file): finished an interrupted seal from \(file).seal — wrote the sealed final member at byte \(result.memberOffset) (\(result.originalSize) → \(result.newSize) bytes)"
                        + (result.lastSequence.map { "; the last event is seq \($0)" } ?? ""))
                return
            }
            let last = result.lastSequence.map { "the last event is now seq \($0)" } ?? "the log now holds no event"
            say(
                "\(file): sealed — cut at byte \(result.memberOffset) and rewrote the final member (\(result.originalSize) → \(result.newSize) bytes); kept \(result.eventsKept) complete events of that member, dropped \(result.droppedBytes) bytes of a partial event; \(last)"
            )
        }
    }
}
