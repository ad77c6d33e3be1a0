import ArgumentParser
import ConfigFile
import TraceCore
import TraceLog

/// `agent-eval log`: look at, check and seal event logs.
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Print, verify, repair and upgrade event logs (.jsonl.gz).",
        subcommands: [Cat.self, Verify.self, Repair.self, Upgrade.self, Keygen.self]
    )

    struct Cat: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cat",
            abstract: "Print a log's events, one per line.",
            discussion: """
                By default each event is shown as a readable summary line: sequence number, step, time, kind and \
                the key facts. With --json (or its old spelling --jsonl) the events are printed exactly as stored, one JSON object per line, \
                for jq and other tools.

                A torn log (cut off by a crash) prints every complete event and a note on standard error saying \
                where the file was cut. A damaged log prints the events before the damage and fails with exit 2, \
                as does a log that holds no event (cut before its first, or whole members with no line).

                Examples:
                  agent-eval log cat Fixtures/samples/support-sample.jsonl.gz
                  agent-eval log cat --json run.jsonl.gz | jq -c 'select(.kind == "verdict_given")'
                  agent-eval log cat --kind tool_intended --kind tool_completed run.jsonl.gz
                """
        )

        @Argument(help: "The log file (.jsonl.gz).")
        var file: String

        @Flag(
            name: [.customLong("json"), .customLong("jsonl")],
            help: "Print the stored JSON lines exactly (one event per line, as zcat does), instead of summaries.")
        var json = false

        @Option(help: "Show only events of this kind (repeatable), e.g. tool_completed.")
        var kind: [String] = []

        func run() throws {
            var output = OutputBuffer()
            let kinds = Set(kind)
            var seen: Set<String> = []
            do {
                let reader = LogReader(path: file, options: LogReader.Options(resolvesContextPackets: !json))
                let summary = try reader.forEachLine { line, recorded in
                    seen.insert(recorded.event.kind)
                    guard kinds.isEmpty || kinds.contains(recorded.event.kind) else { return }
                    if json { output.append(line: line) } else { output.append(recorded.event.summaryLine) }
                }
                output.flush()
                // A kind this version does not know and the log does not hold is a typo, not an
                // empty answer (a newer writer's kinds are found when the log has them).
                for name in kind where !(EventPayload.everyKind + PipelineEvent.kinds).contains(name) && !seen.contains(name) {
                    let suggestion = ConfigNode.suggestion(
                        for: name, among: (EventPayload.everyKind + PipelineEvent.kinds) + seen.sorted())
                    throw diagnose(
                        CommandError(
                            "unknown_kind", "--kind \(name) is not an event kind of this log or of this version",
                            at: SourceLocation(path: file),
                            hint: (suggestion.map { "did you mean \($0)? " } ?? "")
                                + "kinds: \((EventPayload.everyKind + PipelineEvent.kinds).joined(separator: ", "))"), exit: Exit.usage)
                }
                // No event is no run, as verify says: not an empty answer.
                if summary.eventCount == 0 { throw LogError.noEvent(in: file, tear: summary.tear) }
                if let tear = summary.tear {
                    printError("note: \(file): \(tear)")
                    printError("hint: run `agent-eval log repair \(ShellWords.quoted(file))` to seal it")
                }
            } catch {
                output.flush()
                throw diagnose(error)
            }
        }
    }

    struct Keygen: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keygen",
            abstract: "Make an Ed25519 key pair for signing logs.",
            discussion: """
                Writes KEY (the private key, readable by its owner only) and KEY.pub. Sign runs with \
                `agent-eval exec --sign-key KEY`; check them with `agent-eval log verify --key KEY.pub`.

                Exit codes: 0 written; 2 a file is in the way or cannot be written; 64 usage error.

                Examples:
                  agent-eval log keygen keys/ci
                """
        )

        @Argument(help: "The private key file to write; the public key goes to <file>.pub.")
        var file: String

        func run() throws {
            do {
                try LogSigner.generateKeyFiles(at: file)
            } catch {
                throw diagnose(error)
            }
            say("wrote \(file) (private; keep it secret) and \(file).pub (public)")
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check a log's members, CRCs, sequence numbers and hash chain.",
            discussion: """
                Reads the whole log and reports every problem with the gzip member's byte offset and the event's \
                sequence number: damaged members (CRC, size or deflate data), a torn tail, members that end inside \
                an event, lines that are not valid events, an unknown envelope version, sequence gaps and repeats, \
                and breaks in the hash chain (an edited event). It reads on past a damaged member.

                An intact log is complete (it ends with run_stopped and every gzip member is closed) or unfinished \
                (it ends cleanly, but without run_stopped); --json says which as "ending": complete, unfinished, torn \
                or damaged.

                With --key KEY.pub the log must be signed with that key (exec --sign-key): every signature must \
                check and the last one must be the final one after a stop, so an edit with the chain recomputed, \
                reordered events, a cut end or appended events are reported as bad_signature.

                An interrupted repair's <file>.seal is a problem (pending_seal: the log may lack its last events \
                until `log repair` finishes the seal). A <file>.seal that is not a seal of this log as it is now is a \
                warning (stray_seal) and is ignored: the log is judged as it is.

                Exit codes: 0 intact (complete or unfinished), 1 damaged (problems listed), 2 unreadable (missing, not gzip).

                Examples:
                  agent-eval log verify Fixtures/samples/support-sample.jsonl.gz
                  agent-eval log verify --json run.jsonl.gz
                  agent-eval log verify --key keys/ci.pub run.jsonl.gz
                """
        )

        @Argument(help: "The log file (.jsonl.gz).")
        var file: String

        @Option(help: "The public key file (KEY.pub) the log must be signed with.")
        var key: String?

        @Flag(help: "Print the report as JSON.")
        var json = false

        func run() throws {
            let report: VerificationReport
            do {
                let verificationKey = try key.map { path throws(LogError) in try LogVerificationKey(keyFile: path) }
                report = try LogVerifier.verify(path: file, key: verificationKey)
            } catch {
                throw diagnose(error)
            }
            if json {
                printJSON(report.json)
            } else {
                let sequences = report.members.compactMap(\.lastSequence).max().map { ", seq 0 to \($0)" } ?? ""
                if report.isIntact {
                    say(
                        "\(file): intact — \(report.formatVersion.map { "version \($0), " } ?? "")\(counted(report.members.count, "gzip member")), "
                            + "\(counted(report.eventCount, "event"))\(sequences), hash chain unbroken"
                            + (key != nil ? ", \(counted(report.signatureCount, "signature")) checked" : "")
                    )
                    if report.ending == .complete {
                        say(
                            "  complete: the \(report.lastEventKind == "pipeline_stopped" ? "pipeline ends with pipeline_stopped" : "run ends with run_stopped") and every gzip member is closed"
                        )
                    } else {
                        say(
                            "  unfinished: the log ends cleanly, but with \(report.lastEventKind ?? "no event"), not run_stopped or pipeline_stopped "
                                + "(a run still going, or one whose writer stopped between events)")
                    }
                    for warning in report.warnings { reportWarning(warning) }
                } else {
                    say(
                        "\(file): DAMAGED — \(counted(report.problems.count, "problem")) in \(counted(report.members.count, "gzip member")), \(counted(report.eventCount, "event")) read"
                    )
                    for problem in report.problems { report_(problem) }
                    for warning in report.warnings { reportWarning(warning) }
                }
            }
            if !report.isIntact { throw Exit.failure }
        }

        /// A warning: not a problem of the log, which is intact or damaged without it.
        private func reportWarning(_ warning: LogError) {
            say("  warning [\(warning.code.rawValue)]: \(warning.message)")
            if let hint = commandHint(for: warning) ?? warning.hint { say("    hint: \(hint)") }
        }

        private func report_(_ problem: LogError) {
            var location = ""
            if let offset = problem.memberOffset { location += "member at byte \(offset)" }
            if let sequence = problem.sequence { location += (location.isEmpty ? "" : ", ") + "seq \(sequence)" }
            say("  - [\(problem.code.rawValue)] \(location.isEmpty ? "" : location + ": ")\(problem.message)")
            // This is the full report of the damage: no hint sends the reader back to it.
            guard !damageCodes.contains(problem.diagnosticCode) else { return }
            if let hint = commandHint(for: problem) ?? problem.hint { say("    hint: \(hint)") }
        }
    }

    struct Upgrade: ParsableCommand {
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

    struct Repair: ParsableCommand {
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
