import AgentRuntime
import ArgumentParser
import ConfigFile
import Foundation
import MCPTools
import ModelClients
import Synchronization

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

    @Option(
        help:
            "A cassette directory: model interactions and MCP servers' answers are replayed from it, and recorded into it with --record."
    )
    var cassette: String?

    @Option(
        help: ArgumentHelp(
            "With --cassette (or, for run, cases that name a cassette): none replays only (a request with no recording is an error), new records what is missing, all records everything again.",
            valueName: "none|new|all"))
    var record: String = "none"

    func validate() throws {
        guard Cassette.Mode(rawValue: record) != nil else {
            throw ValidationError("--record takes none, new or all; got \(record)")
        }
    }

    /// `--record` without `--cassette` would record nothing: a usage error for every command
    /// but `run`, whose case files may name cassettes (it checks once the cases are loaded).
    func requireCassetteForRecord() throws {
        if record != "none" && cassette == nil { throw ValidationError("--record needs --cassette DIR") }
    }

    var mode: Cassette.Mode { Cassette.Mode(rawValue: record) ?? .none }

    /// The options agent files are loaded with. Throws when the cassette cannot be opened.
    func options(shelf: CassetteShelf = CassetteShelf()) throws -> ModelOptions {
        let cassette = try self.cassette.map { directory in try shelf.cassette(directory, mode: mode) }
        return ModelOptions(factory: HTTPModelClients(cassette: cassette), model: model, baseURL: baseURL)
    }

    /// What starts agents' MCP servers: through the cassette, when `--cassette` names one
    /// (opened from `shelf`, so the models and the servers share one index).
    func toolServers(shelf: CassetteShelf) throws -> MCPServers {
        MCPServers(cassette: try cassette.map { directory in try shelf.cassette(directory, mode: mode) })
    }

    /// The MCP servers of cases that name their own cassette: through it, opened when a server
    /// is first started (and once per directory).
    func caseCassetteToolServers(shelf: CassetteShelf) -> @Sendable (String) -> any ToolServerConnector {
        let mode = self.mode
        return { directory in CaseCassetteServers(directory: directory, mode: mode, shelf: shelf) }
    }

    /// The options for cases that name their own cassette (`cassette:` in a case file): these,
    /// with that cassette in `--record`'s mode, opened when an HTTP model first needs it (a
    /// scripted agent never does) and once per directory.
    func caseCassetteModels(shelf: CassetteShelf) -> @Sendable (String) throws -> ModelOptions {
        let (mode, model, baseURL) = (self.mode, self.model, self.baseURL)
        return { directory in
            ModelOptions(factory: CaseCassetteClients(directory: directory, mode: mode, shelf: shelf), model: model, baseURL: baseURL)
        }
    }
}

/// HTTP model clients served through the cassette a case names.
private struct CaseCassetteClients: ModelClientFactory {
    let directory: String
    let mode: Cassette.Mode
    let shelf: CassetteShelf

    func client(for settings: ModelSettings) throws -> any ModelClient {
        try HTTPModelClients(cassette: try shelf.cassette(directory, mode: mode)).client(for: settings)
    }

    func recordedUserTurns() throws -> (any RecordedUserTurns)? {
        try shelf.cassette(directory, mode: mode)
    }
}

/// MCP servers served through the cassette a case names.
private struct CaseCassetteServers: ToolServerConnector {
    let directory: String
    let mode: Cassette.Mode
    let shelf: CassetteShelf

    func connect(_ settings: ToolServerSettings) async throws -> any ToolServerConnection {
        try await MCPServers(cassette: try shelf.cassette(directory, mode: mode)).connect(settings)
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
