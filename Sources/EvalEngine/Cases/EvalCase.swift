public import AgentRuntime
public import ConfigFile
import Foundation
public import TraceCore

/// One eval case: an input, where its runs come from (an agent run live, or recorded logs),
/// and what their trajectories must look like.
public struct EvalCase: Sendable {
    /// Where a case's runs come from.
    public enum Source: Sendable {
        /// Run this agent file live on `input`; approve or deny waiting calls by id.
        case live(agent: String, approve: [String], deny: [String])
        /// Check these logs (paths after glob expansion happen at run time).
        case recorded(patterns: [String])
        /// No source in the file: the runner's `--agent` is used.
        case defaultAgent(approve: [String], deny: [String])
        /// Run this pipeline file live (on `pipelineInput`, or the file's own input).
        case pipeline(file: String)
        /// Run this program (an agent written with any framework) through the recording model
        /// gateway, and check the log it records.
        case command(ExternalCommand)
    }

    public var id: String
    public var description: String?
    public var tags: [String]
    public var input: String?
    /// A pipeline case's input (any JSON value); nil runs the pipeline on its file's input.
    public var pipelineInput: JSONValue?
    public var source: Source
    public var expected: Expectations
    /// The file the case came from, and where in it.
    public var location: SourceLocation
    /// Whether a run that did not finish (no `run_stopped`, a torn or empty log) is checked
    /// over what it recorded instead of making the case "could not run".
    public var allowsUnfinished = false
    /// Whether a run whose decisions reuse call ids (a source known to number calls per turn)
    /// is checked, the reuse reported, instead of being a run that could not be graded.
    public var allowsReusedCallIds = false
    /// The cassette directory (`cassette:`, resolved against the case file) that records and
    /// replays the model calls of this case's live runs, in place of the command line's
    /// `--cassette`; nil uses that.
    public var cassette: String?
    /// The policy a run that had no gate is audited with (`policy:`, resolved against the case
    /// file): verdict expectations then check what it would have said of each call that
    /// recorded no verdict (`PolicyAudit`).
    public var policy: CasePolicy?
    /// The share of a live case's attempts that must pass for the gate to pass it (`minPassRate`,
    /// 1 unless the case says less): above it a case with failed attempts is `flaky_pass`.
    public var minPassRate = 1.0
    /// A recorded case whose logs are repeated attempts of one agent (it gives `minPassRate`):
    /// graded as a live case's repeats, not as different logs each of which must pass.
    public var logsAreRepeats = false
    /// The least Cohen's κ the case's judge must reach against people's labels
    /// (`judgeMinKappa`; `agent-eval judge calibrate` checks it).
    public var judgeMinKappa: Double?
    /// The quarantine entry that covers the case (`quarantine:` in its file, or the project's
    /// quarantine file): its failures are reported and do not fail the gate until `until`.
    public var quarantine: QuarantineEntry?
    /// A conversation case's simulated user (`user:`): its live runs are conversations, which
    /// the user opens instead of an `input`; nil for a case on one input.
    public var user: CaseUserSpec?
    /// The case as written, for pointing errors found later (a tool the agent lacks, a log that
    /// is not there) at the line that names it.
    public var node: ConfigNode?

    public init(
        id: String, description: String? = nil, tags: [String] = [], input: String? = nil, source: Source, expected: Expectations,
        location: SourceLocation
    ) {
        self.id = id
        self.description = description
        self.tags = tags
        self.input = input
        self.source = source
        self.expected = expected
        self.location = location
    }

    /// Whether `text` can be a caseId: letters, digits, `-`, `_`, `.` and `:` (the one rule, for
    /// case files, the quarantine file and `agent-eval quarantine add`).
    public static func isValidId(_ text: String) -> Bool {
        !text.isEmpty && text.allSatisfy { $0.isLetter || $0.isNumber || "-_.:".contains($0) }
    }

