import CProcess
import Foundation
public import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A process as a later process can recognise it: its pid, when it started (the pid alone may
/// have been given to another process since) and the boot of the machine it ran on. Written
/// beside work that a crash may leave running (a pipeline's command task), so that whoever
/// continues the work can tell whether the earlier process still runs.
///
/// ```swift
/// if let identity = ProcessIdentity(pid: child.pid) { try identity.write(to: path) }
/// // later, in another process:
/// if let earlier = ProcessIdentity.read(from: path), let pid = earlier.survivor() { … }
/// ```
public struct ProcessIdentity: Sendable, Hashable {
    public var pid: Int32
    /// When it started, in the platform's unit (Linux: clock ticks after boot, field 22 of
    /// /proc/<pid>/stat; macOS: microseconds after the epoch).
    public var startTime: UInt64
    /// Linux's boot id (/proc/sys/kernel/random/boot_id); empty elsewhere. No process of an
    /// earlier boot runs.
    public var boot: String

    public init(pid: Int32, startTime: UInt64, boot: String) {
        self.pid = pid
        self.startTime = startTime
        self.boot = boot
    }

    /// Process `pid` (a zombie too: a child that ended and is not yet reaped); nil when there is none.
    public init?(pid: Int32) {
        let start = cprocess_start_time(pid)
        guard start != 0 else { return nil }
        self.init(pid: pid, startTime: start, boot: Self.currentBoot)
    }

    /// This boot's id.
    public static let currentBoot: String = {
        #if os(Linux)
            (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        #else
            ""
        #endif
    }()

    /// A process of it that still runs: itself, or — the process dead — one of the process
    /// group it led that started no earlier than it (what it started and left behind); nil
    /// when none does.
    public func survivor() -> Int32? {
        guard boot == Self.currentBoot else { return nil }
        if cprocess_is_running(pid) != 0 && cprocess_start_time(pid) == startTime { return pid }
        let member = cprocess_group_member(pid, startTime)
        return member == 0 ? nil : member
    }

    /// `{"boot": …, "pid": …, "start_time": …}`.
    public var json: JSONValue {
        ["pid": .int(Int(pid)), "start_time": .int(Int(clamping: startTime)), "boot": .string(boot)]
    }

    public init?(json: JSONValue) {
        guard let pid = json["pid"]?.intValue, let start = json["start_time"]?.intValue, let pid32 = Int32(exactly: pid), start > 0
        else { return nil }
        self.init(pid: pid32, startTime: UInt64(start), boot: json["boot"]?.stringValue ?? "")
    }

    /// Writes the identity to `path` (one JSON line). Not synced to disk: it only matters while
    /// the process may run, and no process outlives the machine's power.
    public func write(to path: String) throws(Failure) {
        let bytes = JSONWriter.encode(json) + [0x0A]
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure(message: "cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { writeDescriptor(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw Failure(message: "cannot write \(path): \(String(cString: strerror(errno)))") }
    }

    /// The identity written at `path`; nil when there is none or it cannot be read.
    public static func read(from path: String) -> ProcessIdentity? {
        guard let data = FileManager.default.contents(atPath: path), let value = try? JSONParser.parse(Array(data)) else { return nil }
        return ProcessIdentity(json: value)
    }

    public struct Failure: Error, Sendable {
        public var message: String
    }
}

/// `write(2)`, under a name no method shadows.
private func writeDescriptor(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { write(fd, bytes, count) }
