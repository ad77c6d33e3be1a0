import Foundation
public import TraceCore

/// The formats `agent-eval import` reads (docs/interop.md).
public enum ImportFormat: String, Sendable, CaseIterable {
    /// Tell by the content.
    case auto
    /// OpenTelemetry traces as OTLP/JSON (`resourceSpans`, or Tempo's `batches`).
    case otlp
    /// A Jaeger JSON export (`data[].spans`).
    case jaeger
    /// Inspect AI eval logs (`.eval` archives or `.json`).
    case inspect
    /// OpenAI chat messages or Anthropic messages, alone or in result files of many episodes.
    case messages
    /// ATIF trajectories (the Agent Trajectory Interchange Format, v1.4 and later).
    case atif
}

/// How to read the inputs.
public struct ImportOptions: Sendable {
    public var format: ImportFormat
    /// For message transcripts: the dotted path to the list of episodes in a result file.
    public var episodesPath: String?
    /// For message transcripts: the key of each episode's message list.
    public var messagesKey: String?
    /// For archives (Inspect's `.eval`): how much one may inflate to.
    public var archiveBudget: ArchiveBudget
    /// For traces: which spans make one run.
    public var spanGrouping: SpanGrouping

    public init(
        format: ImportFormat = .auto, episodesPath: String? = nil, messagesKey: String? = nil, archiveBudget: ArchiveBudget = .standard,
        spanGrouping: SpanGrouping = .trace
    ) {
        self.format = format
        self.episodesPath = episodesPath
        self.messagesKey = messagesKey
        self.archiveBudget = archiveBudget
        self.spanGrouping = spanGrouping
    }
}

/// Which spans of a traces file make one run (`import --group-by`).
public enum SpanGrouping: Sendable, Hashable {
    /// One trace, one run: the default, for instrumentations that open a span around the agent.
    case trace
    /// The traces that share a session id (`session.id`, OpenInference's; `gen_ai.conversation.id`,
    /// the GenAI conventions') on any of their spans; a trace without one is a run of its own.
    case session
    /// Traces of one service that follow each other with gaps shorter than this (microseconds):
    /// for instrumentations that open no span around the agent, where every model call is a
    /// trace of its own.
    case window(Int)
}

/// What an import did, per run: the log written, or why the run was not imported.
public struct ImportOutcome: Sendable {
    public struct Run: Sendable {
        public var input: String
        /// The run's id in the source.
        public var sourceId: String?
        public var format: String
        /// The log written; nil when the run failed.
        public var log: String?
        public var steps: Int
        public var calls: Int
        public var stop: StopReason?
        public var warnings: [String]
        public var error: ImportError?
    }

    public var runs: [Run] = []
    /// Inputs that could not be read at all.
    public var failedInputs: [ImportError] = []

    public var importedCount: Int { runs.count { $0.log != nil } }
    public var failedCount: Int { runs.count { $0.error != nil } + failedInputs.count }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("imported", importedCount)
        object.set("failed", failedCount)
        object.set(
            "runs",
            JSONValue.array(
                runs.map { run in
                    var item = ObjectBuilder()
                    item.set("input", run.input)
                    item.set("source_id", run.sourceId)
                    item.set("format", run.format)
                    item.set("log", run.log)
                    item.set("steps", run.steps)
                    item.set("calls", run.calls)
                    item.set("stop_reason", run.stop?.rawValue)
                    item.set("warnings", JSONValue.array(run.warnings.map { .string($0) }))
                    item.set("error", run.error.map { DiagnosticRecord($0).json })
                    return item.json
                }))
        object.set("failed_inputs", JSONValue.array(failedInputs.map { DiagnosticRecord($0).json }))
        return object.json
    }
}

/// `agent-eval import`: reads each input, turns every run in it into an `ImportedRun`, and
/// writes each as a log. A run that cannot be imported is reported and the others still are.
public enum Importer {
    /// Reads the runs of one file (without writing anything).
    public static func runs(in path: String, options: ImportOptions) throws(ImportError) -> [Result<ImportedRun, ImportError>] {
        if path.hasSuffix(".eval") || options.format == .inspect && !path.hasSuffix(".json") {
            return try InspectImporter.runs(archive: path, budget: options.archiveBudget)
        }
        let file = try SourceFile.read(path)
        // Parsed once: detection and the importer read the same document.
        let document = try file.document()
        let format = options.format == .auto ? try detect(file, document: document) : options.format
        switch format {
        case .auto: preconditionFailure("detect never answers auto")
        case .otlp, .jaeger:
            let read = try SpanReader.spans(in: document, file: file, format: format)
            return read.noted(TraceImporter(file: file, format: format).runs(from: read.spans, grouping: options.spanGrouping))
        case .inspect:
            guard case .json(let log) = document else {
                throw ImportError(
                    .wrongFormat, "\(path) is JSON Lines, not an Inspect eval log (one JSON document)", location: SourceLocation(path: path)
                )
            }
            return try InspectImporter.runs(log: log, file: file)
        case .atif:
            guard case .json(let value) = document else {
                throw ImportError(
                    .wrongFormat, "\(path) is JSON Lines, not an ATIF trajectory (one JSON document)", location: SourceLocation(path: path))
            }
            return try ATIFImporter(file: file).runs(from: value)
        case .messages:
            let episodes = try EpisodeFinder.episodes(
                in: document, file: path, episodesPath: options.episodesPath, messagesKey: options.messagesKey)
            return episodes.map { found in
                Result { () throws(ImportError) in try TranscriptImporter(file: file, episode: try found.get()).run() }
            }
        }
    }

