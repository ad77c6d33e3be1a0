import Foundation
public import Replay
public import TraceCore
public import TraceLog

/// The data of a run's page: the replay document exactly as `agent-eval replay --json` prints
/// it (steps with their events, state and checks; the final state; the verification), and a
/// summary of the run computed from the rebuilt state (tools with counts and durations).
public struct RunView: Sendable {
    /// The replay document plus `summary`, and `error` when reading stopped at damage.
    public var document: JSONValue
    public var stepCount: Int
    public var eventCount: Int
    /// Why reading stopped early (a damaged log): the steps before it are in the document.
    public var error: LogError?
    public var digestMismatches: Int
    /// The steps' numbers, in order.
    public var stepNumbers: [Int]

    /// The run's page: `{"view": "run", "run": <document>}`, titled by the run id.
    public var page: HTMLPage {
        HTMLPage(
            title: "run " + (document["run_id"]?.stringValue ?? document["log"]?.stringValue ?? ""),
            data: .object(JSONObject([("view", .string("run")), ("run", document)])))
    }

    /// A fork of the run shown (`agent-eval fork`), as the catalog knows it.
    public struct Child: Sendable, Hashable {
        public var runId: String
        public var log: String
        public var step: Int

        public init(runId: String, log: String, step: Int) {
            self.runId = runId
            self.log = log
            self.step = step
        }
    }

    /// Replays the log at `path` and collects its steps; `forks` gives the run's own forks (by its
    /// run id), listed on its page. Only the steps `includes` takes are in the document's
    /// `steps` (a live page asks for those it lacks); the rest of the document is the whole run's.
    /// A fork's parent is read for the diff against it only when `readsParent` allows its path
    /// (`serve` reads no log it may not show), and the fork is described only with `describesFork`.
    ///
    /// With `outlinesAfter`, the steps after the first that many are outlines (`outline(of:)`):
    /// no events, what the step list and search need instead — the page of a long run fetches
    /// their events as the reader reaches them (`agent-eval serve`). With `firstSteps`, only the
    /// first that many steps are read, and the rest of the document is the state at their end
    /// (a long run's first page, whose other steps follow).
    public static func make(
        log path: String, forks: (String) -> [Child] = { _ in [] }, includes: (_ step: Int, _ events: Int) -> Bool = { _, _ in true },
        describesFork: Bool = true, readsParent: (String) -> Bool = { _ in true }, outlinesAfter: Int? = nil, firstSteps: Int? = nil
    ) throws -> RunView {
        var isCut = false
        var view = try make(
            log: path, forks: forks, includes: includes, describesFork: describesFork, readsParent: readsParent,
            outlines: { ordinal, _ in outlinesAfter.map { ordinal >= $0 } == true }
        ) { _, body in
            var ordinal = 0
            return try Replayer(path: path).replay { step, state in
                defer { ordinal += 1 }
                let goesOn = try body(step, ordinal, state)
                if goesOn && firstSteps.map({ ordinal + 1 >= $0 }) == true {
                    isCut = true
                    return false
                }
                return goesOn
            }
        }
        // The rest of the log was not read: its digests, tear and signature are not known yet, and
        // the page must not say the log was verified (`partial`, docs/serve.md "Long runs").
        if isCut, var object = view.document.objectValue, var verification = object["verification"]?.objectValue {
            verification["partial"] = .bool(true)
            object["verification"] = .object(verification)
            view.document = .object(object)
        }
        return view
    }

    /// The same document for a log that is being written, read by `follower`: the steps from
    /// where its last read stopped on (`ReplayFollower`: the step in progress then, and every
    /// step after it), and the rest of the document the whole run's as it is now. `outlines`
    /// says, by a step's place among the log's steps and its number, which are outlines.
    public static func make(
        following follower: inout ReplayFollower, includes: (_ step: Int, _ events: Int) -> Bool = { _, _ in true },
        describesFork: Bool = true, readsParent: (String) -> Bool = { _ in true },
        outlines: (_ ordinal: Int, _ step: Int) -> Bool = { _, _ in false }
    ) throws -> RunView {
        try make(
            log: follower.path, forks: { _ in [] }, includes: includes, describesFork: describesFork, readsParent: readsParent,
            outlines: outlines
        ) { restarting, body in
            try follower.read(restarting: restarting) { step, ordinal, state in _ = try body(step, ordinal, state) }
        }
    }

