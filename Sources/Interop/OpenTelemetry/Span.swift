public import TraceCore

/// A span, whichever export it came from (OTLP/JSON, Tempo's batches, Jaeger): what the trace
/// importer needs, plus the span as it was.
public struct Span: Sendable {
    public var traceId: String
    public var spanId: String
    public var parentId: String?
    public var name: String
    public var startUs: Int
    public var endUs: Int
    /// Attribute values by key, OTLP's typed values made plain JSON.
    public var attributes: [String: JSONValue]
    public var events: [SpanEvent]
    /// The status message (or "error") when the span's status is an error.
    public var error: String?
    /// The resource's `service.name`.
    public var service: String?
    /// The span exactly as the file has it.
    public var record: JSONValue

    public init(
        traceId: String, spanId: String, parentId: String?, name: String, startUs: Int, endUs: Int, attributes: [String: JSONValue],
        events: [SpanEvent] = [], error: String? = nil, service: String? = nil, record: JSONValue
    ) {
        self.traceId = traceId
        self.spanId = spanId
        self.parentId = parentId
        self.name = name
        self.startUs = startUs
        self.endUs = endUs
        self.attributes = attributes
        self.events = events
        self.error = error
        self.service = service
        self.record = record
    }

    public subscript(key: String) -> JSONValue? { attributes[key] }

    public func string(_ key: String) -> String? { Self.string(attributes[key]) }

    /// An attribute as a whole number; a double no `Int` holds (`1e300`, infinity, NaN) is none.
    public func int(_ key: String) -> Int? { Self.int(attributes[key]) }

    /// An attribute's text (a number's digits too).
    static func string(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let text)?: return text
        case .int(let number)?: return String(number)
        default: return nil
        }
    }

    static func int(_ value: JSONValue?) -> Int? {
        switch value {
        case .int(let number)?: return number
        case .double(let number)? where number.isFinite && number.magnitude < 9.2e18: return Int(number)
        case .string(let text)?: return Int(text)
        default: return nil
        }
    }

    /// An attribute as a finite number.
    static func double(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let number)?: return Double(number)
        case .double(let number)? where number.isFinite: return number
        case .string(let text)?: return Double(text).flatMap { $0.isFinite ? $0 : nil }
        default: return nil
        }
    }
}

/// A span event: a name, a time and attributes.
public struct SpanEvent: Sendable {
    public var name: String
    public var timeUs: Int
    public var attributes: [String: JSONValue]

    public init(name: String, timeUs: Int, attributes: [String: JSONValue]) {
        self.name = name
        self.timeUs = timeUs
        self.attributes = attributes
    }

    func string(_ key: String) -> String? { Span.string(attributes[key]) }
    func int(_ key: String) -> Int? { Span.int(attributes[key]) }
    func double(_ key: String) -> Double? { Span.double(attributes[key]) }
}

/// Reads the spans of an OTLP/JSON file (an `ExportTraceServiceRequest`, Tempo's `batches`, a
/// list of either, or JSON Lines of them as the collector's file exporter writes) or of a
/// Jaeger JSON export.
enum SpanReader {
    /// The spans of a file, each once, and what reading them left out or read once: for every
    /// run made of them to say (`import` and `collect` read a file the same way).
    struct Read: Sendable {
        var spans: [Span]
        var notes: [String] = []
        /// Spans left out for want of ids: which trace they were of is not known, so any run of
        /// the file may lack them.
        var unidentified = 0

        /// `runs` with the reading's notes among each run's warnings; with spans left out, each
        /// run written unfinished (`ImportedRun.leaveUnfinished`): no case passes on what it
        /// may lack.
        func noted(_ runs: [Result<ImportedRun, ImportError>]) -> [Result<ImportedRun, ImportError>] {
            guard !notes.isEmpty else { return runs }
            return runs.map { result in
                result.map { run in
                    var run = run
                    run.warnings += notes
                    if unidentified > 0 {
                        run.leaveUnfinished(because: "\(counted(unidentified, "span")) of the source had no ids and were left out")
                    }
                    return run
                }
            }
        }
    }

