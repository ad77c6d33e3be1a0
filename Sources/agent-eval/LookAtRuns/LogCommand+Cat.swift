import ArgumentParser
import ConfigFile
import TraceCore
import TraceLog

extension LogCommand {
    struct Cat: ParsableCommand, ReadsLogs {
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

        @OptionGroup var limits: LogReadLimits

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
}