    /// What both readers share: `replay` calls its body with each step, its place among the
    /// log's steps and the state after it (the body says whether to go on), and calls its first
    /// argument when it starts again from the first step.
    private static func make(
        log path: String, forks: (String) -> [Child], includes: (_ step: Int, _ events: Int) -> Bool, describesFork: Bool,
        readsParent: (String) -> Bool, outlines: (_ ordinal: Int, _ step: Int) -> Bool,
        replay: (_ restarting: () -> Void, _ body: (ReplayStep, Int, RunState) throws -> Bool) throws -> Replayer.Result
    ) throws -> RunView {
        var steps: [JSONValue] = []
        var eventCount = 0
        var numbers: [Int] = []
        do {
            let result = try withoutActuallyEscaping(includes) { includes in
                try withoutActuallyEscaping(outlines) { outlines in
                    try replay({
                        steps.removeAll()
                        numbers.removeAll()
                        eventCount = 0
                    }) { step, ordinal, _ in
                        if includes(step.step, step.events.count) {
                            steps.append(outlines(ordinal, step.step) ? outline(of: step) : step.json)
                        }
                        numbers.append(step.step)
                        eventCount += step.events.count
                        return true
                    }
                }
            }
            var object = JSONObject([("steps", .array(steps))])
            for (key, value) in result.tailMembers { object[key] = value }
            object["summary"] = summary(of: result.state, settled: result.settled)
            if describesFork, let forked = result.state.forked { object["fork"] = fork(forked, log: path, readsParent: readsParent) }
            let children = result.state.runId.map(forks) ?? []
            if !children.isEmpty {
                object["forks"] = .array(
                    children.map { child in
                        .object(JSONObject([("run_id", .string(child.runId)), ("log", .string(child.log)), ("step", .int(child.step))]))
                    })
            }
            return RunView(
                document: document(log: path, object), stepCount: steps.count, eventCount: eventCount, error: nil,
                digestMismatches: result.digestMismatches.count, stepNumbers: numbers)
        } catch let error as LogError {
            let object = JSONObject([
                ("steps", .array(steps)), ("error", (error as any Diagnostic).json), ("summary", .object(JSONObject())),
            ])
            return RunView(
                document: document(log: path, object), stepCount: steps.count, eventCount: eventCount, error: error, digestMismatches: 0,
                stepNumbers: numbers)
        }
    }

    /// Logs at least this large are shown as an outline with their events fetched as the reader
    /// reaches them, by `agent-eval serve` (docs/serve.md, "Long runs").
    public static let outlineBytes = 4 << 20
    /// So are logs whose text is at least this large, whatever their file's size (a small file
    /// can hold members that each inflate up to the member limit): about what 4 MiB of gzip
    /// holds of an ordinary log.
    public static let outlineTextBytes = 32 << 20

