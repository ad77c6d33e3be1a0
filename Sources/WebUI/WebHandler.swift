import AgentRuntime
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import NIOCore
import NIOHTTP1
import Recording
import Replay
import Synchronization
import TraceCore
import TraceLog
import Viewer
import Workflows

/// Answers the server's requests: who may ask (the host, the token), then the page or the
/// answer the path names.
///
/// | path | what |
/// |---|---|
/// | `GET /` | the runs list, filtered by the query (`RunQuery`'s filters) |
/// | `GET /api/runs` | the same rows as JSON, with the cursor of the next page |
/// | `GET /run?log=PATH` | a run's page, filling in live while its log grows |
/// | `GET /api/run/steps?log=PATH&from=N&to=M` | steps of a long run, whole, for its page as the reader reaches them |
/// | `GET /events/run?log=PATH` | that run's updates (server-sent events) |
/// | `GET /events/runs` | a note each time the catalog took in changed logs |
/// | `GET /compare?a=PATH&b=PATH` | two runs side by side, aligned as `diff` aligns them |
/// | `GET /suites` | suite runs, newest first, with their commit, branch and runner |
/// | `GET /suite?id=N` | one suite run's report, its failures linked to the run pages |
/// | `GET /case?id=CASE` | a case's history: outcome per suite run, flakiness, quarantine, the last failure |
/// | `GET /audit?policy=NAME&…` | a policy (`--policy`) judging every call of the runs the filters select |
/// | `GET /approvals`, `GET /api/approvals` | calls waiting for a person |
/// | `POST /api/approvals` | an answer to one: `{"log", "call", "granted", "approver", "reason"}` |
final class WebHandler: HTTPRequestHandling {
    let state: WebState

    init(state: WebState) {
        self.state = state
    }

    /// The largest body taken: an answer to an approval is small.
    static let maxBody = 64 * 1024

    func maxRequestBytes(for head: HTTPRequestHead) -> Int { Self.maxBody }

