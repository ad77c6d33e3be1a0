import AgentRuntime
import ArgumentParser
import Catalog
import ConfigFile
import Foundation
import Pipelines
import TraceCore
import TraceLog
import Workflows

/// `agent-eval audit --policy FILE LOG…`: what a policy would have said of runs it did not gate.
struct AuditCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Judge every tool call of recorded, imported or proxied runs by a policy, and report what it would not have allowed.",
        discussion: """
            Each call is judged as the runtime's gate would have judged it when it was proposed: the policy file \
            (a policy: block as in an agent file, and side_effects:, as for mcp-proxy) on the tool, its side \
            effect, the arguments, the run's actor and route, the calls run and approvals granted before it and \
            the tokens used. Runs recorded through the gateway or imported from other tools record no verdicts; \
            this says which of their calls a policy would have denied or held for approval. A case's policy: key \
            applies the same audit to its verdict expectations (docs/eval-cases.md). docs/mcp.md, "Auditing runs".

            A torn log is audited up to the tear, and said to be torn: the calls after it were never seen, so \
            it cannot pass (seal it with `log repair` to audit what it holds as the run's record). A pipeline \
            log is not a run's: its agent attempts' child logs are.

            The policy file's tool names are checked against the runs' tools: a rule or a side_effects entry \
            naming a tool close to one of theirs but not it (a misspelling would be a rule that never fires) is \
            an error at its line, with the name it meant; a name far from all of them is a note (the file may \
            cover tools these runs never met). A rule's literal server: is checked the same way against the MCP \
            servers the runs' tools came from. A run with no call says "nothing to judge", not "all allowed".

            Exit codes: 0 no call ran that the policy would not have allowed; 1 some did; 2 a log or the \
            policy file could not be read, the policy file misspells a tool or server of the runs, a log holds no \
            event or is torn, or only pipeline logs were given \
            (in a folder they are skipped with a note); 64 usage error. \
            With --json, a log that could not be read is an object with its error in the array.

            Examples:
              agent-eval audit --policy shop.policy.yaml runs/
              agent-eval audit --policy shop.policy.yaml --all --json runs/refund-run-1.jsonl.gz
            """
    )

    @Option(help: "The policy file: a policy: block as in an agent file, and side_effects: (tool glob → read, draft or write).")
    var policy: String

    @Option(help: "Who the runs acted for, for rules' actor conditions (default: what each run recorded).")
    var actor: String?

    @Option(help: "The entry point, for rules' route conditions (default: what each run recorded).")
    var route: String?

    @Flag(help: "List every call, not only those the policy would deny or hold for approval.")
    var all = false

    @Flag(help: "Print JSON on standard output: one object per log with every call's finding.")
    var json = false

    @Argument(help: "Logs, directories searched for *.jsonl.gz, or globs.")
    var logs: [String] = []

    func validate() throws {
        guard !logs.isEmpty else { throw ValidationError("give the logs to audit: agent-eval audit --policy FILE runs/") }
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let policyFile: PolicyFile
        do throws(ConfigErrors) {
            policyFile = try PolicyFile.load(path: policy, for: .callChecker(what: "audit"))
        } catch {
            for problem in error.errors { diagnose(problem) }
            throw Exit.unusable
        }
        // The same rules as `index` and `export`: files, directories searched for *.jsonl.gz, globs.
        let paths = try findLogsOrFail(logs).map(displayPath)
        var reports: [JSONValue] = []
        let summary = LogAudit.run(paths, policy: policyFile, actor: actor, route: route) { log in
            switch log.outcome {
            case .success(let (findings, tear)):
                if let tear {
                    printError("error: \(log.path) is torn (\(tear)): the calls after the tear were never seen")
                    printError(
                        "hint: agent-eval log repair \(ShellWords.quoted(log.path)) seals it; the audit then covers the run as it was recorded"
                    )
                }
                if json {
                    reports.append(Self.json(log: log.path, findings: findings, tear: tear))
                } else {
                    for line in Self.describe(log: log.path, findings: findings, all: all, tear: tear) { say(line) }
                }
            case .failure(let error):
                if json {
                    let diagnostic = (error as? any Diagnostic)?.json ?? ["code": "cli.unreadable", "message": .string("\(error)")]
                    reports.append(["log": .string(log.path), "error": diagnostic])
                }
                _ = diagnose(error)
            }
        }
        try report(summary, over: paths, reports: reports)
    }

    /// What the audit found beyond each log's lines, and the exit status.
    func report(_ summary: LogAudit.Summary, over paths: [String], reports: [JSONValue]) throws {
        let pipelineLogs = summary.pipelineLogs
        if pipelineLogs.count == paths.count {
            throw diagnose(
                CommandError(
                    "pipeline_log",
                    "\(pipelineLogs.joined(separator: ", ")) \(pipelineLogs.count == 1 ? "is a pipeline log" : "are pipeline logs"): "
                        + "a pipeline records tasks, not tool calls, so there is nothing to audit in it",
                    hint: "audit the child logs of its agent attempts (the tasks/ folder of its run)"))
        }
        for log in pipelineLogs { printError("note: skipped \(log): a pipeline log (its agent attempts' child logs are runs)") }
        if json { printJSON(.array(reports)) }
        for problem in summary.misspelt { diagnose(problem) }
        for problem in summary.unmet {
            printError(
                "note: \(problem.location): \(problem.message.replacingOccurrences(of: "none of the tools here", with: "none of the audited runs"))"
            )
        }
        if !summary.misspelt.isEmpty {
            printError(
                "the policy file misspells \(counted(summary.misspelt.count, "name")) of the audited runs' tools and servers: a rule that never fires "
                    + "judged them, so the audit above cannot be trusted")
        }
        if summary.unreadable > 0 || !summary.misspelt.isEmpty { throw Exit.unusable }
        if summary.violations > 0 { throw Exit.failure }
    }

    static func describe(log: String, findings: [PolicyAudit.Finding], all: Bool, tear: LogTear? = nil) -> [String] {
        let flagged = findings.filter { $0.decision.verdict != .allow }
        let ran = flagged.filter(\.isViolation).count
        var headline = "\(log): \(findings.count) call\(findings.count == 1 ? "" : "s")"
        // A held call a person approved ran, but not against the policy: it is not counted.
        if findings.isEmpty {
            headline += ": nothing to judge"
        } else {
            headline += flagged.isEmpty ? ", all allowed" : "; the policy would not allow \(flagged.count), \(ran) of which ran unallowed"
        }
        if let tear {
            headline +=
                " — up to a tear: the log is torn after seq \(tear.lastSequence.map(String.init) ?? "?"), and calls after it were never seen"
        }
        var lines = [headline]
        for finding in all ? findings : flagged {
            var line = "  \(finding.callId)  step \(finding.step)  \(finding.tool) \(JSONWriter.encodeString(finding.arguments))"
            line += finding.isExecuted ? "  ran" : "  did not run"
            line += "  → \(finding.decision.verdict.rawValue)"
            if let rule = finding.decision.rule { line += " by rule \(rule)" }
            if let reason = finding.decision.reason { line += " (\(reason))" }
            if let recorded = finding.recorded { line += "; the run recorded \(recorded.verdict.rawValue)" }
            if finding.isApproved { line += "; a person approved it" }
            lines.append(line)
        }
        return lines
    }

    static func json(log: String, findings: [PolicyAudit.Finding], tear: LogTear? = nil) -> JSONValue {
        var object = ObjectBuilder()
        object.set("log", log)
        object.set("tear", tear.map { "\($0)" })
        object.set("calls", findings.count)
        object.set("violations", findings.filter(\.isViolation).count)
        object.set("findings", JSONValue.array(findings.map(\.json)))
        return object.json
    }
}

/// The logs named on a command line — files, directories searched for `*.jsonl.gz`, globs, as
/// `index` reads them — or an error (exit 2) that says none were found.
func findLogsOrFail(_ logs: [String]) throws -> [String] {
    let paths: [String]
    do {
        paths = try Catalog.findLogs(logs)
    } catch {
        throw diagnose(error)
    }
    if paths.isEmpty {
        throw diagnose(
            CommandError(
                "no_logs", "no logs (*.jsonl.gz) found in \(logs.joined(separator: ", "))", hint: "give logs, directories of logs or globs")
        )
    }
    return paths
}
