public import AgentRuntime
import Foundation

/// The factory the CLI hands to agent files: makes `HTTPModelClient`s that read their API
/// key from the environment, share rate limits per server and model within the process, and
/// go through a cassette when one is given.
///
/// ```swift
/// let models = ModelOptions(factory: HTTPModelClients(), model: "openai:gpt-4o-mini")
/// let agent = try AgentFile.load(path: "agent.yaml", models: models)
/// ```
public struct HTTPModelClients: ModelClientFactory {
    public var cassette: Cassette?
    /// Where keys are read from: the process environment unless a test says otherwise.
    public var environment: [String: String]

    public init(cassette: Cassette? = nil, environment: [String: String]? = nil) {
        self.cassette = cassette
        self.environment = environment ?? ProcessInfo.processInfo.environment
    }

    public func client(for settings: ModelSettings) throws -> any ModelClient {
        let key = environment[settings.apiKeyVariable].flatMap { $0.isEmpty ? nil : $0 }
        guard settings.baseURL.hasPrefix("http://") || settings.baseURL.hasPrefix("https://") else {
            throw ModelClientError(.configuration, "the base URL \(settings.baseURL) must start with http:// or https://")
        }
        // The key is asked for only when a request goes to the network: a cassette replays
        // without one, and a check or a load runs nothing.
        var transport: any ModelTransport =
            key == nil && settings.apiKeyRequired
            ? MissingKeyTransport(variable: settings.apiKeyVariable, baseURL: settings.baseURL, hasCassette: cassette != nil)
            : HTTPTransport()
        if let cassette { transport = cassette.transport(provider: settings.provider.rawValue, live: transport) }
        let limiter =
            settings.requestsPerMinute == nil && settings.tokensPerMinute == nil
            ? nil
            : RateLimiter.shared(
                key:
                    "\(settings.provider.rawValue) \(settings.baseURL) \(settings.name) \(settings.requestsPerMinute ?? 0) \(settings.tokensPerMinute ?? 0)",
                requestsPerMinute: settings.requestsPerMinute, tokensPerMinute: settings.tokensPerMinute)
        return HTTPModelClient(settings: settings, transport: transport, apiKey: key, limiter: limiter)
    }
}

/// The live transport of a model whose API key variable is not set: every request that would go
/// to the network fails, final, with what to set. Requests a cassette answers never reach it.
struct MissingKeyTransport: ModelTransport {
    var variable: String
    var baseURL: String
    var hasCassette: Bool

    func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws {
        throw ModelClientError(
            .configuration,
            "api_key_env names \(variable), which is not set in the environment, so the request to \(baseURL) was not sent"
                + (hasCassette ? " (the cassette has no recording of it)" : ""),
            hint: "export \(variable)=…, replay the model from a cassette (--cassette DIR, --record none), "
                + "or leave api_key_env out for a local server that needs no key")
    }
}
