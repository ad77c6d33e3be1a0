public import AgentRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// One server-sent event: its `event:` name (empty when none was given) and its data lines
/// joined with newlines.
public struct ServerSentEvent: Sendable, Hashable {
    public var name: String
    public var data: String

    public init(name: String = "", data: String) {
        self.name = name
        self.data = data
    }
}

/// An incremental parser for `text/event-stream` bodies (the WHATWG event stream rules).
///
/// Bytes arrive in chunks that split lines, and multi-byte UTF-8 characters, anywhere:
/// the parser keeps the unfinished line as bytes and decodes only whole lines, so a
/// character split across two chunks arrives whole. Lines end in LF, CRLF or CR; a line
/// starting with `:` is a comment (servers send them as keep-alives); `id` and `retry` are
/// read and ignored (a model reply is never resumed).
///
/// Memory is bounded by `maxLineBytes`: a line, or an event's data lines joined, that grows
/// past it is an error (`LineTooLong`) as soon as its bytes arrive, not when it ends — a line
/// that never ends is not held whole.
public struct ServerSentEventParser: Sendable {
    /// A line, or an event's data, longer than the parser's limit.
    public struct LineTooLong: Error, Hashable {
        /// The limit (`maxLineBytes`).
        public var limit: Int
        /// Bytes of the stream consumed when it was found.
        public var offset: Int
    }

    /// The longest line, and the longest event data, taken.
    public let maxLineBytes: Int
    private var line: [UInt8] = []
    private var name = ""
    /// The event's data lines so far, joined with newlines, as bytes: decoded once per event.
    private var data: [UInt8] = []
    private var hasData = false
    private var afterCarriageReturn = false
    /// Bytes consumed so far, for messages that point into the stream.
    public private(set) var offset = 0

    public init(maxLineBytes: Int = RequestLimits.defaultMaxLineBytes) {
        self.maxLineBytes = maxLineBytes
    }

    /// Feeds the next chunk; returns the events it completed, in order. Throws when a line or
    /// an event's data grows past `maxLineBytes`; the parser is then of no further use.
    public mutating func feed(_ chunk: some Collection<UInt8>) throws(LineTooLong) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        let bytes = Array(chunk)
        offset += bytes.count
        var isTooLong = false
        bytes.withUnsafeBufferPointer { bytes in
            var start = 0
            // Whole runs of line bytes are appended at once; only line ends are looked at one by one.
            while start < bytes.count {
                if afterCarriageReturn {
                    afterCarriageReturn = false
                    if bytes[start] == 0x0A {
                        start += 1
                        continue
                    }
                }
                let end = Self.lineEnd(in: bytes, from: start)
                // The line so far, with the event's data before it, must stay within the limit.
                if data.count + line.count + (end - start) > maxLineBytes {
                    isTooLong = true
                    return
                }
                guard end < bytes.count else {
                    line.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<end]))
                    break
                }
                if line.isEmpty {
                    // The whole line is in this chunk: read in place.
                    endLine(UnsafeBufferPointer(rebasing: bytes[start..<end]), into: &events)
                } else {
                    line.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<end]))
                    let carried = line
                    carried.withUnsafeBufferPointer { endLine($0, into: &events) }
                    line.removeAll(keepingCapacity: true)
                }
                afterCarriageReturn = bytes[end] == 0x0D
                start = end + 1
            }
        }
        if isTooLong { throw LineTooLong(limit: maxLineBytes, offset: offset) }
        return events
    }

    /// The position of the first LF or CR at or after `start` (`bytes.count` when none), found
    /// with `memchr`.
    private static func lineEnd(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = bytes.baseAddress, start < bytes.count else { return bytes.count }
        let count = bytes.count - start
        let feed = memchr(base + start, 0x0A, count).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) } ?? bytes.count
        let carriage = memchr(base + start, 0x0D, feed - start).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) } ?? feed
        return min(feed, carriage)
    }

    /// Event names servers send over and over, kept as one string each: a name is made once,
    /// not for every event.
    private static let knownNames: [(bytes: [UInt8], name: String)] = [
        "content_block_delta", "content_block_start", "content_block_stop", "message_start", "message_delta", "message_stop", "ping",
        "error",
    ].map { (Array($0.utf8), $0) }

    /// The stream ended: an event whose blank line never came is dropped, as the standard
    /// says; the caller learns whether anything was left unfinished.
    public var hasUnfinishedEvent: Bool { hasData || !line.isEmpty }

    private static let dataField: [UInt8] = Array("data".utf8)
    private static let eventField: [UInt8] = Array("event".utf8)

    /// One whole line, read as bytes: the field is what comes before the first colon, the value
    /// what follows it (one leading space dropped).
    private mutating func endLine(_ line: UnsafeBufferPointer<UInt8>, into events: inout [ServerSentEvent]) {
        if line.isEmpty {
            if hasData { events.append(ServerSentEvent(name: name, data: String(decoding: data, as: UTF8.self))) }
            name = ""
            data.removeAll(keepingCapacity: true)
            hasData = false
            return
        }
        if line[0] == UInt8(ascii: ":") { return }
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.count
        var valueStart = min(colon + 1, line.count)
        if valueStart < line.count, line[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
        let field = line[..<colon]
        if field.elementsEqual(Self.dataField) {
            if hasData { data.append(0x0A) }
            data.append(contentsOf: line[valueStart...])
            hasData = true
        } else if field.elementsEqual(Self.eventField) {
            let value = line[valueStart...]
            name = Self.knownNames.first { $0.bytes.elementsEqual(value) }?.name ?? String(decoding: value, as: UTF8.self)
        }
    }
}
