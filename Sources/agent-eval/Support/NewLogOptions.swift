import AgentRuntime
import ArgumentParser

/// Where a command that records a new run writes its log (`exec`, `record`): `--out`, `--log`,
/// `--run-id`, and the one rule that makes the path from them.
struct NewLogOptions: ParsableArguments {
    @Option(help: "The directory for the new run's log.")
    var out = "runs"

    @Option(help: "The log file to write, instead of <out>/<agent>-<run-id>.jsonl.gz.")
    var log: String?

    @Option(help: "The run id (default: run-<time>-<random>).")
    var runId: String?

    /// The run's id and its log's path, for an agent named `agent`. Names from agent files and
    /// command lines never leave `--out`.
    func destination(agent: String) -> (runId: String, path: String) {
        let id = runId ?? RuntimeEnvironment.live.makeRunId()
        return (id, log ?? "\(out)/\(RuntimeEnvironment.fileNameComponent("\(agent)-\(id)")).jsonl.gz")
    }
}
