import Foundation
import TraceCore

/// Reads Inspect AI eval logs: `.eval` archives (a zip with `header.json` and one
/// `samples/<id>_epoch_<n>.json` per sample and epoch) and `.json` logs (one document with
/// `eval` and `samples`). One run per sample and epoch: the sample's messages as a transcript,
/// its error or limit as the stop reason, its scores, target and metadata kept as metadata.
enum InspectImporter {
    static func runs(archive path: String, budget: ArchiveBudget) throws(ImportError) -> [Result<ImportedRun, ImportError>] {
        let file = try SourceFile.read(path)
        var archive = try ZipArchive(path: path, bytes: file.bytes, budget: budget)
        guard let headerEntry = archive.entry("header.json") ?? archive.entry("_journal/start.json") else {
            throw ImportError(
                .badArchive, "\(path) has no header.json: it is a zip archive but not an Inspect eval log",
                location: SourceLocation(path: path),
                hint: "entries found: " + archive.entries.prefix(8).map(\.name).joined(separator: ", "))
        }
        let sampleEntries = archive.entries.filter { $0.name.hasPrefix("samples/") && $0.name.hasSuffix(".json") }
        if sampleEntries.isEmpty {
            throw ImportError(
                .badArchive, "\(path) holds no samples (no samples/*.json entries): the eval was not run or did not log samples",
                location: SourceLocation(path: path))
        }
        // The whole archive within its budget, or nothing of it inflated.
        try archive.admit([headerEntry] + sampleEntries)
        let header = try parse(try archive.contents(of: headerEntry), name: "\(path):\(headerEntry.name)")
        return sampleEntries.map { entry in
            Result { () throws(ImportError) in
                let sample = try parse(try archive.contents(of: entry), name: "\(path):\(entry.name)")
                return try run(sample: sample, header: header, file: file, place: entry.name)
            }
        }
    }

    static func runs(log: JSONValue, file: SourceFile) throws(ImportError) -> [Result<ImportedRun, ImportError>] {
        guard log["eval"] != nil else {
            throw ImportError(
                .wrongFormat, "\(file.path) is not an Inspect eval log: it has no \"eval\" member",
                location: SourceLocation(path: file.path))
        }
        let samples = log["samples"]?.arrayValue ?? []
        if samples.isEmpty {
            throw ImportError(
                .wrongFormat, "\(file.path) holds no samples (was it written with --no-log-samples, or is it a header only?)",
                location: SourceLocation(path: file.path))
        }
        return samples.enumerated().map { index, sample in
            Result { () throws(ImportError) in try run(sample: sample, header: log, file: file, place: "samples[\(index)]") }
        }
    }

    private static func parse(_ bytes: [UInt8], name: String) throws(ImportError) -> JSONValue {
        try SourceFile(path: name, bytes: bytes).json()
    }

