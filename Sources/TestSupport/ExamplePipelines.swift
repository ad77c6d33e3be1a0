public import Foundation
public import Pipelines
import TraceCore

/// The example pipelines in `Fixtures/pipelines/`, and the run of one checked in under
/// `Fixtures/pipelines/recorded/` for the bundled recorded pipeline case.
public enum ExamplePipelines {
    /// The pipeline file of an example (`triage-recovery`, `release-notes`).
    public static func file(_ name: String) -> String {
        ExampleRuns.fixtures.appendingPathComponent("pipelines/\(name)/pipeline.yaml").path
    }

    /// `Fixtures/pipelines/recorded/<name>`: a checked-in run's directory.
    public static func recordedDirectory(_ name: String) -> URL {
        ExampleRuns.fixtures.appendingPathComponent("pipelines/recorded/\(name)")
    }

    /// The examples with a checked-in run.
    public static let recorded = ["triage-recovery"]

    /// Runs the example `name` into `directory` reproducibly: one task at a time, a stepping
    /// clock, every duration recorded as 1.5 ms, and the file recorded by its path in the
    /// repository (not where the checkout is). Two runs write the same logs byte for byte.
    public static func record(_ name: String, into directory: String) async throws -> PipelineOutcome {
        var definition = try PipelineFile.load(path: file(name))
        definition.path = "Fixtures/pipelines/\(name)/pipeline.yaml"
        return try await PipelineRunner(definition: definition, environment: .deterministic(runId: "pipe-\(name)"))
            .start(directory: directory, runId: "pipe-\(name)", jobs: 1)
    }
}
