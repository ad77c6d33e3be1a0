import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

@testable import TraceLog

@Suite("Torn, corrupt and tampered logs")
struct LogDamageTests {
    /// A multi-member log flushed after every event, with the file size after each append; of
    /// version 1 (every line linked) unless told otherwise.
    static func flushedLog(in directory: TemporaryDirectory, version: Int = 1) throws -> (
        path: String, bytes: [UInt8], lines: [[UInt8]], durableAt: [Int]
    ) {
        let path = directory.path("flushed.jsonl.gz")
        let writer = try LogWriter.create(
            at: path, runId: "run-cut", options: .init(memberBound: 700, durability: .init(flush: .everyEvent), formatVersion: version))
        let clock = SteppingClock()
        let recorder = RunRecorder(writer: writer, clock: { clock.now() })
        var durableAt: [Int] = []
        try recorder.record(.runStarted(SampleRun.supportStart()))
        durableAt.append(writer.bytesWritten)
        for step in 1...4 {
            // Packets that share their tools and earlier observations, so that some are version 2
            // delta lines and cuts fall inside those too.
            try recorder.record(
                .contextBuilt(
                    ContextBuilt(
                        goal: "g", stateSummary: "step \(step) — ünïcode",
                        observations: (1..<step).map { ItemReference(id: "obs-\($0)", summary: "seen at step \($0)") },
                        toolsDisclosed: ["lookup", "refund"], tokenEstimate: step * 10)))
            durableAt.append(writer.bytesWritten)
            try recorder.record(.decisionMade(DecisionMade(raw: "ask", outcome: .valid(.askHuman("Which order, \(step)?")))))
            durableAt.append(writer.bytesWritten)
            try recorder.endStep()
            durableAt.append(writer.bytesWritten)
        }
        try recorder.record(.runStopped(RunStopped(reason: .blocked)))
        try writer.close()
        durableAt.append(writer.bytesWritten)
        var lines: [[UInt8]] = []
        _ = try LogReader(path: path).forEachLine { line, _ in lines.append(Array(line)) }
        let deltas = lines.filter { String(decoding: $0, as: UTF8.self).contains(#""base_seq":"#) }.count
        guard deltas >= 2 else { throw LogError(.invalidEvent, "the test log should hold delta packets; it holds \(deltas)", path: path) }
        return (path, try readBytes(path), lines, durableAt)
    }

    @Test(
        "a log cut at every byte offset: a prefix of the events, never an error but when nothing is left (0 bytes); sealing makes gzip and zcat agree",
        .atScale, .tags(.scale), arguments: [1, 3])
    func cutEverywhere(version: Int) async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory, version: version)
            let memberStarts = Set(try memberOffsets(log.path))
            #expect(memberStarts.count >= 3)
            let cutPath = directory.path("cut.jsonl.gz")
            var sealed = 0
            for cut in 0..<log.bytes.count {
                // A long CPU-bound loop: let other tests' tasks run on this thread too.
                await Task.yield()
                try writeBytes(Array(log.bytes[..<cut]), to: cutPath)
                if cut == 0 {
                    // No bytes: empty, not torn; nothing to seal (the test below says more).
                    #expect { _ = try LogReader(path: cutPath).readAll() } throws: { ($0 as? LogError)?.code == .empty }
                    #expect { _ = try LogRepair.seal(path: cutPath) } throws: { ($0 as? LogError)?.code == .empty }
                    continue
                }
                var lines: [[UInt8]] = []
                let summary = try LogReader(path: cutPath).forEachLine { line, _ in lines.append(Array(line)) }
                // Exactly a prefix, and every event made durable at or before the cut is there.
                #expect(lines == Array(log.lines.prefix(lines.count)), "cut at \(cut)")
                let durable = log.durableAt.filter { $0 <= cut }.count
                #expect(lines.count >= durable, "cut at \(cut): \(lines.count) events, \(durable) durable")
                if cut > 0 && memberStarts.contains(cut) {
                    // A cut between members leaves whole members: nothing is torn.
                    #expect(summary.tear == nil, "cut at \(cut), a member boundary")
                    #expect(try LogRepair.seal(path: cutPath) == nil)
                } else {
                    #expect(summary.tear != nil, "cut at \(cut) should be reported as torn")
                    // Strict mode turns the tear into an error.
                    #expect(throws: LogError.self) {
                        _ = try LogReader(path: cutPath, options: .init(isStrict: true)).forEachEvent { _ in }
                    }
                    let report = try LogRepair.seal(path: cutPath)
                    #expect(report?.lastSequence == (lines.isEmpty ? nil : lines.count - 1))
                }
                let zcat = try await Subprocess.run(gzipPath, ["-dc", cutPath])
                #expect(zcat.status == 0, "cut at \(cut): gzip -dc failed after sealing: \(zcat.stderr)")
                let expected = lines.isEmpty ? [] : Array(lines.joined(separator: [0x0A])) + [0x0A]
                #expect(zcat.stdout == expected, "cut at \(cut): zcat prints other events than the reader returned")
                // Sealed before its first event, a log is whole gzip but holds no run.
                #expect(try LogVerifier.verify(path: cutPath).problems.map(\.code) == (lines.isEmpty ? [.noEvent] : []), "cut at \(cut)")
                sealed += 1
            }
            #expect(sealed == log.bytes.count - 1)
        }
    }

    @Test(
        "every bit flipped inside a closed member is reported at that member with its first sequence number", .atScale, .tags(.scale),
        arguments: [1, 3])
    func bitFlips(version: Int) async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory, version: version)
            let report = try LogVerifier.verify(path: log.path)
            #expect(report.members.count >= 3)
            let target = report.members[1]
            let firstSequence = try #require(target.firstSequence)
            let flippedPath = directory.path("flipped.jsonl.gz")
            var invisible = 0
            for byte in target.offset..<(target.offset + target.length) {
                await Task.yield()
                for bit in 0..<8 {
                    var bytes = log.bytes
                    bytes[byte] ^= UInt8(1 << bit)
                    try writeBytes(bytes, to: flippedPath)
                    let flipped = try LogVerifier.verify(path: flippedPath)
                    if flipped.isIntact {
                        // Only a flip in the unused padding bits after the last deflate block
                        // leaves the content unchanged; nothing can see those.
                        var lines: [[UInt8]] = []
                        _ = try LogReader(path: flippedPath).forEachLine { line, _ in lines.append(Array(line)) }
                        #expect(lines == log.lines, "byte \(byte) bit \(bit): content changed but verify saw nothing")
                        invisible += 1
                        continue
                    }
                    let problem = try #require(flipped.problems.first)
                    #expect(problem.memberOffset == target.offset, "byte \(byte) bit \(bit): \(problem)")
                    #expect(problem.sequence == firstSequence, "byte \(byte) bit \(bit): \(problem)")
                    // The events after the damage are still read and checked.
                    #expect(
                        flipped.members.contains { $0.offset > target.offset && !$0.isCorrupt },
                        "byte \(byte - target.offset) bit \(bit): \(flipped.problems) \(flipped.members)")
                }
            }
            // Each sync flush ends in an empty stored block whose up to 7 padding bits inflate
            // never reads; those are the only flips that may go unseen.
            #expect(invisible <= 7 * (target.eventCount + 1))
        }
    }

    @Test("an intact log whose events do not fit together as a run (a second stop) is intact with an anomalous_run warning at its seq")
    func anomalousRunWarned() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("two-stops.jsonl.gz")
            let (_, _, events) = try writeSampleLog(at: path)
            let clean = try LogVerifier.verify(path: path)
            #expect(clean.isIntact && clean.warnings.isEmpty, "\(clean.warnings)")
            // The chain goes on, as a writer that reopens the log links to it: no chain problem.
            let (writer, _) = try LogWriter.open(at: path)
            _ = try writer.append(.runStopped(RunStopped(reason: .success, answer: "again")), step: 9, timeUs: 99)
            try writer.close()
            let report = try LogVerifier.verify(path: path)
            #expect(report.isIntact, "\(report.problems)")
            let warning = try #require(report.warnings.first { $0.code == .anomalousRun }, "\(report.warnings)")
            #expect(warning.sequence == events.count, "\(warning)")
            #expect(warning.message.hasPrefix("the events do not fit together as a run: event \(events.count) "), "\(warning.message)")
            #expect(report.json["warnings"]?.arrayValue?.first?["seq"]?.intValue == events.count)
        }
    }

    @Test("any read buffer size gives the same events and the same findings, headers split across reads included")
    func readBufferSizes() throws {
        try TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory)
            let members = try LogVerifier.verify(path: log.path).members
            var flagged = log.bytes
            flagged[members[2].offset + 3] |= 0x04  // FEXTRA on the third member
            let flaggedPath = directory.path("flagged.jsonl.gz")
            try writeBytes(flagged, to: flaggedPath)
            for size in [1, 2, 3, 5, 7, 13, 64, 1000] {
                var lines: [[UInt8]] = []
                _ = try LogReader(path: log.path, options: .init(readBufferSize: size)).forEachLine { line, _ in
                    lines.append(Array(line))
                }
                #expect(lines == log.lines, "read buffer \(size)")
                let report = try LogVerifier.verify(path: flaggedPath, readBufferSize: size)
                #expect(report.problems.first?.code == .corruptMember, "read buffer \(size)")
                #expect(report.problems.first?.memberOffset == members[2].offset, "read buffer \(size)")
                #expect(report.problems.first?.message.contains("extra field") == true, "read buffer \(size)")
            }
        }
    }

    @Test("reads on one thread, one after another and one inside another, each read their own log whole")
    func readsShareNothing() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory)
            let other = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
            let otherLines = try await Subprocess.run(gzipPath, ["-dc", other]).stdout.split(separator: 0x0A).map { Array($0) }
            // A thread keeps its read buffers and inflaters between reads: a read started
            // inside another (here, in its callback) must get its own.
            for _ in 0..<3 {
                var lines: [[UInt8]] = []
                _ = try LogReader(path: log.path).forEachLine { line, _ in
                    lines.append(Array(line))
                    var inner: [[UInt8]] = []
                    _ = try LogReader(path: other).forEachLine { line, _ in inner.append(Array(line)) }
                    #expect(inner == otherLines)
                }
                #expect(lines == log.lines)
            }
            // A torn read, then an intact one: nothing of the first is left for the second.
            let torn = directory.path("torn.jsonl.gz")
            try writeBytes(Array(log.bytes.dropLast(7)), to: torn)
            #expect(try LogReader(path: torn).forEachEvent { _ in }.tear != nil)
            var lines: [[UInt8]] = []
            let summary = try LogReader(path: log.path).forEachLine { line, _ in lines.append(Array(line)) }
            #expect(summary.tear == nil && lines == log.lines)
        }
    }

    @Test(
        "inflating whole members (libdeflate) and streaming them (zlib) read the same events and find the same damage", .atScale,
        .tags(.scale), arguments: [1, 3])
    func wholeMemberInflateAgreesWithZlib(version: Int) async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory, version: version)
            let path = directory.path("variant.jsonl.gz")
            let whole = try LogReader(path: log.path).forEachEvent { _ in }
            let streamed = try LogReader(path: log.path, options: .init(inflatesWholeMembers: false)).forEachEvent { _ in }
            #expect(whole.memberCount >= 3 && whole.wholeMemberCount == whole.memberCount, "\(whole.memberCount) \(whole.wholeMemberCount)")
            #expect(streamed.wholeMemberCount == 0)
            func outcome(_ whole: Bool) -> String {
                var lines: [[UInt8]] = []
                do {
                    let summary = try LogReader(path: path, options: .init(inflatesWholeMembers: whole)).forEachLine { line, _ in
                        lines.append(Array(line))
                    }
                    return "\(lines.count) events \(lines.hashValue), tear \(String(describing: summary.tear))"
                } catch {
                    return "\(lines.count) events \(lines.hashValue), error \(error)"
                }
            }
            let variants = try await Self.forEachDamagedCopy(of: log.bytes, at: path) { variant in
                #expect(outcome(true) == outcome(false), "\(variant)")
            }
            #expect(variants > log.bytes.count)
        }
    }

    @Test(
        "reading ahead on a helper thread reads the same events, and finds the same damage, as reading on one thread", .atScale,
        .tags(.scale), arguments: [1, 3])
    func readAheadAgreesWithOneThread(version: Int) async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory, version: version)
            let path = directory.path("variant.jsonl.gz")
            func outcome(_ readsAhead: Bool) -> String {
                let threshold = readsAhead ? 0 : Int.max
                var lines: [[UInt8]] = []
                var read: String
                do {
                    var summary = try LogReader(path: path, options: .init(readsAheadFromBytes: threshold)).forEachLine { line, recorded in
                        lines.append(Array(line) + Array(recorded.hash.utf8))
                    }
                    summary.peakBufferBytes = 0  // the helper's queue holds a few members more
                    read = "\(lines.count) events \(lines.hashValue), \(summary)"
                } catch {
                    read = "\(lines.count) events \(lines.hashValue), error \(error)"
                }
                do {
                    var report = try LogVerifier.verify(path: path, readsAheadFromBytes: threshold)
                    report.peakBufferBytes = 0
                    return read + "; verify: \(String(describing: report))"
                } catch {
                    return read + "; verify: \(error)"
                }
            }
            let variants = try await Self.forEachDamagedCopy(of: log.bytes, at: path) { variant in
                #expect(outcome(true) == outcome(false), "\(variant)")
            }
            #expect(variants > log.bytes.count)
        }
    }

    @Test("a read that stops early while a helper thread reads ahead stops the helper and can read again")
    func readAheadStopsWithTheReader() throws {
        struct Enough: Error {}
        try TemporaryDirectory.with { directory in
            let path = directory.path("long.jsonl.gz")
            try SampleRun.writeGrowingRun(to: path, steps: 300, options: LogWriter.Options(memberBound: 4096))
            let options = LogReader.Options(readsAheadFromBytes: 0, hashesLines: true)
            let all = try LogReader(path: path, options: options).readAll()
            #expect(all.summary.memberCount > 20)
            #expect(
                all.events.map(\.hash)
                    == (try LogReader(path: path, options: .init(readsAheadFromBytes: .max, hashesLines: true)).readAll().events.map(\.hash))
            )
            for stop in [0, 1, 7, all.events.count / 2, all.events.count - 1] {
                var seen = 0
                #expect(throws: Enough.self) {
                    _ = try LogReader(path: path, options: options).forEachEvent { _ in
                        if seen == stop { throw Enough() }
                        seen += 1
                    }
                }
                #expect(seen == stop)
            }
            #expect(try LogReader(path: path, options: options).readAll().events.count == all.events.count)

            // From the start of a member in the middle, reading on to the end, both ways.
            let start = try #require(all.events.first { $0.location.memberIndex == all.summary.memberCount / 2 })
            // The link a member's first event carries: the member before's hash (version 3).
            let position = LogReader.Position(
                memberOffset: start.location.memberOffset, memberIndex: start.location.memberIndex, sequence: start.event.sequence,
                previousHash: try #require(start.event.previousHash), runId: start.event.runId)
            var hashes: [Bool: [String]] = [:]
            for (readsAhead, threshold) in [(true, 0), (false, Int.max)] {
                try LogReader(path: path, options: .init(readsAheadFromBytes: threshold, hashesLines: true)).forEachEvent(
                    from: position, readsAhead: readsAhead
                ) {
                    hashes[readsAhead, default: []].append($0.hash)
                    return true
                }
            }
            #expect(hashes[true] == hashes[false])
            #expect(hashes[true] == all.events.filter { $0.event.sequence >= start.event.sequence }.map(\.hash))
        }
    }

    /// Writes to `path` each cut of `bytes` (at every offset) and each copy with one bit
    /// flipped (in every third byte), calling `check` with what was done to each; returns how
    /// many copies were checked.
    static func forEachDamagedCopy(of bytes: [UInt8], at path: String, _ check: (String) -> Void) async throws -> Int {
        var variants = 0
        for cut in 0...bytes.count {
            await Task.yield()
            try writeBytes(Array(bytes[..<cut]), to: path)
            check("cut at \(cut)")
            variants += 1
        }
        for byte in stride(from: 0, to: bytes.count, by: 3) {
            await Task.yield()
            var flipped = bytes
            flipped[byte] ^= UInt8(1 << (byte % 8))
            try writeBytes(flipped, to: path)
            check("bit \(byte % 8) of byte \(byte) flipped")
            variants += 1
        }
        return variants
    }

    /// Recompresses edited lines with the real gzip into a one-member log.
    static func gzipLines(_ lines: [[UInt8]], to path: String) async throws {
        let text = Array(lines.joined(separator: [0x0A])) + [0x0A]
        let result = try await Subprocess.run(gzipPath, ["-c", "-n"], input: text)
        #expect(result.status == 0)
        try writeBytes(result.stdout, to: path)
    }

    @Test("an edited event is reported at its sequence number")
    func editedEvent() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory)
            var lines = log.lines
            let text = String(decoding: lines[5], as: UTF8.self)
            lines[5] = Array(text.replacingOccurrences(of: "\"ask\"", with: "\"ASK\"").utf8)
            #expect(lines[5] != log.lines[5])
            let path = directory.path("edited.jsonl.gz")
            try await Self.gzipLines(lines, to: path)
            let report = try LogVerifier.verify(path: path)
            #expect(report.problems.count == 1)
            #expect(report.problems.first?.code == .brokenChain)
            #expect(report.problems.first?.sequence == 5)
            #expect(throws: LogError.self) { _ = try LogReader(path: path).readAll() }
        }
    }

    @Test("a removed event is reported as a gap at the missing sequence number")
    func removedEvent() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory)
            var lines = log.lines
            lines.remove(at: 7)
            let path = directory.path("removed.jsonl.gz")
            try await Self.gzipLines(lines, to: path)
            let report = try LogVerifier.verify(path: path)
            #expect(report.problems.map(\.code) == [.sequenceGap])
            #expect(report.problems.first?.sequence == 7)
        }
    }

    @Test("a duplicated event is reported as a repeat of its sequence number")
    func duplicatedEvent() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory)
            var lines = log.lines
            lines.insert(lines[4], at: 5)
            let path = directory.path("duplicated.jsonl.gz")
            try await Self.gzipLines(lines, to: path)
            let report = try LogVerifier.verify(path: path)
            #expect(report.problems.map(\.code) == [.sequenceRepeat])
            #expect(report.problems.first?.sequence == 4)
        }
    }

    @Test("a line that is not JSON, and an unknown envelope version, are reported")
    func invalidLines() async throws {
        try await TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory)
            var lines = log.lines
            lines[3] = Array("{\"v\":1,\"seq\":3,".utf8)
            lines[8] = Array(String(decoding: lines[8], as: UTF8.self).replacingOccurrences(of: "{\"v\":1,", with: "{\"v\":5,").utf8)
            let path = directory.path("invalid.jsonl.gz")
            try await Self.gzipLines(lines, to: path)
            let report = try LogVerifier.verify(path: path)
            let codes = report.problems.map(\.code)
            #expect(codes.contains(.invalidEvent))
            #expect(codes.contains(.unsupportedVersion))
            #expect(report.problems.first { $0.code == .invalidEvent }?.sequence == 3)
            #expect(report.problems.first { $0.code == .unsupportedVersion }?.sequence == 8)
            // The lines that are not events are problems, not events read.
            #expect(report.eventCount == log.lines.count - 2)
            #expect(report.members.reduce(0) { $0 + $1.eventCount } == report.eventCount)

            // A line of prose, and JSON that is not an object, are named for what they are.
            lines[3] = Array("this is not an event".utf8)
            lines[5] = Array("[1,2]".utf8)
            try await Self.gzipLines(lines, to: path)
            let messages = try LogVerifier.verify(path: path).problems.filter { $0.code == .invalidEvent }.map(\.message)
            #expect(messages.count == 2)
            #expect(messages.first?.contains("invalid JSON at byte 0: expected 'true', found 'this'") == true, "\(messages)")
            #expect(messages.last?.contains("an event must be a JSON object, found an array") == true, "\(messages)")
            // An event after white space is still an event (its changed bytes break the chain).
            let spaced = try Event(line: [0x20] + log.lines[6])
            #expect(spaced == (try Event(line: log.lines[6])))
        }
    }

    @Test("repair refuses a corrupt middle and leaves the file untouched")
    func repairRefusesCorruptMiddle() throws {
        try TemporaryDirectory.with { directory in
            let log = try Self.flushedLog(in: directory)
            let members = try memberOffsets(log.path)
            var bytes = log.bytes
            bytes[members[1] + 20] ^= 0x10
            let path = directory.path("corrupt.jsonl.gz")
            try writeBytes(Array(bytes.dropLast(5)), to: path)
            #expect {
                try LogRepair.seal(path: path)
            } throws: { error in
                guard let error = error as? LogError else { return false }
                return error.code == .notRepairable && error.message.contains("other damage")
            }
            #expect(try readBytes(path) == Array(bytes.dropLast(5)))
        }
    }

    @Test("corruption at the end of a torn log is not a tear: repair never seals a changed event or a stray byte as intact")
    func corruptionIsNotATear() throws {
        try TemporaryDirectory.with { directory in
            let torn = FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path
            let original = try LogReader(path: torn).readAll().events.map(\.hash)
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: torn)))
            var refused = 0
            // Every bit flip in the last stretch of the torn member: either repair refuses, or
            // what it seals is exactly the original's complete events.
            for offset in (bytes.count - 120)..<bytes.count {
                var flipped = bytes
                flipped[offset] ^= 0x01
                let path = directory.path("flip-\(offset).jsonl.gz")
                try Data(flipped).write(to: URL(fileURLWithPath: path))
                do {
                    _ = try LogRepair.seal(path: path)
                } catch let error as LogError {
                    #expect(error.code == .notRepairable || error.code == .corruptMember, "offset \(offset): \(error.message)")
                    #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(flipped), "a refused repair leaves the file as it was")
                    refused += 1
                    continue
                }
                let sealed = try LogReader(path: path, options: .init(isStrict: true)).readAll().events.map(\.hash)
                #expect(original.starts(with: sealed), "offset \(offset): the sealed log holds an event the original did not")
            }
            #expect(refused > 0)

            // A stray byte after a complete log: damage, not a tear, and repair refuses it.
            let complete = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
            let stray = directory.path("stray.jsonl.gz")
            try (try Data(contentsOf: URL(fileURLWithPath: complete)) + Data([0x78])).write(to: URL(fileURLWithPath: stray))
            let report = try LogVerifier.verify(path: stray)
            #expect(report.tear == nil)
            #expect(report.problems.map(\.code) == [.corruptMember])
            #expect(throws: LogError.self) { _ = try LogRepair.seal(path: stray) }
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: stray)).count == (try Data(contentsOf: URL(fileURLWithPath: complete))).count + 1)
            // The first bytes of a new member's header cut short are a tear, as before.
            let cut = directory.path("cut.jsonl.gz")
            try (try Data(contentsOf: URL(fileURLWithPath: complete)) + Data([0x1F, 0x8B])).write(to: URL(fileURLWithPath: cut))
            #expect(try LogVerifier.verify(path: cut).tear != nil)
        }
    }

    @Test(
        "a flipped bit near the end of a complete log's last member that still inflates is damage, not a tear: the partial line is no JSON start"
    )
    func aFlipThatStillInflatesIsNotATear() throws {
        try TemporaryDirectory.with { directory in
            // Found by flipping every bit of the samples' last members: these inflate without an
            // error to the stop event followed by garbage (version 3), and to a member name
            // followed by what is no colon (version 1), with no gzip trailer reached.
            for (sample, fromEnd, bit) in [("support-sample-v3.jsonl.gz", 11, 3), ("support-sample.jsonl.gz", 20, 6)] {
                var bytes = [UInt8](try Data(contentsOf: FixtureLogs.directory.appendingPathComponent(sample)))
                bytes[bytes.count - fromEnd] ^= 1 << bit
                let path = directory.path("flipped-\(sample)")
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                let report = try LogVerifier.verify(path: path)
                #expect(report.tear == nil, "\(sample)")
                #expect(report.problems.map(\.code) == [.corruptMember], "\(sample)")
                #expect(
                    report.problems.first?.message.contains("damaged, not cut off: the partial line is not the start of a JSON object")
                        == true,
                    "\(report.problems.first?.message ?? "")")
                #expect(throws: LogError.self) { _ = try LogReader(path: path).readAll() }
                #expect(throws: LogError.self) { _ = try LogRepair.seal(path: path) }
                #expect(try readBytes(path) == bytes, "a refused repair leaves the file as it was")
            }
        }
    }

    /// Lines as given, chained and gzipped by the real gzip: a log another writer could write.
    func foreignLog(_ lines: [String], lineEnding: String = "\n", in directory: TemporaryDirectory) async throws -> String {
        var previous = ContentHash.genesis
        var text = ""
        for (sequence, template) in lines.enumerated() {
            let line = template.replacingOccurrences(of: "PREV", with: previous).replacingOccurrences(of: "SEQ", with: "\(sequence)")
            previous = ContentHash.sha256Hex(Array(line.utf8))
            text += line + lineEnding
        }
        let plain = directory.path("foreign-\(UUID().uuidString).jsonl")
        try text.write(toFile: plain, atomically: true, encoding: .utf8)
        #expect(try await Subprocess.run(gzipPath, ["-n", plain]).status == 0)
        return plain + ".gz"
    }

    static let started =
        #"{"v":1,"run":"r","seq":SEQ,"step":0,"time_us":1,"kind":"run_started","prev":"PREV","data":{"agent":{"config_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","name":"a"},"goal":"g","model":{"name":"m","provider":"p"},"policy":{"name":"p"}}}"#
    static func ended(step: Int) -> String {
        #"{"v":1,"run":"r","seq":SEQ,"step":\#(step),"time_us":2,"kind":"step_ended","prev":"PREV","data":{"state_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}}"#
    }

    @Test(
        "what the spec forbids is rejected with the place: a first event other than run_started, a step that goes down, CRLF, a prev not in hex form"
    )
    func specEnforced() async throws {
        try await TemporaryDirectory.with { directory in
            let good = try await foreignLog([Self.started, Self.ended(step: 0), Self.ended(step: 1)], in: directory)
            #expect(try LogVerifier.verify(path: good).isIntact)
            func problems(_ path: String) throws -> [String] { try LogVerifier.verify(path: path).problems.map(\.message) }
            #expect(
                try await problems(try foreignLog([Self.ended(step: 0), Self.started], in: directory)).contains {
                    $0 == "the first event must be run_started (or pipeline_started), but seq 0 is step_ended"
                })
            #expect(
                try await problems(try foreignLog([Self.started, Self.ended(step: 2), Self.ended(step: 1)], in: directory)).contains {
                    $0 == "event seq 2 goes back to step 1 after step 2: steps never decrease"
                })
            #expect(
                try await problems(try foreignLog([Self.started, Self.ended(step: 0)], lineEnding: "\r\n", in: directory)).contains {
                    $0.contains("ends with a carriage return")
                })
            let upper = try await foreignLog(
                [Self.started, Self.ended(step: 0).replacingOccurrences(of: #""prev":"PREV""#, with: #""prev":"ABC""#)], in: directory)
            #expect(try problems(upper).contains { $0 == #"event seq 1 has prev "ABC", which is not 64 lowercase hex digits"# })
            // The strict reader stops at the first of them too.
            #expect(throws: LogError.self) { _ = try LogReader(path: upper).readAll() }
        }
    }

    @Test("an event of another run is named, and a run id or prev written with escapes is the same string")
    func runIdsAndLinksAsWritten() async throws {
        try await TemporaryDirectory.with { directory in
            let other = try await foreignLog(
                [Self.started, Self.ended(step: 0), Self.ended(step: 1).replacingOccurrences(of: #""run":"r""#, with: #""run":"s""#)],
                in: directory)
            let report = try LogVerifier.verify(path: other)
            #expect(report.problems.map(\.code) == [.runMismatch])
            #expect(report.problems.first?.message == #"event seq 2 belongs to run "s", but this log is run "r""#)
            // The reader hands each event the run id and link it expects when the bytes are
            // those; written with escapes, they must still read as the same strings.
            let first = Self.started.replacingOccurrences(of: "SEQ", with: "0").replacingOccurrences(of: "PREV", with: ContentHash.genesis)
            let link = ContentHash.sha256Hex(Array(first.utf8))
            let escapedLink = String(format: "\\u%04x", Int(link.utf8.first ?? 0)) + link.dropFirst()
            let second = Self.ended(step: 0).replacingOccurrences(of: "SEQ", with: "1")
                .replacingOccurrences(of: #""run":"r""#, with: #""run":"\u0072""#)
                .replacingOccurrences(of: "PREV", with: escapedLink)
            let third = Self.ended(step: 1).replacingOccurrences(of: "SEQ", with: "2")
                .replacingOccurrences(of: "PREV", with: ContentHash.sha256Hex(Array(second.utf8)))
            let escaped = try await foreignLog([first, second, third], in: directory)
            #expect(try LogVerifier.verify(path: escaped).isIntact)
            let events = try LogReader(path: escaped).readAll().events
            #expect(events.map(\.event.runId) == ["r", "r", "r"])
        }
    }

    static let zeroDigest = "sha256:" + String(repeating: "0", count: 64)

    @Test(
        "the writer never writes what its reader rejects: no first event but run_started, no step going down, no nesting past the limit, no malformed hash"
    )
    func writerRefuses() throws {
        try TemporaryDirectory.with { directory in
            #expect {
                try LogWriter.withWriter(creating: directory.path("a.jsonl.gz"), runId: "r") { writer in
                    _ = try writer.append(.stepEnded(StepEnded(stateDigest: "sha256:00")), step: 0, timeUs: 1)
                }
            } throws: { ($0 as? LogError)?.message == "the first event of a log must be run_started (or pipeline_started), not step_ended" }
            let path = directory.path("b.jsonl.gz")
            var deep: JSONValue = 1
            for _ in 0..<600 { deep = .array([deep]) }
            try LogWriter.withWriter(creating: path, runId: "r") { writer in
                try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 0)
                try writer.append(.stepEnded(StepEnded(stateDigest: Self.zeroDigest)), step: 2, timeUs: 1)
                #expect(throws: LogError.self) {
                    try writer.append(.stepEnded(StepEnded(stateDigest: Self.zeroDigest)), step: 1, timeUs: 2)
                }
                #expect {
                    try writer.append(.stepEnded(StepEnded(stateDigest: "sha256:00")), step: 2, timeUs: 3)
                } throws: {
                    ($0 as? LogError)?.message
                        == #"event seq 2 (step_ended) has data.state_digest "sha256:00", which is not a hash ("sha256:" and 64 lowercase hex digits), so it is not written"#
                }
                #expect {
                    try writer.append(
                        .toolIntended(ToolIntended(callId: "c", tool: "t", arguments: deep, attempt: 1)), step: 2, timeUs: 3)
                } throws: { ($0 as? LogError)?.message.contains("nests 513+ levels deep") == true }
                // A measure the reader refuses (docs/log-format.md §2) is not written either: an
                // import of a time before 1970, or a count that is no count, would be a log
                // nothing can read.
                let refused: [(EventPayload, Int, String)] = [
                    (.stepEnded(StepEnded(stateDigest: Self.zeroDigest)), -1, "time_us -1"),
                    (.stepEnded(StepEnded(stateDigest: Self.zeroDigest)), JSONScanner.maximumMeasure + 1, "time_us 9007199254740992"),
                    (
                        .decisionMade(DecisionMade(raw: "", outcome: .valid(.answer("a")), usage: TokenUsage(input: 5, output: -2))), 3,
                        "data.usage.output -2"
                    ),
                    (
                        .decisionMade(DecisionMade(raw: "", outcome: .valid(.answer("a")), latencyUs: Int.max)), 3,
                        "data.latency_us \(Int.max)"
                    ),
                    (
                        .toolCompleted(ToolCompleted(callId: "c", tool: "t", attempt: 1, status: .ok, output: nil, durationUs: -5)), 3,
                        "data.duration_us -5"
                    ),
                ]
                for (payload, time, named) in refused {
                    #expect {
                        try writer.append(payload, step: 2, timeUs: time)
                    } throws: {
                        ($0 as? LogError)?.message
                            == "event seq 2 (\(payload.kind)) has \(named), which is not a whole number from 0 to 9007199254740991 (2^53 − 1), "
                            + "so it is not written: readers refuse it"
                    }
                }
            }
            // What was refused was not written: the log reads back whole and intact.
            #expect(try LogVerifier.verify(path: path).isIntact)
            #expect(try LogReader(path: path).readAll().events.count == 2)
        }
    }

    @Test("a file that is not gzip is unreadable, not damaged")
    func notGzip() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("plain.jsonl")
            try writeBytes(Array("{\"v\":1}\n".utf8), to: path)
            #expect { _ = try LogVerifier.verify(path: path) } throws: { ($0 as? LogError)?.code == .notGzip }
            #expect { _ = try LogReader(path: path).readAll() } throws: { ($0 as? LogError)?.code == .notGzip }
        }
    }

    @Test("a folder given as a log is said to be a folder, by the reader and the verifier, not a failed read")
    func folder() throws {
        try TemporaryDirectory.with { directory in
            @Sendable func isFolder(_ error: any Error) -> Bool {
                guard let error = error as? LogError else { return false }
                return error.code == .unreadable && error.message == "this is a folder, not a log"
                    && error.hint?.contains(".jsonl.gz") == true
            }
            #expect(performing: { _ = try LogReader(path: directory.url.path).readAll() }, throws: isFolder)
            #expect(performing: { _ = try LogVerifier.verify(path: directory.url.path) }, throws: isFolder)
        }
    }

    @Test("a file of 0 bytes is empty, not a member cut off: the reader, the verifier and repair say so, and nothing is written")
    func emptyFile() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("empty.jsonl.gz")
            try writeBytes([], to: path)
            @Sendable func isEmpty(_ error: any Error) -> Bool {
                guard let error = error as? LogError else { return false }
                return error.code == .empty && error.message == "the file is empty (0 bytes): it holds no gzip member and no event"
                    && !"\(error.message) \(error.hint ?? "")".contains("repair")
            }
            #expect(performing: { _ = try LogReader(path: path).readAll() }, throws: isEmpty)
            #expect(performing: { _ = try LogReader(path: path, options: .init(isStrict: true)).readAll() }, throws: isEmpty)
            #expect(performing: { _ = try LogReader(path: path).firstEvent() }, throws: isEmpty)
            #expect(performing: { _ = try LogVerifier.verify(path: path) }, throws: isEmpty)
            #expect(performing: { _ = try LogRepair.seal(path: path) }, throws: isEmpty)
            #expect(try readBytes(path).isEmpty, "repair left the file as it was")
        }
    }

    @Test("a log cut before its first event is complete holds no run: the verifier says so once and does not offer repair")
    func cutBeforeTheFirstEvent() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("cut.jsonl.gz")
            let source = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
            let head = try await Subprocess.run("/usr/bin/env", ["head", "-c", "40", source])
            #expect(head.status == 0)
            try writeBytes(Array(head.stdout), to: path)
            let read = try LogReader(path: path).readAll()
            #expect(read.events.isEmpty)
            #expect(read.summary.tear?.lastSequence == nil)
            let report = try LogVerifier.verify(path: path)
            #expect(report.problems.map(\.code) == [.noEvent])
            #expect(
                report.problems.first?.message
                    == "no event could be read: the file (40 bytes) ends inside the gzip member at byte 0, before its first event was complete"
            )
            let hint = report.problems.first?.hint ?? ""
            #expect(!hint.contains("repair"), "\(hint)")
            #expect(report.ending == .torn)
            // Sealed, it is whole gzip again, and still holds no run.
            #expect(try LogRepair.seal(path: path)?.eventsKept == 0)
            #expect(try await Subprocess.run(gzipPath, ["-t", path]).status == 0)
            #expect(
                try LogVerifier.verify(path: path).problems.map(\.message) == [
                    "the log holds no event: its gzip members are whole but hold no line, and a log starts with run_started"
                ])
        }
    }

    @Test(
        "a member typed hash that is not sha256: and 64 lowercase hex digits is rejected, naming the event and the field",
        arguments: [
            ("config_digest", "data.agent.config_digest", "sha256:" + String(repeating: "0", count: 63)),
            ("digest", "data.policy.digest", "sha256:" + String(repeating: "ABCDEF0123456789", count: 4)),
            ("state_digest", "data.state_digest", String(repeating: "0", count: 64)),
            ("hash", "data.hash", "sha256:" + String(repeating: "g", count: 64)),
            ("prompt_hash", "data.prompt_hash", "SHA256:" + String(repeating: "0", count: 64)),
            ("content_hash", "data.content_hash", "sha256:" + String(repeating: "0", count: 65)),
        ])
    func malformedHash(member: String, fieldPath: String, value: String) async throws {
        try await TemporaryDirectory.with { directory in
            // A real log, its JSON edited where the member first appears, compressed again by gzip.
            let source = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
            let zcat = try await Subprocess.run(gzipPath, ["-dc", source])
            var lines = zcat.stdout.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
            let index = try #require(lines.firstIndex { $0.contains("\"\(member)\":\"sha256:") })
            let start = try #require(lines[index].range(of: "\"\(member)\":\"sha256:"))
            let hash = lines[index][start.upperBound...].prefix { $0 != "\"" }
            #expect(hash.count == 64)
            lines[index].replaceSubrange(
                start.lowerBound..<lines[index].index(start.upperBound, offsetBy: 64), with: "\"\(member)\":\"\(value)")
            let path = directory.path("edited.jsonl.gz")
            try await Self.gzipLines(lines.map { Array($0.utf8) }, to: path)

            let expected =
                "line \(index + 1) (expected seq \(index)) is not a valid event: \(fieldPath) must be a hash, "
                + "\"sha256:\" and 64 lowercase hex digits, found \"\(value)\""
            let problems = try LogVerifier.verify(path: path).problems
            #expect(problems.first?.code == .invalidEvent, "\(problems)")
            #expect(problems.first?.message == expected)
            #expect(problems.first?.sequence == index)
            #expect { _ = try LogReader(path: path).readAll() } throws: { ($0 as? LogError)?.message == expected }
            // The same line with its hash as written reads.
            #expect(try Event(line: Array(zcat.stdout.split(separator: 0x0A)[index])).sequence == index)
        }
    }
}

