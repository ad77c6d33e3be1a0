public import TraceCore
import TraceLog

/// A model that serves the decisions recorded in a log, in order: the n-th decision of the
/// run gets the n-th recorded reply, raw text, usage, latency and cost included. It never
/// makes anything up: asked for more decisions than the log holds, it throws.
public struct ReplayModel: ModelClient {
    public var identity: ModelIdentity
    public var recorded: [DecisionMade]
    /// Where the decisions came from, for messages.
    public var source: String

    public init(identity: ModelIdentity, recorded: [DecisionMade], source: String) {
        self.identity = identity
        self.recorded = recorded
        self.source = source
    }

    /// The decisions of the log at `path`. Throws `LogError` when it cannot be read.
    public init(log path: String) throws {
        var decisions: [DecisionMade] = []
        var identity = ModelIdentity(provider: "replay", name: path)
        _ = try LogReader(path: path).forEachEvent { recorded in
            switch recorded.event.payload {
            case .decisionMade(let made): decisions.append(made)
            case .runStarted(let started): identity = ModelIdentity(provider: "replay", name: started.model.name)
            default: break
            }
        }
        self.init(identity: identity, recorded: decisions, source: path)
    }

    public func reply(to request: ModelRequest) async throws -> ModelReply {
        guard request.decisionIndex < recorded.count else {
            throw ModelError(
                "\(source) records \(counted(recorded.count, "decision")); the run asked for decision \(request.decisionIndex + 1), "
                    + "which the log cannot answer")
        }
        return ModelReply(recorded: recorded[request.decisionIndex])
    }
}

extension ModelReply {
    /// The reply a log recorded: raw text, usage, latency, cost and retried requests as they were.
    public init(recorded made: DecisionMade) {
        self.init(
            raw: made.raw, format: made.format, usage: made.usage, latencyUs: made.latencyUs,
            timeToFirstTokenUs: made.timeToFirstTokenUs, costUSD: made.costUSD, attempts: made.attempts)
    }
}