    /// The spans of `document`, each (trace id, span id) once — the copy sent last, as an exporter
    /// that retried a request sends the same spans again — with notes for spans left out for
    /// want of ids and for copies that differ.
    static func spans(in document: SourceFile.Document, file: SourceFile, format: ImportFormat) throws(ImportError) -> Read {
        let found = try allSpans(in: document, file: file, format: format)
        var seen = Set<String>()
        var kept: [String: JSONValue] = [:]
        var differing: [String] = []
        var spans: [Span] = []
        for span in found.spans.reversed() {
            let key = span.traceId + "/" + span.spanId
            guard seen.insert(key).inserted else {
                if kept[key] != span.record { differing.append(span.spanId) }
                continue
            }
            kept[key] = span.record
            spans.append(span)
        }
        var read = Read(spans: spans.reversed())
        read.unidentified = found.unidentified
        if found.unidentified > 0 {
            read.notes.append(
                "\(counted(found.unidentified, "span")) of \(file.path) had no trace id or no span id (an id of zeros is none) and "
                    + "\(found.unidentified == 1 ? "is" : "are") left out: the run may lack what \(found.unidentified == 1 ? "it" : "they") did"
            )
        }
        if !differing.isEmpty {
            let named = Array(Set(differing)).sorted().prefix(5).joined(separator: ", ")
            read.notes.append(
                "\(counted(differing.count, "span")) came again with other content (\(named)): each is read as last sent, the "
                    + "earlier copies are in the source")
        }
        return read
    }

    private static func allSpans(in document: SourceFile.Document, file: SourceFile, format: ImportFormat) throws(ImportError) -> (
        spans: [Span], unidentified: Int
    ) {
        var documents: [(place: String, value: JSONValue)] = []
        switch document {
        case .json(let value):
            if let list = value.arrayValue {
                documents = list.enumerated().map { ("[\($0.offset)]", $0.element) }
            } else {
                documents = [("", value)]
            }
        case .lines(let lines): documents = lines.map { ("line \($0.line)", $0.value) }
        }
        var spans: [Span] = []
        /// Spans found without a trace id or a span id, which are left out.
        var unidentified = 0
        /// What `read` throws (a span's time that is none), said at the place in the file.
        func placed<T>(_ at: String, _ read: () throws(ImportError) -> T) throws(ImportError) -> T {
            do throws(ImportError) {
                return try read()
            } catch {
                throw ImportError(error.code, "\(at): \(error.message)", location: SourceLocation(path: file.path), hint: error.hint)
            }
        }
        for (place, given) in documents {
            let at = place.isEmpty ? file.path : "\(file.path) (\(place))"
            // A credential in an attribute reaches no record the log keeps (`AttributeRedaction`).
            let request = AttributeRedaction.redact(given)
            if format == .jaeger {
                guard let traces = request["data"]?.arrayValue else {
                    throw ImportError(
                        .wrongFormat, "\(at) is not a Jaeger export: it has no \"data\" list of traces",
                        location: SourceLocation(path: file.path),
                        hint: "export the trace as JSON from Jaeger's UI or its /api/traces endpoint")
                }
                for trace in traces {
                    let found = trace["spans"]?.arrayValue ?? []
                    let read = try placed(at) { () throws(ImportError) in try jaegerSpans(trace) }
                    unidentified += found.count - read.count
                    spans += read
                }
                continue
            }
            guard let batches = (request["resourceSpans"] ?? request["batches"])?.arrayValue else {
                throw ImportError(
                    .wrongFormat, "\(at) is not OTLP/JSON: it has no \"resourceSpans\" (or Tempo's \"batches\") list",
                    location: SourceLocation(path: file.path), hint: "is it a Jaeger export? try: agent-eval import jaeger …")
            }
            let read = try placed(at) { () throws(ImportError) in try otlpSpans(inBatches: batches) }
            spans += read.spans
            unidentified += read.unidentified
        }
        guard spans.isEmpty else { return (spans, unidentified) }
        let location = SourceLocation(path: file.path)
        guard unidentified == 0 else {
            let isJaeger = format == .jaeger
            throw ImportError(
                .wrongFormat,
                "\(file.path) has \(unidentified) span\(unidentified == 1 ? "" : "s"), but none with both "
                    + (isJaeger ? "\"traceID\" and \"spanID\"" : "\"traceId\" and \"spanId\"") + ": no trace to import",
                location: location, hint: isJaeger ? nil : "OTLP/JSON writes ids as hex strings; protobuf's JSON mapping as base64")
        }
        throw ImportError(.wrongFormat, "\(file.path) holds no spans: no trace to import", location: location)
    }