@Suite("Crash-safe sealing")
struct SealRecoveryTests {
    /// The torn fixture, sealed: the sealed bytes, the member the seal wrote, and a side file as
    /// a seal writes it before it touches the log.
    func sealedFixture(in directory: TemporaryDirectory) throws -> (torn: [UInt8], sealed: [UInt8], sideFile: [UInt8], offset: Int) {
        let torn = try readBytes(FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path)
        let reference = directory.path("reference.jsonl.gz")
        try writeBytes(torn, to: reference)
        let report = try #require(try LogRepair.seal(path: reference))
        let sealed = try readBytes(reference)
        let member = Array(sealed[report.memberOffset...])
        let offset = report.memberOffset
        let before = ContentHash.sha256Hex(torn[max(0, offset - LogRepair.bindingWindow)..<offset])
        let header = LogRepair.sideFileHeader(
            offset: offset, length: member.count, size: torn.count, before: before, torn: ContentHash.sha256Hex(torn[offset...]))
        return (torn, sealed, Array(header.utf8) + member, offset)
    }

    @Test("a seal interrupted after truncating the log is finished from its side file, and says so; readers see it is pending")
    func interruptedSeal() throws {
        try TemporaryDirectory.with { directory in
            let (torn, sealed, sideFile, offset) = try sealedFixture(in: directory)
            // The crash: side file written and synced, log truncated, new member not yet written.
            let crashed = directory.path("crashed.jsonl.gz")
            try writeBytes(Array(torn[..<offset]), to: crashed)
            try writeBytes(sideFile, to: crashed + ".seal")
            #expect(try LogVerifier.verify(path: crashed).problems.first?.code == .pendingSeal)
            #expect { _ = try LogReader(path: crashed).readAll() } throws: { ($0 as? LogError)?.code == .pendingSeal }

            let report = try #require(try LogRepair.seal(path: crashed))
            #expect(report.finishedInterruptedSeal)
            #expect(report.lastSequence == 22)
            #expect(try readBytes(crashed) == sealed)
            #expect(!FileManager.default.fileExists(atPath: crashed + ".seal"))
            #expect(try LogVerifier.verify(path: crashed).isIntact)

            // Killed before truncating: the torn tail is still there; the seal is finished too.
            let early = directory.path("early.jsonl.gz")
            try writeBytes(torn, to: early)
            try writeBytes(sideFile, to: early + ".seal")
            let (writer, _) = try LogWriter.open(at: early)
            try writer.close()
            #expect(Array(try readBytes(early).prefix(sealed.count)) == sealed)
        }
    }

