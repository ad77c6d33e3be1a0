public import TraceCore

/// One run read from another tool's record, in the shape a log needs: what the importers
/// produce and `ImportWriter` writes. Each step is one model decision (the calls it proposed
/// and their results, or an answer); the source's own records ride along so nothing is lost.
public struct ImportedRun: Sendable {
    public var source: RunSource
    public var goal: String
    /// The agent's name in the source (the service, the task, the transcript's file name).
    public var agentName: String
    public var model: ModelIdentity
    /// The tools the source declares, in the order first declared (`tools(declaredBy:)`); the
    /// writer adds the tools the calls name that none declares (`declareCalledTools()`).
    public var tools: [ToolSpec]
    /// Records before the first decision (system and user messages, the root span): kept with
    /// the first step.
    public var preamble: [JSONValue]
    public var steps: [ImportedStep]
    /// How the run ended; nil for a run the source shows unfinished (no `run_stopped` is written):
    /// a transcript that ends on a user turn, our own export of a run that had not stopped.
    public var stop: RunStopped?
    /// When the run started, in microseconds since the epoch (the source's clock).
    public var startUs: Int
    /// What the importer had to decide about the source (a reused call id, arguments that are not
    /// JSON): reported to the user, never silently.
    public var warnings: [String]
    /// Why the source shows a run that may still be going, when it does: a trace in which a model
    /// call's or a tool's span names a parent that is not in it (spans are exported as they end,
    /// a parent after its children). `collect` writes such a trace's run unfinished until the
    /// parent comes; `import` reads the span as a root and says so.
    public var openBecause: String?
    /// Writes the run unfinished (no `run_stopped`; `source.stop` `incomplete`) because its
    /// source lacks part of it (`why`): what it did in the part left out is not known, so a case
    /// over it could not run (or, allowing unfinished runs, is checked as far as it went) — never
    /// a pass on a record that looks whole. A run already unfinished stays as it is.
    public mutating func leaveUnfinished(because why: String) {
        guard stop != nil else { return }
        stop = nil
        source.stop = "incomplete"
        warnings.append("\(why): the run is written unfinished (no run_stopped), not as its source ended it")
    }

    /// A conversation's user turns (a transcript with more than one user message), each with the
    /// index of the step it comes before (`steps.count` for one after the last step): written as
    /// `user_turn` events. Empty for a run on one input.
    public var userTurns: [(beforeStep: Int, turn: UserTurn)] = []

    public init(
        source: RunSource, goal: String, agentName: String, model: ModelIdentity, tools: [ToolSpec] = [], preamble: [JSONValue] = [],
        steps: [ImportedStep] = [], stop: RunStopped?, startUs: Int, warnings: [String] = [],
        userTurns: [(beforeStep: Int, turn: UserTurn)] = []
    ) {
        self.source = source
        self.goal = goal
        self.agentName = agentName
        self.model = model
        self.tools = tools
        self.preamble = preamble
        self.steps = steps
        self.stop = stop
        self.userTurns = userTurns
        self.startUs = startUs
        self.warnings = warnings
    }

    /// Tool definitions as the log's tool specs, in the order given: OpenAI's
    /// `{type: function, function: {name, description, parameters}}`, the flat
    /// `{name, description, parameters}` of the GenAI conventions and Inspect, and Anthropic's
    /// `{name, description, input_schema}`. A schema given as a JSON string (OpenLLMetry's) is
    /// parsed; a schema that is not an object is read as an open one. A name declared again keeps
    /// its first definition; a definition without a name is left out. No source says what a tool
    /// does to the world, so every tool is a `write` (the most dangerous kind), as the MCP proxy
    /// treats a tool of unknown effect: a policy rule on `side_effect: write` then judges it.
    public static func tools(declaredBy definitions: [JSONValue]) -> [ToolSpec] {
        var tools: [ToolSpec] = []
        var names = Set<String>()
        for definition in definitions {
            let function = definition["function"].flatMap { $0.objectValue == nil ? nil : $0 } ?? definition
            guard let name = function["name"]?.stringValue, !name.isEmpty, names.insert(name).inserted else { continue }
            var schema = function["parameters"] ?? function["input_schema"] ?? function["inputSchema"]
            if let text = schema?.stringValue { schema = try? JSONParser.parse(Array(text.utf8)) }
            tools.append(
                ToolSpec(
                    name: name, description: function["description"]?.stringValue ?? "",
                    inputSchema: schema.flatMap { $0.objectValue == nil ? nil : $0 } ?? ["type": "object"], sideEffect: .write))
        }
        return tools
    }

    /// The tools the steps call that `tools` does not declare, appended in first-use order with an
    /// open schema: a case can name every tool the run used.
    mutating func declareCalledTools() {
        var known = Set(tools.map(\.name))
        for step in steps {
            for call in step.calls where known.insert(call.call.name).inserted {
                tools.append(
                    ToolSpec(
                        name: call.call.name, description: "imported: declared by no tool list in the source",
                        inputSchema: ["type": "object"], sideEffect: .write))
            }
        }
    }
}

