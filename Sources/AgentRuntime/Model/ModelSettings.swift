public import TraceCore

/// A model served over HTTP, as an agent file's `model:` section declares it
/// (`docs/models.md`). The runtime only reads it; a `ModelClientFactory` (the
/// `ModelClients` module) turns it into a client.
public struct ModelSettings: Sendable, Hashable {
    /// The wire protocol: `openai` (Chat Completions, and every server that speaks it) or
    /// `anthropic` (Messages).
    public enum Provider: String, Sendable, CaseIterable {
        case openai
        case anthropic

        /// Where the provider's own API lives.
        public var defaultBaseURL: String {
            switch self {
            case .openai: return "https://api.openai.com/v1"
            case .anthropic: return "https://api.anthropic.com/v1"
            }
        }

        /// The environment variable the key is read from unless `api_key_env` says otherwise.
        public var defaultKeyVariable: String {
            switch self {
            case .openai: return "OPENAI_API_KEY"
            case .anthropic: return "ANTHROPIC_API_KEY"
            }
        }
    }

    /// Dollars per million tokens, for `cost_usd`.
    public struct Prices: Sendable, Hashable {
        public var inputPerMillion: Double
        public var outputPerMillion: Double

        public init(inputPerMillion: Double, outputPerMillion: Double) {
            self.inputPerMillion = inputPerMillion
            self.outputPerMillion = outputPerMillion
        }

        public func cost(of usage: TokenUsage) -> Double {
            (Double(usage.input) * inputPerMillion + Double(usage.output) * outputPerMillion) / 1_000_000
        }
    }

    public var provider: Provider
    public var name: String
    /// Without a trailing slash; the provider's path (`/chat/completions`, `/messages`) follows.
    public var baseURL: String
    /// The variable holding the API key. The key itself is never stored here, in a log or in
    /// a message; a run reads it from the environment when it starts.
    public var apiKeyVariable: String
    /// Whether the variable was named in the file (then it must be set) or is the default
    /// (then a missing key sends no credentials, for local servers).
    public var apiKeyRequired: Bool
    public var temperature: Double?
    public var maxTokens: Int?
    /// The seed sent for reproducible sampling (OpenAI's `seed`); nil sends none.
    public var seed: Int?
    /// Stream the reply (server-sent events). Off: one JSON response.
    public var stream: Bool
    /// What each request is held to: its timeouts and how large a reply may be.
    public var limits: RequestLimits
    /// One attempt, from sending to the last byte, streaming included (`limits.timeoutMs`).
    public var timeoutMs: Int {
        get { limits.timeoutMs }
        set { limits.timeoutMs = newValue }
    }
    public var connectTimeoutMs: Int {
        get { limits.connectTimeoutMs }
        set { limits.connectTimeoutMs = newValue }
    }
    /// The longest silence between two chunks of a streamed reply (`limits.idleTimeoutMs`).
    public var idleTimeoutMs: Int {
        get { limits.idleTimeoutMs }
        set { limits.idleTimeoutMs = newValue }
    }
    /// Retries after the first attempt (connection errors, 408, 409, 429, 5xx, 529).
    public var maxRetries: Int
    /// Client-side limits shared by every run of this process against the same server.
    public var requestsPerMinute: Int?
    public var tokensPerMinute: Int?
    /// Overrides the built-in price table for this model.
    public var prices: Prices?

    public init(
        provider: Provider, name: String, baseURL: String? = nil, apiKeyVariable: String? = nil, temperature: Double? = nil,
        maxTokens: Int? = nil, stream: Bool = true, timeoutMs: Int = RequestLimits.defaultTimeoutMs,
        connectTimeoutMs: Int = RequestLimits.defaultConnectTimeoutMs, idleTimeoutMs: Int = RequestLimits.defaultIdleTimeoutMs,
        maxRetries: Int = 4, requestsPerMinute: Int? = nil, tokensPerMinute: Int? = nil,
        prices: Prices? = nil
    ) {
        self.provider = provider
        self.name = name
        self.baseURL = Self.trimmed(baseURL ?? provider.defaultBaseURL)
        self.apiKeyVariable = apiKeyVariable ?? provider.defaultKeyVariable
        self.apiKeyRequired = apiKeyVariable != nil
        self.temperature = temperature
        self.maxTokens = maxTokens
        self.stream = stream
        self.limits = RequestLimits(timeoutMs: timeoutMs, connectTimeoutMs: connectTimeoutMs, idleTimeoutMs: idleTimeoutMs)
        self.maxRetries = maxRetries
        self.requestsPerMinute = requestsPerMinute
        self.tokensPerMinute = tokensPerMinute
        self.prices = prices
    }

    static func trimmed(_ url: String) -> String {
        var url = url
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    /// Recorded in `run_started`.
    public var identity: ModelIdentity { ModelIdentity(provider: provider.rawValue, name: name) }
}

/// Makes clients for models served over HTTP. The CLI passes the `ModelClients` module's
/// factory; a program that embeds the runtime without it can only use scripted and replayed
/// models.
public protocol ModelClientFactory: Sendable {
    /// A client for `settings`; throws a `ModelError` saying what is missing (a key, say).
    func client(for settings: ModelSettings) throws -> any ModelClient
    /// The user turns its cassette recorded, for `--user frozen`; nil when it has no cassette.
    func recordedUserTurns() throws -> (any RecordedUserTurns)?
}

extension ModelClientFactory {
    public func recordedUserTurns() throws -> (any RecordedUserTurns)? { nil }
}

/// How agent files get their models: the factory for HTTP models, and what the command line
/// overrides (`--model openai:gpt-4o-mini`, `--base-url`).
public struct ModelOptions: Sendable {
    public var factory: (any ModelClientFactory)?
    /// `provider:name`; replaces the agent file's model, scripted ones included.
    public var model: String?
    public var baseURL: String?

    public init(factory: (any ModelClientFactory)? = nil, model: String? = nil, baseURL: String? = nil) {
        self.factory = factory
        self.model = model
        self.baseURL = baseURL
    }

    /// Nothing to override.
    public var overridesNothing: Bool { model == nil && baseURL == nil }
}
