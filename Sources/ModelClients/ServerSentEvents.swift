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
public struct ServerSentEventParser: Sendable {
    private var line: [UInt8] = []
    private var name = ""
    private var data: [String] = []
    private var hasData = false
    private var afterCarriageReturn = false
    /// Bytes consumed so far, for messages that point into the stream.
    public private(set) var offset = 0

    public init() {}

    /// Feeds the next chunk; returns the events it completed, in order.
    public mutating func feed(_ chunk: some Collection<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        let bytes = Array(chunk)
        offset += bytes.count
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
            var end = start
            while end < bytes.count, bytes[end] != 0x0A, bytes[end] != 0x0D { end += 1 }
            line.append(contentsOf: bytes[start..<end])
            guard end < bytes.count else { break }
            endLine(into: &events)
            afterCarriageReturn = bytes[end] == 0x0D
            start = end + 1
        }
        return events
    }

    /// The stream ended: an event whose blank line never came is dropped, as the standard
    /// says; the caller learns whether anything was left unfinished.
    public var hasUnfinishedEvent: Bool { hasData || !line.isEmpty }

    private mutating func endLine(into events: inout [ServerSentEvent]) {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            if hasData { events.append(ServerSentEvent(name: name, data: data.joined(separator: "\n"))) }
            name = ""
            data.removeAll(keepingCapacity: true)
            hasData = false
            return
        }
        if line.first == UInt8(ascii: ":") { return }
        let field: String
        var value: Substring
        let text = String(decoding: line, as: UTF8.self)
        if let colon = text.firstIndex(of: ":") {
            field = String(text[..<colon])
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = text
            value = ""
        }
        switch field {
        case "data":
            data.append(String(value))
            hasData = true
        case "event":
            name = String(value)
        default:
            break
        }
    }
}