    func answerTooLarge(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws -> Bool {
        try await Response.text(413, "the request's body is larger than \(Self.maxBody) bytes").send(to: head, outbound)
        return false
    }

    func handle(_ head: HTTPRequestHead, body: [UInt8], _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
        -> Bool
    {
        guard let request = WebRequest(head, body: body) else {
            try await Response.text(400, "the request's target does not read as a path and a query").send(to: head, outbound)
            return false
        }
        if let refusal = admission(request) {
            try await refusal.send(to: head, outbound)
            return true
        }
        switch (head.method, request.path) {
        case (.GET, "/events/run"):
            try await streamRun(request, outbound)
            return false
        case (.GET, "/events/runs"):
            try await streamIndex(request, outbound)
            return false
        default:
            let response = await answer(request)
            try await response.send(to: head, outbound)
            return true
        }
    }

    private func answer(_ request: WebRequest) async -> Response {
        // HEAD is answered as GET is, without the body (`LocalHTTPServer.answer`).
        let method: HTTPMethod = request.head.method == .HEAD ? .GET : request.head.method
        switch (method, request.path) {
        case (.GET, "/"): return await runsPage(request)
        case (.GET, "/api/runs"): return await runsJSON(request)
        case (.GET, "/run"): return await runPage(request)
        case (.GET, "/api/run/steps"): return await steps(request)
        case (.GET, "/compare"): return await comparePage(request)
        case (.GET, "/suites"): return await suitesPage(request)
        case (.GET, "/suite"): return await suitePage(request)
        case (.GET, "/case"): return await casePage(request)
        case (.GET, "/audit"): return await auditPage(request)
        case (.GET, "/approvals"): return await approvalsPage()
        case (.GET, "/api/approvals"):
            switch await waitingCalls() {
            case .success(let waiting): return .json(200, .array(waiting))
            case .failure(let error): return .json(500, ["error": .string(Self.approvalsUnknown(error))])
            }
        case (.POST, "/api/approvals"): return await approve(request)
        default:
            let paths: Set = [
                "/", "/api/runs", "/run", "/api/run/steps", "/compare", "/suites", "/suite", "/case", "/audit", "/approvals",
                "/api/approvals", "/events/run",
                "/events/runs",
            ]
            if paths.contains(request.path) { return .text(405, "\(request.head.method.rawValue) is not answered at \(request.path)") }
            return .text(404, "nothing is served at \(request.path): the runs list is at /")
        }
    }

    // MARK: Who may ask

    /// Nil when the request may be answered; else the answer that refuses it.
    private func admission(_ request: WebRequest) -> Response? {
        // One Host, as HTTP/1.1 asks of every request (RFC 9112 §3.2): two could name two sites,
        // and which of them a check reads would decide who is let in.
        if request.head.headers[canonicalForm: "host"].count > 1 {
            return .text(400, "this request names more than one Host")
        }
        let port = state.port.withLock { $0 }
        if let token = state.options.token {
            let cookie = "agent_eval_token_\(port)"
            let bearer = request.header("authorization").flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            if let given = request.parameter("token"), ContentHash.sameSecret(given, token) {
                // Once from the address printed, then by cookie: the address bar keeps no token.
                // The cookie is the server's port's (cookies ignore ports), and Lax, so a shared
                // link opened from another site is let in; changes need the CSRF token anyway.
                let rest = request.query.filter { $0.name != "token" }
                return Response(
                    status: 303, contentType: "text/plain; charset=utf-8", body: Array("signed in".utf8),
                    headers: [
                        ("location", Self.location(path: request.path, query: rest)),
                        ("set-cookie", "\(cookie)=\(token); HttpOnly; SameSite=Lax; Path=/"),
                    ])
            }
            guard
                bearer.map({ ContentHash.sameSecret($0, token) }) == true
                    || request.cookie(cookie).map({ ContentHash.sameSecret($0, token) }) == true
            else {
                return .text(
                    401,
                    "this server needs its token: open the address `agent-eval serve` printed (it ends in ?token=…), or send Authorization: Bearer TOKEN"
                )
            }
        } else {
            // Bound to a loopback address: a page of another site that renamed itself to
            // 127.0.0.1 (DNS rebinding) still says its own name in Host.
            guard let host = request.header("host"), state.loopbackHosts.contains(host.lowercased()) else {
                return .text(403, "this server answers only requests addressed to \(state.loopbackHosts.sorted().joined(separator: ", "))")
            }
        }
        if request.head.method != .GET && request.head.method != .HEAD {
            // A change needs the token of a page this server made, and no other site's origin
            // (http or https: behind a TLS proxy the browser says https).
            if let origin = request.header("origin"), let host = request.header("host"),
                Self.authority(ofOrigin: origin) != host.lowercased()
            {
                return .text(403, "a request from \(origin) may not change anything here")
            }
            guard let csrf = request.header("x-agent-eval-csrf"), ContentHash.sameSecret(csrf, state.csrfToken) else {
                return .text(403, "this request lacks the page's CSRF token (X-Agent-Eval-CSRF): reload the page and try again")
            }
        }
        return nil
    }

    /// `host:port` of an `Origin` header (`http://host:port` or `https://…`), lower-cased.
    static func authority(ofOrigin origin: String) -> String? {
        for scheme in ["http://", "https://"] where origin.lowercased().hasPrefix(scheme) {
            return String(origin.dropFirst(scheme.count)).lowercased()
        }
        return nil
    }

    /// A same-site `Location`: the path re-escaped (no line break can reach the header) and never
    /// `//host` (which a browser would take for another site).
    static func location(path: String, query: [(name: String, value: String)]) -> String {
        var escaped = queryEscaped(path)
        while escaped.hasPrefix("//") { escaped.removeFirst() }
        if !escaped.hasPrefix("/") { escaped = "/" + escaped }
        return escaped
            + (query.isEmpty ? "" : "?" + query.map { "\(queryEscaped($0.name))=\(queryEscaped($0.value))" }.joined(separator: "&"))
    }

    // MARK: Runs

    /// The most rows one page lists.
    static let maxPageRows = 500

    private func runsQuery(_ request: WebRequest) -> Result<RunQuery, RunQuery.FilterError> {
        var filters: [(name: String, value: String)] = []
        var limit = 50
        var after: RunQuery.Cursor?
        for (name, value) in request.query {
            switch name {
            case "limit":
                guard let number = Int(value), (1...Self.maxPageRows).contains(number) else {
                    return .failure(RunQuery.FilterError(name: name, message: "limit must be a number from 1 to \(Self.maxPageRows)"))
                }
                limit = number
            case "after":
                guard let cursor = RunQuery.Cursor(text: value) else {
                    return .failure(RunQuery.FilterError(name: name, message: "after must be a cursor this server gave (STARTED:PATH)"))
                }
                after = cursor
            case "token", "policy": continue
            default:
                // An empty field of the filter form is no filter.
                if value.isEmpty && name != "denied" { continue }
                filters.append((name, value))
            }
        }
        do {
            var query = try RunQuery(filters: filters, limit: limit + 1)
            query.after = after
            return .success(query)
        } catch {
            return .failure(error)
        }
    }

    /// The page of rows the query asks for, and the cursor after them when there are more.
    private func runs(_ query: RunQuery) async throws(CatalogError) -> (rows: [JSONValue], next: String?) {
        let rows = try await state.catalog.work { catalog throws(CatalogError) in try catalog.runs(query, looksAtFiles: true) }
        let shown = Array(rows.prefix(query.limit - 1))
        let next = rows.count >= query.limit ? shown.last.map { RunQuery.Cursor(after: $0).text } : nil
        return (shown.map(Self.row), next)
    }

    /// The filters a page's address holds, as the page shows them and passes them on (`[name,
    /// value]` pairs in order): not the paging, the token or the audit's policy.
    static func shownFilters(_ request: WebRequest) -> JSONValue {
        .array(
            request.query.filter { !["after", "limit", "token", "policy"].contains($0.name) }.map {
                .array([.string($0.name), .string($0.value)])
            })
    }

    static func row(_ row: RunRow) -> JSONValue {
        var object = row.json.objectValue ?? JSONObject()
        object["page"] = .string("/run?log=" + queryEscaped(row.path))
        return .object(object)
    }

    private func runsJSON(_ request: WebRequest) async -> Response {
        switch runsQuery(request) {
        case .failure(let error): return .json(400, ["error": .string(error.message), "filter": .string(error.name)])
        case .success(let query):
            do {
                let (rows, next) = try await runs(query)
                return .json(200, ["runs": .array(rows), "next": next.map { .string($0) } ?? .null])
            } catch {
                return .json(500, ["error": .string(error.message)])
            }
        }
    }

    private func runsPage(_ request: WebRequest) async -> Response {
        var object = ObjectBuilder()
        object.set("view", "runs")
        object.set("served", state.served)
        object.set("filter_names", RunQuery.filterNames)
        object.set("filters", Self.shownFilters(request))
        var status = 200
        switch runsQuery(request) {
        case .failure(let error):
            object.set("error", error.message)
            status = 400
        case .success(let query):
            do {
                let (rows, next) = try await runs(query)
                object.set("runs", JSONValue.array(rows))
                object.set("next", next)
                object.set("indexed", "\(state.epoch):\(state.index.indexed.withLock { $0.generation })")
            } catch {
                object.set("error", error.message)
                status = 500
            }
        }
        if let failure = state.index.indexed.withLock({ $0.failure }) { object.set("index_failure", failure) }
        return page(status, HTMLPage(title: "runs", data: object.json))
    }

    // MARK: A run

    private func runPage(_ request: WebRequest) async -> Response {
        guard let given = request.parameter("log") else { return .text(400, "give the log: /run?log=PATH") }
        guard let log = await state.access.allowed(given) else { return notShown(given) }
        // A served folder may name a log that is not there: not found, not a damaged log.
        guard FileManager.default.fileExists(atPath: log) else { return .text(404, "there is no log at \(log)") }
        // A pipeline log is drawn as its pipeline, as `view` draws it (its digests checked by the
        // pipeline fold, its child runs embedded), never judged by the rules of a run's log: read
        // as a run, an edited one was shown with 0 digests checked and a green banner.
        if await state.readers.run({ Self.isPipelineLog(log) }) {
            do {
                let access = state.access
                let view = try await state.readers.run {
                    try PipelineRunView.make(log: log, reads: { access.allowedBlocking($0) != nil })
                }
                var data = view.page.data.objectValue ?? JSONObject()
                data["served"] = state.served
                return page(200, HTMLPage(title: view.page.title, data: .object(data)))
            } catch {
                return .text(500, "\(log) cannot be shown: \(FileProblem.reason(of: error))")
            }
        }
        _ = state.watcher.follow(log)
        let access = state.access
        let view: RunView
        let approvals: [MCPApprovals.PendingCall]
        let writer: Int?
        let isLong: Bool
        do {
            (view, approvals, writer, isLong) = try await state.readers.run {
                // A long run's page carries its first steps at once; the rest follow over the
                // page's stream as outlines, whose events the page fetches as the reader reaches
                // them (`/api/run/steps`).
                let isLong = Self.isLong(log)
                // As a stream's read does (`read(_:after:outlines:)`): a writer that closed the log
                // during the read was writing it.
                let writerBefore = LogWriter.writerProcess(of: log)
                return (
                    try RunView.make(
                        log: log, readsParent: { access.allowedBlocking($0) != nil }, firstSteps: isLong ? Self.wholeSteps : nil),
                    MCPApprovals.pending(log: log), LogWriter.writerProcess(of: log) ?? writerBefore, isLong
                )
            }
        } catch {
            return .text(500, "\(log) cannot be shown: \(FileProblem.reason(of: error))")
        }
        let update = RunFeed.update(view.document, after: .start, approvals: approvals, writer: writer)
        // The state in words comes with the rest of a long run, over the page's stream.
        let status: JSONValue? =
            isLong && view.stepCount == Self.wholeSteps
            ? [
                "state": "loading",
                "text": .string("reading the log: its first \(Self.wholeSteps) steps are shown, and the others follow as they are read"),
            ] : update.update["status"]
        var data = view.page.data.objectValue ?? JSONObject()
        var live = ObjectBuilder()
        live.set("log", log)
        live.set("cursor", update.cursor.text)
        // The run the page holds: a stream resumed from the page's cursor starts it again when
        // the log now holds another run.
        live.set("run", view.document["run_id"]?.stringValue)
        live.set("status", status)
        data["live"] = live.json
        data["approvals"] = update.update["approvals"]
        data["served"] = state.served
        return page(200, HTMLPage(title: view.page.title, data: .object(data)))
    }

    /// Whether `log` is a pipeline's log: its first event is `pipeline_started`.
    static func isPipelineLog(_ log: String) -> Bool {
        guard case .pipeline(.started)? = try? LogReader(path: log).firstEvent()?.event.payload else { return false }
        return true
    }

    /// Whether `log` is shown in two parts, its first steps and then outlines (docs/serve.md, "Long
    /// runs"): its file is large, or its text is (counted up to the bound, never kept).
    static func isLong(_ log: String) -> Bool {
        (FileStamp(path: log)?.size ?? 0) >= RunView.outlineBytes
            || LogReader.inflatedSize(of: log, atMost: RunView.outlineTextBytes) >= RunView.outlineTextBytes
    }

    /// The steps a long run's page carries whole: its first page.
    static let wholeSteps = 25
    /// The most steps one fetch returns.
    static let maxFetchedSteps = 200

    /// Steps `from` to `to` (numbers) of a log, whole, as replay's JSON has them: read through the
    /// log's step table (kept in the catalog, made by one replay when it has none for the log as
    /// it is), so only the members holding them are inflated.
    private func steps(_ request: WebRequest) async -> Response {
        guard let given = request.parameter("log"), let from = request.parameter("from").flatMap(Int.init),
            let to = request.parameter("to").flatMap(Int.init), from >= 0, to >= from
        else {
            return .json(400, ["error": "give the log and the steps: /api/run/steps?log=PATH&from=N&to=M"])
        }
        guard to - from < Self.maxFetchedSteps else {
            return .json(400, ["error": .string("at most \(Self.maxFetchedSteps) steps at once")])
        }
        guard let log = await state.access.allowed(given) else { return .json(404, ["error": .string(notShownText(given))]) }
        // No log file there (gone, a folder, a pipe): not found, as its page says — not a failure
        // of the server's.
        let notAFile =
            FileManager.default.fileExists(atPath: log)
            ? FileProblem.notARegularFile(log).map { "\(log): \($0)" } : "there is no log at \(log)"
        if let notAFile { return .json(404, ["error": .string(notAFile)]) }
        guard await !state.readers.run({ Self.isPipelineLog(log) }) else {
            return .json(400, ["error": .string("\(log) is a pipeline log: it has tasks, not steps")])
        }
        let catalog = state.catalog
        do {
            let steps = try await state.readers.run { () -> [JSONValue] in
                let (index, _) = try StepIndex.open(log: log, store: CatalogStepStore(catalog: catalog))
                return try (from...to).compactMap { try index.replayStep($0)?.json }
            }
            return .json(200, ["steps": .array(steps)])
        } catch {
            return .json(500, ["error": .string(FileProblem.reason(of: error))])
        }
    }

    private func notShown(_ given: String) -> Response {
        .text(
            404,
            "no log this server may show is at \(given): it shows the logs its catalog indexes and those under the directories it was given"
        )
    }

    /// What one read of a followed log found.
    struct LiveRead: Sendable {
        var document: JSONValue
        var approvals: [MCPApprovals.PendingCall]
        var writer: Int?
        /// The number of the last step read (whether the page lacked it or not).
        var lastStep: Int? = nil
    }

    /// Which steps of a long run a page's stream sends as outlines: those past the first
    /// `after` (the page's first part), up to the last step the stream's first read found (the
    /// backlog: a step written while the page is open comes whole, as the page follows it).
    struct OutlineRule: Sendable {
        var after: Int
        var before: Int?

        func outlines(ordinal: Int, step: Int) -> Bool { ordinal >= after && before.map { step < $0 } != false }
    }

    /// Reads what is new in the log `follower` follows for a page at `cursor`, on a reader
    /// thread: the replay (only the steps the page lacks made into JSON, those `outlines` takes
    /// as outlines; the fork described only for a page that has nothing yet), the calls that
    /// wait, and the process writing it. Gives back the follower, which goes on from there the
    /// next time.
    private func read(_ follower: ReplayFollower, after cursor: RunFeed.Cursor, outlines: OutlineRule?) async -> (
        LiveRead, ReplayFollower
    ) {
        let access = state.access
        return await state.readers.run {
            var follower = follower
            let log = follower.path
            // A writer that closes the log while it is read leaves this read an open member: read
            // with no writer after it, that is a torn log ("the writer died?") until the next read.
            // It was being written: the page says so, and the close brings the next read (a writer
            // that died instead is looked for again while the page says it runs).
            let writerBefore = LogWriter.writerProcess(of: log)
            let document: JSONValue
            var lastStep: Int?
            do {
                let view = try RunView.make(
                    following: &follower, includes: { step, events in RunFeed.lacks(step: step, events: events, after: cursor) },
                    describesFork: cursor == .start, readsParent: { access.allowedBlocking($0) != nil },
                    outlines: { ordinal, step in outlines?.outlines(ordinal: ordinal, step: step) == true })
                document = view.document
                lastStep = view.stepNumbers.last
            } catch {
                document = ["error": ["message": .string(FileProblem.reason(of: error))], "steps": []]
            }
            let found = LiveRead(
                document: document, approvals: MCPApprovals.pending(log: log), writer: LogWriter.writerProcess(of: log) ?? writerBefore,
                lastStep: lastStep)
            return (found, follower)
        }
    }

    /// The shortest time between two reads of a log for one page: a log written without pause is
    /// read about ten times a second per open page, whatever the number of its events.
    static let readPause: Duration = .milliseconds(100)

    /// The run's updates as server-sent events, from the cursor the page has (`Last-Event-ID`
    /// after a reconnect, else `after`), until the page goes away or the server stops. Each is
    /// read from the log when the watcher says it changed; a comment every 15 s keeps the
    /// connection, and finds a page that left. The stream is written as fast as the page reads
    /// it and no faster: a page that reads nothing holds one update, never a queue of them.
    private func streamRun(_ request: WebRequest, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        guard let given = request.parameter("log") else {
            try await Response.text(400, "give the log: /events/run?log=PATH").send(to: request.head, outbound)
            return
        }
        guard let log = await state.access.allowed(given) else {
            try await notShown(given).send(to: request.head, outbound)
            return
        }
        guard FileManager.default.fileExists(atPath: log) else {
            try await Response.text(404, "there is no log at \(log)").send(to: request.head, outbound)
            return
        }
        guard await !state.readers.run({ Self.isPipelineLog(log) }) else {
            try await Response.text(400, "\(log) is a pipeline log: its page (/run?log=…) draws the pipeline; it has no run to stream")
                .send(to: request.head, outbound)
            return
        }
        let resumed = request.header("last-event-id") ?? request.parameter("after")
        var cursor = resumed.flatMap(RunFeed.Cursor.init(text:)) ?? .start
        let key = state.watcher.follow(log)
        // One fold of the log for this page, which each read takes on from where it stopped; a
        // long run's steps past its first page come as outlines, as on its page.
        var follower = ReplayFollower(path: log)
        func outlineRule() -> OutlineRule? {
            Self.isLong(log) ? OutlineRule(after: Self.wholeSteps, before: nil) : nil
        }
        var outlines = outlineRule()
        try await Self.startStream(request.head, outbound)
        var lastSent: (status: JSONValue?, approvals: JSONValue?) = (nil, nil)
        /// The head the page was last sent: later updates carry only what changed of it.
        var sentHead: JSONObject?
        /// The run the page holds (`run=`, from its page), once known; a log replaced by another
        /// run starts the page again.
        var shownRun: String? = request.parameter("run").flatMap { $0.isEmpty ? nil : $0 }
        var resets = false
        while !Task.isCancelled {
            let generation = state.watcher.generation(of: key)
            // Looked at again before each read: a log replaced since by a link out of the served
            // folders (or one the catalog no longer has) is not read through it. The stream ends;
            // the page, connecting again, is told the log is not shown.
            guard await state.access.allowed(given) == log else { return }
            var found: LiveRead
            let startsBefore = follower.readsFromStart
            (found, follower) = await read(follower, after: cursor, outlines: outlines)
            let runId = found.document["run_id"]?.stringValue
            // A log that holds fewer steps than the page was sent (replaced by a shorter copy)
            // starts the page again too: what it holds past them is no longer the log's. So does
            // one the follower read again from its start (another file put in its place, with as
            // many steps of the same run: the steps the page holds may no longer be its steps).
            let shrank = found.lastStep.map { $0 < cursor.step } ?? false
            let readAgain = startsBefore > 0 && follower.readsFromStart > startsBefore
            if cursor != .start, shrank || readAgain || (shownRun != nil && runId != nil && runId != shownRun) {
                cursor = .start
                resets = true
                outlines = outlineRule()
                (found, follower) = await read(ReplayFollower(path: log), after: cursor, outlines: outlines)
            }
            // And again once read, before anything is sent: a file swapped for a link out while it
            // was read sends nothing of what it read.
            guard await state.access.allowed(given) == log else { return }
            // The backlog ends at the last step read now: later steps come whole.
            if outlines?.before == nil, let last = found.lastStep { outlines?.before = last }
            shownRun = found.document["run_id"]?.stringValue ?? shownRun
            let (updates, newSteps) = RunFeed.updates(found.document, after: cursor, approvals: found.approvals, writer: found.writer)
            let last = updates[updates.count - 1].update
            if newSteps > 0 || resets || last["status"] != lastSent.status || last["approvals"] != lastSent.approvals {
                for (index, (update, next)) in updates.enumerated() {
                    var object = update.objectValue ?? JSONObject()
                    if resets && index == 0 {
                        object["reset"] = true
                        sentHead = nil
                    }
                    if let head = object["head"]?.objectValue {
                        let (changed, removed) = RunFeed.headChanges(head, since: sentHead)
                        if sentHead == nil { object["head_whole"] = true }
                        object["head"] = .object(changed)
                        if !removed.isEmpty { object["head_removed"] = .array(removed.map(JSONValue.string)) }
                        sentHead = head
                    }
                    // The page's CSRF token, which a server started again made anew.
                    object["csrf"] = .string(state.csrfToken)
                    // Each waits for the page to take the one before (the channel's backpressure).
                    try await Self.send(event: "update", id: next.text, data: .object(object), outbound)
                    cursor = next
                }
                lastSent = (last["status"], last["approvals"])
                resets = false
            }
            // A log written without pause is read again once the pause is over.
            if state.watcher.generation(of: key) > generation {
                try? await state.options.clock.sleep(for: Self.readPause)
                continue
            }
            // Until the log changes; a comment every 15 s keeps the connection and finds a page
            // that left. A writer that dies changes no file: while the run is being written,
            // the lock is looked at again then.
            var changed = false
            while !changed && !Task.isCancelled {
                changed = await state.watcher.changes.wait(within: .seconds(15), on: state.options.clock) {
                    ($0.logs[key] ?? 0) > generation
                }
                if changed { break }
                try await outbound.write(.body(.byteBuffer(ByteBuffer(string: ": still here\n\n"))))
                if lastSent.status?["state"]?.stringValue == "running",
                    await state.readers.run({ LogWriter.writerProcess(of: log) }) == nil
                {
                    break
                }
            }
        }
    }

    /// A note each time the catalog took in changed logs, for open runs lists to fetch theirs
    /// again. Ids are `EPOCH:GENERATION`: a page that reconnects to a server started again (a new
    /// epoch) is sent a note at once, as is one that saw a generation this server has not reached.
    private func streamIndex(_ request: WebRequest, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        try await Self.startStream(request.head, outbound)
        let now = state.index.indexed.withLock { $0.generation }
        var seen = now
        if let given = request.header("last-event-id") ?? request.parameter("after") {
            let parts = given.split(separator: ":")
            let generation = parts.count == 2 ? Int(parts[1]) : nil
            seen = parts.count == 2 && String(parts[0]) == state.epoch ? min(generation ?? -1, now) : -1
            if let generation, parts.count == 2, String(parts[0]) == state.epoch, generation > now { seen = -1 }
        }
        while !Task.isCancelled {
            let before = seen
            let changed = await state.index.indexed.wait(within: .seconds(15), on: state.options.clock) { $0.generation > before }
            if changed {
                seen = state.index.indexed.withLock { $0.generation }
                try await Self.send(event: "indexed", id: "\(state.epoch):\(seen)", data: ["generation": .int(seen)], outbound)
            } else {
                try await outbound.write(.body(.byteBuffer(ByteBuffer(string: ": still here\n\n"))))
            }
        }
    }

    private static func startStream(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
    {
        var response = HTTPResponseHead(version: head.version, status: .ok)
        response.headers.add(name: "content-type", value: "text/event-stream; charset=utf-8")
        response.headers.add(name: "cache-control", value: "no-store")
        response.headers.add(name: "x-content-type-options", value: "nosniff")
        try await outbound.write(.head(response))
        // The page's EventSource waits this long before it connects again.
        try await outbound.write(.body(.byteBuffer(ByteBuffer(string: "retry: 1000\n\n"))))
    }

    /// One server-sent event; its data is one line of JSON (which holds no line break).
    static func send(event: String, id: String, data: JSONValue, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>)
        async throws
    {
        var bytes = Array("id: \(id)\nevent: \(event)\ndata: ".utf8)
        bytes += JSONWriter.encode(data)
        bytes += Array("\n\n".utf8)
        try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: bytes))))
    }

    // MARK: Compare

    private func comparePage(_ request: WebRequest) async -> Response {
        guard let a = request.parameter("a"), let b = request.parameter("b") else {
            return .text(400, "give both runs: /compare?a=PATH&b=PATH")
        }
        guard let left = await state.access.allowed(a) else { return notShown(a) }
        guard let right = await state.access.allowed(b) else { return notShown(b) }
        // Both runs go into the page whole: a long one would make a page of its whole text (and
        // the server hold it), so it is compared where nothing is held, by `agent-eval diff`.
        let long = await state.readers.run { [left, right].filter { Self.isLong($0) } }
        if let first = long.first {
            return .text(
                413,
                "\(first) is too long to compare on a page (its file is at least \(RunView.outlineBytes >> 20) MiB or its text at least "
                    + "\(RunView.outlineTextBytes >> 20) MiB); compare the runs with agent-eval diff \(ShellWords.quoted(left)) \(ShellWords.quoted(right))"
            )
        }
        do {
            let access = state.access
            let view = try await state.readers.run {
                try DiffView.make(left: left, right: right, readsParent: { access.allowedBlocking($0) != nil })
            }
            var data = view.document.objectValue ?? JSONObject()
            data["served"] = state.served
            return page(200, HTMLPage(title: "compare", data: .object(data)))
        } catch {
            return .text(500, "the runs cannot be compared: \(FileProblem.reason(of: error))")
        }
    }

    // MARK: Suites and cases

    private func suitesPage(_ request: WebRequest) async -> Response {
        let givenBefore = request.parameter("before").flatMap { $0.isEmpty ? nil : $0 }
        let before = givenBefore.flatMap(Int.init)
        if let givenBefore, before == nil {
            return .text(400, "before=\(givenBefore) is not a suite run's number: /suites?before=N pages from the `next` of a page")
        }
        let branch = request.parameter("branch").flatMap { $0.isEmpty ? nil : $0 }
        let limit = 50
        var object = ObjectBuilder()
        object.set("view", "suites")
        object.set("served", state.served)
        object.set("branch", branch)
        do {
            let (rows, isKnown) = try await state.catalog.work { catalog throws(CatalogError) in
                let rows = try catalog.suiteRuns(limit: limit + 1, before: before, branch: branch)
                // Nothing before a suite run the catalog does not hold is no empty page: it is no page.
                return (rows, try rows.isEmpty && before != nil ? catalog.hasSuiteRun(id: before ?? 0) : true)
            }
            if !isKnown, let before {
                return .text(404, "the catalog holds no suite run \(before): /suites?before=N pages from the `next` of a page")
            }
            object.set("suite_runs", JSONValue.array(rows.prefix(limit).map(\.json)))
            object.set("next", rows.count > limit ? rows[limit - 1].id : nil)
        } catch {
            object.set("error", error.message)
            return page(500, HTMLPage(title: "suite runs", data: object.json))
        }
        return page(200, HTMLPage(title: "suite runs", data: object.json))
    }

    /// A suite run's report, drawn as `results --html` draws one, its runs not embedded: each
    /// links to its run's page (at the failure's step).
    private func suitePage(_ request: WebRequest) async -> Response {
        guard let id = request.parameter("id").flatMap(Int.init) else { return .text(400, "give the suite run: /suite?id=N") }
        let report: JSONValue?
        do {
            report = try await state.catalog.work { catalog throws(CatalogError) in try catalog.suiteReport(id: id) }
        } catch {
            return .text(500, "the catalog could not be read: \(error.message)")
        }
        guard let report else { return .text(404, "the catalog holds no suite run \(id)") }
        var object = ObjectBuilder()
        object.set("view", "report")
        object.set("served", state.served)
        object.set("results", Self.resolvingLogs(in: report))
        object.set("runs", JSONValue.array([]))
        return page(200, HTMLPage(title: "suite run \(id)", data: object.json))
    }

    /// `report` with each run's log (and each failure's) as a path from here: a report keeps them
    /// as the suite run named them, from the folder it ran in — the project's root, usually, and
    /// this server may run in another folder of the project, where they named nothing (every
    /// link of the suite page answered 404). A relative path is taken from this folder when a
    /// file is there, else from the project's root when one is there.
    static func resolvingLogs(in report: JSONValue) -> JSONValue {
        guard var object = report.objectValue, let cases = object["cases"]?.arrayValue else { return report }
        object["cases"] = .array(cases.map { resolvingLogs(inCase: $0) })
        return .object(object)
    }

    static func resolvingLogs(inCase entry: JSONValue) -> JSONValue {
        func resolved(_ value: JSONValue?) -> JSONValue? {
            guard case .string(let path)? = value, !path.hasPrefix("/") else { return value }
            let here = FileManager.default.currentDirectoryPath
            for base in [here, ConfigPath.projectRoot(of: here)] where FileManager.default.fileExists(atPath: base + "/" + path) {
                return .string(base + "/" + path)
            }
            return value
        }
        func fixing(_ items: JSONValue?) -> JSONValue? {
            guard let items = items?.arrayValue else { return items }
            return .array(
                items.map { item in
                    guard var fields = item.objectValue else { return item }
                    if fields["log"] != nil { fields["log"] = resolved(fields["log"]) }
                    if fields["failures"] != nil { fields["failures"] = fixing(fields["failures"]) }
                    return .object(fields)
                })
        }
        guard var fields = entry.objectValue else { return entry }
        if fields["runs"] != nil { fields["runs"] = fixing(fields["runs"]) }
        return .object(fields)
    }

    /// A case's history (as `agent-eval history` sees it), its quarantine in the project's
    /// quarantine file, and its newest result that was not a pass, with its failures.
    private func casePage(_ request: WebRequest) async -> Response {
        guard let caseId = request.parameter("id"), !caseId.isEmpty else { return .text(400, "give the case: /case?id=CASE") }
        var object = ObjectBuilder()
        object.set("view", "case")
        object.set("served", state.served)
        object.set("case_id", caseId)
        do {
            let (stability, failing) = try await state.catalog.work { catalog throws(CatalogError) in
                let stability = try catalog.history(caseId: caseId, limit: 50)
                let newestFailing = stability.entries.first { $0.outcome != "pass" }
                let report = try newestFailing.flatMap { entry throws(CatalogError) in try catalog.suiteReport(id: entry.suiteRunId) }
                let entry = report?["cases"]?.arrayValue?.first { $0["case_id"]?.stringValue == caseId }
                return (stability, entry.map { ($0, newestFailing?.suiteRunId ?? 0) })
            }
            guard !stability.entries.isEmpty else { return .text(404, "the catalog holds no suite run of case \(caseId)") }
            object.set("history", stability.json)
            object.set("sentence", stability.sentence)
            if let (entry, suiteRun) = failing {
                object.set("last_failure", Self.resolvingLogs(inCase: entry))
                object.set("last_failure_suite_run", suiteRun)
            }
        } catch {
            return .text(500, "the catalog could not be read: \(error.message)")
        }
        let state = self.state
        if let quarantine = await state.readers.run({ state.quarantine() }) {
            if let entry = quarantine.entry(for: caseId) {
                var json = entry.json.objectValue ?? JSONObject()
                json["expired"] = .bool(entry.isExpired())
                object.set("quarantine", JSONValue.object(json))
            }
        }
        return page(200, HTMLPage(title: "case \(caseId)", data: object.json))
    }

    // MARK: Audit

    /// The most runs one audit page judges.
    static let maxAudited = 500

    /// A policy given to `serve --policy` judging every call of the runs the filters select
    /// (at most `maxAudited`, newest first), as `agent-eval audit` judges them.
    private func auditPage(_ request: WebRequest) async -> Response {
        guard let name = request.parameter("policy") else {
            return .text(400, "give the policy: /audit?policy=NAME (one of: \(state.options.policies.map(\.name).joined(separator: ", ")))")
        }
        guard let policy = state.options.policies.first(where: { $0.name == name }) else {
            return .text(
                404,
                "no policy \(name) was given to agent-eval serve (--policy FILE)"
                    + (state.options.policies.isEmpty ? "" : "; given: \(state.options.policies.map(\.name).joined(separator: ", "))"))
        }
        var object = ObjectBuilder()
        object.set("view", "audit")
        object.set("served", state.served)
        object.set("policy", policy.path)
        object.set("filters", Self.shownFilters(request))
        let loaded = await state.readers.run { () -> Result<PolicyFile, ConfigErrors> in
            do throws(ConfigErrors) {
                return .success(try PolicyFile.load(path: policy.path, for: .callChecker(what: "the audit view")))
            } catch {
                return .failure(error)
            }
        }
        let file: PolicyFile
        switch loaded {
        case .success(let made): file = made
        case .failure(let error):
            object.set("error", error.errors.map(\.description).joined(separator: "\n"))
            return page(400, HTMLPage(title: "audit", data: object.json))
        }
        var filtered = request
        filtered.query = request.query.filter { $0.name != "limit" } + [("limit", String(Self.maxAudited))]
        let query: RunQuery
        switch runsQuery(filtered) {
        case .failure(let error):
            object.set("error", error.message)
            return page(400, HTMLPage(title: "audit", data: object.json))
        case .success(let made): query = made
        }
        do {
            let rows = try await state.catalog.work { catalog throws(CatalogError) in try catalog.runs(query) }
            let logs = Array(rows.prefix(Self.maxAudited).map(\.path))
            let summary = await state.readers.run { () -> LogAuditOutcome in
                var reports: [JSONValue] = []
                let summary = LogAudit.run(logs, policy: file, actor: nil, route: nil) { log in
                    var entry = ObjectBuilder()
                    entry.set("log", log.path)
                    entry.set("page", "/run?log=" + queryEscaped(log.path))
                    switch log.outcome {
                    case .success(let (findings, tear)):
                        entry.set("findings", JSONValue.array(findings.map(\.json)))
                        entry.set("tear", tear.map { "\($0)" })
                    case .failure(let error):
                        entry.set("error", (error as? any Diagnostic)?.message ?? "\(error)")
                    }
                    reports.append(entry.json)
                }
                return LogAuditOutcome(reports: reports, summary: summary)
            }
            object.set("logs", JSONValue.array(summary.reports))
            object.set("violations", summary.summary.violations)
            object.set("unreadable", summary.summary.unreadable)
            object.set("pipeline_logs", summary.summary.pipelineLogs)
            object.set("misspelt", summary.summary.misspelt.map(\.description))
            object.set("unmet", summary.summary.unmet.map(\.description))
            object.set("left_out", rows.count > Self.maxAudited)
        } catch {
            object.set("error", error.message)
            return page(500, HTMLPage(title: "audit", data: object.json))
        }
        return page(200, HTMLPage(title: "audit", data: object.json))
    }

    // MARK: Approvals

    /// The calls that wait in the runs the catalog has as running, newest run first; the
    /// catalog's error when it cannot say which runs those are (never "none waits" then). Every
    /// such run is looked at, a page at a time: runs whose writer died pile up over time, and a
    /// call waiting in an older run must not drop off the list unsaid.
    private func waitingCalls() async -> Result<[JSONValue], CatalogError> {
        var query = RunQuery()
        query.stopReasons = ["running", StopReason.approvalRequired.rawValue]
        query.limit = 500
        let running = query
        let rows: [RunRow]
        do {
            rows = try await state.catalog.work { catalog throws(CatalogError) in
                var all: [RunRow] = []
                var page = running
                while true {
                    let found = try catalog.runs(page)
                    all += found
                    guard found.count == page.limit, let last = found.last else { break }
                    page.after = RunQuery.Cursor(after: last)
                }
                return all
            }
        } catch {
            return .failure(error)
        }
        let pending = await state.readers.run { rows.map { MCPApprovals.pending(log: $0.path) } }
        var waiting: [JSONValue] = []
        for (row, calls) in zip(rows, pending) {
            guard !calls.isEmpty else { continue }
            var object = ObjectBuilder()
            object.set("log", row.path)
            object.set("run_id", row.runId)
            object.set("agent", row.agent)
            object.set("page", "/run?log=" + queryEscaped(row.path))
            object.set("calls", JSONValue.array(calls.map(\.json)))
            waiting.append(object.json)
        }
        return .success(waiting)
    }

    private func approvalsPage() async -> Response {
        var object = ObjectBuilder()
        object.set("view", "approvals")
        object.set("served", state.served)
        switch await waitingCalls() {
        case .success(let waiting):
            object.set("waiting", JSONValue.array(waiting))
            return page(200, HTMLPage(title: "approvals", data: object.json))
        case .failure(let error):
            object.set("error", Self.approvalsUnknown(error))
            return page(500, HTMLPage(title: "approvals", data: object.json))
        }
    }

    /// What the approvals page and API say when the catalog cannot tell which runs are running.
    static func approvalsUnknown(_ error: CatalogError) -> String {
        "which calls wait for a person is not known: the catalog could not list the running runs (\(error.message))"
    }

    /// Records a person's answer as `agent-eval approve` does (`MCPApprovals.answer`): of two
    /// answers at once, one is taken and the other is told (409).
    private func approve(_ request: WebRequest) async -> Response {
        guard let body = try? JSONParser.parse(request.body), let given = body["log"]?.stringValue, let call = body["call"]?.stringValue,
            let granted = body["granted"]?.boolValue
        else {
            return .json(400, ["error": "give {\"log\": PATH, \"call\": ID, \"granted\": true|false} (and approver, reason)"])
        }
        guard let log = await state.access.allowed(given) else { return .json(404, ["error": .string(notShownText(given))]) }
        let approver = body["approver"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } ?? state.options.approver
        let answer = MCPApprovals.Answer(isGranted: granted, approver: approver, reason: body["reason"]?.stringValue)
        do {
            let answered = try await state.readers.run { () throws(RecordingError) in
                try MCPApprovals.answer(log: log, callId: call, with: answer)
            }
            return .json(
                200,
                [
                    "call_id": .string(answered.callId), "tool": .string(answered.tool), "granted": .bool(granted),
                    "approver": .string(approver),
                ])
        } catch let error as RecordingError {
            return .json(
                error.code == .alreadyAnswered ? 409 : 404,
                ["error": .string(error.message), "hint": error.hint.map { .string($0) } ?? .null])
        } catch {
            return .json(500, ["error": .string("\(error)")])
        }
    }

    private func notShownText(_ given: String) -> String { "no log this server may show is at \(given)" }

    // MARK: Pages

    /// The most bytes one page is: a log's huge values (a goal of tens of MB, each of a long run's
    /// first steps at the member limit) would otherwise make a page no browser should be given.
    static let maxPageBytes = 64 << 20

    private func page(_ status: Int, _ page: HTMLPage) -> Response {
        do {
            // Not compressed: over a local connection, inflating costs the browser more than the bytes do.
            let bytes = try page.render(with: state.options.assets, compressionThreshold: .max, servedBy: true)
            guard bytes.count <= Self.maxPageBytes else {
                return .text(
                    413,
                    "this page would be \(bytes.count >> 20) MiB, more than the \(Self.maxPageBytes >> 20) MiB a page is given: "
                        + "look at the run with agent-eval replay LOG --step N (a step at a time), or compare runs with agent-eval diff")
            }
            return Response(
                status: status, contentType: "text/html; charset=utf-8", body: bytes,
                headers: [
                    // frame-ancestors holds only as a header (a <meta> policy cannot say it).
                    (
                        "content-security-policy",
                        HTMLPage.contentSecurityPolicy(script: state.options.assets.script, servedBy: true) + "; frame-ancestors 'none'"
                    ),
                    ("referrer-policy", "no-referrer"),
                ])
        } catch {
            return .text(500, "the page could not be made: \(error)")
        }
    }
}

/// What an audit found, carried off the thread that made it.
struct LogAuditOutcome: Sendable {
    var reports: [JSONValue]
    var summary: LogAudit.Summary
}

/// An answer with a body, and the headers every answer carries.
struct Response: Sendable {
    var status: Int
    var contentType: String
    var body: [UInt8]
    var headers: [(String, String)] = []

    static func text(_ status: Int, _ text: String) -> Response {
        Response(status: status, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8))
    }

    static func json(_ status: Int, _ value: JSONValue) -> Response {
        Response(status: status, contentType: "application/json", body: JSONWriter.encode(value) + [UInt8(ascii: "\n")])
    }

    func send(to head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        _ = try await LocalHTTPServer.answer(
            status: status, contentType: contentType, body: body, to: head, outbound,
            headers: headers + [("cache-control", "no-store"), ("x-content-type-options", "nosniff"), ("x-frame-options", "DENY")])
    }
}