    /// The error for a caseId that breaks the rule, at `location`.
    public static func invalidIdError(_ id: String, key: String = "caseId", at location: SourceLocation) -> ConfigError {
        ConfigError(.invalidValue, "\(key) \"\(id)\" may only hold letters, digits, \"-\", \"_\", \".\" and \":\"", at: location)
    }

    /// Where the case gives `key` (`agent`, `logs`, `pipeline`); the case's own place otherwise.
    public func location(ofKey key: String) -> SourceLocation {
        node?.location(ofKey: key) ?? location
    }

    /// Where the case's expectations first name `text` (a tool); the case's own place otherwise.
    /// Walks the expectations: for many names, use `nameLocations()`.
    public func location(ofName text: String) -> SourceLocation {
        expectedNode?.firstLocation(of: text) ?? location
    }

    /// Where the case's expectations first name each text, from one walk of them: for errors
    /// about many names (a long list of tools no agent has), each found in constant time.
    public func nameLocations() -> NameLocations {
        NameLocations(places: expectedNode?.firstLocations() ?? [:], fallback: location)
    }

    /// Where each text is first written in a case's expectations (`EvalCase.nameLocations()`).
    public struct NameLocations: Sendable {
        let places: [String: SourceLocation]
        let fallback: SourceLocation

        /// As `EvalCase.location(ofName:)`.
        public func location(ofName text: String) -> SourceLocation { places[text] ?? fallback }
    }

    private var expectedNode: ConfigNode? {
        guard case .mapping(let pairs)? = node?.content else { return nil }
        return pairs.first { $0.key == "expected" }?.value
    }

    /// Whether the case's runs are made when the suite runs (an agent, a pipeline, a command),
    /// not read from recorded logs.
    public var isLive: Bool { source.isLive }
}

extension EvalCase.Source {
    /// Whether the case runs a pipeline.
    var isPipeline: Bool { if case .pipeline = self { true } else { false } }

    /// Whether the runs are made when the suite runs, not read from recorded logs.
    var isLive: Bool { if case .recorded = self { false } else { true } }
}

/// A `command:` case's program: any agent, run through the recording model gateway
/// (docs/record.md) in the case file's directory.
public struct ExternalCommand: Sendable {
    /// The program and its arguments as the case writes them; `{input}` stands for the input.
    public var arguments: [String]
    /// Where it runs: the case file's directory.
    public var directory: String
    /// Where each provider's requests go (`upstream:`), by provider (`openai`, `anthropic`).
    public var upstreams: [String: String]
    /// How long a run may take (`timeout:`, seconds).
    public var timeoutSeconds: Int
    /// Variables the command runs with over agent-eval's own environment (`env:`), in file order.
    public var environment: [(name: String, value: String)] = []
    /// The agent's name in the log (`name:`); nil derives it from the command line.
    public var agentName: String?

    /// A run may take 10 minutes unless the case says otherwise.
    public static let defaultTimeoutSeconds = 600

    public init(arguments: [String], directory: String, upstreams: [String: String] = [:], timeoutSeconds: Int = Self.defaultTimeoutSeconds)
    {
        self.arguments = arguments
        self.directory = directory
        self.upstreams = upstreams
        self.timeoutSeconds = timeoutSeconds
    }

    /// The command line for one run: every `{input}` replaced by `input`.
    public func commandLine(input: String) -> [String] {
        arguments.map { $0.replacingOccurrences(of: "{input}", with: input) }
    }
}

extension ExternalCommand {
    /// The script the command's interpreter runs (`python3 agents/refund.py` → `agents/refund.py`),
    /// when it names one; `check` makes sure it is there.
    public var script: String? { AgentFile.interpreterScript(of: arguments) }
}

/// A case's `policy:` file, read once with the case.
public struct CasePolicy: Sendable {
    public var path: String
    public var file: PolicyFile
    /// SHA-256 of the file's bytes: a cached check result holds only for the same policy.
    public var digest: String

    public init(path: String, file: PolicyFile, digest: String) {
        self.path = path
        self.file = file
        self.digest = digest
    }
}
