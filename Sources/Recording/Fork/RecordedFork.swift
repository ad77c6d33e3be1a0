public import AgentRuntime
import Foundation
import Interop
public import ModelClients
public import TraceCore

/// A fork of a run that `agent-eval record` recorded (docs/replay.md, "What if" — "A run recorded
/// by agent-eval record"). Such a run has no agent file: its own program holds the loop, so the
/// fork runs the program again from its start, through the gateway:
///
/// - the model requests the parent's prefix answered (one per step, up to the fork point) are
///   answered from the parent's cassette, each checked to be the parent's request (its canonical
///   form): a program that asks otherwise did not retrace its parent, and the fork is not made;
/// - the run is first recorded apart; at the first request past the fork point the fork's log is
///   made as every fork's is — the parent's events up to the fork point copied, then
///   `run_forked` — and the rest is recorded into it as the gateway records any run;
/// - from there the requests go on to the upstream (or a cassette), with the edits applied to
///   them: a replaced result is what every later request carries for that call (the model sees
///   it), and `model` names the model every later request asks for.
///
/// What it cannot do, and does not pretend to: the program's own tools run again for the prefix
/// (they run in its process), and what its own code did with a result it got is not changed by
/// an edit, only what the model is shown.
public struct RecordedFork: Sendable {
    /// The parent's events through the fork point, as `Fork.plan` cut them.
    public var prefix: [Event]
    public var forked: RunForked
    /// The parent's cassette: it answers the prefix's requests.
    public var cassette: Cassette
    /// The canonical form of each request the prefix answered, in order.
    var requests: [JSONValue]
    /// Replaced results, by the provider's call id: the text every later request carries.
    var results: [String: (text: String, isError: Bool)]
    /// The model every request after the fork point names, when given.
    public var model: String?

    /// The canonical form of the parent's requests after the fork point: a request of the program
    /// that is one of them, sent before the requests up to the fork point are all answered, is
    /// another conversation of the same run, ahead (sub-agents, parallel calls): it waits for
    /// the fork point (`ExchangeRecorder.settleForkPoint`).
    var laterRequests: Set<JSONValue>

    /// Reads the requests the prefix answered from its stored content (and those the parent made
    /// after it, from `rest`, the parent's events after the prefix); throws when the prefix is
    /// not a recorded run's, or an edit cannot be made to one.
    public init(prefix: [Event], rest: [Event] = [], forked: RunForked, cassette: Cassette, model: String? = nil)
        throws(RecordingError)
    {
        self.prefix = prefix
        self.forked = forked
        self.cassette = cassette
        self.model = model
        guard case .runStarted(let started)? = prefix.first?.payload, started.source?.importer == ExchangeRecorder.recorderName else {
            throw RecordingError(
                .forkFailed, "the run was not recorded by agent-eval record: it has no command to run again",
                hint: "fork it with the agent file it ran: agent-eval fork LOG --agent AGENT.yaml")
        }
        var stored: [String: [UInt8]] = [:]
        var requests: [JSONValue] = []
        var requestSteps: [Int] = []
        var proposed = Set<String>()
        for event in prefix {
            switch event.payload {
            case .runForked:
                throw RecordingError(
                    .forkFailed,
                    "the run is itself a fork of a recorded run: its requests past its own fork point were edited on their way, so the command cannot retrace them",
                    hint: "fork its parent again, with the edits of both")
            case .decisionMade(let made):
                if case .valid(.toolCalls(let calls)) = made.outcome { proposed.formUnion(calls.map(\.id)) }
            case .contentStored(let content):
                if let bytes = content.bytes { stored[content.hash] = bytes }
            case .contextBuilt(let built):
                guard let hash = built.promptHash, let bytes = stored[hash], let body = try? JSONParser.parse(bytes) else {
                    throw RecordingError(
                        .forkFailed, "the parent's request of step \(event.step) is not stored in its log, so it cannot be checked",
                        hint: "a log recorded by agent-eval record stores every request; was its content stripped?")
                }
                requests.append(RequestKey.canonical(body))
                requestSteps.append(event.step)
            default:
                continue
            }
        }
        self.requests = requests
        self.requestSteps = requestSteps
        requestPositions = Dictionary(grouping: requests.indices) { requests[$0] }
        var later = Set<JSONValue>()
        for event in rest {
            switch event.payload {
            case .contentStored(let content):
                if let bytes = content.bytes { stored[content.hash] = bytes }
            case .contextBuilt(let built):
                if let hash = built.promptHash, let bytes = stored[hash], let body = try? JSONParser.parse(bytes) {
                    later.insert(RequestKey.canonical(body))
                }
            default:
                continue
            }
        }
        laterRequests = later
        var results: [String: (text: String, isError: Bool)] = [:]
        for edit in forked.edits {
            switch edit.kind {
            case .result, .error:
                let id = edit.callId ?? ""
                // The gateway's log ids are the provider's, made unique with `#N` when a provider reused one.
                guard proposed.contains(id) else {
                    throw RecordingError(
                        .forkFailed,
                        "--\(edit.kind.rawValue) \(id): no model reply proposed this call (it was recorded from the program's spans or its MCP proxy), so no request shows the model its result",
                        hint: "edit a call the model proposed")
                }
                guard !id.contains("#") else {
                    throw RecordingError(
                        .forkFailed,
                        "--\(edit.kind.rawValue) \(id): the provider gave two calls of this run the id \(id.prefix { $0 != "#" }), so the requests cannot tell their results apart"
                    )
                }
                if edit.kind == .error {
                    results[id] = (edit.text ?? "", true)
                } else if case .string(let text)? = edit.value {
                    results[id] = (text, false)
                } else {
                    results[id] = (JSONWriter.encodeString(edit.value ?? .null), false)
                }
            default:
                throw RecordingError(
                    .forkFailed, "--\(edit.kind.rawValue) cannot be applied to a run recorded by agent-eval record",
                    hint: Self.whyNot(edit.kind))
            }
        }
        self.results = results
        editedCalls = results.keys.sorted()
    }

