public import ConfigFile
import Foundation
public import TraceCore
import TraceLog

/// Where a model comes from, as a `model:` section says: served over HTTP, a scripted model
/// file, or the decisions of a recorded log. Agent files and the judges of eval cases
/// (`answer: {rubric, model}`) read it the same way, so a judge can be anything an agent's
/// model can be (docs/models.md).
///
/// ```swift
/// let source = try ModelSource.read(node, directory: "agents", overrides: ModelOptions())
/// let client = try source.client(factory: HTTPModelClients())
/// ```
public struct ModelSource: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case http(ModelSettings)
        /// A scripted model file (`ScriptedModel`).
        case script(path: String)
        /// The decisions of a recorded log (`ReplayModel`).
        case replay(log: String)
    }

    public var kind: Kind
    /// The key path the file names it under (`model`, `expected.answer.model`), for messages.
    public var what: String
    /// Where the file names it: errors in making its client point here.
    public var location: SourceLocation

    public init(_ kind: Kind, what: String = "model", location: SourceLocation) {
        self.kind = kind
        self.what = what
        self.location = location
    }

    /// The variable holding the API key of a model served over HTTP.
    public var apiKeyVariable: String? {
        if case .http(let settings) = kind { return settings.apiKeyVariable }
        return nil
    }

    /// `provider:name` (`scripted:support-script` for a script) — what a person calls it.
    public var label: String {
        switch kind {
        case .http(let settings): return "\(settings.provider.rawValue):\(settings.name)"
        case .script(let path): return "script \(path)"
        case .replay(let log): return "replay of \(log)"
        }
    }

    /// Reads a `model:` section: a mapping (`provider` and `name` with their settings,
    /// `script`, or `replay`) or the text `provider:name`. Paths start from `directory`.
    /// `overrides` (`--model`, `--base-url`) replace what the file says.
    public static func read(
        _ node: ConfigNode, what: String = "model", directory: String, overrides: ModelOptions = ModelOptions()
    ) throws(ConfigError) -> ModelSource {
        if case .scalar = node.content {
            // `model: openai:gpt-4o-mini`: the provider's defaults for everything else.
            var (provider, name) = try providerAndName(try node.nonEmptyString(what), what: what, at: node.location)
            if let override = overrides.model { (provider, name) = try providerAndName(override, what: "--model", at: node.location) }
            var settings = ModelSettings(provider: provider, name: name)
            if let baseURL = overrides.baseURL { settings.baseURL = ModelSettings.trimmed(baseURL) }
            return ModelSource(.http(settings), what: what, location: node.location)
        }
        var fields = try node.mapping(what)
        let script = fields.optional("script")
        let replay = fields.optional("replay")
        let provider = fields.optional("provider")
        if overrides.model != nil || provider != nil {
            // --model replaces a scripted or replayed model; the file itself names one kind.
            guard provider == nil || (script == nil && replay == nil) else {
                throw ConfigError(
                    .invalidValue, "\(what) has \"provider\" and \"\(script == nil ? "replay" : "script")\"; give one", at: node.location)
            }
            var settings = try readSettings(&fields, provider: provider, what: what, node: node, overrides: overrides)
            if let baseURL = overrides.baseURL { settings.baseURL = ModelSettings.trimmed(baseURL) }
            return ModelSource(.http(settings), what: what, location: node.location)
        }
        if overrides.baseURL != nil {
            throw ConfigError(
                .invalidValue, "--base-url applies to a model served over HTTP, and this agent's model is not", at: node.location,
                hint: "give --model provider:name as well")
        }
        try fields.finish()
        switch (script, replay) {
        case (let script?, nil):
            let path = ConfigPath.resolve(try script.nonEmptyString("\(what).script"), from: directory)
            guard FileManager.default.fileExists(atPath: path) else {
                throw ConfigError(
                    .unreadable, "\(what).script: \(path) does not exist", at: script.location,
                    hint: "the path starts from the folder of the file that names it")
            }
            return ModelSource(.script(path: path), what: what, location: script.location)
        case (nil, let replay?):
            let path = ConfigPath.resolve(try replay.nonEmptyString("\(what).replay"), from: directory)
            return ModelSource(.replay(log: path), what: what, location: replay.location)
        case (nil, nil):
            throw ConfigError(
                .missingKey,
                "\(what) needs \"provider\" (a model served over HTTP), \"script\" (a scripted model file) or \"replay\" (a recorded log)",
                at: node.location)
        default:
            throw ConfigError(.invalidValue, "\(what) has both \"script\" and \"replay\"; give one", at: node.location)
        }
    }

    /// `provider:name` given on the command line (`--judge-model`), with the provider's
    /// defaults for everything else; errors name the option.
    public static func named(_ text: String, option: String) throws(ConfigError) -> ModelSource {
        let place = SourceLocation(path: option)
        let (provider, name) = try providerAndName(text, what: option, at: place)
        return ModelSource(.http(ModelSettings(provider: provider, name: name)), what: option, location: place)
    }

    /// The client for this model. `factory` makes clients for models served over HTTP (the
    /// CLI passes the `ModelClients` module's); without one, only scripts and replays work.
    public func client(factory: (any ModelClientFactory)?) throws(ConfigError) -> any ModelClient {
        switch kind {
        case .http(let settings):
            guard let factory else {
                throw ConfigError(
                    .invalidValue,
                    "\(what).provider \"\(settings.provider.rawValue)\" is served over HTTP, which this program cannot reach (it was built without model clients)",
                    at: location, hint: "use the agent-eval command, or a scripted model")
            }
            do {
                return try factory.client(for: settings)
            } catch {
                let message = (error as? any Diagnostic)?.message ?? "\(error)"
                throw ConfigError(.invalidValue, "\(what): \(message)", at: location, hint: (error as? any Diagnostic)?.hint)
            }
        case .script(let path):
            return try ScriptedModel.load(path: path)
        case .replay(let log):
            do {
                return try ReplayModel(log: log)
            } catch let error as LogError {
                throw ConfigError(.unreadable, "\(what).replay: \(error.message)", at: location, hint: error.hint)
            } catch {
                throw ConfigError(.unreadable, "\(what).replay: cannot read \(log): \(error)", at: location)
            }
        }
    }

    /// `provider:name`, as `--model` and the short form of `model:` give it.
    static func providerAndName(_ text: String, what: String, at location: SourceLocation) throws(ConfigError) -> (
        ModelSettings.Provider, String
    ) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        let choices = ModelSettings.Provider.allCases.map(\.rawValue).joined(separator: " or ")
        guard parts.count == 2, !parts[1].isEmpty else {
            throw ConfigError(
                .invalidValue, "\(what) \"\(text)\" is not provider:name (the provider is \(choices))", at: location,
                hint: what == "--model" ? "for example --model openai:gpt-4o-mini" : "for example openai:gpt-4o-mini")
        }
        guard let known = ModelSettings.Provider(rawValue: parts[0]) else {
            throw ConfigError(
                .invalidValue, "\(what) \"\(text)\": \"\(parts[0])\" is not a provider (\(choices))", at: location,
                hint: "any OpenAI-compatible server (vLLM, llama.cpp, Ollama's /v1) is openai with "
                    + (what == "--model" ? "--base-url" : "base_url"))
        }
        return (known, parts[1])
    }

    /// An HTTP model's settings from the file, with `--model provider:name` over them.
    static func readSettings(
        _ fields: inout MappingReader, provider providerNode: ConfigNode?, what: String, node: ConfigNode, overrides: ModelOptions
    ) throws(ConfigError) -> ModelSettings {
        var provider: ModelSettings.Provider?
        var name: String?
        if let override = overrides.model {
            (provider, name) = try providerAndName(override, what: "--model", at: node.location)
        }
        if let providerNode {
            let fromFile: ModelSettings.Provider = try providerNode.choice("\(what).provider")
            provider = provider ?? fromFile
        }
        let nameNode = fields.optional("name")
        if let nameNode {
            let fromFile = try nameNode.nonEmptyString("\(what).name")
            name = name ?? fromFile
        }
        guard let provider, let name else {
            throw ConfigError(
                .missingKey, "\(what) needs \"name\" beside \"provider\"", at: node.location, hint: "for example name: gpt-4o-mini")
        }
        var settings = ModelSettings(provider: provider, name: name)
        if let value = fields.optional("base_url") {
            let url = try value.nonEmptyString("\(what).base_url")
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw ConfigError(.invalidValue, "\(what).base_url must start with http:// or https://", at: value.location)
            }
            settings.baseURL = ModelSettings.trimmed(url)
        }
        if let value = fields.optional("api_key_env") {
            settings.apiKeyVariable = try value.name("\(what).api_key_env")
            settings.apiKeyRequired = true
        }
        if let value = fields.optional("temperature") { settings.temperature = try value.double("\(what).temperature") }
        if let value = fields.optional("max_tokens") { settings.maxTokens = try value.int("\(what).max_tokens", in: 1...10_000_000) }
        if let value = fields.optional("seed") {
            guard provider == .openai else {
                throw ConfigError(
                    .invalidValue, "\(what).seed: \(provider.rawValue) takes no seed (OpenAI's API does)", at: value.location,
                    hint: "drop seed, or set temperature: 0 for the least varied replies")
            }
            settings.seed = try value.int("\(what).seed", in: 0...Int(Int32.max))
        }
        if let value = fields.optional("stream") { settings.stream = try value.bool("\(what).stream") }
        if let value = fields.optional("timeout_ms") { settings.timeoutMs = try value.int("\(what).timeout_ms", in: 1...86_400_000) }
        if let value = fields.optional("connect_timeout_ms") {
            settings.connectTimeoutMs = try value.int("\(what).connect_timeout_ms", in: 1...86_400_000)
        }
        if let value = fields.optional("idle_timeout_ms") {
            settings.idleTimeoutMs = try value.int("\(what).idle_timeout_ms", in: 1...86_400_000)
        }
        if let value = fields.optional("max_reply_bytes") {
            settings.limits.maxReplyBytes = try value.int("\(what).max_reply_bytes", in: RequestLimits.byteLimitRange)
        }
        if let value = fields.optional("max_line_bytes") {
            settings.limits.maxLineBytes = try value.int("\(what).max_line_bytes", in: RequestLimits.byteLimitRange)
        }
        if let value = fields.optional("max_retries") { settings.maxRetries = try value.int("\(what).max_retries", in: 0...100) }
        if let value = fields.optional("requests_per_minute") {
            settings.requestsPerMinute = try value.int("\(what).requests_per_minute", in: 1...1_000_000)
        }
        if let value = fields.optional("tokens_per_minute") {
            settings.tokensPerMinute = try value.int("\(what).tokens_per_minute", in: 1...1_000_000_000)
        }
        if let value = fields.optional("prices") {
            var prices = try value.mapping("\(what).prices")
            let input = try prices.required("input_per_mtok").double("\(what).prices.input_per_mtok")
            let output = try prices.required("output_per_mtok").double("\(what).prices.output_per_mtok")
            try prices.finish()
            settings.prices = ModelSettings.Prices(inputPerMillion: input, outputPerMillion: output)
        }
        try fields.finish()
        return settings
    }
}