    @Test("a side file is applied only to the log it was made for: a planted one is ignored with a warning and nothing is changed")
    func plantedSideFile() throws {
        try TemporaryDirectory.with { directory in
            let (_, _, sideFile, _) = try sealedFixture(in: directory)
            let intact = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
            let victim = directory.path("victim.jsonl.gz")
            try writeBytes(try readBytes(intact), to: victim)
            // Another log's seal, an old unbound one, one with bytes after its member, and garbage.
            let planted: [[UInt8]] = [
                sideFile, Array("agent-eval seal v1 offset=0 length=2\n".utf8) + [0x1F, 0x8B], sideFile + [0],
                Array("not a side file at all".utf8), Array(repeating: 0x41, count: 5000),
            ]
            for side in planted {
                try writeBytes(side, to: victim + ".seal")
                #expect(try LogRepair.seal(path: victim) == nil)
                #expect(try readBytes(victim) == (try readBytes(intact)))
                #expect(try readBytes(victim + ".seal") == side, "kept as evidence")
                #expect(LogRepair.straySeal(of: victim)?.code == .straySeal)
                let report = try LogVerifier.verify(path: victim)
                #expect(report.isIntact)
                #expect(report.warnings.map(\.code) == [.straySeal])
                #expect(try LogReader(path: victim).readAll().events.count == 27)
                // A writer continuing the log leaves it too.
                let (writer, repair) = try LogWriter.open(at: victim)
                try writer.close()
                #expect(repair == nil)
                #expect(try readBytes(victim + ".seal") == side)
                try writeBytes(try readBytes(intact), to: victim)
            }
        }
    }