    /// The calls whose results the edits replace, in order.
    public let editedCalls: [String]

    /// The result the fork shows the model for call `id`, as the gateway records a result it
    /// reads from a request; nil when no edit replaces it.
    func editedResult(_ id: String) -> ImportedResult? {
        guard let result = results[id] else { return nil }
        return result.isError
            ? ImportedResult(status: .error, output: nil, error: result.text) : ImportedResult.fromContent(result.text, isError: false)
    }

    /// The step of each request in `requests`.
    var requestSteps: [Int]
    /// The positions in `requests` of each request, in order.
    var requestPositions: [JSONValue: [Int]]

    /// The first position of a request equal to `canonical` that no request of the program claimed.
    func unclaimedPosition(of canonical: JSONValue, claimed: Set<Int>) -> Int? {
        requestPositions[canonical]?.first { !claimed.contains($0) }
    }

    /// Why an edit is not possible for a recorded run: it would have to reach into the program.
    public static func whyNot(_ kind: ForkEdit.Kind) -> String {
        switch kind {
        case .decision:
            return "a reply would have to reach the program's SDK in its own wire format; fork at the step before and let the "
                + "model answer (--model, --upstream), or record the reply you want into a cassette"
        case .approve, .deny:
            return "a recorded run's approvals are its MCP proxy's (agent-eval mcp-proxy --policy FILE, in the command), which the fork "
                + "runs again: change the policy or the approval the command is given"
        case .input:
            return "the goal is the program's own first message: the fork gives the command its arguments as written after --, "
                + "and its standard input with --command-input (what record --input gave the parent)"
        case .toolFixture:
            return "the program's tools run in its own process; --result and --error change what the model is shown of a call"
        case .say:
            return "a conversation's user turn would have to reach the program; recorded programs are not conversations here yet"
        case .result, .error:
            return ""
        }
    }

    /// The request the fork sends on instead of `body`, or nil when no edit changes it: each
    /// replaced result where the request carries it back (a tool message, a `tool_result`
    /// block, a `function_call_output` item), and the model.
    func rewritten(_ body: JSONValue, api: ModelAPI) -> (body: JSONValue, shown: Set<String>)? {
        Self.rewritten(body, api: api, results: results, model: model)
    }

    /// `body` with `results` (by the provider's call id) and `model` put in, and the calls whose
    /// results it carried; nil when nothing changes it. A failure is shown as the provider's
    /// API has it: an Anthropic `tool_result` with `is_error`; for OpenAI's, whose tool messages
    /// have no such flag, `{"error": text}` (what the gateway then reads as a failure).
    static func rewritten(_ body: JSONValue, api: ModelAPI, results: [String: (text: String, isError: Bool)], model: String?)
        -> (body: JSONValue, shown: Set<String>)?
    {
        guard !results.isEmpty || model != nil, var object = body.objectValue else { return nil }
        var changed = false
        var shown = Set<String>()
        func shownText(_ id: String) -> String? {
            guard let result = results[id] else { return nil }
            shown.insert(id)
            return result.isError ? JSONWriter.encodeString(["error": .string(result.text)]) : result.text
        }
        if let model, object["model"] != .string(model) {
            object["model"] = .string(model)
            changed = true
        }
        func replace(_ items: [JSONValue], _ change: (inout JSONObject) -> Bool) -> [JSONValue] {
            items.map { item in
                guard var member = item.objectValue, change(&member) else { return item }
                changed = true
                return .object(member)
            }
        }
        switch api {
        case .openAIChat:
            if let messages = object["messages"]?.arrayValue {
                object["messages"] = .array(
                    replace(messages) { message in
                        guard message["role"]?.stringValue == "tool", let id = message["tool_call_id"]?.stringValue,
                            let text = shownText(id)
                        else { return false }
                        message["content"] = .string(text)
                        return true
                    })
            }
        case .openAIResponses:
            if let items = object["input"]?.arrayValue {
                object["input"] = .array(
                    replace(items) { item in
                        guard item["type"]?.stringValue == "function_call_output", let id = item["call_id"]?.stringValue,
                            let text = shownText(id)
                        else { return false }
                        item["output"] = .string(text)
                        return true
                    })
            }
        case .anthropicMessages:
            if let messages = object["messages"]?.arrayValue {
                object["messages"] = .array(
                    replace(messages) { message in
                        guard message["role"]?.stringValue == "user", let blocks = message["content"]?.arrayValue else { return false }
                        var found = false
                        let edited = blocks.map { block -> JSONValue in
                            guard var member = block.objectValue, member["type"]?.stringValue == "tool_result",
                                let id = member["tool_use_id"]?.stringValue, let result = results[id]
                            else { return block }
                            found = true
                            shown.insert(id)
                            member["content"] = .string(result.text)
                            if result.isError { member["is_error"] = true } else { member["is_error"] = nil }
                            return .object(member)
                        }
                        guard found else { return false }
                        message["content"] = .array(edited)
                        return true
                    })
            }
        }
        return changed ? (.object(object), shown) : nil
    }
}
