public import AgentRuntime
import Foundation
public import ModelClients
public import Replay
public import TraceCore
import TraceLog

extension RecordedFork {
    /// What `agent-eval fork LOG … -- COMMAND` runs: the fork of a run `agent-eval record`
    /// recorded, planned from the parent's log, and the recording that runs the command again
    /// through the gateway with the parent's cassette answering up to the fork point. Running
    /// `recording` writes the fork's log at `logPath`; `Fork.report(request, plan:, log:)` then
    /// diffs it against its parent.
    public struct Job: Sendable {
        public var request: Fork.Request
        public var plan: Fork.Plan
        public var recording: CommandRecording
    }

    /// Plans the fork of `parent` at `at` with `edits`, answered up to the fork point from
    /// `parentCassette` (the directory the parent was recorded with) and, past it, from the
    /// upstreams or `cassette`; `model` (`provider:name` or a name) is the model every request
    /// after the fork point names. Throws what is wrong before anything runs: the parent, an
    /// edit, a directory that holds no cassette.
    public static func job(
        parent: String, at: Int?, edits: [ForkEdit], parentCassette: String, command: [String], input: String?, model: String?,
        logPath: String, runId: String, timeoutMs: Int, upstreams: Upstreams, cassette: Cassette?, environment: [String: String]
    ) throws -> Job {
        let request = Fork.Request(parent: parent, at: at, edits: edits, resultsMayFollow: true)
        let plan = try Fork.plan(request)
        guard FileManager.default.fileExists(atPath: parentCassette + "/index.json") else {
            throw RecordingError(
                .cassetteFailed, "--parent-cassette \(parentCassette) holds no cassette (no index.json)",
                hint: "give the directory the parent was recorded with (agent-eval record --cassette DIR --record new|all)")
        }
        let parentAnswers = try Cassette(directory: parentCassette, mode: .none)
        let name = CommandRecording.agentName(for: command)
        var forked = plan.forked
        forked.agent = AgentIdentity(name: name, configDigest: ContentHash.sha256(Array(ShellWords.command(command).utf8)))
        // `provider:name` as for agent files, or the name alone: the requests name a model, not a provider.
        let model = model.map { given in
            ["openai:", "anthropic:"].first { given.hasPrefix($0) }.map { String(given.dropFirst($0.count)) } ?? given
        }
        if let model { forked.model = ModelIdentity(provider: "gateway", name: model) }
        // The parent's requests after the fork point tell another conversation's, ahead, from a divergence.
        let rest = try LogReader(path: parent).readAll().events.map(\.event).dropFirst(plan.prefix.count)
        var recording = CommandRecording(
            command: command, input: input, logPath: logPath, runId: runId, agentName: name, timeoutMs: timeoutMs,
            upstreams: upstreams, cassette: cassette, environment: environment)
        recording.fork = try RecordedFork(prefix: plan.prefix, rest: Array(rest), forked: forked, cassette: parentAnswers, model: model)
        return Job(request: request, plan: plan, recording: recording)
    }
}
