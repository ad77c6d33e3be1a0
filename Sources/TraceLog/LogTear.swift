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

    public var description: String {
        let last = lastSequence.map { "the last complete event is seq \($0)" } ?? "no event is complete"
        return "the file (\(fileSize) bytes) ends inside the gzip member that starts at byte \(memberOffset): "
            + "a write was cut off; \(last)"
            + (droppedBytes > 0 ? ", and \(droppedBytes) bytes of a partial event after it were dropped" : "")
    }
}
