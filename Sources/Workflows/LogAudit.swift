public import AgentRuntime
public import ConfigFile
import Foundation
import Pipelines
public import TraceCore
public import TraceLog

/// `agent-eval audit` as a library: every tool call of the runs in some logs judged by a policy
/// file, as its gate would have judged it (`PolicyAudit`), a log at a time, and then the policy
/// file's tool names checked against the tools the runs had. Pipeline logs record tasks, not
/// calls, and are left out (their agent attempts' child logs are runs).
public enum LogAudit {
    /// One log's audit: its findings and where it was torn, or why it could not be read.
    public struct Log: Sendable {
        public var path: String
        public var outcome: Result<(findings: [PolicyAudit.Finding], tear: LogTear?), any Error>
    }

    /// What the audit found over every log.
    public struct Summary: Sendable {
        /// Calls that ran that the policy would not have allowed.
        public var violations = 0
        /// Logs that could not be read, or were torn (the calls after the tear were never seen).
        public var unreadable = 0
        /// The pipeline logs left out.
        public var pipelineLogs: [String] = []
        /// Names in the policy file close to a tool of the runs but not it: a rule that never
        /// fired judged them (`PolicyFile.misspeltTools`), so the audit cannot be trusted.
        public var misspelt: [ConfigError] = []
        /// Names far from every tool of the runs: the file may cover tools these runs never met.
        public var unmet: [ConfigError] = []
    }

    /// Audits `logs` (paths, in order) by `policy`, calling `each` with every run's log as it is
    /// audited, on the calling thread.
    public static func run(
        _ logs: [String], policy: PolicyFile, actor: String?, route: String?, each: (Log) -> Void
    ) -> Summary {
        var summary = Summary()
        // Every tool of the runs read: a name in the policy file that none of them has is a rule
        // that never fires, and "all allowed" over it would be no audit at all.
        var toolsSeen: [String] = []
        var toolSet = Set<String>()
        // And every MCP server their tools came from: a rule's literal `server:` none of them is
        // never applied either.
        var serversSeen: [String] = []
        var serverSet = Set<String>()
        for path in logs {
            if PipelineTarget.detected(path) != nil {
                summary.pipelineLogs.append(path)
                continue
            }
            do {
                let (findings, tear, tools, servers) = try PolicyAudit.auditReadingTear(
                    log: path, policy: policy, actor: actor, route: route)
                for tool in tools where toolSet.insert(tool).inserted { toolsSeen.append(tool) }
                for server in servers where serverSet.insert(server).inserted { serversSeen.append(server) }
                summary.violations += findings.filter(\.isViolation).count
                if tear != nil { summary.unreadable += 1 }
                each(Log(path: path, outcome: .success((findings, tear))))
            } catch {
                summary.unreadable += 1
                each(Log(path: path, outcome: .failure(error)))
            }
        }
        if !toolSet.isEmpty {
            (summary.misspelt, summary.unmet) = policy.misspeltTools(among: toolsSeen)
            let servers = policy.misspeltServers(among: serversSeen)
            summary.misspelt += servers.errors
            summary.unmet += servers.notes
        }
        return summary
    }
}
