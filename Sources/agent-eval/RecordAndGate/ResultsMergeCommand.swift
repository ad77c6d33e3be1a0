import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import TraceCore
import Viewer

/// `agent-eval results merge`: the reports of `run --shard i/n` jobs as one report.
struct ResultsMergeCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge the JSON reports of `agent-eval run --shard i/n` jobs into one report, JUnit file and exit status.",
        discussion: """
            A CI matrix runs `agent-eval run EvalCases/ --shard i/n --json-out shard-i.json` on n machines; a last job \
            downloads the reports and merges them: one summary, one baseline comparison (each shard compared its cases \
            with the same baseline), one JUnit file, and the exit status the whole suite would have had. Every report \
            must be a results document of version 1 with the same k; a case in two reports, or a baseline in some \
            reports only, is an error (exit 2). Cases are ordered as one run over the same case files would order \
            them; the merged duration is the longest shard's. The merged document lists its inputs in `merged_from` \
            (docs/eval-results.md).

            Each report records its shard (i/n; an unsharded run is 1/1) and its suite (the number of cases and a \
            digest of their ids, the same in every shard). The merge must hold the whole suite: a missing shard, the \
            same shard twice, reports of different suites or of different shard counts are errors (exit 2), so a \
            shard job that died before uploading its report cannot turn the gate green. --allow-partial merges what \
            is there anyway: the merged report says in `partial` what it lacks, and so do the summary line and a \
            warning. A report without a shard (written by an older agent-eval) cannot show that nothing is missing, \
            so it merges only with --allow-partial.

            --add-to-catalog adds the merged report to the catalog as one suite run (origin `merge`), so \
            `agent-eval history` sees the sharded suite as a whole (--record, its older spelling, still works). The \
            same reports merged again (a CI job run again) are the suite run already recorded, not another one. Shards \
            that ran on this machine with the catalog already recorded themselves; leave it off then.

            Exit codes: 0 everything passed (per --fail-on); 1 a case failed or regressed; 2 a case could not run, a \
            report cannot be read or merged, or a shard is missing (without --allow-partial); 64 usage error.

            Examples:
              agent-eval results merge shard-*.json --json-out all.json --junit all.xml --html all.html
              agent-eval results merge reports/*.json --fail-on regression --add-to-catalog
              agent-eval results merge shard-1.json shard-3.json --allow-partial --html what-ran.html
            """
    )

    @Argument(help: "The JSON reports to merge (written by `agent-eval run --json-out FILE`).")
    var reports: [String]

    @Flag(help: "Print the merged report on standard output instead of the console lines.")
    var json = false

    @Option(help: ArgumentHelp("Write the merged report to this file.", valueName: "file"))
    var jsonOut: String?

    @Option(help: ArgumentHelp("Write a JUnit XML report to this file.", valueName: "file"))
    var junit: String?

    @Option(
        help: ArgumentHelp(
            "Write the merged report as one self-contained HTML page (with the runs whose logs are on this machine).",
            valueName: "file"))
    var html: String?

    @Option(help: "What fails the merged suite: regression, failure or any (default: what the shards ran with).")
    var failOn: FailOn?

    @Flag(help: "Add the merged report to the catalog as one suite run.")
    var addToCatalog = false

    /// The older spelling of --add-to-catalog (`--record` is the cassette mode everywhere else).
    @Flag(name: .customLong("record"), help: .hidden)
    var recordSpelling = false

    var record: Bool { addToCatalog || recordSpelling }

    @Flag(help: "Print GitHub Actions annotations (::error at each failing case's file and line) after the summary.")
    var githubAnnotations = false

    @Flag(
        help: """
            Merge even when shards are missing (or a report does not say which shard it is): the merged report, \
            summary line and a warning say it is partial. Not for a gate: the exit status covers only the cases merged.
            """)
    var allowPartial = false

    @Flag(
        help:
            "With --fail-on regression, count every case as new when the shards were compared with no baseline (as run's --allow-no-baseline); without it such a merge is an error, not a pass."
    )
    var allowNoBaseline = false

    @OptionGroup(title: "Catalog")
    var catalog: CatalogArguments

    func validate() throws {
        if reports.isEmpty { throw ValidationError("give the JSON reports to merge, e.g. shard-*.json") }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let merge: ResultsMerge
        do {
            merge = try ResultsMerge(paths: reports, allowsPartial: allowPartial, failOn: failOn, allowsNoBaseline: allowNoBaseline)
        } catch {
            throw diagnose(error)
        }
        if let partial = merge.partial {
            // Before anything is written, so that --add-to-catalog refuses before any file changes.
            if record {
                throw diagnose(
                    EvalError(
                        .incompleteSuite,
                        "the merged report is partial (\(partial)); recorded, history would take it for a whole suite run",
                        hint: "record the merge of every shard's report, or let each shard record itself (`run` with the catalog)"))
            }
            printError("warning: the merged report is partial: \(partial); its results are not the whole suite's")
        }
        let toStandardOutput = json
        do {
            let text = JSONWriter.encodePretty(merge.report)
            if json { printOutput(text) }
            if let jsonOut { try ReportFile.write(text, to: jsonOut) }
            if let junit { try ReportFile.write(merge.junit, to: junit) }
            if let html {
                let view = ReportView.make(results: merge.report)
                let title =
                    "eval report (merged\(merge.partial.map { ", partial: \($0)" } ?? "")): \(merge.counts.verdict(failOn: merge.failOn))"
                try HTMLOutput.write(HTMLPage(title: title, data: view.document), to: html)
            }
        } catch {
            throw diagnose(error)
        }
        if record {
            let catalog = try await self.catalog.open()
            var info = await SuiteRunInfo.current(commandLine: CommandLine.arguments)
            info.origin = "merge"
            // The same reports are one suite run, however often they are merged into the catalog.
            info.inputsDigest = merge.inputsDigest
            do {
                let (report, recorded) = (merge.report, info)
                let (id, isNew) = try await catalog.work { catalog throws(CatalogError) in
                    try catalog.recordSuiteOnce(report: report, info: recorded)
                }
                if !toStandardOutput {
                    say(
                        isNew
                            ? "recorded as suite run \(id) in \(displayPath(self.catalog.path))"
                            : "these reports are suite run \(id) in \(displayPath(self.catalog.path)) already: not recorded again")
                }
            } catch {
                throw diagnose(error)
            }
        }
        if !toStandardOutput {
            for line in merge.problemLines { say(line) }
            say(merge.summaryLine)
        }
        if githubAnnotations {
            for line in GitHubAnnotations.lines(from: merge.report) { if toStandardOutput { printError(line) } else { printOutput(line) } }
        }
        throw ExitCode(merge.exitStatus)
    }
}