    /// A step without its events: what the step list, the chart and search need of it — its
    /// number, sequence numbers, problems, `state` with only its tokens and cost, and
    /// `outline: true`, `event_count`, `sketch` (what the step list shows for it) and `search`
    /// (the tool names and arguments search looks through), made as the viewer's script makes
    /// them from the events. The step's card needs the whole step, fetched when it is shown.
    static func outline(of step: ReplayStep) -> JSONValue {
        // The members of `step.json` it keeps, made alone (a long run has tens of thousands).
        var object = JSONObject()
        object["step"] = .int(step.step)
        object["first_seq"] = .int(step.firstSequence)
        object["last_seq"] = .int(step.lastSequence)
        object["problems"] = step.problemsJSON
        var state = ObjectBuilder()
        state.set("input_tokens", step.after.inputTokens)
        state.set("output_tokens", step.after.outputTokens)
        state.set("cost_usd", Double(step.after.costMicroUSD) / 1_000_000)
        object["state"] = state.json
        object["outline"] = true
        object["event_count"] = .int(step.events.count)
        var sketch: [String] = []
        var search: [String] = []
        for recorded in step.events {
            switch recorded.event.payload {
            case .decisionMade(let decision):
                switch decision.outcome {
                case .invalid: sketch.append("rejected")
                case .valid(.toolCalls(let calls)):
                    for call in calls {
                        sketch.append(call.name)
                        search += [call.name, searched(call.arguments)]
                    }
                case .valid(.answer): sketch.append("answer")
                case .valid(.askHuman): sketch.append("ask_human")
                case .valid(.stop): sketch.append("stop")
                }
            case .runStarted: sketch.append("start")
            case .runStopped(let stop): sketch.append("stop: " + stop.reason.rawValue)
            case .approvalRecorded(let approval): sketch.append(approval.isGranted ? "approved" : "refused")
            case .runForked: sketch.append("fork")
            case .userTurn(let turn): sketch.append("user turn \(turn.turn)")
            default: break
            }
            switch recorded.event.payload {
            case .verdictGiven(let verdict): search.append(verdict.tool)
            case .toolIntended(let intent): search += [intent.tool, searched(intent.arguments)]
            case .toolCompleted(let completed): search.append(completed.tool)
            default: break
            }
        }
        object["sketch"] = .string(sketch.joined(separator: ", "))
        // Each text once: an intent repeats its decision's arguments.
        var seen = Set<String>()
        object["search"] = .string(search.filter { seen.insert($0).inserted }.joined(separator: "\n").lowercased())
        return .object(object)
    }

    /// The most bytes of one call's arguments an outline's search text keeps: a long run whose
    /// calls carry large arguments made outlines as large as the log (a page that never read its
    /// stream held hundreds of MB of them on the server). The step, fetched whole, has them all.
    static let searchedArgumentBytes = 4096

    /// `arguments` as an outline's search text holds them: their JSON, cut at `searchedArgumentBytes`.
    static func searched(_ arguments: JSONValue) -> String {
        let text = JSONWriter.encodeString(arguments)
        guard text.utf8.count > searchedArgumentBytes else { return text }
        return String(decoding: text.utf8.prefix(searchedArgumentBytes), as: UTF8.self)
    }

    /// The runs of `logs` for a page that shows several (a report's, a pipeline's), in the order
    /// given: `{"log", "run"}`, or `{"log", "error"}` when a log cannot be replayed. Logs are
    /// embedded until `eventBudget` events are in; the rest, and logs that do not exist, are
    /// left out, for the page to list with the command that shows them.
    static func embed(_ logs: [String], eventBudget: Int, reads: (String) -> Bool = { _ in true }) -> (
        runs: [JSONValue], embedded: [String], leftOut: [String]
    ) {
        var runs: [JSONValue] = []
        var embedded: [String] = []
        var leftOut: [String] = []
        var events = 0
        for log in logs {
            // A log the reader may not read (`serve`'s folders) is left out, as one not there is.
            guard events < eventBudget, FileManager.default.fileExists(atPath: log), reads(log) else {
                leftOut.append(log)
                continue
            }
            do {
                let view = try RunView.make(log: log)
                events += view.eventCount
                runs.append(.object(JSONObject([("log", .string(log)), ("run", view.document)])))
                embedded.append(log)
            } catch {
                runs.append(.object(JSONObject([("log", .string(log)), ("error", .string("\(error)"))])))
                embedded.append(log)
            }
        }
        return (runs, embedded, leftOut)
    }

    static func document(log: String, _ members: JSONObject) -> JSONValue {
        var object = members
        object["schema"] = .string("agent-eval/replay")
        object["version"] = .int(1)
        object["log"] = .string(log)
        return .object(object)
    }

