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
        // Strict replay from a cassette needs no key: nothing goes to the server.
        if key == nil && settings.apiKeyRequired && cassette?.mode != Cassette.Mode.none {
            throw ModelClientError(
                .configuration, "api_key_env names \(settings.apiKeyVariable), which is not set in the environment",
                hint: "export \(settings.apiKeyVariable)=…, or leave api_key_env out for a local server that needs no key")
        }
        guard settings.baseURL.hasPrefix("http://") || settings.baseURL.hasPrefix("https://") else {
            throw ModelClientError(.configuration, "the base URL \(settings.baseURL) must start with http:// or https://")
        }
        var transport: any ModelTransport = HTTPTransport()
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
