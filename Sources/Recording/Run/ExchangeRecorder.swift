public import AgentRuntime
import ConfigFile
import Foundation
import Interop
public import ModelClients
import Synchronization
public import TraceCore
public import TraceLog

/// Numbers identical requests for the cassette's keys (`RequestKey`): the n-th identical
/// request replays the n-th recorded answer. A request takes the lowest number no other
/// identical request holds (answered, or still in flight), so two identical requests at once get
/// two numbers; a request that was not answered whole (a 429 the SDK retries) gives its number
/// back, and the retry replays as the one answer it finally got.
public final class RequestKeys: Sendable {
    private struct State {
        /// Numbers held, by the key of a request's first occurrence.
        var taken: [String: Set<Int>] = [:]
        /// Numbers reserved by the gateway and not yet asked for by the cassette, oldest first.
        var pending: [String: [Int]] = [:]
    }

    // Guarded by the mutex.
    private let state = Mutex(State())

    public init() {}

    /// Reserves the number of a request about to be forwarded.
    func reserve(api: ModelAPI, canonical: JSONValue) -> Int {
        let first = RequestKey.key(api: api, canonical: canonical, occurrence: 1)
        return state.withLock { state in
            var number = 1
            while state.taken[first, default: []].contains(number) { number += 1 }
            state.taken[first, default: []].insert(number)
            state.pending[first, default: []].append(number)
            return number
        }
    }

    /// Gives back the number of a request that was not answered whole.
    func release(api: ModelAPI, canonical: JSONValue, occurrence: Int) {
        let first = RequestKey.key(api: api, canonical: canonical, occurrence: 1)
        _ = state.withLock { $0.taken[first]?.remove(occurrence) }
    }

    /// The key of the request `request` carries (its number as reserved), and its canonical body
    /// (what the cassette stores).
    public func key(for request: TransportRequest) -> (key: String, request: JSONValue) {
        let body = (try? JSONParser.parse(request.body)) ?? .string(String(decoding: request.body, as: UTF8.self))
        let api = ModelAPI(path: request.url) ?? .openAIChat
        let canonical = RequestKey.canonical(body)
        let first = RequestKey.key(api: api, canonical: canonical, occurrence: 1)
        let reserved: Int? = state.withLock { state in
            guard var queue = state.pending[first], !queue.isEmpty else { return nil }
            let number = queue.removeFirst()
            state.pending[first] = queue.isEmpty ? nil : queue
            return number
        }
        let occurrence = reserved ?? reserve(api: api, canonical: canonical)
        return (RequestKey.key(api: api, canonical: canonical, occurrence: occurrence), canonical)
    }
}

/// Turns the exchanges the gateway forwards into one run's log (docs/record.md, "What is
/// recorded"): per answered request a step — the tool results the request carries back, the
/// request stored as content, a context packet, the decision, an intent per proposed call —
/// and at the end the stop.
///
/// Conversations: a command may talk to its model in several conversations at once (sub-agents,
/// parallel calls). A request belongs to
/// 1. the conversation that proposed a call whose result the request carries;
/// 2. else the latest conversation with the same opening (system text and first user message)
///    whose last request had fewer messages than this one (the same chat, continued);
/// 3. else a new conversation.
/// Each step's packet names its conversation (`state_summary`). The run's outcome is that of the
/// conversation answered last: an orchestrator's final answer comes after its sub-agents'.
///
/// The log is made at the first answered request (its goal is that request's first user
/// message, unless one is given), or at the end when none came.
public final class ExchangeRecorder: Sendable {
    /// Limits the recorder enforces on the command's model use.
    public struct Limits: Sendable, Hashable {
        /// Answered requests allowed; the next is refused and the command stopped.
        public var maxRequests: Int?
        /// Input and output tokens allowed, over all requests; past it the command is stopped.
        public var maxTokens: Int?

        /// The requests a command may make when nothing else is said (`record --max-requests`,
        /// a command case's run): an agent that loops is stopped, not billed for hours.
        public static let defaultMaxRequests = 100

        public init(maxRequests: Int? = Limits.defaultMaxRequests, maxTokens: Int? = nil) {
            self.maxRequests = maxRequests
            self.maxTokens = maxTokens
        }
    }

    /// Why the recorder wants the command stopped.
    public enum StopCause: Sendable, Hashable {
        case maxRequests(Int)
        case tokenBudget(used: Int, limit: Int)
        /// The cassette has no answer for the request the run's step `step` would have made.
        case notRecorded(String, step: Int)
        /// A fork's program asked, before the fork point, otherwise than its parent at step `step`.
        case forkDiverged(String, step: Int)
        /// A fork's program asked past the fork point while a request before it was unanswered.
        case forkOverlap
    }

