public import TraceCore

/// Where and how a log file was cut: what the reader says instead of failing on a torn tail.
public struct LogTear: Sendable, Hashable, CustomStringConvertible {
    /// The byte offset of the gzip member the file ends inside.
    public var memberOffset: Int
    /// The file's size in bytes.
    public var fileSize: Int
    /// Complete events read from the torn member (they are returned like any other).
    public var eventsInTornMember: Int
    /// Bytes of a partial event after the last complete one, dropped.
    public var droppedBytes: Int
    /// The sequence number of the last complete event, if any.
    public var lastSequence: Int?

    public init(memberOffset: Int, fileSize: Int, eventsInTornMember: Int, droppedBytes: Int, lastSequence: Int?) {
        self.memberOffset = memberOffset
        self.fileSize = fileSize
        self.eventsInTornMember = eventsInTornMember
        self.droppedBytes = droppedBytes
        self.lastSequence = lastSequence
    }

    public var description: String {
        let last = lastSequence.map { "the last complete event is seq \($0)" } ?? "no event is complete"
        return "the file (\(fileSize) bytes) ends inside the gzip member that starts at byte \(memberOffset): "
            + "a write was cut off; \(last)"
            + (droppedBytes > 0 ? ", and \(droppedBytes) bytes of a partial event after it were dropped" : "")
    }
}

extension LogTear: JSONRepresentable {
    public init(from scanner: inout JSONScanner) throws {
        var offset: Int?
        var size: Int?
        var events: Int?
        var dropped: Int?
        var last: Int?
        try scanner.readObject { scanner, key in
            switch key {
            case "member_offset": offset = try scanner.read()
            case "file_size": size = try scanner.read()
            case "events_in_torn_member": events = try scanner.read()
            case "dropped_bytes": dropped = try scanner.read()
            case "last_seq": last = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.init(
            memberOffset: try required(offset, "member_offset"), fileSize: try required(size, "file_size"),
            eventsInTornMember: try required(events, "events_in_torn_member"), droppedBytes: try required(dropped, "dropped_bytes"),
            lastSequence: last)
    }

    /// `{"member_offset", "file_size", "events_in_torn_member", "dropped_bytes", "last_seq"?}`.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("member_offset", memberOffset)
        object.set("file_size", fileSize)
        object.set("events_in_torn_member", eventsInTornMember)
        object.set("dropped_bytes", droppedBytes)
        object.set("last_seq", lastSequence)
        return object.json
    }
}