    /// Where a fork parts from its parent: the `run_forked` data, each edit in words, and the
    /// diff against the parent from the fork point when the parent's log is where the fork
    /// says and holds that run (else `parent_missing` says why not).
    static func fork(_ forked: RunForked, log path: String, readsParent: (String) -> Bool = { _ in true }) -> JSONValue {
        var object = forked.json.objectValue ?? JSONObject()
        object["edit_summaries"] = .array(forked.edits.map { .string($0.summary) })
        if let parent = forked.parentLog, !readsParent(parent) {
            object["parent_missing"] = .string("the parent's log is not one this page may read")
            return .object(object)
        }
        guard let parent = forked.parentLog, FileManager.default.fileExists(atPath: parent) else {
            object["parent_missing"] = .string("the parent's log is not at \(forked.parentLog ?? "a known path") from here")
            return .object(object)
        }
        // Its run id from its first step alone: the diff below reads it whole once.
        let parentRun = try? Replayer(path: parent).replay(until: 0) { _, _ in false }.state.runId
        guard parentRun == forked.parentRunId else {
            object["parent_missing"] = .string("\(parent) holds run \(parentRun ?? "none"), not the parent \(forked.parentRunId)")
            return .object(object)
        }
        let edited = Set(forked.edits.filter { $0.kind == .result || $0.kind == .error }.compactMap(\.callId))
        do {
            let fixtures = Set(forked.edits.filter { $0.kind == .toolFixture }.compactMap(\.tool))
            object["diff"] = try TrajectoryDiff.compare(left: parent, right: path, outputsOf: edited, outputsOfTools: fixtures).json(
                left: parent, right: path)
        } catch {
            object["parent_missing"] = .string("\(parent) cannot be read: \(error)")
        }
        return .object(object)
    }

    /// Per tool: calls proposed, executed, denied, attempts, failed attempts and durations
    /// (total, median, slowest), in tool-name order. `settled`: what a settling fold dropped
    /// from `state` (a followed log's, `ReplayFollower`).
    static func summary(of state: RunState, settled: SettledRun = SettledRun()) -> JSONValue {
        let tools = ToolSummary.tools(of: state, settled: settled).map { tool -> JSONValue in
            var object = ObjectBuilder()
            object.set("tool", tool.tool)
            object.set("calls", tool.calls)
            object.set("executed", tool.executed)
            object.set("denied", tool.denied)
            object.set("attempts", tool.attempts)
            object.set("failed_attempts", tool.failedAttempts)
            object.set("total_us", tool.totalUs)
            object.set("p50_us", tool.p50Us)
            object.set("max_us", tool.maxUs)
            return object.json
        }
        var object = ObjectBuilder()
        object.set("run_id", state.runId)
        object.set("tools", JSONValue.array(tools))
        if let start = state.start {
            object.set("agent", start.agent.name + (start.agent.version.map { " v\($0)" } ?? ""))
            object.set("model", start.model.provider + "/" + start.model.name)
            object.set("goal", start.goal)
        }
        object.set("stop_reason", state.stop?.reason)
        object.set("limit", state.stop?.limit)
        object.set("answer", state.stop?.answer)
        if let started = state.startedAtUs, let last = state.lastEventAtUs { object.set("duration_us", last - started) }
        if state.isConversation { object.set("conversation", conversation(of: state)) }
        return object.json
    }

    /// A conversation as a chat (docs/conversations.md): who said what, in order, and between
    /// them the calls the agent made, each `{"speaker": "user"|"agent", "text", "turn", "step"}`
    /// or `{"calls": [{"id", "tool", "status"}], "turn", "step"}`.
    static func conversation(of state: RunState) -> JSONValue {
        var items: [(step: Int, rank: Int, json: JSONValue)] = []
        for line in state.dialogue {
            var object = ObjectBuilder()
            object.set("speaker", line.speaker.rawValue)
            object.set("text", line.text)
            object.set("turn", line.turn)
            object.set("step", line.step)
            if line.speaker == .user, let record = state.userTurns.first(where: { $0.turn.turn == line.turn }) {
                object.set("source", record.turn.source)
                object.set("ends", record.turn.ends)
            }
            items.append((line.step, line.speaker == .user ? 0 : 2, object.json))
        }
        for (step, calls) in Dictionary(grouping: state.calls, by: \.step) {
            let list: [JSONValue] = calls.map { call in
                var object = ObjectBuilder()
                object.set("id", call.id)
                object.set("tool", call.tool)
                object.set(
                    "status", call.isDenied ? "denied" : call.lastResult?.status.rawValue ?? (call.isExecuted ? "running" : "not run"))
                return object.json
            }
            var object = ObjectBuilder()
            object.set("calls", JSONValue.array(list))
            object.set("turn", state.turn(ofStep: step))
            object.set("step", step)
            items.append((step, 1, object.json))
        }
        return .array(items.sorted { ($0.step, $0.rank) < ($1.step, $1.rank) }.map(\.json))
    }
}
