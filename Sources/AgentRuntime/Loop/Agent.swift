import Foundation
public import TraceCore
public import TraceLog

/// Everything that defines an agent for the runtime: instructions, model, tools, policy,
/// limits and how failures are handled. Built from an agent file (`AgentFile`) or in code.
public struct Agent: Sendable {
    public var name: String
    public var version: String?
    public var instructions: String
    public var model: any ModelClient
    public var tools: ToolRegistry
    public var policy: any Policy
    public var limits: RunLimits
    public var handling: FailureHandling
    public var context: ContextSettings
    public var memory: [ContextItem]
    public var evidence: [ContextItem]
    /// The actor and route runs act for unless a run says otherwise.
    public var actor: String?
    public var route: String?
    public var durability: Durability
    /// Writes a context packet as a delta on the one before it when that is smaller (log
    /// format version 2, so a long run's log grows linearly); false writes every packet whole,
    /// as version 1 lines, for readers that know only version 1 (the agent file's
    /// `log_version: 1`).
    public var writesContextDeltas = true
    /// The log's format version (`LogWriter.Options.formatVersion`): 3, whose hash chain links
    /// gzip members, or 1 (with `writesContextDeltas`, versions 1 and 2), for agent-eval 0.3's
    /// readers (the agent file's `log_version: 1` or `2`).
    public var logFormatVersion = Event.memberChainVersion
    /// Environment variables whose values, and member names whose string values, are secret:
    /// replaced in every event before it reaches the log (with the always-on key patterns; see
    /// `Redactor`).
    public var redactEnvironment: [String] = []
    /// The environment variable the model's API key comes from (`api_key_env`), when it has one.
    /// Read only when a request goes to the network: a cassette replays without it.
    public var apiKeyVariable: String?
    /// Where the agent file names that model.
    public var apiKeyLocation: SourceLocation?
    public var redactMembers: [String] = []
    /// `sha256:` of the agent's configuration, recorded in `run_started`; a resumed run must
    /// be resumed with the same configuration.
    public var configDigest: String
    /// MCP servers to start for each run (their tools join `tools` when they do; see
    /// `connectingToolServers`), and what starts them.
    public var toolServers: [ToolServerSettings] = []
    public var toolServerConnector: (any ToolServerConnector)?
    /// The servers `connectingToolServers` started, whose tools are now in `tools`.
    public var startedToolServers: [ToolServerSettings] = []
    /// The servers the run's tools come from, recorded in `run_started`.
    public var toolServerIdentities: [ToolServerIdentity] = []
    /// Tools named by policy rules that only a server can offer: checked when the servers start.
    public var toolReferences: [ToolReference] = []

    public init(
        name: String, version: String? = nil, instructions: String, model: any ModelClient, tools: ToolRegistry,
        policy: any Policy = AllowAllPolicy(), limits: RunLimits = RunLimits(), handling: FailureHandling = FailureHandling(),
        context: ContextSettings = ContextSettings(), memory: [ContextItem] = [], evidence: [ContextItem] = [], actor: String? = nil,
        route: String? = nil, durability: Durability = Durability(), configDigest: String? = nil
    ) {
        self.name = name
        self.version = version
        self.instructions = instructions
        self.model = model
        self.tools = tools
        self.policy = policy
        self.limits = limits
        self.handling = handling
        self.context = context
        self.memory = memory
        self.evidence = evidence
        self.actor = actor
        self.route = route
        self.durability = durability
        self.configDigest =
            configDigest
            ?? ContentHash.sha256(
                Array("\(name) \(version ?? "") \(instructions)".utf8) + tools.specs.flatMap { JSONWriter.encode($0) })
    }

    /// The environments the runtime hands to the processes it starts: each command tool's that
    /// has one of its own (an agent file's always do) and each MCP server's, in the agent's
    /// order (started or still to start). Their secrets are redacted like the caller's
    /// (`redactor`).
    public var childEnvironments: [[String: String]] {
        tools.tools.compactMap { ($0.host as? SubprocessToolHost)?.environment }
            + (startedToolServers + toolServers).map(\.environment)
    }

    /// What keeps this agent's secrets out of its logs and of what a run shows as it happens:
    /// the values of `redactEnvironment` — in the caller's environment and in every child's —
    /// the values handed to a child under a name that looks secret, the string values of
    /// `redactMembers`, and the always-on key patterns; and, as every log writer does
    /// (`Redactor.standard`), the values of agent-eval's own variables whose names look secret.
    /// The one redactor of a run.
    public var redactor: Redactor {
        Redactor(
            environmentNames: redactEnvironment, memberNames: redactMembers,
            childEnvironments: childEnvironments + [ProcessInfo.processInfo.environment]
        ).adding(childArguments.flatMap(Redactor.secrets(inArguments:)), rule: "argument")
    }

