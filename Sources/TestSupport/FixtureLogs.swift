public import Foundation
import TraceLog

/// The logs in `Fixtures/samples/`, and the code that writes each of them.
///
/// Every fixture is produced by this code, byte for byte (a fixed clock and a fixed gzip
/// header make the writer deterministic). `AGENT_EVAL_UPDATE_FIXTURES=1 swift test` rewrites
/// them and their expected states on purpose.
public enum FixtureLogs {
    public struct Fixture: Sendable, CustomStringConvertible {
        public let name: String
        /// Writes the fixture log to `path`.
        public let write: @Sendable (_ path: String) throws -> Void

        public var description: String { name }

        public var logFileName: String { "\(name).jsonl.gz" }
        public var stateFileName: String { "\(name).state.json" }
    }

    /// The samples but `*-v3` are version 1 logs, as agent-eval 0.3 wrote them (every line
    /// linked to the one before): logs of that version stay in the wild, and every reader reads
    /// them. The `*-v3` samples are the same runs as the writer writes them now (version 3,
    /// members linked; docs/log-format.md §3).
    public static let all: [Fixture] = [
        Fixture(name: "support-sample") { path in
            _ = try LogWriter.withWriter(creating: path, runId: "run-support-refund", options: version1) {
                try SampleRun.recordSupportRun(into: $0)
            }
        },
        Fixture(name: "research-sample") { path in
            _ = try LogWriter.withWriter(creating: path, runId: "run-research-budget", options: version1) {
                try SampleRun.recordResearchRun(into: $0)
            }
        },
        // The research run killed mid-write: the writer flushed after every event but never
        // closed its member, and the last 37 bytes never reached the disk.
        Fixture(name: "research-sample-torn") { path in
            try writeTorn(to: path, runId: "run-research-torn", formatVersion: 1)
        },
        Fixture(name: "support-sample-v3") { path in
            _ = try LogWriter.withWriter(creating: path, runId: "run-support-refund") { try SampleRun.recordSupportRun(into: $0) }
        },
        Fixture(name: "research-sample-torn-v3") { path in
            try writeTorn(to: path, runId: "run-research-torn", formatVersion: 3)
        },
    ]

    static let version1 = LogWriter.Options(formatVersion: 1)

    /// The research run, killed while it wrote its last event.
    static func writeTorn(to path: String, runId: String, formatVersion: Int) throws {
        let writer = try LogWriter.create(
            at: path, runId: runId, options: .init(durability: .init(flush: .everyEvent), formatVersion: formatVersion))
        _ = try SampleRun.recordResearchRun(into: writer)
        let size = writer.bytesWritten
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        try bytes.prefix(size - 37).write(to: URL(fileURLWithPath: path))
        // Closing would finish the member after the "crash"; the writer is dropped instead,
        // and its deinit closes a member on a file we then restore.
        withExtendedLifetime(writer) {}
        try? writer.close()
        try bytes.prefix(size - 37).write(to: URL(fileURLWithPath: path))
    }

    /// `Fixtures/samples` in the package.
    public static var directory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/samples")
    }

    /// Whether this run should rewrite the fixtures.
    public static var isUpdating: Bool {
        ProcessInfo.processInfo.environment["AGENT_EVAL_UPDATE_FIXTURES"] == "1"
    }
}
