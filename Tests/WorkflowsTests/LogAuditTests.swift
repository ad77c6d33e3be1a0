import AgentRuntime
import ConfigFile
import Foundation
import TestSupport
import Testing
import Workflows

/// `agent-eval audit`'s job as a library.
@Suite("Auditing logs by a policy")
struct LogAuditTests {
    static var fixtures: URL { ExampleRuns.fixtures }

    @Test(
        "each run is judged and handed over in order; a pipeline log is left out; a torn log counts as not fully read; a misspelt tool is found"
    )
    func auditsRunsAndLeavesPipelinesOut() throws {
        try TemporaryDirectory.with { directory in
            try """
            policy:
              name: shop
              default: allow
              rules:
                - id: no-refunds
                  when: {tool: refund_ordr}
                  verdict: deny
                - id: no-lookups
                  when: {tool: lookup_order}
                  verdict: deny
            """.write(toFile: directory.path("p.yaml"), atomically: true, encoding: .utf8)
            let policy = try PolicyFile.load(path: directory.path("p.yaml"))
            let logs = [
                Self.fixtures.appendingPathComponent("samples/support-sample.jsonl.gz").path,
                Self.fixtures.appendingPathComponent("pipelines/recorded/triage-recovery/pipeline.jsonl.gz").path,
                Self.fixtures.appendingPathComponent("samples/research-sample-torn.jsonl.gz").path,
            ]
            var seen: [String] = []
            let summary = LogAudit.run(logs, policy: policy, actor: nil, route: nil) { seen.append($0.path) }
            #expect(seen == [logs[0], logs[2]])
            #expect(summary.pipelineLogs == [logs[1]])
            #expect(summary.unreadable == 1, "the torn sample")
            #expect(summary.violations >= 1, "lookup_order ran, and the policy denies it")
            #expect(summary.misspelt.contains { $0.message.contains("refund_ordr") }, "\(summary.misspelt.map(\.message))")
        }
    }
}
