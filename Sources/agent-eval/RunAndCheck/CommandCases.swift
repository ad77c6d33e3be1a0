import EvalEngine
import Foundation
import ModelClients
import Recording
import TraceCore

/// How `agent-eval run` runs `command:` cases: through the recording model gateway, like
/// `agent-eval record`, with the case's cassette (else `--cassette`) in `--record`'s mode.
struct GatewayCommandCases: CommandCaseRecorder {
    /// The run's `--cassette`, for cases that name none.
    let cassette: String?
    let mode: Cassette.Mode
    let shelf: CassetteShelf
    /// The environment the commands start from (this process's).
    let environment: [String: String]

    func record(_ run: CommandCaseRun) async throws -> CommandCaseOutcome {
        let cassette: Cassette?
        do {
            cassette = try (run.cassette ?? self.cassette).map { try shelf.cassette($0, mode: mode) }
        } catch {
            let diagnostic = error as? any Diagnostic
            throw CommandCaseCassetteError(message: diagnostic?.message ?? "\(error)", hint: diagnostic?.hint)
        }
        // The case's env: over this process's (its keys are kept out of the log like any other).
        var environment = self.environment
        for (name, value) in run.environment { environment[name] = value }
        var recording = CommandRecording(
            command: run.command, directory: run.directory, input: run.input, logPath: run.logPath, runId: run.runId, goal: run.input,
            agentName: run.agentName ?? CommandRecording.agentName(for: run.command), timeoutMs: run.timeoutMs,
            upstreams: Upstreams.resolve(given: run.upstreams, environment: environment), cassette: cassette, environment: environment)
        // Many cases run at once: their output is kept, not interleaved into the report.
        recording.outputDescriptor = nil
        recording.conversation = run.conversation
        let outcome = try await recording.run()
        if case .notRecorded(let message, let step)? = outcome.stopCause {
            return CommandCaseOutcome(missedStep: step, missMessage: message)
        }
        return CommandCaseOutcome()
    }
}
