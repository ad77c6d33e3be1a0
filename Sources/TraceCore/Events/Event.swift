/// One line of a log: the envelope and its payload.
///
/// The envelope fields are written in a fixed order —
/// `{"v":1,"run":…,"seq":…,"step":…,"time_us":…,"kind":…,"prev":…,"data":{…}}` — and the
/// payload in canonical JSON (see `JSONWriter`), so an event has exactly one encoding.
public struct Event: Sendable, Hashable {
    /// The envelope version this code writes, but for delta packets.
    public static let schemaVersion = 1
    /// The envelope version of a line holding a delta packet (`ContextDelta`): version 1
    /// readers refuse it rather than read its lists as whole ones.
    public static let deltaVersion = 2
    /// The envelope version of a log whose hash chain links gzip members, not lines (format
    /// version 3, docs/log-format.md §3): only the first line of each member carries `prev`.
    /// Every line of such a log says 3, delta packets included.
    public static let memberChainVersion = 3
    /// The envelope version of a line holding a conversation's user turn (`user_turn`), its
    /// ending (`run_stopped` with a `StopReason.isConversationEnding` reason) or a fork's `say`
    /// edit (`run_forked`): format version 4,
    /// docs/log-format.md §6. Such lines sit in a version 3 log (members linked); older readers
    /// refuse them rather than fold a state whose digests would not match.
    public static let conversationVersion = 4
    /// The envelope versions this code reads.
    public static let supportedVersions = 1...4
    /// The log versions a writer may be asked for (`log_version`, `exec --log-version`): a
    /// conversation's version 4 lines come with the conversation, in a version 3 log.
    public static let writableVersions = 1...memberChainVersion

    public var version: Int
    /// The run the event belongs to; the same on every line of a log.
    public var runId: String
    /// Dense from 0: the n-th event of the log has sequence n.
    public var sequence: Int
    /// 0 for the run's start, then 1, 2, ... for the steps of the loop.
    public var step: Int
    /// Microseconds since the Unix epoch, from the runtime's clock.
    public var timeUs: Int
    /// The hash link: in a version 1 or 2 line, the SHA-256 (hex) of the previous event's line;
    /// in a version 3 log, the SHA-256 of the previous member's content on the first line of a
    /// member, and nil on every other line. 64 zeros for sequence 0.
    public var previousHash: String?
    public var payload: EventPayload

    public init(
        version: Int = Event.schemaVersion, runId: String, sequence: Int, step: Int, timeUs: Int,
        previousHash: String?, payload: EventPayload
    ) {
        self.version = version
        self.runId = runId
        self.sequence = sequence
        self.step = step
        self.timeUs = timeUs
        self.previousHash = previousHash
        self.payload = payload
    }

    /// The envelope's `kind`.
    public var kind: String { payload.kind }

