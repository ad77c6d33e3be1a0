import ArgumentParser
import ConfigFile
import TraceCore
import TraceLog

extension LogCommand {
    struct Upgrade: ParsableCommand, ReadsLogs {
        static let configuration = CommandConfiguration(
            commandName: "upgrade",
            abstract: "Rewrite a version 1 log as version 3, whose hash chain links gzip members (about a fifth smaller).",
            discussion: """
                Writes NEW with the same run and the same events as OLD — kind, step, time and data; each context \
                packet the same once made whole (the writer writes it whole or as a delta, as it chooses) — in version 3 \
                members with version 3 links (docs/log-format.md §3.1, §6). OLD is not changed (a version 1 log stays \
                readable by every reader; upgrading saves its bytes). Recompressing a version 3 log as one member \
                (zcat | gzip) breaks its chain: rewrite logs with this command, never with gzip. NEW is then read back: it must hold the same events, and every state digest must \
                match its fold, or it is removed and the command fails.

                Only a log that proves what it holds is rewritten: intact, and every recorded state digest matching \
                the state its events fold to (a mismatch is evidence a rewrite would hide). A torn log is not upgraded: \
                copy it, seal the copy (agent-eval log repair), and upgrade that. A signed log's signatures sign its version 1 links, so they are left \
                out — and the digests that counted them recomputed. --sign-key signs the new log; for a log that was \
                signed it needs --key, the old log's public key, and the old log must verify with it first.

                An event with data members this agent-eval does not know (written by a newer one) is not dropped \
                silently: the log is refused, naming the event and the member; upgrade it with a newer agent-eval.

                Exit codes: 0 upgraded (or already version 3, with a note), 1 refused (torn, damaged, a digest \
                that does not match, or members this agent-eval does not know), 2 unreadable or NEW cannot be written.

                Example:
                  agent-eval log upgrade Fixtures/samples/support-sample.jsonl.gz /tmp/support-v3.jsonl.gz
                """
        )

        /// What the old log can be that refuses an upgrade: torn, damaged, or a digest mismatch.
        static let refusals: Set<LogError.Code> = [
            .digestMismatch, .badSignature, .tornTail, .corruptMember, .splitEvent, .invalidEvent, .sequenceGap, .sequenceRepeat,
            .brokenChain,
            .runMismatch, .noEvent, .unknownMembers,
        ]

        @Argument(help: "The log to upgrade (.jsonl.gz); left as it is.")
        var source: String

        @Argument(help: "The new log to write; must not exist.")
        var destination: String

        @Option(name: .customLong("sign-key"), help: "Sign the new log with this private key (agent-eval log keygen).")
        var signKey: String?

        @Option(
            help: "The public key (KEY.pub) the old log must verify with; needed to sign anew a log that was signed.")
        var key: String?

        @Flag(help: "Print the result as JSON.")
        var json = false

        @OptionGroup var limits: LogReadLimits

        func run() throws {
            let report: LogUpgrade.Report
            do {
                var options = LogWriter.Options()
                options.signer = try signKey.map { path throws(LogError) in try LogSigner(keyFile: path) }
                let sourceKey = try key.map { path throws(LogError) in try LogVerificationKey(keyFile: path) }
                report = try LogUpgrade.upgrade(from: source, to: destination, writing: options, sourceKey: sourceKey)
            } catch let error as LogError where error.code == .alreadyUpgraded {
                if json {
                    printJSON(["source": .string(source), "upgraded": false, "reason": .string(error.message)])
                } else {
                    say("\(source): \(error.message)")
                }
                return
            } catch let error as LogError where error.path == source && error.code == .tornTail {
                // The hint `log repair` gives would change OLD in place, which upgrade never does.
                throw diagnose(
                    CommandError(
                        "torn_tail", error.message, at: error.place,
                        hint: "upgrade leaves OLD as it is: copy it, seal the copy (agent-eval log repair COPY), then upgrade the copy"),
                    exit: Exit.failure)
            } catch let error as LogError where error.code == .alreadyExists && error.path == destination {
                throw diagnose(
                    CommandError(
                        "already_exists", "\(destination) exists already: upgrade writes a new file and never overwrites one",
                        at: SourceLocation(path: destination), hint: "give NEW a path where no file is"))
            } catch let error as LogError where error.path == source && Self.refusals.contains(error.code) {
                // Refused: the old log does not prove what it holds (1, as documented).
                throw diagnose(error, exit: Exit.failure)
            } catch {
                throw diagnose(error)
            }
            show(report)
        }

        /// Says what the upgrade wrote: a line (and a note about signatures left out), or JSON.
        private func show(_ report: LogUpgrade.Report) {
            let saved = report.sourceBytes > 0 ? Double(report.sourceBytes - report.destinationBytes) / Double(report.sourceBytes) : 0
            if json {
                var object = ObjectBuilder()
                object.set("source", report.source)
                object.set("destination", report.destination)
                object.set("upgraded", true)
                object.set("source_version", report.sourceVersion)
                object.set("version", report.destinationVersion)
                object.set("events", report.eventCount)
                object.set("signatures_left_out", report.signaturesLeftOut)
                object.set("signatures_added", report.signaturesAdded)
                object.set("source_bytes", report.sourceBytes)
                object.set("bytes", report.destinationBytes)
                object.set("source_members", report.sourceMembers)
                object.set("members", report.destinationMembers)
                printJSON(object.json)
                return
            }
            func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }
            let signatures = report.signaturesAdded > 0 ? " and \(count(report.signaturesAdded, "signature"))" : ""
            say(
                "\(report.destination): version \(report.destinationVersion), \(count(report.eventCount, "event"))\(signatures), "
                    + "\(count(report.destinationMembers, "gzip member")), \(report.destinationBytes) bytes (\(report.source): version "
                    + "\(report.sourceVersion), \(count(report.sourceMembers, "member")), \(report.sourceBytes) bytes; "
                    + "\(Int((saved * 100).rounded()))% smaller); read back: the same events, every digest checked")
            if report.signaturesLeftOut > 0 {
                say(
                    "note: \(report.signaturesLeftOut) signature event\(report.signaturesLeftOut == 1 ? "" : "s") of the old log left out (they sign its version 1 links)"
                        + (report.signaturesAdded > 0
                            ? "; the new log is signed (\(report.signaturesAdded) signatures)" : "; sign the new one with --sign-key"))
            }
        }
    }
}
