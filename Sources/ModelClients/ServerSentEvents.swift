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
    public mutating func feed(_ chunk: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in chunk {
            offset += 1
            if afterCarriageReturn {
                afterCarriageReturn = false
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0A:
                endLine(into: &events)
            case 0x0D:
                endLine(into: &events)
                afterCarriageReturn = true
            default:
                line.append(byte)
            }
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