/// One decision of an imported run.
public struct ImportedStep: Sendable {
    /// What the model decided.
    public enum Decision: Sendable {
        /// Tool calls (with their results, when the source has them).
        case calls([ImportedCall])
        case answer(String)
        /// The model's output could not be a decision (an empty reply, a refusal).
        case invalid(InvalidDecision)
    }

    public var decision: Decision
    /// The model's message as the source has it (`decision_made.raw`).
    public var raw: JSONValue
    /// How `raw` is read: `openai.chat`, `anthropic.messages`, `otlp.span`, `inspect.message`.
    public var format: String
    /// Every source record of this step (the model message, the tool results), as they were.
    public var records: [JSONValue]
    public var usage: TokenUsage?
    public var latencyUs: Int?
    public var costUSD: Double?
    /// When the decision was made, when the source says.
    public var timeUs: Int?

    public init(
        decision: Decision, raw: JSONValue, format: String, records: [JSONValue], usage: TokenUsage? = nil, latencyUs: Int? = nil,
        costUSD: Double? = nil, timeUs: Int? = nil
    ) {
        self.decision = decision
        self.raw = raw
        self.format = format
        self.records = records
        self.usage = usage
        self.latencyUs = latencyUs
        self.costUSD = costUSD
        self.timeUs = timeUs
    }

    public var calls: [ImportedCall] {
        if case .calls(let calls) = decision { return calls }
        return []
    }
}

/// One tool call of an imported decision and, when the source shows it ran, its result.
public struct ImportedCall: Sendable {
    public var call: ToolCall
    /// Nil when the source has no sign that the call ran (no result, no tool span).
    public var result: ImportedResult?
    /// The attempts before `result`, when the source records them (agent-eval's OTLP export):
    /// each written as an attempt of its own, `result` as the last.
    public var earlierAttempts: [ImportedResult] = []

    public init(call: ToolCall, result: ImportedResult? = nil) {
        self.call = call
        self.result = result
    }
}

/// The outcome of an imported call.
public struct ImportedResult: Sendable {
    public var status: ToolStatus
    public var output: JSONValue?
    public var error: String?
    public var durationUs: Int
    /// When the tool started, when the source says.
    public var timeUs: Int?
    /// Whether the failure was one to retry, when the source says (agent-eval's export).
    public var isRetryable: Bool?

    public init(status: ToolStatus, output: JSONValue?, error: String? = nil, durationUs: Int = 0, timeUs: Int? = nil) {
        self.status = status
        self.output = output
        self.error = error
        self.durationUs = durationUs
        self.timeUs = timeUs
    }

    /// A result from a tool message's content: JSON when it parses as JSON, else text. A failure
    /// the source signals only inside the content (`{"error": …}`, text that starts with
    /// `Error:`) is an error (docs/interop.md, "Tool failures").
    public static func fromContent(_ text: String, isError: Bool = false, durationUs: Int = 0, timeUs: Int? = nil) -> ImportedResult {
        let parsed = try? JSONParser.parse(Array(text.utf8))
        // Content that is one JSON string (a string result encoded as JSON, as an exporter writes
        // an attribute of any type) is that string, not its quotes and escapes.
        if case .string(let inner)? = parsed { return fromContent(inner, isError: isError, durationUs: durationUs, timeUs: timeUs) }
        let value = parsed.flatMap { value -> JSONValue? in
            switch value {
            case .object, .array: return value
            default: return nil
            }
        }
        let output = value ?? .string(text)
        if isError || signalsFailure(text: text, value: value) {
            return ImportedResult(status: .error, output: output, error: String(text.prefix(500)), durationUs: durationUs, timeUs: timeUs)
        }
        return ImportedResult(status: .ok, output: output, durationUs: durationUs, timeUs: timeUs)
    }

    /// Whether a result's content says the call failed, for sources without an error flag.
    static func signalsFailure(text: String, value: JSONValue?) -> Bool {
        if let error = value?["error"], error != .null, error != .bool(false), error != .string("") { return true }
        let head = text.drop { $0 == " " || $0 == "\n" }.prefix(6).lowercased()
        return head == "error:" || text.drop { $0 == " " || $0 == "\n" }.lowercased().hasPrefix("error executing")
    }
}

/// Gives each imported call a log id unique within the run: the source's own id, `call_N` when
/// the source has none, and `id#2`, `id#3`… for a source id used again by a later call — never an
/// id given before, whatever the source's ids look like (a source id `a#2` after `a` was given
/// twice is `a#2#2`).
struct CallIds {
    /// Every log id given so far.
    private var given: Set<String> = []
    /// The source ids seen so far.
    private var sources: Set<String> = []
    private var generated = 0

    /// The log id for a call with `sourceId`, and whether that source id was used before.
    mutating func next(_ sourceId: String?) -> (id: String, isReused: Bool) {
        guard let sourceId, !sourceId.isEmpty else {
            var id: String
            repeat {
                generated += 1
                id = "call_\(generated)"
            } while given.contains(id)
            given.insert(id)
            return (id, false)
        }
        let isReused = !sources.insert(sourceId).inserted
        var id = sourceId
        var count = 1
        while given.contains(id) {
            count += 1
            id = "\(sourceId)#\(count)"
        }
        given.insert(id)
        return (id, isReused)
    }
}