    /// The command lines of the processes the runtime starts, as `childEnvironments` lists their
    /// environments: a value given to an option named like a secret (`--password VALUE`) is
    /// redacted too, for a program may echo its command line (on a failure, say).
    public var childArguments: [[String]] {
        tools.tools.compactMap { ($0.host as? SubprocessToolHost)?.command } + (startedToolServers + toolServers).map(\.command)
    }

    /// The identity recorded in `run_started`.
    public var identity: AgentIdentity {
        AgentIdentity(name: name, version: version, configDigest: configDigest)
    }
}

/// What the runtime does when things go wrong.
public struct FailureHandling: Sendable, Hashable {
    /// What a failure becomes: an observation the model sees next step, or the end of the run.
    public enum Response: String, Sendable, Hashable, CaseIterable {
        case observe
        case stop
    }

    /// Rejected replies given back to the model (with the reason) before the run stops with
    /// `invalid_decision`. 0 stops at the first.
    public var invalidDecisionRetries: Int
    /// A tool call that failed after its retries.
    public var toolFailure: Response
    /// A call denied by policy, or refused by a human.
    public var policyDenied: Response

    public init(invalidDecisionRetries: Int = 2, toolFailure: Response = .observe, policyDenied: Response = .observe) {
        self.invalidDecisionRetries = invalidDecisionRetries
        self.toolFailure = toolFailure
        self.policyDenied = policyDenied
    }
}

/// The runtime's view of the outside world: time, waiting, run ids. Live runs use `.live`;
/// tests and fixtures inject deterministic ones, so the same script gives the same log bytes.
public struct RuntimeEnvironment: Sendable {
    /// Microseconds since the Unix epoch, for event timestamps and the run's wall-clock limit.
    public var now: @Sendable () -> Int
    /// The monotonic clock that measures attempts and model calls and enforces tool timeouts.
    /// On a `LiveClock` (the default) its `DeadlineWatchdog` keeps an attempt's deadline; on
    /// any other clock the attempt races `clock.sleep(until:)` it. Tests inject one they advance.
    public var clock: any Clock<Duration>
    /// Turns a measured duration (tool attempt, model call) into the microseconds recorded.
    public var recordedDuration: @Sendable (Duration) -> Int
    /// Waits before a retry (milliseconds): `clock` by default; reproducible runs skip it.
    public var sleep: @Sendable (Int) async throws -> Void
    /// A new run id.
    public var makeRunId: @Sendable () -> String
    /// Told of every event as it is recorded and of the model's streamed text; nil for no one
    /// (see `AgentRuntime.updates`).
    public var observe: (@Sendable (RunUpdate) -> Void)?

    public init(
        now: @escaping @Sendable () -> Int, clock: any Clock<Duration> = LiveClock(),
        recordedDuration: @escaping @Sendable (Duration) -> Int, sleep: (@Sendable (Int) async throws -> Void)? = nil,
        makeRunId: @escaping @Sendable () -> String
    ) {
        self.now = now
        self.clock = clock
        self.recordedDuration = recordedDuration
        self.sleep = sleep ?? { milliseconds in try await clock.sleep(for: .milliseconds(milliseconds)) }
        self.makeRunId = makeRunId
    }

    /// The real clock, real waits, random run ids.
    public static let live = RuntimeEnvironment(
        now: { Int((Date.timeIntervalSinceReferenceDate + Date.timeIntervalBetween1970AndReferenceDate) * 1_000_000) },
        recordedDuration: { duration in Int(duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)
        },
        makeRunId: {
            // Sortable by start time, unique by the random tail: run-20261122-004348-1f3a9c2e.
            "run-\(RuntimeEnvironment.utcStamp())-" + String(UInt32.random(in: 0...UInt32.max), radix: 16).leftPadded(to: 8)
        })

    /// Starts measuring on `clock`: the function returned tells the time since.
    public func stopwatch() -> @Sendable () -> Duration { clock.stopwatch() }

    /// The current UTC time as `yyyyMMdd-HHmmss`, for names that sort by time (run ids, output folders).
    public static func utcStamp() -> String {
        var seconds = time(nil)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d%02d%02d-%02d%02d%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min,
            parts.tm_sec)
    }
}

extension RuntimeEnvironment {
    /// `text` made safe as one file name: letters, digits, `.`, `_` and `-` are kept, anything
    /// else (a `/`, a space, a control character) becomes `-`, and a leading dot becomes `_`, so
    /// a name from an agent file or the command line can never leave the output directory or
    /// hide the file.
    public static func fileNameComponent(_ text: String) -> String {
        var name = String(
            text.unicodeScalars.map { scalar -> Character in
                scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "._-".unicodeScalars.contains(scalar))
                    ? Character(scalar) : "-"
            })
        if name.hasPrefix(".") { name = "_" + name.dropFirst() }
        return name.isEmpty ? "_" : name
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

extension Clock where Duration == Swift.Duration {
    /// Starts measuring: the function returned tells the time since.
    func stopwatch() -> @Sendable () -> Duration {
        let start = now
        return { start.duration(to: self.now) }
    }
}