    static func run(sample: JSONValue, header: JSONValue, file: SourceFile, place: String) throws(ImportError) -> ImportedRun {
        guard let messages = sample["messages"]?.arrayValue else {
            throw ImportError(
                .badRun, "\(file.path) (\(place)): the sample has no messages list", location: SourceLocation(path: file.path))
        }
        let sampleId = sample["id"].flatMap(EpisodeFinder.scalarText) ?? place
        let epoch = sample["epoch"].flatMap(EpisodeFinder.scalarText) ?? "1"
        var metadata = JSONObject()
        for key in ["scores", "target", "metadata", "model_usage", "limit", "error", "total_time", "working_time"] {
            if let value = sample[key], value != .null { metadata[key] = value }
        }
        if let task = header["eval"]?["task"] { metadata["task"] = task }
        let episode = Episode(
            messages: messages.map(openAIShape), id: "\(sampleId):\(epoch)", tools: declaredTools(in: sample),
            model: header["eval"]?["model"]?.stringValue, metadata: .object(metadata), place: place)
        var run = try TranscriptImporter(file: file, episode: episode).run()
        // Messages that end on a user turn are unfinished, unless the sample's error or limit says
        // how it ended; the last reply's stop reason does not (the user turn came after it).
        let endsOnUserTurn = run.stop == nil
        run.source.format = "inspect"
        run.agentName = header["eval"]?["task"]?.stringValue ?? run.agentName
        if let provider = run.model.name.split(separator: "/").first, run.model.name.contains("/") {
            run.model = ModelIdentity(provider: String(provider), name: String(run.model.name.dropFirst(provider.count + 1)))
        }
        if let created = header["eval"]?["created"]?.stringValue, let time = isoMicros(created) { run.startUs = time }
        for index in run.steps.indices { run.steps[index].format = "inspect.message" }
        if let error = sample["error"], error != .null {
            let message = error["message"]?.stringValue ?? EpisodeFinder.scalarText(error) ?? "error"
            run.stop = RunStopped(reason: .blocked, error: message)
            run.source.stop = "error: \(message)"
        } else if let limit = sample["limit"], limit != .null {
            let type = limit["type"]?.stringValue ?? "limit"
            let kind: LimitKind? =
                switch type {
                case "message": .maxSteps
                case "token", "context": .tokenBudget
                case "time", "working": .timeout
                default: nil
                }
            let value = limit["limit"].flatMap(EpisodeFinder.scalarText).map { " (\($0))" } ?? ""
            run.stop = RunStopped(reason: kind == nil ? .blocked : .budgetExhausted, limit: kind, error: "Inspect's \(type) limit\(value)")
            run.source.stop = "limit: \(type)\(value)"
        } else if !endsOnUserTurn, let reason = sample["output"]?["choices"]?.arrayValue?.first?["stop_reason"]?.stringValue {
            run.source.stop = reason
            switch reason {
            case "max_tokens", "model_length":
                run.stop = RunStopped(reason: .budgetExhausted, limit: .tokenBudget, error: "the model hit its output limit (\(reason))")
            case "content_filter":
                run.stop = RunStopped(reason: .blocked, error: "the provider stopped the reply (\(reason))")
            default: break
            }
        }
        if endsOnUserTurn, run.stop != nil { run.warnings.removeAll { $0.hasPrefix(TranscriptImporter.userTurnNote) } }
        if let usage = sample["output"]?["usage"], let last = run.steps.indices.last, run.steps[last].usage == nil {
            run.steps[last].usage = TranscriptImporter.usage(usage)
        }
        return run
    }

    /// The tools the sample's model calls were offered (each model event's `tools`: name,
    /// description, parameters), in first-offered order. Inspect moves a description longer than
    /// 100 characters to the sample's `attachments` (`attachment://<hash>`): it is read from there.
    static func declaredTools(in sample: JSONValue) -> [JSONValue] {
        let attachments = sample["attachments"]
        var tools: [JSONValue] = []
        for event in sample["events"]?.arrayValue ?? [] where event["event"]?.stringValue == "model" {
            for tool in event["tools"]?.arrayValue ?? [] {
                guard var object = tool.objectValue else { continue }
                if let description = object["description"]?.stringValue, description.hasPrefix("attachment://"),
                    let text = attachments?[String(description.dropFirst("attachment://".count))]?.stringValue
                {
                    object["description"] = .string(text)
                }
                tools.append(.object(object))
            }
        }
        return tools
    }

    /// An Inspect message in the OpenAI shape the transcript importer reads: `function` is the
    /// tool's name and `arguments` an object there; a tool message's `error` marks a failure.
    static func openAIShape(_ message: JSONValue) -> JSONValue {
        guard var object = message.objectValue else { return message }
        if let calls = object["tool_calls"]?.arrayValue {
            object["tool_calls"] = .array(
                calls.map { call in
                    guard let name = call["function"]?.stringValue else { return call }
                    var function = JSONObject()
                    function["name"] = .string(name)
                    function["arguments"] = call["arguments"] ?? .object(JSONObject())
                    var shaped = call.objectValue ?? JSONObject()
                    shaped["function"] = .object(function)
                    shaped["arguments"] = nil
                    return .object(shaped)
                })
        }
        return .object(object)
    }

    /// Microseconds since the epoch of an ISO 8601 time (`2026-11-23T10:00:00+00:00`, with or
    /// without fractional seconds).
    static func isoMicros(_ text: String) -> Int? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int(date.timeIntervalSince1970 * 1_000_000) }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text).map { Int($0.timeIntervalSince1970 * 1_000_000) }
    }
}
