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

/// `agent-eval stats`: numbers over the indexed runs.
struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Per tool: calls, error rate, p50/p95 duration. Per agent and model: runs, tokens, cost, stop reasons.",
        discussion: """
            Over every indexed run, or those the filters select (the same filters as `runs`, and as there --tool, \
            --approval and --denied hold for the same call).

            Example:
              agent-eval stats --since 7d --agent 'support-*'
            """
    )

    @OptionGroup var filters: RunFilters

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var location: CatalogArguments

    func run() throws {
        let query = try filters.query(limit: Int(Int32.max))
        let catalog = try location.open(readOnly: true)
        let stats: (tools: [ToolStats], agents: [AgentStats])
        do {
            stats = try catalog.stats(query)
        } catch {
            throw diagnose(error)
        }
        if json {
            printJSON(["tools": .array(stats.tools.map(\.json)), "agents": .array(stats.agents.map(\.json))])
            return
        }
        guard !stats.agents.isEmpty else {
            say("no indexed run matches")
            return
        }
        var tools = [["TOOL", "CALLS", "RAN", "FAILED", "ERROR RATE", "DENIED", "P50 MS", "P95 MS"]]
        for tool in stats.tools {
            tools.append([
                tool.tool, "\(tool.calls)", "\(tool.executed)", "\(tool.failed)", String(format: "%.1f%%", tool.errorRate * 100),
                "\(tool.denied)", String(format: "%.1f", Double(tool.p50Us) / 1000), String(format: "%.1f", Double(tool.p95Us) / 1000),
            ])
        }
        for line in table(tools) { say(line) }
        say("")
        var agents = [["AGENT", "MODEL", "RUNS", "TOKENS", "COST $", "STOP REASONS"]]
        for agent in stats.agents {
            agents.append([
                agent.agent, agent.model, "\(agent.runs)", "\(agent.tokens)", String(format: "%.4f", agent.costUSD),
                agent.stopReasons.map { "\($0.reason) \($0.runs)" }.joined(separator: ", "),
            ])
        }
        for line in table(agents) { say(line) }
    }
}
