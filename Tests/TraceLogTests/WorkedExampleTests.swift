import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// docs/log-format.md §8's worked example, computed from the torn fixture, real gzip and the
/// repair code, so the numbers in the spec cannot go stale.
@Suite("The spec's worked example")
struct WorkedExampleTests {
    static let docs = FixtureLogs.directory.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
        "docs/log-format.md")

    static func hex(_ bytes: some Collection<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined(separator: " ") }

    static func render() async throws -> String {
        let torn = FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: torn)))
        let flush: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]
        let lastFlush = try #require((0...(bytes.count - 4)).last { Array(bytes[$0..<$0 + 4]) == flush })
        let headerLength = bytes[3] & 0x02 != 0 ? 12 : 10
        let read = try LogReader(path: torn).readAll()
        let tear = try #require(read.summary.tear)
        let inflated = try await Subprocess.run(gzipPath, ["-dc", torn]).stdout
        let partial = inflated.suffix(tear.droppedBytes)
        let partialStart = String(decoding: partial.prefix(51), as: UTF8.self)
        let test = try await Subprocess.run(gzipPath, ["-t", torn])
        let gzipSays = test.stderr.split(separator: "\n").first.map { $0.split(separator: ": ").last.map(String.init) ?? "" } ?? ""
        let complete = read.events.count

        return try await TemporaryDirectory.with { directory in
            let copy = directory.path("research-sample-torn.jsonl.gz")
            try FileManager.default.copyItem(atPath: torn, toPath: copy)
            let repair = try #require(try LogRepair.seal(path: copy))
            let sealed = [UInt8](try Data(contentsOf: URL(fileURLWithPath: copy)))
            let trailer = sealed.suffix(8)
            let crc = trailer.prefix(4).reversed().map { String(format: "%02x", $0) }.joined()
            let isize = trailer.suffix(4).reversed().reduce(0) { $0 << 8 | Int($1) }
            #expect(try await Subprocess.run(gzipPath, ["-t", copy]).status == 0)
            let number = NumberFormatter()
            number.numberStyle = .decimal
            number.locale = Locale(identifier: "en_US")
            func n(_ value: Int) -> String { number.string(from: NSNumber(value: value)) ?? "\(value)" }
            return """
                `Fixtures/samples/research-sample-torn.jsonl.gz` is a research run whose writer flushed after every event
                and was killed while writing the last one (`run_stopped`): the file is \(n(bytes.count)) bytes, one member
                that never got its trailer.

                ```
                offset 0     \(hex(bytes.prefix(headerLength)))   header: FHCRC set, MTIME 0, OS 255, CRC16
                offset \(String(headerLength).padding(toLength: 6, withPad: " ", startingAt: 0))…deflate data…
                offset \(String(lastFlush).padding(toLength: 6, withPad: " ", startingAt: 0))\(hex(flush))                            the last sync flush: seq \(complete - 1) is complete here
                offset \(String(lastFlush + 4).padding(toLength: 6, withPad: " ", startingAt: 0))…\(bytes.count - lastFlush - 4) bytes of deflate data for seq \(complete)…  (the file ends here: no final block, no trailer)
                ```

                Inflating the whole file gives \(n(inflated.count)) bytes: \(complete) complete lines (`seq` 0 to \(complete - 1)) and \(tear.droppedBytes) bytes of
                a partial line `\(partialStart)…` with no `\\n`. `gzip -t`
                fails with "\(gzipSays)". A reader returns the \(complete) events and reports the tear at
                member offset \(tear.memberOffset), last complete seq \(complete - 1), \(tear.droppedBytes) bytes dropped.

                `agent-eval log repair` then writes `research-sample-torn.jsonl.gz.seal`
                (`agent-eval seal v2 offset=\(repair.memberOffset) length=\(repair.newSize - repair.memberOffset) size=\(bytes.count) before=… torn=…` and the new member), truncates the log to \(repair.memberOffset) bytes,
                writes the new \(n(repair.newSize - repair.memberOffset))-byte member — the same \(n(isize)) bytes of \(complete) lines compressed at once, ending
                in the trailer `\(hex(trailer.prefix(4)))` (CRC-32 0x\(crc), little-endian) and `\(hex(trailer.suffix(4)))` (ISIZE \(isize))
                — fsyncs, and deletes the side file. Now `gzip -t` passes and `zcat` prints exactly the \(complete)
                complete lines.
                """
        }
    }

    @Test("the worked example of §8 is what the fixture and the code give")
    func workedExample() async throws {
        let text = try String(contentsOf: Self.docs, encoding: .utf8)
        let begin = try #require(
            text.range(
                of:
                    #"<!-- worked-example:begin (generated by the test "the worked example of §8 is what the fixture and the code give") -->"#
            ))
        let end = try #require(text.range(of: "<!-- worked-example:end -->"))
        let generated = try await Self.render()
        if FixtureLogs.isUpdating {
            try (text[..<begin.upperBound] + "\n" + generated + "\n" + text[end.lowerBound...]).write(
                to: Self.docs, atomically: true, encoding: .utf8)
        }
        let current = try String(contentsOf: Self.docs, encoding: .utf8)
        #expect(current.contains("\n" + generated + "\n<!-- worked-example:end -->"), "rewrite with AGENT_EVAL_UPDATE_FIXTURES=1")
    }
}