    /// A request on its way: begun, not yet finished.
    public struct Exchange: Sendable {
        var api: ModelAPI
        var body: JSONValue
        var canonical: JSONValue
        var bytes: [UInt8]
        var startUs: Int
        /// Which identical request this is (`RequestKeys`), when it is forwarded.
        var occurrence = 0
        /// Set when the request is not forwarded: the status, message and error type to answer.
        var refusal: (status: Int, message: String, type: String)?
        /// A fork's request before its fork point: the parent's request it is (its position in
        /// `RecordedFork.requests`), answered from the parent's cassette.
        var prefixIndex: Int?
        var isPrefix: Bool { prefixIndex != nil }
    }

    typealias Conversation = ConversationBook.Conversation

    struct State: ~Copyable {
        var recorder: RunRecorder?
        /// The run's conversations and which request continues which.
        var book = ConversationBook()
        var logIds = Set<String>()
        var stored = Set<String>()
        var requests = 0
        /// Requests that failed after the upstream (or the cassette) answered them with a status:
        /// a reply that could not be read, cut off, or an HTTP error. Each was made and may be
        /// billed, so `--max-requests` counts it as it counts an answered one.
        var failedAnswered = 0
        /// Requests the gateway refused before they could be recorded (a path that is no model
        /// API's, a body that is not a JSON object), and why the first was.
        var refused = 0
        var firstRefusal: String?
        var firstRefusalIsBody = false
        /// Requests forwarded and not yet finished.
        var inFlight = 0
        /// The requests in flight when the command ended (`commandEnded`), before stopping the
        /// gateway cancelled them: what a `--timeout` stop names.
        var inFlightAtEnd = 0
        var tokens = 0
        /// Answered requests whose reply carried no token usage (an OpenAI stream asked without
        /// `stream_options.include_usage`): `tokens` counts an estimate for each.
        var unmetered = 0
        /// Failed exchanges not yet recorded with a decision, oldest first: each request's
        /// canonical key, when it ended, the attempt, and the part of a cut stream's reply the
        /// agent was passed (stored when the attempt is recorded). The next answered request with the same
        /// key (the retry), or any answered request made after it ended (the agent asked again
        /// another way: a trimmed context, another model), carries it in `attempts`.
        var failures: [Failure] = []
        var lastFailure: String?
        var stopCause: StopCause?
        var writeError: String?
        /// The MCP proxies recording their gates into this run, and the calls they judged.
        var proxying = ProxyRoster()
        /// Credentials the requests carried: never written to the log.
        var secrets = Set<String>()
        /// Where a fork of a recorded run stands on its way to its fork point.
        var forking = ForkProgress()
        /// The command's OpenTelemetry spans, and what became of them.
        var spans = SpanLedger()
        /// The conversation with a simulated user, when the run is one (`UserTalk`).
        var talk = UserTalk()
    }

    /// A failed exchange waiting to be recorded (`State.failures`).
    struct Failure {
        var key: String
        var endUs: Int
        var attempt: ModelAttempt
        var partial: ContentStored?
    }

    public let logPath: String
    public let runId: String
    let goal: String?
    let source: RunSource
    let agentName: String
    let limits: Limits
    /// Numbers identical requests for a cassette's keys; nil without a cassette.
    let keys: RequestKeys?
    /// The run forked, when this recording is a fork of a recorded run.
    let fork: RecordedFork?
    let options: LogWriter.Options
    /// The clock events are timed by, before a fork's shift.
    let clockNow: @Sendable () -> Int
    /// A fork goes on on its parent's clock (as `agent-eval fork` of an agent file does): from its
    /// fork point, times are shifted back by this much, so that the fork's first event comes
    /// right after the last one copied.
    let forkShift = Atomic<Int>(0)

    /// Now, in µs since the epoch, on the run's clock.
    func now() -> Int { clockNow() - forkShift.load(ordering: .relaxed) }
    let onStop: @Sendable (StopCause) -> Void
    /// Values never to write: the keys the command was given.
    let secrets: Set<String>
    /// The most conversations kept (`defaultMaxConversations`).
    let maxConversations: Int
    /// The recorder's state; its changes wake the calls, spans and forks that wait on it.
    let state = WatchedState(State())
    /// What those waits are bounded on.
    let clock: any Clock<Duration>

    public init(
        logPath: String, runId: String, goal: String?, agentName: String, command: [String], limits: Limits, keys: RequestKeys?,
        options: LogWriter.Options = LogWriter.Options(), secrets: Set<String> = [], maxConversations: Int = defaultMaxConversations,
        fork: RecordedFork? = nil, now: @escaping @Sendable () -> Int = RuntimeEnvironment.live.now,
        clock: any Clock<Duration> = RuntimeEnvironment.live.clock, onStop: @escaping @Sendable (StopCause) -> Void
    ) {
        self.clock = clock
        self.fork = fork
        self.secrets = secrets
        self.maxConversations = max(1, maxConversations)
        self.logPath = logPath
        self.runId = runId
        self.goal = goal
        self.agentName = agentName
        self.limits = limits
        self.keys = keys
        self.options = options
        self.clockNow = now
        self.onStop = onStop
        source = RunSource(format: "gateway", file: ShellWords.command(command), importer: Self.recorderName)
    }

