import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import Pipelines
import Synchronization
import TraceCore
import TraceLog

struct PipelineCheckCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a pipeline file without running anything (an older spelling of `agent-eval check --verbose FILE`).",
        discussion: """
            Reads the whole file and every agent file it names: keys, inputs (each must name $input or an upstream \
            task), goal templates, validation, recovery policies, breakers and the graph (cycles, unknown tasks, \
            fallbacks that could not run). Errors and warnings (outputs nobody uses, tasks that lead to no output) \
            name file:line:column.

            Exit codes: 0 the file is valid (warnings allowed); 2 it has errors.
            """,
        shouldDisplay: false)

    @Argument(help: "The pipeline file (YAML or JSON).")
    var file: String

    @OptionGroup(title: "Model")
    var models: ModelArguments

    @Flag(help: "Print the plan as JSON: tasks in plan order with what each needs.")
    var json = false

    func validate() throws {
        try models.requireCassetteForRecord()
    }

    @OptionGroup var limits: LogReadLimits

    func run() async throws {
        let definition = try loadPipeline(file, models: models)
        if json {
            printJSON([
                "pipeline": .string(definition.name), "tasks": .array(definition.plan.map(\.json)),
                "outputs": .array(definition.outputs.map { .string($0) }),
                "warnings": .array(definition.warnings.map { .string($0.description) }),
            ])
        } else {
            say(
                "\(definition.path): pipeline \(definition.name), \(definition.tasks.count) tasks, outputs \(definition.outputs.joined(separator: ", "))"
            )
            for line in definition.planLines { say("  " + line) }
            say(definition.warnings.isEmpty ? "ok" : "ok, with \(definition.warnings.count) warning(s)")
        }
    }
}