    /// Imports every input into `writer`'s directory.
    public static func importRuns(
        from inputs: [String], options: ImportOptions, writer: ImportWriter, progress: ((ImportOutcome.Run) -> Void)? = nil
    ) -> ImportOutcome {
        var outcome = ImportOutcome()
        var names = Set<String>()
        for input in inputs {
            do throws(ImportError) {
                try Self.forEachRun(in: input, options: options) { result in
                    var entry: ImportOutcome.Run
                    switch result {
                    case .failure(let error):
                        entry = ImportOutcome.Run(
                            input: input, sourceId: nil, format: options.format.rawValue, log: nil, steps: 0, calls: 0, stop: nil,
                            warnings: [],
                            error: error)
                    case .success(let run):
                        entry = ImportOutcome.Run(
                            input: input, sourceId: run.source.id, format: run.source.format, log: nil, steps: run.steps.count,
                            calls: run.steps.reduce(0) { $0 + $1.calls.count }, stop: run.stop?.reason, warnings: run.warnings, error: nil)
                        // Two runs of one import never share a file: a repeated name gets a number.
                        let first = ImportWriter.fileName(for: run.source)
                        var name = first
                        var number = 2
                        while !names.insert(name).inserted {
                            name = first.replacingOccurrences(of: ".jsonl.gz", with: "") + "-\(number).jsonl.gz"
                            number += 1
                        }
                        do {
                            entry.log = try writer.write(run, fileName: name)
                        } catch {
                            entry.error = error as? ImportError ?? ImportError(.writeFailed, "\(error)")
                        }
                    }
                    progress?(entry)
                    outcome.runs.append(entry)
                }
            } catch {
                outcome.failedInputs.append(error)
            }
        }
        return outcome
    }

    /// Hands each run of one file to `body` as it is read: a JSON Lines file of episodes a line at
    /// a time (memory follows the longest line), every other file after reading it whole.
    public static func forEachRun(
        in path: String, options: ImportOptions, _ body: (Result<ImportedRun, ImportError>) -> Void
    ) throws(ImportError) {
        if let stream = try EpisodeStream.open(path, options: options) {
            try stream.forEachRun(body)
            return
        }
        for run in try runs(in: path, options: options) { body(run) }
    }

    /// The format of a file (not an `.eval` archive), by its content; an error when none or
    /// several fit.
    public static func detect(_ file: SourceFile, document: SourceFile.Document) throws(ImportError) -> ImportFormat {
        var fits: [ImportFormat] = []
        switch document {
        case .json(let value):
            if ATIFImporter.version(of: value.arrayValue?.first ?? value) != nil { fits.append(.atif) }
            if value["resourceSpans"] != nil || value["batches"] != nil
                || value.arrayValue?.first.map({ $0["resourceSpans"] != nil || $0["batches"] != nil }) == true
            {
                fits.append(.otlp)
            }
            if value["data"]?.arrayValue?.first?["spans"] != nil { fits.append(.jaeger) }
            // An Inspect log holds transcripts too; its `eval` header says which it is.
            if value["eval"] != nil, value["samples"] != nil || value["version"] != nil {
                fits.append(.inspect)
            } else if (try? EpisodeFinder.episodes(in: document, file: file.path, episodesPath: nil, messagesKey: nil)) != nil {
                fits.append(.messages)
            }
        case .lines(let lines):
            if lines.allSatisfy({ $0.value["resourceSpans"] != nil || $0.value["batches"] != nil }) {
                fits.append(.otlp)
            } else if (try? EpisodeFinder.episodes(in: document, file: file.path, episodesPath: nil, messagesKey: nil)) != nil {
                fits.append(.messages)
            }
        }
        if fits.count == 1, let format = fits.first { return format }
        if fits.isEmpty {
            throw ImportError(
                .wrongFormat,
                "\(file.path) is not a format agent-eval imports: not OTLP/JSON (resourceSpans or batches), a Jaeger export (data[].spans), "
                    + "an Inspect log (eval and samples), an ATIF trajectory (schema_version ATIF-v…) or message transcripts "
                    + "(lists of chat messages)",
                location: SourceLocation(path: file.path), hint: "name the format: agent-eval import otlp|jaeger|inspect|atif|messages …")
        }
        throw ImportError(
            .ambiguousFormat, "\(file.path) could be \(fits.map(\.rawValue).joined(separator: " or "))",
            location: SourceLocation(path: file.path), hint: "name the format: agent-eval import \(fits[0].rawValue) …")
    }
}