    /// `run_started.source.importer` of a recorded run.
    public static let recorderName = "agent-eval-record/1"

    /// The cause the command was stopped for, if the recorder stopped it.
    public var stopCause: StopCause? { state.withLock { $0.stopCause } }
    /// Answered requests so far.
    public var requestCount: Int { state.withLock { $0.requests } }

    /// The command ended: the requests still in flight are noted before the gateway's stop
    /// cancels them, so that a stop at `--timeout` says the model had not answered.
    public func commandEnded() {
        state.withLock { $0.inFlightAtEnd = $0.inFlight }
    }

    /// Answered requests whose reply carried no token usage (`State.unmetered`).
    public var unmeteredReplyCount: Int { state.withLock { $0.unmetered } }

    /// Requests the upstream answered with a status that still failed (`State.failedAnswered`).
    public var failedRequestCount: Int { state.withLock { $0.failedAnswered } }

    /// Requests the gateway refused before they could be recorded, and why the first was.
    public var refusedRequests: (count: Int, first: String?) { state.withLock { ($0.refused, $0.firstRefusal) } }

    /// The gateway refused a request before it could be recorded (it reached no model): counted,
    /// so that a run that made only such requests is not said to have made none. The reason
    /// kept is the first of a request to a model API (`isBody`), else the first: a probe of
    /// another path (`GET /models`) does not hide why the model requests were refused. It is
    /// printed on agent-eval's own standard error, so it is kept redacted.
    public func noteRefused(_ reason: String, isBody: Bool) {
        let shown = Redactor.standard.redactText(reason)
        state.withLock { state in
            state.refused += 1
            if state.firstRefusal == nil || isBody && !state.firstRefusalIsBody {
                state.firstRefusal = shown
                state.firstRefusalIsBody = isBody
            }
        }
    }

    /// Tool calls MCP proxies judged into this run (`agent-eval mcp-proxy` under `record`).
    public var proxiedCallCount: Int { state.withLock { $0.proxying.proxiedCalls.count } }

    /// A request arrives: refused when the request budget is spent.
    func begin(api: ModelAPI, body: JSONValue, bytes: [UInt8], secrets: [String]) -> Exchange {
        var exchange = Exchange(api: api, body: body, canonical: RequestKey.canonical(body), bytes: bytes, startUs: now())
        if let fork {
            if let refused = forkRequest(&exchange, fork) { return refused }
            // Past the fork point, on the parent's clock.
            exchange.startUs = now()
        }
        let refused: StopCause? = state.withLock { state in
            // The user's turn the program was given comes first in the step of the request it
            // makes on it: recorded (durably) before the model is asked, however long that takes.
            if let pending = state.talk.pending {
                if !Self.carries(body, text: pending.turn.text) {
                    state.talk.requestsPastPending += 1
                } else if let recorder = state.recorder {
                    do {
                        try recordPendingTurn(recorder: recorder, state: &state)
                    } catch {
                        if state.writeError == nil { state.writeError = "\(error)" }
                    }
                }
            }
            // The request's header values reach no event from here on, wherever the upstream
            // or the agent echoes them.
            let learned = secrets.filter { !state.secrets.contains($0) }
            state.secrets.formUnion(secrets)
            if !learned.isEmpty { state.recorder?.writer.redact(also: learned, rule: "header") }
            // Requests in flight count: three sent at once under --max-requests 1 are one too many;
            // so does every request the upstream answered, readable or not.
            guard let max = limits.maxRequests, state.requests + state.failedAnswered + state.inFlight >= max else {
                state.inFlight += 1
                return nil
            }
            if state.stopCause == nil { state.stopCause = .maxRequests(max) }
            return .maxRequests(max)
        }
        if let refused {
            exchange.refusal = (
                429,
                "agent-eval: the command used its --max-requests budget of \(limits.maxRequests ?? 0) model requests; it is being stopped",
                "agent_eval_budget"
            )
            onStop(refused)
        } else {
            exchange.occurrence = keys?.reserve(api: api, canonical: exchange.canonical) ?? 0
        }
        return exchange
    }