    @Test("an incomplete side file is dropped and the log sealed from scratch")
    func incompleteSideFile() async throws {
        try await TemporaryDirectory.with { directory in
            let torn = FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path
            let path = directory.path("torn.jsonl.gz")
            try writeBytes(try readBytes(torn), to: path)
            try writeBytes(
                Array(LogRepair.sideFileHeader(offset: 0, length: 9999, size: 1, before: "x", torn: "y").utf8) + [0x1F, 0x8B],
                to: path + ".seal")
            let report = try #require(try LogRepair.seal(path: path))
            #expect(report.lastSequence == 22)
            #expect(!report.finishedInterruptedSeal)
            #expect(try await Subprocess.run(gzipPath, ["-t", path]).status == 0)
            #expect(!FileManager.default.fileExists(atPath: path + ".seal"))
        }
    }
}

@Suite("Redaction's quick test")
struct RedactorSearchTests {
    @Test("a line holds a needle wherever it sits: at the start, at the end, after a false start, or not at all")
    func needlesAnywhere() {
        let redactor = Redactor(environmentNames: ["TOKEN"], memberNames: ["password"], environment: ["TOKEN": "s3cr3t-value"])
        let hits = [
            "s3cr3t-value", "xx s3cr3t-value", "s3s3cr3t-valuex", "{\"password\":1}", "ends with sk-", "Bearer ",
            "\\\"password\\\":", "ss3cr3t-values3cr3t-valu s3cr3t-value",
        ]
        let misses = ["", "s", "s3cr3t-valu", "3cr3t-value", "password", "{\"passwor\":1}", "sk", "Bearer", "S3CR3T-VALUE"]
        for line in hits { #expect(redactor.mayRedact(Array(line.utf8)), "\(line)") }
        for line in misses { #expect(!redactor.mayRedact(Array(line.utf8)), "\(line)") }
    }
}
