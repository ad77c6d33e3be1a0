import Foundation
import TestSupport
import TraceCore
import TraceLog

/// Writes the sample support run to a new log and returns the file's bytes and the events.
func writeSampleLog(
    at path: String, options: LogWriter.Options = LogWriter.Options()
) throws -> (state: RunState, bytes: [UInt8], events: [RecordedEvent]) {
    let state = try LogWriter.withWriter(creating: path, runId: "run-sample", options: options) { writer in
        try SampleRun.recordSupportRun(into: writer)
    }
    let bytes = try readBytes(path)
    let events = try LogReader(path: path).readAll().events
    return (state, bytes, events)
}

func readBytes(_ path: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path)))
}

func writeBytes(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// The offsets of gzip members our writer wrote, found by decoding, not by guessing.
func memberOffsets(_ path: String) throws -> [Int] {
    let report = try LogVerifier.verify(path: path)
    return report.members.map(\.offset)
}