    /// The spans of an OTLP/JSON request's `resourceSpans` (or Tempo's `batches`), and how many
    /// were left out for want of a trace id or a span id. A span whose time is no time a log can
    /// hold is an error naming it (`spanTime`).
    static func otlpSpans(inBatches batches: [JSONValue]) throws(ImportError) -> (spans: [Span], unidentified: Int) {
        var spans: [Span] = []
        var unidentified = 0
        for (batchIndex, batch) in batches.enumerated() {
            let service = attributes(batch["resource"]?["attributes"])["service.name"]?.stringValue
            let scopeKey = batch["scopeSpans"] != nil ? "scopeSpans" : "instrumentationLibrarySpans"
            for (scopeIndex, scope) in try list(batch[scopeKey], at: "resourceSpans[\(batchIndex)].\(scopeKey)").enumerated() {
                for span in try list(scope["spans"], at: "resourceSpans[\(batchIndex)].\(scopeKey)[\(scopeIndex)].spans") {
                    if let span = try otlpSpan(span, service: service) { spans.append(span) } else { unidentified += 1 }
                }
            }
        }
        return (spans, unidentified)
    }

    /// A member that must be a list when present (`scopeSpans`, `spans`): absent is empty, any
    /// other value an error naming where — never read as no spans.
    static func list(_ value: JSONValue?, at path: String) throws(ImportError) -> [JSONValue] {
        guard let value, value != .null else { return [] }
        guard let list = value.arrayValue else {
            throw ImportError(.wrongFormat, "\(path) is \(value.typeDescription), not a list of spans: OTLP/JSON gives a list")
        }
        return list
    }

    private static func otlpSpan(_ value: JSONValue, service: String?) throws(ImportError) -> Span? {
        guard let traceId = id(value["traceId"]), let spanId = id(value["spanId"]) else { return nil }
        let status = value["status"]
        let code = status?["code"]
        let isError = code?.intValue == 2 || code?.stringValue == "STATUS_CODE_ERROR"
        func time(_ value: JSONValue?, _ member: String) throws(ImportError) -> Int {
            try spanTime(value, member, nanoseconds: true, span: spanId, trace: traceId)
        }
        var events: [SpanEvent] = []
        for (index, event) in (value["events"]?.arrayValue ?? []).enumerated() {
            events.append(
                SpanEvent(
                    name: event["name"]?.stringValue ?? "", timeUs: try time(event["timeUnixNano"], "events[\(index)].timeUnixNano"),
                    attributes: attributes(event["attributes"])))
        }
        let parent = id(value["parentSpanId"])
        return Span(
            traceId: traceId, spanId: spanId, parentId: parent, name: value["name"]?.stringValue ?? "",
            startUs: try time(value["startTimeUnixNano"], "startTimeUnixNano"),
            endUs: try time(value["endTimeUnixNano"], "endTimeUnixNano"),
            attributes: attributes(value["attributes"]), events: events,
            error: isError ? (status?["message"]?.stringValue).flatMap { $0.isEmpty ? nil : $0 } ?? "error" : nil, service: service,
            record: value)
    }

    private static func jaegerSpans(_ trace: JSONValue) throws(ImportError) -> [Span] {
        var services: [String: String] = [:]
        for member in trace["processes"]?.objectValue ?? JSONObject() {
            if let name = member.value["serviceName"]?.stringValue { services[member.key] = name }
        }
        var spans: [Span] = []
        for value in trace["spans"]?.arrayValue ?? [] {
            guard let traceId = id(value["traceID"]), let spanId = id(value["spanID"]) else { continue }
            func time(_ value: JSONValue?, _ member: String) throws(ImportError) -> Int {
                try spanTime(value, member, nanoseconds: false, span: spanId, trace: traceId)
            }
            let parent =
                (value["references"]?.arrayValue ?? []).first { $0["refType"]?.stringValue == "CHILD_OF" }.flatMap { id($0["spanID"]) }
                ?? id(value["parentSpanID"])
            let tags = jaegerTags(value["tags"])
            let start = try time(value["startTime"], "startTime")
            // A measure each, so their sum cannot overflow (a later time past the range is the
            // log writer's to refuse).
            let duration = try time(value["duration"], "duration")
            let isError =
                tags["error"]?.boolValue == true || tags["error"]?.stringValue == "true" || tags["otel.status_code"]?.stringValue == "ERROR"
            var events: [SpanEvent] = []
            for (index, log) in (value["logs"]?.arrayValue ?? []).enumerated() {
                let fields = jaegerTags(log["fields"])
                events.append(
                    SpanEvent(
                        name: fields["event"]?.stringValue ?? "", timeUs: try time(log["timestamp"], "logs[\(index)].timestamp"),
                        attributes: fields))
            }
            spans.append(
                Span(
                    traceId: traceId, spanId: spanId, parentId: parent, name: value["operationName"]?.stringValue ?? "", startUs: start,
                    endUs: start + duration, attributes: tags, events: events,
                    error: isError ? tags["otel.status_description"]?.stringValue ?? "error" : nil,
                    service: value["processID"]?.stringValue.flatMap { services[$0] }, record: value))
        }
        return spans
    }

