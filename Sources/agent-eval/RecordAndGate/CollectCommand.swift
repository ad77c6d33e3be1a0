import AgentRuntime
import ArgumentParser
import Foundation
import Interop
import Recording
import TraceCore
import TraceLog

/// `agent-eval collect --listen ADDR --out DIR`: an OTLP/HTTP receiver that turns each trace
/// it is sent into a log.
struct CollectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "collect",
        abstract: "Receive OpenTelemetry traces over OTLP/HTTP and write one log per trace as they arrive.",
        discussion: """
            Point an instrumented agent's exporter here (OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318, \
            protocol http/protobuf or http/json, gzip or not) and every trace it sends becomes an ordinary log, \
            read by the same mapping as `agent-eval import otlp`: the GenAI semantic conventions, OpenLLMetry's \
            and OpenInference's attributes. Every request's spans are on disk (DIR/spans/TRACE.otlp.jsonl, \
            fsynced) before the exporter is answered 200, so a collector killed at any moment loses no span \
            it acknowledged; a trace's log (DIR/TRACE.jsonl.gz) is written once no span of it has come for \
            --settle seconds, again whole if more come later, and for every open trace when the collector \
            stops (SIGINT or SIGTERM) or starts again on the same DIR. docs/interop.md, "Collecting traces live".

            Bodies larger than --max-body (or that inflate to more) are answered 413 without being kept in \
            memory; a body that is not an OTLP trace request is answered 400 with the reason. One trace keeps at most \
            --max-trace bytes of spans: past it its spans are refused (the request's other traces keep theirs; 413 \
            when nothing is kept), and its log says how many requests were refused.

            Exit codes: 0 stopped by SIGINT or SIGTERM after writing every open trace's log; 1 stopped, but \
            some trace's log could not be written (each is named); 2 the address cannot be listened on, or DIR \
            cannot be created; 64 usage error.

            Examples:
              agent-eval collect --out runs/collected
              agent-eval collect --listen :0 --json      # a free port, printed
              OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python3 agent.py
            """
    )

    @Option(help: ArgumentHelp("The address to listen on: HOST:PORT, :PORT or PORT (port 0: a free one).", valueName: "address"))
    var listen = "127.0.0.1:4318"

    @Option(help: ArgumentHelp("Where the logs go (and the spans kept for them, under spans/).", valueName: "dir"))
    var out = "runs/collected"

    @Option(help: ArgumentHelp("The largest request body taken, in bytes (K, M and G suffixes: KiB, MiB, GiB).", valueName: "size"))
    var maxBody = "20M"

    @Option(
        help: ArgumentHelp(
            "The most bytes of spans kept for one trace (K, M and G suffixes): its spans past it are refused (413 when a request keeps nothing), and the trace's log says how many.",
            valueName: "size"))
    var maxTrace = "64M"

    @Option(help: ArgumentHelp("How long a trace stays open after its last span came.", valueName: "seconds"))
    var settle: Double = 2

    @Flag(help: "Print JSON Lines on standard output: where it listens, each log written, the summary at the end.")
    var json = false

    func validate() throws {
        guard Self.address(listen) != nil else {
            throw ValidationError("--listen takes HOST:PORT, :PORT or PORT (0-65535); \"\(listen)\" is none")
        }
        guard Self.bytes(maxBody) != nil else {
            throw ValidationError("--max-body takes a size in bytes, more than 0 (20M, 512K, 1048576); \"\(maxBody)\" is none")
        }
        guard Self.bytes(maxTrace) != nil else {
            throw ValidationError("--max-trace takes a size in bytes, more than 0 (64M, 512K, 1048576); \"\(maxTrace)\" is none")
        }
        guard settle >= 0, settle <= 86_400 else { throw ValidationError("--settle takes a number of seconds, from 0 to 86400 (a day)") }
    }

    /// `HOST:PORT`, `:PORT` or `PORT`.
    static func address(_ text: String) -> (host: String, port: Int)? {
        let host: String
        let portText: Substring
        if let colon = text.lastIndex(of: ":") {
            host = text[..<colon].isEmpty ? "127.0.0.1" : String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            portText = text[text.index(after: colon)...]
        } else {
            host = "127.0.0.1"
            portText = Substring(text)
        }
        guard let port = Int(portText), (0...65535).contains(port) else { return nil }
        return (host, port)
    }

    /// A size with an optional K, M or G suffix (binary multiples), as `--max-archive-bytes` reads it.
    static func bytes(_ text: String) -> Int? {
        ArchiveBudget.byteCount(text).flatMap { $0 > 0 ? $0 : nil }
    }

    func run() async throws {
        guard let (host, port) = Self.address(listen), let maxBytes = Self.bytes(maxBody), let maxTraceBytes = Self.bytes(maxTrace) else {
            throw Exit.usage
        }
        let collector = TraceCollector(
            directory: out, settleUs: Int(settle * 1_000_000), maxTraceBytes: maxTraceBytes,
            now: RuntimeEnvironment.live.now)
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: out, isDirectory: &isFolder), !isFolder.boolValue {
            throw diagnose(CommandError("unwritable", "--out \(out) is a file, not a directory", hint: "choose a directory for the logs"))
        }
        let collection: TraceCollection
        do {
            collection = try TraceCollection(collector: collector, settleSeconds: settle)
        } catch {
            // The code collect has always given a folder it cannot write (`unwritable`).
            throw diagnose(CommandError("unwritable", error.message, hint: error.hint))
        }
        var finished: [TraceCollector.Finished] = []
        // Traces a collector before this one kept but did not write.
        let recovered = await collection.recover()
        Self.show(recovered, json: json)
        finished += recovered
        let receiver = collection.receiver(maxRequestBytes: maxBytes)
        let server: TraceServer
        do {
            server = try await TraceServer(host: host, port: port, receiver: receiver)
        } catch {
            throw diagnose(error)
        }
        announce(endpoint: "http://\(host.contains(":") ? "[\(host)]" : host):\(server.port)")
        // Settled traces are written as the collector runs; a signal ends the wait.
        let json = self.json
        let (settled, _) = try await withInterruption { await collection.collect { Self.show($0, json: json) } }
        finished += settled
        await server.stop()
        let last = await collection.finishAll()
        Self.show(last, json: json)
        finished += last
        if summarize(finished, received: receiver.received) > 0 { throw Exit.failure }
    }

    /// Says where the collector listens: a line and the environment variable to set, or JSON.
    private func announce(endpoint: String) {
        if json {
            printJSON([
                "event": "listening", "endpoint": .string(endpoint), "traces": .string(endpoint + "/v1/traces"), "out": .string(out),
            ])
            fflush(nil)
        } else {
            printError("collecting OpenTelemetry traces at \(endpoint)/v1/traces (OTLP/HTTP) into \(displayPath(out)); Ctrl-C stops")
            printError("hint: OTEL_EXPORTER_OTLP_ENDPOINT=\(endpoint)")
        }
    }

    /// Says what the collector did once it stopped; returns the number of traces it could not write.
    private func summarize(_ finished: [TraceCollector.Finished], received counts: TraceReceiver.Counts) -> Int {
        let written = finished.count { $0.log != nil }
        let failed = finished.count - written
        if json {
            printJSON([
                "event": "stopped", "requests": .int(counts.requests), "spans": .int(counts.spans), "refused": .int(counts.refused),
                "unidentified": .int(counts.unidentified), "logs": .int(written), "failed": .int(failed),
            ])
        } else {
            printError(
                "collected \(counted(counts.spans, "span")) in \(counted(counts.requests, "request")) (\(counts.refused) refused"
                    + (counts.unidentified > 0 ? ", \(counts.unidentified) left out for want of ids" : "") + "); "
                    + "\(counted(written, "log")) written"
                    + (failed > 0 ? ", \(failed) failed" : ""))
        }
        fflush(nil)
        return failed
    }

    /// Says which logs were written: a line each on standard error, or JSON Lines.
    static func show(_ finished: [TraceCollector.Finished], json: Bool) {
        for trace in finished {
            if json {
                printJSON(["event": "log", "trace": trace.json])
            } else if let log = trace.log {
                let stop = trace.stop.map { ", \($0.rawValue)" } ?? ", no stop"
                let warnings = trace.warnings.isEmpty ? "" : " (\(counted(trace.warnings.count, "warning")))"
                printError(
                    "trace \(trace.traceId): \(counted(trace.spans, "span")) → \(displayPath(log)): "
                        + "\(counted(trace.steps, "step")), \(counted(trace.calls, "call"))\(stop)" + warnings)
            } else {
                printError("error: trace \(trace.traceId) could not be written: \(trace.error?.message ?? "unknown")")
            }
        }
        fflush(nil)
    }
}
