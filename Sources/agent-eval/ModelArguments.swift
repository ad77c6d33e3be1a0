import AgentRuntime
import ArgumentParser
import ConfigFile
import ModelClients

/// The model options `exec` and `run` share: which model serves the agent, and the cassette
/// that records or replays what it said.
struct ModelArguments: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Serve the agent with this model instead of the agent file's, as provider:name (openai or anthropic).",
            valueName: "provider:name"))
    var model: String?

    @Option(help: "The model server's base URL, e.g. http://127.0.0.1:8080/v1 for a local OpenAI-compatible server.")
    var baseURL: String?

    @Option(help: "A cassette directory: model interactions are replayed from it, and recorded into it with --record.")
    var cassette: String?

    @Option(
        help: ArgumentHelp(
            "With --cassette: none replays only (a request with no recording is an error), new records what is missing, all records everything again.",
            valueName: "none|new|all"))
    var record: String = "none"

    func validate() throws {
        guard Cassette.Mode(rawValue: record) != nil else {
            throw ValidationError("--record takes none, new or all; got \(record)")
        }
        if record != "none" && cassette == nil { throw ValidationError("--record needs --cassette DIR") }
    }

    /// The options agent files are loaded with. Throws when the cassette cannot be opened.
    func options() throws -> ModelOptions {
        let cassette = try self.cassette.map { try Cassette(directory: $0, mode: Cassette.Mode(rawValue: record) ?? .none) }
        return ModelOptions(factory: HTTPModelClients(cassette: cassette), model: model, baseURL: baseURL)
    }
}

/// The judge options `run` and `check` share: the judge of model-graded expectations whose
/// rubric names none. Judges served over HTTP go through the same cassette as the agents.
struct JudgeArguments: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The judge model for rubrics that name none, as provider:name (openai or anthropic); docs/eval-cases.md.",
            valueName: "provider:name"))
    var judgeModel: String?

    func validate() throws {
        do {
            _ = try source()
        } catch {
            throw ValidationError(error.message)
        }
    }

    func source() throws(ConfigError) -> ModelSource? {
        try judgeModel.map { text throws(ConfigError) in try ModelSource.named(text, option: "--judge-model") }
    }
}
