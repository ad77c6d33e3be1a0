import Recording
import TraceCore
import Viewer

/// What an open run page has of its run, and what it is sent next: its steps by number, each
/// with its count of events, for a run whose log is still being written. The page replaces a
/// step it has by number and appends a new one, so an update sent again after a reconnect shows
/// nothing twice, and one that follows the cursor the page last saw (`Last-Event-ID`) leaves
/// nothing out.
struct RunFeed: Sendable {
    /// The page has every step up to `step`, and `events` events of that one.
    struct Cursor: Sendable, Hashable {
        var step: Int
        var events: Int

        /// `STEP.EVENTS`, the id of the server-sent event that brought it.
        var text: String { "\(step).\(events)" }

        init(step: Int, events: Int) {
            self.step = step
            self.events = events
        }

        init?(text: String) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, let step = Int(parts[0]), let events = Int(parts[1]), events >= 0 else { return nil }
            self.init(step: step, events: events)
        }

        /// Before any step.
        static let start = Cursor(step: Int.min, events: 0)
    }

    /// The most bytes of steps one update carries: a page that needs more (a long run opened
    /// from the start, a page back after a while) gets several, each sent once the page has read
    /// the one before, so a page that stops reading holds one of them, never the whole run.
    static let maxUpdateBytes = 512 * 1024

    /// The updates a page at `cursor` needs from `document` (a run's replay document), in order:
    /// the steps it lacks or has only part of, at most `maxUpdateBytes` of them each with the
    /// cursor they bring it to; the last also carries every other member of the document as it is
    /// now, the run's state in words and the calls that wait for approval. There is always one
    /// (the status may have changed); `newSteps` counts the steps sent in all.
    static func updates(
        _ document: JSONValue, after cursor: Cursor, approvals: [MCPApprovals.PendingCall], writer: Int?,
        maxBytes: Int = RunFeed.maxUpdateBytes
    ) -> (updates: [(update: JSONValue, cursor: Cursor)], newSteps: Int) {
        var chunks: [(steps: [JSONValue], cursor: Cursor)] = [([], cursor)]
        var bytes = 0
        var sent = 0
        for step in document["steps"]?.arrayValue ?? [] {
            guard let number = step["step"]?.intValue else { continue }
            // An outline (a long run's page, `RunView.outline`) says how many events it stands for.
            let events = step["event_count"]?.intValue ?? step["events"]?.arrayValue?.count ?? 0
            guard lacks(step: number, events: events, after: cursor) else { continue }
            let size = JSONWriter.encode(step).count
            if bytes > 0 && bytes + size > maxBytes {
                chunks.append(([], chunks[chunks.count - 1].cursor))
                bytes = 0
            }
            chunks[chunks.count - 1].steps.append(step)
            chunks[chunks.count - 1].cursor = Cursor(step: number, events: events)
            bytes += size
            sent += 1
        }
        var head = JSONObject()
        for member in document.objectValue ?? JSONObject() where member.key != "steps" { head[member.key] = member.value }
        let updates = chunks.enumerated().map { index, chunk -> (update: JSONValue, cursor: Cursor) in
            var object = ObjectBuilder()
            object.set("steps", JSONValue.array(chunk.steps))
            if index == chunks.count - 1 {
                object.set("head", JSONValue.object(head))
                object.set("status", status(of: document, writer: writer))
                object.set("approvals", JSONValue.array(approvals.map(\.json)))
            }
            object.set("cursor", chunk.cursor.text)
            return (object.json, chunk.cursor)
        }
        return (updates, sent)
    }

    /// The one update that brings a page at `cursor` to all of `document` (a page's first
    /// render embeds the document itself; this gives its cursor, status and approvals).
    static func update(_ document: JSONValue, after cursor: Cursor, approvals: [MCPApprovals.PendingCall], writer: Int?) -> (
        update: JSONValue, cursor: Cursor, newSteps: Int
    ) {
        let made = updates(document, after: cursor, approvals: approvals, writer: writer, maxBytes: .max)
        return (made.updates[0].update, made.updates[0].cursor, made.newSteps)
    }

    /// What an update carries of the document's head (every member but its steps) for a page
    /// that was last sent `sent` (nil: none yet, or the page starts again): the members that
    /// differ, and the names of those `sent` had that `head` no longer has. A member the page
    /// has as it is now (a run's goal, its start) is not sent again with every step.
    static func headChanges(_ head: JSONObject, since sent: JSONObject?) -> (changed: JSONObject, removed: [String]) {
        guard let sent else { return (head, []) }
        var changed = JSONObject()
        for member in head where sent[member.key] != member.value { changed[member.key] = member.value }
        return (changed, sent.keys.filter { head[$0] == nil })
    }

    /// Whether a page at `cursor` lacks step `step` (holding `events` events now), or has only part of it.
    static func lacks(step: Int, events: Int, after cursor: Cursor) -> Bool {
        step > cursor.step || (step == cursor.step && events != cursor.events)
    }

    /// The run's state in a word and a line: `running` (a process holds the log's write lock:
    /// `writer`), `stopped`, `torn` (its last member is cut off and nobody writes it: the writer
    /// died), `unfinished` (no stop, nobody writing), `damaged`, or `mismatched` (a recorded state
    /// digest differs from the state the events rebuild: never shown as a plain stop).
    static func status(of document: JSONValue, writer: Int?) -> JSONValue {
        var object = ObjectBuilder()
        let stop = document["summary"]?["stop_reason"]?.stringValue
        if let error = document["error"], error != .null {
            object.set("state", "damaged")
            object.set("text", "the log could not be read to the end: " + (error["message"]?.stringValue ?? "damaged"))
        } else if let mismatches = document["verification"]?["digest_mismatches"]?.arrayValue, !mismatches.isEmpty {
            // Whatever the log says of its stop, its events do not rebuild the state it recorded.
            let checked = document["verification"]?["digests_checked"]?.intValue ?? mismatches.count
            object.set("state", "mismatched")
            object.set(
                "text",
                (stop.map { "stopped: \($0), but " } ?? "")
                    + "\(mismatches.count) of \(checked) state digests do not match the state its events rebuild")
        } else if writer == nil, let tear = document["verification"]?["tear"]?.stringValue {
            // Cut off, whatever stop it recorded before the cut: `log verify` calls it damaged, and
            // a case over it could not run (its end is unproven).
            object.set("state", "torn")
            object.set(
                "text",
                "torn, and no process writes it (the writer died?)" + (stop.map { ", after it recorded a stop (\($0))" } ?? "")
                    + ": \(tear); agent-eval log repair seals it")
        } else if let stop, writer == nil || stop != "approval_required" {
            object.set("state", "stopped")
            object.set("text", "stopped: " + stop)
        } else if let writer {
            object.set("state", "running")
            object.set("text", "being written (process \(writer))")
        } else {
            object.set("state", "unfinished")
            object.set("text", "no stop is recorded and no process writes it here")
        }
        return object.json
    }
}
