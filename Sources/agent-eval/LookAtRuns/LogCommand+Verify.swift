import ArgumentParser
import ConfigFile
import TraceCore
import TraceLog

extension LogCommand {
    struct Verify: ParsableCommand, ReadsLogs {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check a log's members, CRCs, sequence numbers, hash chain and state digests.",
            discussion: """
                Reads the whole log and reports every problem with the gzip member's byte offset and the event's \
                sequence number: damaged members (CRC, size or deflate data), a torn tail, members that end inside \
                an event, lines that are not valid events, an unknown envelope version, sequence gaps and repeats, \
                and breaks in the hash chain (an edited event). It reads on past a damaged member. It also checks \
                every state digest the log records against the state its events fold to: a log whose chain holds \
                but whose digests do not (an event edited and the chain computed again) is reported EDITED, with \
                the sequence numbers (--json: "digest_mismatches"), and fails.

                An intact log is complete (it ends with run_stopped and every gzip member is closed) or unfinished \
                (it ends cleanly, but without run_stopped); --json says which as "ending": complete, unfinished, torn \
                or damaged.

                With --key KEY.pub the log must be signed with that key (exec --sign-key): every signature must \
                check and the last one must be the final one after a stop, so an edit with the chain recomputed, \
                reordered events, a cut end or appended events are reported as bad_signature.

                An interrupted repair's <file>.seal is a problem (pending_seal: the log may lack its last events \
                until `log repair` finishes the seal). A <file>.seal that is not a seal of this log as it is now is a \
                warning (stray_seal) and is ignored: the log is judged as it is.

                Exit codes: 0 intact (complete or unfinished) and every state digest matches, 1 damaged (problems \
                listed) or edited (digests that do not match), 2 unreadable (missing, not gzip).

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

        @OptionGroup var limits: LogReadLimits

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
                if report.isIntact && !report.digestMismatches.isEmpty {
                    let at = report.digestMismatches.map { "seq \($0)" }.joined(separator: ", ")
                    say(
                        "\(file): EDITED — the hash chain holds, but the state digest\(report.digestMismatches.count == 1 ? "" : "s") "
                            + "recorded at \(at) \(report.digestMismatches.count == 1 ? "is not the digest" : "are not the digests") of the "
                            + "state its events fold to: an event before it was changed and the chain computed again, or another fold wrote it"
                    )
                    say("  hint: agent-eval replay \(file) shows the step whose state differs; the log is no record to trust")
                    for warning in report.warnings { reportWarning(warning) }
                } else if report.isIntact {
                    say(
                        "\(file): intact — \(report.formatVersion.map { "version \($0), " } ?? "")\(counted(report.members.count, "gzip member")), "
                            + "\(counted(report.eventCount, "event"))\(sequences), hash chain unbroken, "
                            + "\(counted(report.digestCount, "state digest")) checked"
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
            if !report.isIntact || !report.digestMismatches.isEmpty { throw Exit.failure }
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
}