    /// The request was answered (or failed): records it.
    func finish(_ exchange: Exchange, outcome: ModelForwarder.Outcome) {
        let endUs = now()
        let baseKey = RequestKey.key(api: exchange.api, canonical: exchange.canonical, occurrence: 1)
        guard let raw = outcome.reply.raw, outcome.failure == nil else {
            keys?.release(api: exchange.api, canonical: exchange.canonical, occurrence: exchange.occurrence)
            let message = outcome.failure ?? outcome.reply.problem ?? "the request failed"
            // What a cut stream had passed to the agent is kept with the failure: the agent may
            // have acted on it.
            let partial = outcome.reply.partial.map {
                ContentStored(bytes: JSONWriter.encode($0), mediaType: Self.partialReplyMediaType)
            }
            let attempt = ModelAttempt(
                status: outcome.reply.status == 0 ? nil : outcome.reply.status, error: message, retryAfterMs: outcome.reply.retryAfterMs,
                waitedMs: 0, partialReply: partial?.hash)
            let cause: StopCause? = state.withLock { state in
                state.inFlight -= 1
                if outcome.reply.status != 0 { state.failedAnswered += 1 }
                // The retry that answers it asks for the same parent request again.
                if let index = exchange.prefixIndex { state.forking.prefixClaimed.remove(index) }
                state.failures.append(Failure(key: baseKey, endUs: endUs, attempt: attempt, partial: partial))
                state.lastFailure = message
                if outcome.isNotRecorded, state.stopCause == nil {
                    state.stopCause = .notRecorded(message, step: state.recorder?.step ?? 0)
                    return state.stopCause
                }
                return nil
            }
            if let cause { onStop(cause) }
            return
        }
        let view = ModelRequestView(api: exchange.api, body: exchange.body)
        let cause: StopCause? = state.withLock { state in
            // Out of flight and counted in one step: a request beginning meanwhile sees one or the other.
            state.inFlight -= 1
            do {
                try record(view, exchange: exchange, raw: raw, outcome: outcome, baseKey: baseKey, endUs: endUs, state: &state)
                if let fork, exchange.isPrefix { try prefixAnswered(fork, state: &state) }
            } catch {
                if state.writeError == nil { state.writeError = "\(error)" }
            }
            state.requests += 1
            // A reply without usage is not free: it counts one token per four bytes of the request
            // and of the reply (the context packet's estimate), so --max-tokens still stops a loop.
            if outcome.reply.usage == nil { state.unmetered += 1 }
            let used =
                outcome.reply.usage?.total ?? ContextSettings.estimateTokens(bytes: exchange.bytes.count + JSONWriter.encode(raw).count)
            state.tokens = state.tokens.addingSaturating(used)
            if let max = limits.maxTokens, state.tokens > max, state.stopCause == nil {
                state.stopCause = .tokenBudget(used: state.tokens, limit: max)
                return state.stopCause
            }
            return nil
        }
        if let cause { onStop(cause) }
    }