    /// OTLP's `[{key, value: {stringValue | intValue | …}}]` as plain JSON values.
    static func attributes(_ list: JSONValue?) -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        for item in list?.arrayValue ?? [] {
            guard let key = item["key"]?.stringValue else { continue }
            result[key] = anyValue(item["value"])
        }
        return result
    }

    static func anyValue(_ value: JSONValue?) -> JSONValue {
        guard let value else { return .null }
        if let text = value["stringValue"] { return text }
        if let number = value["intValue"] {
            if let text = number.stringValue, let parsed = Int(text) { return .int(parsed) }
            return number
        }
        if let number = value["doubleValue"] {
            if let text = number.stringValue, let parsed = Double(text) { return .double(parsed) }
            return number
        }
        if let flag = value["boolValue"] { return flag }
        if let array = value["arrayValue"] { return .array((array["values"]?.arrayValue ?? []).map { anyValue($0) }) }
        if let list = value["kvlistValue"] {
            var object = JSONObject()
            for item in list["values"]?.arrayValue ?? [] {
                if let key = item["key"]?.stringValue { object[key] = anyValue(item["value"]) }
            }
            return .object(object)
        }
        if let bytes = value["bytesValue"] { return bytes }
        return .null
    }

    private static func jaegerTags(_ list: JSONValue?) -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        for tag in list?.arrayValue ?? [] {
            guard let key = tag["key"]?.stringValue else { continue }
            result[key] = tag["value"] ?? .null
        }
        return result
    }

    /// A trace or span id as lowercase hex: OTLP/JSON writes hex; protobuf's JSON mapping writes
    /// base64, which is converted. Empty and all-zero ids are no id.
    static func id(_ value: JSONValue?) -> String? {
        guard let text = value?.stringValue, !text.isEmpty else { return nil }
        let hex: String
        if (text.count == 32 || text.count == 16), text.allSatisfy(\.isHexDigit) {
            hex = text.lowercased()
        } else if let bytes = Base64.decode(text), bytes.count == 16 || bytes.count == 8 {
            hex = ContentHash.hex(bytes)
        } else {
            hex = text
        }
        return hex.allSatisfy({ $0 == "0" }) ? nil : hex
    }

    /// Throws as reading `span` (an OTLP/JSON span) would when one of its times is no time a
    /// log can hold (`spanTime`).
    static func checkTimes(of span: JSONValue, span spanId: String, trace: String) throws(ImportError) {
        for member in ["startTimeUnixNano", "endTimeUnixNano"] {
            _ = try spanTime(span[member], member, nanoseconds: true, span: spanId, trace: trace)
        }
        for (index, event) in (span["events"]?.arrayValue ?? []).enumerated() {
            _ = try spanTime(event["timeUnixNano"], "events[\(index)].timeUnixNano", nanoseconds: true, span: spanId, trace: trace)
        }
    }

    /// A span's time member as microseconds since 1970 (`nanoseconds`: OTLP's `…UnixNano`, a
    /// number or, as protobuf's JSON mapping writes a 64-bit integer, a string; else Jaeger's
    /// microseconds, or a duration): 0 when the member is missing or null. A value that is no
    /// whole number from 0 to what a log can hold (2^53 − 1 µs, docs/log-format.md §2) is an
    /// error naming the span and the member, never a trap or a log no reader takes.
    static func spanTime(_ value: JSONValue?, _ member: String, nanoseconds: Bool, span: String, trace: String) throws(ImportError) -> Int {
        let scale = nanoseconds ? 1_000 : 1
        let highest = JSONScanner.maximumMeasure * scale + (scale - 1)
        let whole: Int?
        switch value {
        case nil, .null?: return 0
        case .string(let text)?: whole = Int(text)
        case .int(let number)?: whole = number
        case .double(let number)? where number.isFinite && number.rounded() == number && number >= 0 && number <= Double(highest):
            whole = Int(number)
        default: whole = nil
        }
        guard let whole, whole >= 0, whole <= highest else {
            let shown = value.map { JSONWriter.encodeString($0) } ?? ""
            throw ImportError(
                .wrongFormat,
                "span \(span) of trace \(trace): \(member) is \(shown.count > 60 ? String(shown.prefix(60)) + "…" : shown), which is no time: "
                    + (nanoseconds ? "nanoseconds since 1970" : "microseconds (since 1970, or a duration)")
                    + ", a whole number from 0 to \(highest)",
                hint: "the exporter wrote a time no trace can hold; fix the exporter, or leave the span out")
        }
        return whole / scale
    }
}
