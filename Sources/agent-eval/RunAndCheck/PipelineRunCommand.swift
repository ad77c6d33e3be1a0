import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct PipelineRunCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a pipeline and record it: a pipeline log plus one child log per agent attempt.",
        discussion: """
            Ready tasks run concurrently up to --jobs; a task starts when every task it needs has settled. Each \
            task sees only its declared inputs. Failed attempts follow the task's on_error policy (retry with \
            backoff, skip with a default output, fall back to another task, or fail the pipeline); circuit \
            breakers stop tasks of a failing dependency early. The run writes <out>/<pipeline>-<id>/pipeline.jsonl.gz \
            and tasks/<task>-<attempt>.jsonl.gz beside it.

            Ctrl-C (SIGINT) or SIGTERM pause the pipeline: running agent tasks record their stop, commands are \
            killed, and `pipeline resume` continues from the last checkpoint.

            Exit codes: 0 the pipeline succeeded; 1 it failed or paused; 2 it could not run (bad pipeline or agent \
            file); 64 usage error; 130/143 interrupted.

            Example:
              agent-eval pipeline run Fixtures/pipelines/release-notes/pipeline.yaml --out runs
            """)

    @Argument(help: "The pipeline file (YAML or JSON).")
    var file: String

    @Option(help: "The pipeline's input as JSON (replaces the file's input).")
    var input: String?

    @Option(help: "The directory under which the run's directory is made.")
    var out = "runs"

    @Option(help: "The pipeline run's id (default: pipe-<time>-<random>).")
    var runId: String?

    @OptionGroup var options: PipelineRunOptions

    @OptionGroup(title: "Model")
    var models: ModelArguments

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let definition = try loadPipeline(file, models: models)
        var inputValue: JSONValue?
        if let input {
            do {
                inputValue = try JSONParser.parse(Array(input.utf8))
            } catch {
                throw ValidationError("--input is not JSON: \(error)")
            }
        }
        let id = runId ?? PipelineTarget.newRunId()
        let directory = PipelineTarget.directory(under: out, pipeline: definition.name, runId: id)
        let runner = PipelineRunner(definition: definition)
        let (jobs, observer, input) = (options.jobs, options.observer, inputValue)
        let outcome: PipelineOutcome
        let interrupted: Int32?
        do {
            (outcome, interrupted) = try await withInterruption {
                try await runner.start(directory: directory, runId: id, input: input, jobs: jobs, observe: observer)
            }
        } catch {
            throw diagnose(error)
        }
        try options.finish(outcome, interrupted: interrupted)
    }
}