    /// The line bytes of this event, without the newline.
    public func encodedLine() -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        encode(into: &writer)
        return writer.bytes
    }

    /// Appends the line bytes of this event, without the newline. A delta packet is written
    /// under at least the delta version, which is the version that gives it its meaning.
    public func encode(into writer: inout JSONWriter) {
        writer.writeRaw("{\"v\":")
        writer.write(max(version, payload.leastVersion))
        writer.writeRaw(",\"run\":")
        writer.write(runId)
        writer.writeRaw(",\"seq\":")
        writer.write(sequence)
        writer.writeRaw(",\"step\":")
        writer.write(step)
        writer.writeRaw(",\"time_us\":")
        writer.write(timeUs)
        writer.writeRaw(",\"kind\":")
        writer.write(payload.kind)
        if let previousHash {
            writer.writeRaw(",\"prev\":")
            writer.write(previousHash)
        }
        writer.writeRaw(",\"data\":")
        payload.writeData(to: &writer)
        writer.writeRaw("}")
    }

    /// Decodes one line (without its newline).
    ///
    /// Throws `TraceCoreError` for text that is not JSON, an envelope field that is missing or
    /// mistyped, a version other than 1 or 2, or a known kind whose data does not fit.
    public init(line: UnsafeRawBufferPointer) throws {
        try self.init(line: line, runId: nil, previousHash: nil)
    }

    /// Decodes one line, giving its `run` and `prev` the storage of `runId` and `previousHash`
    /// when they are those strings: a reader passes the run's id and the last line's hash,
    /// which the next line repeats, and saves two string allocations per event. Without
    /// `keepsPacketText`, a `context_built` payload's strings are checked as always but left
    /// empty (`JSONScanner.discardsText`): what a reader that only folds asks for.
    public init(
        line: UnsafeRawBufferPointer, runId expectedRunId: String?, previousHash expectedPrevious: String?, keepsPacketText: Bool = true
    ) throws {
        // A line that is not an object is named for what it is: not JSON at all (a stray line
        // of text), or JSON of another type. (An object after white space reads on as usual.)
        if line.first != UInt8(ascii: "{") {
            let value = try JSONParser.parse(line)
            guard case .object = value else {
                throw TraceCoreError(.invalidField, "an event must be a JSON object, found \(value.typeDescription)")
            }
        }
        // The reader's hot path: envelope members straight into fields, the payload straight
        // into its type, with no intermediate JSON tree. A line as the writer writes it, members
        // in their order and nothing else, is read member by member without matching names; any
        // other line (or any error) is read again the general way, which gives the error.
        var fields = EnvelopeFields(expectedRunId: expectedRunId, expectedPrevious: expectedPrevious, keepsPacketText: keepsPacketText)
        // `prev` (member 6) may be left out: a version 3 line carries it only first in a member.
        let isWritersForm =
            (try? JSONScanner.scan(line) {
                try $0.readObject(exactly: Event.envelopeNames, optional: 6) { try fields.read($1, &$0) }
            }) == true
        if !isWritersForm {
            fields = EnvelopeFields(expectedRunId: expectedRunId, expectedPrevious: expectedPrevious, keepsPacketText: keepsPacketText)
            try JSONScanner.scan(line) { scanner in
                try scanner.readObject { scanner, key in
                    switch key {
                    case "v": try fields.read(0, &scanner)
                    case "run": try fields.read(1, &scanner)
                    case "seq": try fields.read(2, &scanner)
                    case "step": try fields.read(3, &scanner)
                    case "time_us": try fields.read(4, &scanner)
                    case "kind": try fields.read(5, &scanner)
                    case "prev": try fields.read(6, &scanner)
                    case "data": try fields.read(7, &scanner)
                    default: try scanner.skipValue()
                    }
                }
            }
        }
        // The fields are moved out (`take`) and the event made at once: set one by one from
        // copies, the event was copied whole again at the end (a retain of each of its strings
        // and its payload's, and a release of each after, for every line read).
        let version = try required(fields.version, "v")
        try Event.checkVersion(version)
        let runId = try required(fields.runId.take(), "run")
        let sequence = try required(fields.sequence, "seq")
        let step = try required(fields.step, "step")
        let timeUs = try required(fields.timeUs, "time_us")
        let kindName = try required(fields.kind.take(), "kind")
        let previousHash =
            version >= Event.memberChainVersion ? fields.previousHash.take() : try required(fields.previousHash.take(), "prev")
        let payload: EventPayload
        if let decoded = fields.payload.take() {
            payload = decoded
        } else {
            payload = try EventPayload(kind: kindName, data: try required(fields.earlyData.take(), "data"), version: version)
        }
        self.init(
            version: version, runId: runId, sequence: sequence, step: step, timeUs: timeUs, previousHash: previousHash, payload: payload)
    }

    /// The envelope members of a line as they are read, for both ways of reading it.
    private struct EnvelopeFields {
        let expectedRunId: String?
        let expectedPrevious: String?
        let keepsPacketText: Bool
        var version: Int?
        var runId: String?
        var sequence: Int?
        var step: Int?
        var timeUs: Int?
        var kind: String?
        /// `kind`'s place in `EventPayload.runKinds`, when it is one of them.
        var kindIndex: Int?
        var previousHash: String?
        var payload: EventPayload?
        var earlyData: JSONValue?

        init(expectedRunId: String?, expectedPrevious: String?, keepsPacketText: Bool) {
            self.expectedRunId = expectedRunId
            self.expectedPrevious = expectedPrevious
            self.keepsPacketText = keepsPacketText
        }

        /// Reads the value of envelope member `member` (its index in `Event.envelopeKeys`).
        mutating func read(_ member: Int, _ scanner: inout JSONScanner) throws {
            switch member {
            case 0: version = try scanner.read()
            case 1: runId = try scanner.readString(reusing: expectedRunId)
            case 2: sequence = try scanner.readMeasure()
            case 3: step = try scanner.readMeasure()
            case 4: timeUs = try scanner.readMeasure()
            case 5: (kind, kindIndex) = try scanner.readString(among: EventPayload.runKinds)
            case 6: previousHash = try scanner.readString(reusing: expectedPrevious)
            default:
                if let kind, let version, Event.supportedVersions.contains(version) {
                    scanner.discardsText = !keepsPacketText && kindIndex == EventPayload.contextBuiltKind
                    defer { scanner.discardsText = false }
                    payload = try EventPayload(kind: kind, at: kindIndex, from: &scanner, version: version)
                } else {
                    // Written before `kind` (or under another version): decode it afterwards.
                    earlyData = try scanner.readValue()
                }
            }
        }
    }

    /// Decodes one line (without its newline).
    public init(line: [UInt8]) throws {
        self = try line.withUnsafeBytes { try Event(line: $0) }
    }

    /// Decodes an already parsed line.
    public init(json value: JSONValue) throws {
        guard case .object(let object) = value else {
            throw TraceCoreError(.invalidField, "an event must be a JSON object, found \(value.typeDescription)")
        }
        try self.init(envelope: Event.envelopeKeys.map { object[$0] })
    }

    /// The envelope's member names, in the order they are written.
    public static let envelopeKeys = ["v", "run", "seq", "step", "time_us", "kind", "prev", "data"]
    /// The same, as `JSONScanner.readObject(exactly:)` matches them in a line the writer wrote.
    static let envelopeNames: [StaticString] = [
        "\"v\":", "\"run\":", "\"seq\":", "\"step\":", "\"time_us\":", "\"kind\":", "\"prev\":", "\"data\":",
    ]

    private init(envelope: [JSONValue?]) throws {
        func field<T: JSONRepresentable>(_ slot: Int) throws -> T {
            let name = Event.envelopeKeys[slot]
            guard let value = envelope[slot] else {
                throw TraceCoreError(.invalidField, "is missing", fieldPath: name)
            }
            do {
                return try T(json: value)
            } catch let error as TraceCoreError {
                throw error.inside(name)
            }
        }
        version = try field(0)
        try Event.checkVersion(version)
        runId = try field(1)
        sequence = try field(2)
        step = try field(3)
        timeUs = try field(4)
        for (value, name) in [(sequence, "seq"), (step, "step"), (timeUs, "time_us")] {
            do {
                try JSONScanner.checkMeasure(value)
            } catch let error as TraceCoreError {
                throw error.inside(name)
            }
        }
        let kind: String = try field(5)
        previousHash = version >= Event.memberChainVersion && envelope[6] == nil ? nil : try field(6) as String
        let data: JSONValue = try field(7)
        payload = try EventPayload(kind: kind, data: data, version: version)
    }

    private static func checkVersion(_ version: Int) throws {
        guard supportedVersions.contains(version) else {
            throw TraceCoreError(
                .unsupportedVersion,
                "event has envelope version \(version); this agent-eval reads versions \(supportedVersions.lowerBound) to \(supportedVersions.upperBound)",
                fieldPath: "v")
        }
    }
}