    private func record(
        _ view: ModelRequestView, exchange: Exchange, raw: JSONValue, outcome: ModelForwarder.Outcome, baseKey: String, endUs: Int,
        state: inout State
    ) throws {
        let recorder = try recorder(for: view, state: &state, atUs: exchange.startUs)
        let number = conversation(for: view, state: &state)
        guard var conversation = state.book.conversations[number] else { return }
        conversation.requests += 1
        conversation.lastMessageCount = view.messageCount
        recorder.timeUs = exchange.startUs
        // The results this request carries back, for calls its conversation proposed: as tool
        // messages, or written back as text (a message naming the call, then its result).
        var results = view.results.map { ($0.callId, $0.text, $0.isError) }
        for echo in view.echoes {
            let named = conversation.openCalls.keys.compactMap { id in Self.place(of: id, in: echo.callText).map { (id, $0) } }
            results += named.sorted { $0.1 < $1.1 }.map { ($0.0, echo.resultText, false) }
        }
        for (callId, text, isError) in results {
            guard let call = conversation.openCalls.removeValue(forKey: callId) else { continue }
            state.book.openCallOwner[callId]?.removeAll { $0 == number }
            if state.book.openCallOwner[callId]?.isEmpty == true { state.book.openCallOwner[callId] = nil }
            let record = recorder.state.call(id: call.logId)
            if state.proxying.proxiedCalls.contains(call.logId) {
                // A proxy records how it ended (or that it never ran) as it happens — perhaps
                // after this, when the agent gave up on a slow call: what the agent sends back is
                // not the tool's result. (A proxy that could not record the end leaves the call
                // with an intent and no result: its outcome unknown, as it is.)
                continue
            } else if let record, !record.isExecuted {
                // A call of a proxied tool's name that never went through a proxy (a tool of the
                // agent's own of that name, a proxy that had failed): the gateway's inference, as
                // for any tool, recorded now that its result comes back.
                try recorder.record(
                    .toolIntended(ToolIntended(callId: call.logId, tool: call.tool, arguments: record.arguments, attempt: 1)))
            }
            state.spans.recentResults.append((call.tool, call.atUs, exchange.startUs))
            if state.spans.recentResults.count > Self.exchangeTimesKept {
                state.spans.recentResults.removeFirst(state.spans.recentResults.count / 2)
            }
            if let span = state.spans.spanResults.removeValue(forKey: callId) {
                // The agent's tool span: its measured duration and error, the text sent back.
                try recordResult(callId: call.logId, tool: call.tool, from: span, text: text, recorder: recorder, state: &state)
                continue
            }
            try recordCompleted(
                callId: call.logId, tool: call.tool, ImportedResult.fromContent(text, isError: isError),
                durationUs: max(0, exchange.startUs - call.atUs), recorder: recorder, state: &state)
        }
        let requestHash = try store(
            ContentStored(bytes: JSONWriter.encode(exchange.body), mediaType: "application/json"), recorder: recorder, state: &state)
        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: conversation.goal,
                    stateSummary:
                        "conversation \(conversation.number), request \(conversation.requests): \(view.messageCount) message"
                        + (view.messageCount == 1 ? "" : "s") + " to \(view.model) (\(exchange.api.rawValue))",
                    toolsDisclosed: view.tools.map(\.name), tokenEstimate: ContextSettings.estimateTokens(bytes: exchange.bytes.count),
                    promptHash: requestHash)))
        recorder.timeUs = endUs
        let (decision, calls) = decision(from: raw, format: outcome.reply.format, state: &state)
        // Its own failed tries, and every failure it followed: none is left out of the log.
        let isCarried = { (failure: Failure) in failure.key == baseKey || failure.endUs <= exchange.startUs }
        let carried = state.failures.filter(isCarried)
        state.failures.removeAll(where: isCarried)
        let attempts = try storedAttempts(of: carried, recorder: recorder, state: &state)
        // In a conversation with a simulated user, only the agent's talk with the user speaks to
        // the user: a side conversation's answer (a summary, a classifier, an input guardrail) is
        // marked aside, so no check or user reads it as said to the user. Decided at the
        // conversation's first request.
        let isUserTalk =
            conversation.isUserTalk ?? Self.isUserTalk(number: number, goal: conversation.goal, view: view, said: state.talk.saidTexts)
        conversation.isUserTalk = isUserTalk
        try recorder.record(
            .decisionMade(
                DecisionMade(
                    raw: JSONWriter.encodeString(raw), format: outcome.reply.format.rawValue, outcome: decision, usage: outcome.reply.usage,
                    latencyUs: max(0, endUs - exchange.startUs), timeToFirstTokenUs: outcome.reply.isStream ? outcome.firstContentUs : nil,
                    attempts: attempts, isAside: state.talk.isConversation && !isUserTalk)))
        for call in calls {
            // A proxied tool's call is judged, and its intent recorded, by the proxy when the
            // agent makes it.
            if !state.proxying.proxiedTools.contains(call.name) {
                try recorder.record(.toolIntended(ToolIntended(callId: call.logId, tool: call.name, arguments: call.arguments, attempt: 1)))
            }
            conversation.openCalls[call.sourceId] = (call.logId, call.name, endUs)
            state.book.openCallOwner[call.sourceId, default: []].append(number)
        }
        state.spans.exchangeStarts.append(exchange.startUs)
        if state.spans.exchangeStarts.count > Self.exchangeTimesKept {
            state.spans.exchangeStarts.removeFirst(state.spans.exchangeStarts.count / 2)
        }
        matchWaitingModelSpans(state: &state)
        if state.talk.isConversation, case .valid(.answer) = decision, isUserTalk,
            state.talk.answers < state.talk.turnsSaid - (state.talk.pending == nil ? 0 : 1)
        {
            // The agent answered the user's latest recorded turn: its turn is over, and the user
            // is asked for the next. (A second answer in the same turn — a retried output, a
            // sub-agent — asks nothing more.)
            state.talk.answers += 1
        }
        conversation.lastOutcome = decision
        conversation.lastAnswered = state.requests + 1
        state.book.conversations[number] = conversation
        state.book.lastAnswered = number
        state.lastFailure = nil
        try recorder.endStep()
        try recorder.writer.flush(sync: false)
    }

    /// Whether the model conversation `number` (opening with `goal`), whose first request is
    /// `view`, is the agent's talk with the user: the first conversation, or one that opens with
    /// what the user said (a program that starts a new chat each turn) — unless it offers the
    /// model no tool and its request asks for an answer in a JSON schema (a classifier's verdict,
    /// the OpenAI Agents SDK's guardrail agents), or opens with the user's words and then asks a
    /// question of its own about them (its last user message holds none of them: a guardrail's
    /// "is the message above safe?"). Such a conversation's answer was taken for the agent's
    /// reply, and the user answered "SAFE". A conversation that offers tools is the agent's
    /// whatever format it asks for or reminds its model of; one that opens otherwise — a program
    /// that rewrites what the user says — is the user's talk as before, its answers placed by the
    /// turns its requests hold.
    static func isUserTalk(number: Int, goal: String, view: ModelRequestView, said: Set<String>) -> Bool {
        guard number == 1 || said.contains(goal) else { return false }
        guard view.tools.isEmpty else { return true }
        if view.answersInSchema { return false }
        guard let first = view.firstUserText, said.contains(first), let last = view.lastUserText else { return true }
        return said.contains { !$0.isEmpty && last.contains($0) }
    }

    /// Records a call's result: its output inline, or stored as content and referenced when it is
    /// too large or nests too deep to hold inline (as imports do).
    func recordCompleted(
        callId: String, tool: String, _ result: ImportedResult, durationUs: Int, recorder: RunRecorder, state: inout State
    ) throws {
        let (output, content) = ImportWriter.recordable(output: result.output)
        let contentHash = try content.map { try store($0, recorder: recorder, state: &state) }
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: callId, tool: tool, attempt: 1, status: result.status, output: output, contentHash: contentHash,
                    error: result.error, durationUs: durationUs)))
    }

    /// The exchanges whose times are kept for matching model spans (the latest).
    static let exchangeTimesKept = 4096

    /// The log's recorder, made (with `run_started`) on first use.
    func recorder(for view: ModelRequestView?, state: inout State, atUs: Int) throws -> RunRecorder {
        if let recorder = state.recorder { return recorder }
        // A fork records its prefix apart; its log is made at the fork point (`makeFork`). The
        // prefix file is bookkeeping, but a recorder killed before the fork point leaves it on
        // disk: it redacts as the log does.
        var prefixOptions = LogWriter.Options()
        prefixOptions.redactor = options.redactor
        let writer =
            fork == nil
            ? try LogWriter.create(at: logPath, runId: runId, options: options)
            : try LogWriter.create(at: forkPrefixPath, runId: runId, options: prefixOptions)
        writer.redact(also: state.secrets.sorted(), rule: "header")
        let recorder = RunRecorder(writer: writer, timeUs: atUs)
        let goal = self.goal ?? view?.firstUserText ?? ""
        try recorder.record(
            .runStarted(
                RunStarted(
                    goal: goal,
                    agent: AgentIdentity(name: agentName, configDigest: ContentHash.sha256(Array(source.file.utf8))),
                    model: ModelIdentity(provider: view?.api.provider ?? "unknown", name: view?.model ?? "unknown"),
                    policy: PolicyIdentity(name: "none (recorded through the gateway)"),
                    tools: Self.sideEffects(of: view?.tools ?? [], proxies: state.proxying.proxies.sorted { $0.key < $1.key }.map(\.value)),
                    source: source)))
        state.recorder = recorder
        if let opening = state.talk.opening {
            // A conversation's first turn, at step 0 beside run_started: the step that answers it.
            try recorder.record(.userTurn(opening))
            state.talk.opening = nil
        }
        for message in state.proxying.earlyServerRequests {
            try recorder.store(ContentStored(bytes: message, mediaType: ProxyGate.serverRequestMediaType)) { _ in false }
        }
        state.proxying.earlyServerRequests = []
        if !state.spans.earlySpans.isEmpty {
            let spans = state.spans.earlySpans
            state.spans.earlySpans = []
            try merge(spans, at: atUs, recorder: recorder, state: &state)
        }
        return recorder
    }

    /// The tools a request declares, each with the side effect the proxies in front of its
    /// server give it (their policy file's `side_effects`, the server's annotations) where one
    /// serves or names it; `write` otherwise, since a model request does not say what a tool does.
    static func sideEffects(of tools: [ToolSpec], proxies: [ProxyGate]) -> [ToolSpec] {
        tools.map { tool in
            var tool = tool
            if let gate = proxies.first(where: { gate in gate.tools.contains { $0.name == tool.name } })
                ?? proxies.first(where: { gate in gate.policy.sideEffects.contains { $0.pattern.matches(tool.name) } })
            {
                tool.sideEffect = gate.spec(tool.name).sideEffect
            }
            return tool
        }
    }

    static func excerpt(_ value: JSONValue?) -> String {
        guard let value else { return "nothing" }
        let text = JSONWriter.encodeString(value)
        return text.count > 120 ? String(text.prefix(119)) + "…" : text
    }

    /// Where a text that writes a call back (smolagents' `Calling tools: [{'id': 'call_1', …}]`)
    /// names the call `id`: quoted, so that `call_1` is not found in `call_12`.
    static func place(of id: String, in text: String) -> String.Index? {
        (text.range(of: "'\(id)'") ?? text.range(of: "\"\(id)\""))?.lowerBound
    }

    /// The most conversations kept by default: past it, the one answered longest ago with no call
    /// open is forgotten (a request continuing it later starts a new one), so a long run's
    /// bookkeeping stays bounded.
    public static let defaultMaxConversations = 1024

    /// The number of the conversation `view` belongs to (`ConversationBook.assign`), made when
    /// it is new.
    private func conversation(for view: ModelRequestView, state: inout State) -> Int {
        state.book.assign(view, runGoal: goal, maxKept: maxConversations)
    }

    private struct ProposedCall {
        var sourceId: String
        var logId: String
        var name: String
        var arguments: JSONValue
    }

    /// The decision a reply makes, with log ids for its calls: the provider's id, made unique in
    /// the run (`id#2` for an id seen before; `call_N` for a call without one).
    private func decision(from raw: JSONValue, format: ReplyFormat, state: inout State) -> (DecisionMade.Outcome, [ProposedCall]) {
        switch format.decisionObject(from: JSONWriter.encodeString(raw)) {
        case .rejected(let invalid):
            return (.invalid(invalid), [])
        case .decision(let object):
            if let answer = object["answer"]?.stringValue { return (.valid(.answer(answer)), []) }
            if let calls = object["tool_calls"]?.arrayValue, calls.count == 1, let name = calls[0]["name"]?.stringValue,
                Self.answerTools.contains(name)
            {
                return (.valid(.answer(Self.answer(calledWith: calls[0]["arguments"]))), [])
            }
            let sourceIds = Self.callIds(in: raw, format: format)
            var calls: [ProposedCall] = []
            for (index, call) in (object["tool_calls"]?.arrayValue ?? []).enumerated() {
                let sourceId = index < sourceIds.count && !sourceIds[index].isEmpty ? sourceIds[index] : "call_\(state.logIds.count + 1)"
                var logId = sourceId
                var suffix = 1
                while state.logIds.contains(logId) {
                    suffix += 1
                    logId = "\(sourceId)#\(suffix)"
                }
                state.logIds.insert(logId)
                calls.append(
                    ProposedCall(
                        sourceId: sourceId, logId: logId, name: call["name"]?.stringValue ?? "",
                        arguments: call["arguments"] ?? .object(JSONObject())))
            }
            return (.valid(.toolCalls(calls.map { ToolCall(id: $0.logId, name: $0.name, arguments: $0.arguments) })), calls)
        }
    }

    /// The tools frameworks answer with instead of a text reply, as they document them:
    /// smolagents' `final_answer`, Pydantic AI's `final_result` (its default output tool). A
    /// reply calling one of them alone is the model's answer.
    static let answerTools: Set<String> = ["final_answer", "final_result"]

    /// An answer tool's arguments as the answer: its `answer` member when it has only that, a
    /// string as it is, anything else as JSON.
    static func answer(calledWith arguments: JSONValue?) -> String {
        switch arguments {
        case .string(let text)?: return text
        case .object(let members)? where members.count == 1:
            if let text = members["answer"]?.stringValue { return text }
            return JSONWriter.encodeString(.object(members))
        case let value?: return JSONWriter.encodeString(value)
        case nil: return ""
        }
    }

    /// The provider's ids of a reply's calls, in the order `decisionObject` lists the calls.
    static func callIds(in raw: JSONValue, format: ReplyFormat) -> [String] {
        switch format {
        case .openAIChat:
            return (raw["message"]?["tool_calls"]?.arrayValue ?? []).map { $0["id"]?.stringValue ?? "" }
        case .anthropicMessages:
            return (raw["content"]?.arrayValue ?? []).filter { $0["type"]?.stringValue == "tool_use" }.map { $0["id"]?.stringValue ?? "" }
        }
    }

    /// `content_stored`'s media type for the part of a streamed reply that was cut off: the
    /// message its events had assembled, in the provider's shape (`ModelAttempt.partialReply`).
    public static let partialReplyMediaType = "application/vnd.agent-eval.partial-model-reply+json"

    /// `content_stored`'s media type for the failed model requests no answered request followed
    /// (the agent gave up, crashed, or was stopped after them): each with the time it ended and
    /// what failed, so none is in the stop's words alone.
    public static let unansweredMediaType = "application/vnd.agent-eval.unanswered-model-requests+json"

    /// Stores the failures left at the end, which no decision carries (`unansweredMediaType`),
    /// oldest first.
    func storeUnansweredFailures(recorder: RunRecorder, state: inout State) throws {
        guard !state.failures.isEmpty else { return }
        let attempts = try storedAttempts(of: state.failures, recorder: recorder, state: &state)
        let failures: [JSONValue] = zip(state.failures, attempts).map { failure, attempt in
            ["ended_us": .int(failure.endUs), "attempt": attempt.json]
        }
        state.failures.removeAll()
        _ = try store(
            ContentStored(bytes: JSONWriter.encode(.array(failures)), mediaType: Self.unansweredMediaType), recorder: recorder,
            state: &state)
    }

    /// Stores content once per log, as the log keeps it (redacted before it is hashed,
    /// `LogWriter.keptContent`); returns the hash the log keeps it under, which events name it by.
    func store(_ content: ContentStored, recorder: RunRecorder, state: inout State) throws -> String {
        try recorder.store(content) { !state.stored.insert($0).inserted }.hash
    }

    /// The attempts of `failures`, each partial reply stored and named by the hash the log keeps.
    func storedAttempts(of failures: [Failure], recorder: RunRecorder, state: inout State) throws -> [ModelAttempt] {
        try failures.map { failure in
            var attempt = failure.attempt
            if let partial = failure.partial { attempt.partialReply = try store(partial, recorder: recorder, state: &state) }
            return attempt
        }
    }

    // MARK: The end

    /// How the command ended, as the recording session saw it.
    public enum Ending: Sendable, Hashable {
        case exited(Int32)
        case signalled(Int32)
        case timedOut(ms: Int)
        /// The recording was interrupted (Ctrl-C), or the recorder stopped the command.
        case stopped
    }

    /// Records the stop and closes the log; returns the stop. A log is made if no request came.
    @discardableResult
    public func finish(_ ending: Ending, stderrTail: String = "") throws -> RunStopped {
        try state.withLock { state in
            // A fork whose program ended before its fork point is not made.
            if fork != nil, !state.forking.isForkMade { throw abandonFork(ending, state: &state) }
            var stop = stopped(ending, stderrTail: stderrTail, state: state)
            // The command's own words (its last line of stderr) may quote a key it was given.
            let redaction = RequestPolicy(limits: RequestLimits(), secrets: Array(state.secrets.union(secrets)).sorted())
            // And what the log's redactor hides (key-shaped values): the stop returned is what
            // `record` prints, which must say no more than the log holds.
            let logRedaction = { (text: String) in self.options.redactor?.redactText(text) ?? text }
            stop.error = stop.error.map(redaction.redact).map(logRedaction)
            stop.answer = stop.answer.map(redaction.redact).map(logRedaction)
            let at = now()
            let recorder = try recorder(for: nil, state: &state, atUs: at)
            recorder.timeUs = at
            // A turn the program was given and ended without acting on: shown before the stop
            // that followed it — unless the program ended the conversation by itself.
            if !isAgentEnd(ending, state: state) { try recordPendingTurn(recorder: recorder, state: &state) }
            recorder.timeUs = at
            try recordSpanResultsLeft(recorder: recorder, state: &state)
            try storeUnansweredFailures(recorder: recorder, state: &state)
            try recorder.record(.runStopped(stop))
            try recorder.writer.close()
            if let writeError = state.writeError {
                throw RecordingError(.logFailed, "the log \(logPath) could not record every request: \(writeError)", hint: "check the disk")
            }
            return stop
        }
    }

    private func stopped(_ ending: Ending, stderrTail: String, state: borrowing State) -> RunStopped {
        if let stop = unseenTurnStop(state: state) { return stop }
        if state.stopCause == nil, let stop = conversationStop(ending, state: state) { return stop }
        switch state.stopCause {
        case .maxRequests(let max)?:
            return RunStopped(
                reason: .budgetExhausted, limit: .maxSteps, error: "the command asked for more than --max-requests \(max) model requests")
        case .tokenBudget(let used, let limit)?:
            return RunStopped(
                reason: .budgetExhausted, limit: .tokenBudget, error: "the command used \(used) tokens, more than --max-tokens \(limit)")
        case .notRecorded(let message, let step)?:
            return RunStopped(reason: .blocked, error: "cassette miss at step \(step): \(message)")
        case .forkDiverged(let message, let step)?:
            return RunStopped(reason: .blocked, error: "the command did not retrace its parent at step \(step): \(message)")
        case .forkOverlap?:
            return RunStopped(reason: .blocked, error: Self.overlapMessage)
        case nil:
            break
        }
        // The last model request failed and none was answered after it: whatever the command did
        // then (gave up, crashed, exited quietly) followed from its model, not from its own logic.
        let failed = state.lastFailure.map { "the last model request failed: \($0); " } ?? ""
        let modelFailure = failed.isEmpty ? "" : "\(RunStopped.modelFailurePrefix) \(failed)"
        let tail = stderrTail.split(separator: "\n").last.map { " (\($0.prefix(300)))" } ?? ""
        switch ending {
        case .timedOut(let ms) where state.inFlightAtEnd > 0:
            return RunStopped(
                reason: .budgetExhausted, limit: .timeout,
                error:
                    "\(RunStopped.modelFailurePrefix) \(counted(state.inFlightAtEnd, "model request")) still unanswered when the command "
                    + "ran longer than \(ms / 1000) s (--timeout)")
        case .timedOut(let ms):
            return RunStopped(
                reason: .budgetExhausted, limit: .timeout, error: "\(modelFailure)the command ran longer than \(ms / 1000) s (--timeout)")
        case .signalled(let signal):
            return RunStopped(reason: .blocked, error: "\(modelFailure)\(RunStopped.commandKilledPhrase)\(signal)")
        case .stopped:
            return RunStopped(
                reason: .blocked, error: "\(RunStopped.interruptionPrefix) the recording was stopped before the command ended")
        case .exited(let status) where status != 0:
            return RunStopped(reason: .blocked, error: "\(modelFailure)\(RunStopped.commandFailedPhrase)\(status)\(tail)")
        case .exited:
            break
        }
        guard let number = state.book.lastAnswered, let last = state.book.conversations[number]?.lastOutcome else {
            return RunStopped(reason: .blocked, error: "\(modelFailure)the command made no model request that was answered")
        }
        switch last {
        case .valid(.answer(let text)) where modelFailure.isEmpty: return RunStopped(reason: .success, answer: text)
        case .invalid(let invalid) where modelFailure.isEmpty: return RunStopped(reason: .invalidDecision, error: invalid.message)
        case .valid(.answer), .invalid:
            return RunStopped(reason: .blocked, error: "\(modelFailure)the command exited without asking the model again")
        default:
            return RunStopped(
                reason: .blocked, error: "\(modelFailure)the command exited after the model's tool calls, without a final answer")
        }
    }
}
