import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

@testable import TraceLog

/// Context packets written as deltas (format version 2): whole again on reading, checked
/// against their base, and a log that grows with a run's length rather than its square.
@Suite("Delta context packets")
struct ContextDeltaTests {
    static func lines(of path: String) async throws -> [String] {
        let text = try await Subprocess.run(gzipPath, ["-dc", path])
        return text.stdoutText.split(separator: "\n").map(String.init)
    }

    @Test("packets come back whole and in order, across members; without resolving, the fold is the same as for whole packets")
    func roundTrip() async throws {
        try await TemporaryDirectory.with { directory in
            let deltas = directory.path("deltas.jsonl.gz")
            let whole = directory.path("whole.jsonl.gz")
            let packets = try SampleRun.writeGrowingRun(to: deltas, steps: 120, options: LogWriter.Options(memberBound: 4096))
            try SampleRun.writeGrowingRun(to: whole, steps: 120, options: LogWriter.Options(memberBound: 4096, writesContextDeltas: false))

            // Real gzip reads it; most packets are version 2 deltas, some are whole again.
            #expect(try await Subprocess.run(gzipPath, ["-t", deltas]).status == 0)
            let packetLines = try await Self.lines(of: deltas).filter { $0.contains(#""kind":"context_built""#) }
            let deltaLines = packetLines.filter { $0.hasPrefix(#"{"v":3,"#) && $0.contains(#""base_seq":"#) }
            #expect(deltaLines.count > 100)
            #expect(packetLines.count - deltaLines.count >= 2, "whole packets are written again as deltas add up")
            #expect(try await Self.lines(of: whole).allSatisfy { $0.hasPrefix(#"{"v":3,"#) })

            let resolved = try LogReader(path: deltas, options: LogReader.Options(resolvesContextPackets: true)).readAll()
            #expect(resolved.summary.memberCount > 3)
            let read = resolved.events.compactMap { if case .contextBuilt(let packet) = $0.event.payload { packet } else { nil } }
            #expect(read == packets)

            let plain = try LogReader(path: deltas).readAll().events.map(\.event)
            #expect(plain.contains { if case .contextBuilt(let packet) = $0.payload { packet.delta != nil } else { false } })
            let wholeEvents = try LogReader(path: whole).readAll().events.map(\.event)
            #expect(RunState(folding: plain) == RunState(folding: wholeEvents))
            #expect(RunState(folding: plain).digest == RunState(folding: wholeEvents).digest)
            #expect(try LogVerifier.verify(path: deltas).isIntact)
            // The independent reader makes the same packets whole and folds to the same state.
            let python = try #require(Subprocess.which("python3"), "python3 is needed for the reference reader")
            let verified = try JSONParser.parse(try await Subprocess.run(python, [ConformanceTests.reference, "verify", deltas]).stdout)
            #expect(verified["intact"] == true)
            #expect(verified["state_digest"] == .string(RunState(folding: plain).digest))
            #expect(FileManager.default.sizeOfFile(deltas) < FileManager.default.sizeOfFile(whole))
        }
    }

    @Test("the bytes per step stay flat as the run grows: 100 steps and 800 steps", .atScale, .tags(.scale))
    func linearGrowth() async throws {
        try await TemporaryDirectory.with { directory in
            func jsonlBytesPerStep(_ steps: Int, deltas: Bool) async throws -> Double {
                let path = directory.path("run-\(steps)-\(deltas).jsonl.gz")
                try SampleRun.writeGrowingRun(to: path, steps: steps, options: LogWriter.Options(writesContextDeltas: deltas))
                return Double(try await Self.lines(of: path).reduce(0) { $0 + $1.utf8.count + 1 }) / Double(steps)
            }
            let short = try await jsonlBytesPerStep(100, deltas: true)
            let long = try await jsonlBytesPerStep(800, deltas: true)
            #expect(long < short * 1.5, "\(short) → \(long) bytes per step")
            // Whole packets grow with the run: the same 8× longer run takes far more per step.
            #expect(try await jsonlBytesPerStep(800, deltas: false) > 4 * (try jsonlBytesPerStep(100, deltas: false)))
        }
    }

    @Test("edits rebuild any list from any base, and copy what the lists share")
    func editsRebuildLists() throws {
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<500 {
            let base = (0..<Int(generator.next() % 30)).map { _ in "item-\(generator.next() % 12)" }
            var list = base
            for _ in 0..<Int(generator.next() % 6) {
                switch generator.next() % 3 {
                case 0: list.insert("new-\(generator.next() % 50)", at: list.isEmpty ? 0 : Int(generator.next() % UInt64(list.count)))
                case 1: if !list.isEmpty { list.remove(at: Int(generator.next() % UInt64(list.count))) }
                default: list.reverse()
                }
            }
            let edits = ListEdit.edits(from: base, to: list)
            #expect(try ListEdit.apply(edits, to: base, name: "tools_disclosed", baseSequence: 0) == list)
            let items = edits.filter { if case .item = $0 { true } else { false } }.count
            #expect(items <= list.filter { !base.contains($0) }.count + list.count / 2 + 1)
        }
        let shifted = ListEdit<String>.edits(from: ["a", "b", "c", "d"], to: ["x", "b", "c", "d", "e"])
        #expect(shifted == [ListEdit<String>.item("x"), .copy(start: 1, count: 3), .item("e")])
    }

    @Test("a delta that builds on another packet, or copies past its base, is named with its seq and field")
    func damagedDeltas() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            // Version 1: its lines are edited one by one below, each linked to the one before.
            try SampleRun.writeGrowingRun(to: path, steps: 12, options: LogWriter.Options(formatVersion: 1))
            let lines = try await Self.lines(of: path)
            let index = try #require(lines.firstIndex { $0.contains(#""base_seq":"#) && $0.contains(#""observations":[[0,"#) })
            let event = try Event(line: Array(lines[index].utf8))
            guard case .contextBuilt(let packet) = event.payload, let delta = packet.delta else {
                Issue.record("no delta at line \(index + 1)")
                return
            }

            func verify(_ edited: String) throws -> [LogError] {
                var changed = lines
                changed[index] = edited
                let damaged = directory.path("damaged-\(UUID().uuidString).jsonl.gz")
                let text = Array(changed.joined(separator: "\n").utf8) + [0x0A]
                try Data(try text.withUnsafeBytes { try gzipMember($0) }).write(to: URL(fileURLWithPath: damaged))
                return try LogVerifier.verify(path: damaged).problems.filter { $0.code == .invalidEvent }
            }
            let wrongBase = try verify(
                lines[index].replacingOccurrences(
                    of: #""base_seq":\#(delta.baseSequence),"#, with: #""base_seq":\#(delta.baseSequence - 2),"#))
            #expect(wrongBase.count == 1)
            #expect(wrongBase.first?.sequence == event.sequence)
            #expect(
                wrongBase.first?.message.contains(
                    "is a delta on seq \(delta.baseSequence - 2), but the packet before it is seq \(delta.baseSequence)") == true)

            let pastTheEnd = try verify(lines[index].replacingOccurrences(of: #""observations":[[0,"#, with: #""observations":[[90,"#))
            #expect(pastTheEnd.count == 1)
            let message = pastTheEnd.first?.message ?? ""
            #expect(message.contains("data.observations[0] copies") && message.contains("from item 90 of the base packet"), "\(message)")

            // In a version 1 line, base_seq is a member this version does not define: ignored.
            let whole = try #require(lines.first { $0.hasPrefix(#"{"v":1,"#) && $0.contains(#""kind":"context_built""#) })
            let version1 = try Event(line: Array(whole.replacingOccurrences(of: #""data":{"#, with: #""data":{"base_seq":1,"#).utf8))
            guard case .contextBuilt(let asRead) = version1.payload else {
                Issue.record("not a packet")
                return
            }
            #expect(asRead.delta == nil)
            #expect(asRead == SampleRun.growingPacket(step: 1))
        }
    }
}

extension ContextDeltaTests {
    @Test("a packet's one-line summary names the first five omitted items and counts the rest")
    func summaryOfALongPacket() {
        let packet = SampleRun.growingPacket(step: 40)
        let summary = EventPayload.contextBuilt(packet).summary
        #expect(
            summary.contains(
                "omitted tool:delete (policy), call-35 (budget), call-34 (budget), call-33 (budget), call-32 (budget) … and 31 more"))
        let short = EventPayload.contextBuilt(SampleRun.growingPacket(step: 7)).summary
        #expect(short.hasSuffix("omitted tool:delete (policy), call-2 (budget), call-1 (budget)"))
    }
}

extension ContextDeltaTests {
    @Test("random bases and copy ranges, chain intact: never a crash; what verify accepts is always made whole", .atScale, .tags(.scale))
    func mutatedDeltas() async throws {
        try await TemporaryDirectory.with { directory in
            let original = directory.path("run.jsonl.gz")
            // Version 1: its lines are relinked one by one below.
            try SampleRun.writeGrowingRun(to: original, steps: 30, options: LogWriter.Options(formatVersion: 1))
            let events = try LogReader(path: original).readAll().events.map(\.event)
            let deltas = events.indices.filter {
                if case .contextBuilt(let packet) = events[$0].payload { packet.delta != nil } else { false }
            }
            #expect(deltas.count > 10)
            var generator = SeededGenerator(seed: 16)
            let values = [-1, 0, 1, 2, 3, 7, 40, 1 << 31, Int.max - 1, Int.max]
            var accepted = 0
            var rejected = 0
            for round in 0..<200 {
                var mutated = events
                let index = deltas[Int(generator.next() % UInt64(deltas.count))]
                guard case .contextBuilt(var packet) = mutated[index].payload, var delta = packet.delta else { continue }
                let value = values[Int(generator.next() % UInt64(values.count))]
                switch generator.next() % 3 {
                case 0: delta.baseSequence = value
                case 1:
                    if let at = delta.omitted.firstIndex(where: { if case .copy = $0 { true } else { false } }),
                        case .copy(let start, _) = delta.omitted[at]
                    {
                        delta.omitted[at] = .copy(start: start, count: value)
                    }
                default:
                    if let at = delta.observations.firstIndex(where: { if case .copy = $0 { true } else { false } }),
                        case .copy(_, let count) = delta.observations[at]
                    {
                        delta.observations[at] = .copy(start: value, count: count)
                    }
                }
                packet.delta = delta
                mutated[index].payload = .contextBuilt(packet)
                // The chain recomputed, so only the packet's own checks can find the change.
                var text: [UInt8] = []
                var previous = ContentHash.genesis
                for var event in mutated {
                    event.previousHash = previous
                    let line = event.encodedLine()
                    previous = ContentHash.sha256Hex(line)
                    text += line + [0x0A]
                }
                let path = directory.path("mutated-\(round).jsonl.gz")
                try Data(try text.withUnsafeBytes { try gzipMember($0) }).write(to: URL(fileURLWithPath: path))
                let report = try LogVerifier.verify(path: path)
                if round.isMultiple(of: 10) {
                    // The independent reader comes to the same verdict.
                    let python = try #require(Subprocess.which("python3"), "python3 is needed for the reference reader")
                    let found = try JSONParser.parse(try await Subprocess.run(python, [ConformanceTests.reference, "verify", path]).stdout)
                    #expect(found["intact"] == .bool(report.isIntact), "round \(round): \(report.problems)")
                }
                if report.isIntact {
                    accepted += 1
                    let whole = try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).readAll().events
                    #expect(whole.allSatisfy { if case .contextBuilt(let packet) = $0.event.payload { packet.delta == nil } else { true } })
                } else {
                    rejected += 1
                    #expect(
                        report.problems.contains { $0.code == .invalidEvent && $0.sequence == mutated[index].sequence },
                        "\(report.problems)")
                    #expect(throws: LogError.self) { try LogReader(path: path).readAll() }
                }
                try FileManager.default.removeItem(atPath: path)
            }
            #expect(accepted > 0 && rejected > 50, "accepted \(accepted), rejected \(rejected)")
        }
    }
}

extension FileManager {
    fileprivate func sizeOfFile(_ path: String) -> Int {
        ((try? attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }
}

extension ContextDeltaTests {
    /// A packet with its strings left empty, as a reader that keeps no packet text gives it.
    static func withoutText(_ packet: ContextBuilt) -> ContextBuilt {
        func blank(_ items: [ItemReference]) -> [ItemReference] {
            items.map { ItemReference(id: "", summary: $0.summary.map { _ in "" }, contentHash: $0.contentHash.map { _ in "" }) }
        }
        func blank(_ edits: [ListEdit<ItemReference>]) -> [ListEdit<ItemReference>] {
            edits.map { if case .item(let item) = $0 { .item(blank([item])[0]) } else { $0 } }
        }
        var blanked = packet
        blanked.goal = ""
        blanked.stateSummary = ""
        blanked.promptHash = packet.promptHash.map { _ in "" }
        blanked.observations = blank(packet.observations)
        blanked.evidence = blank(packet.evidence)
        blanked.memory = blank(packet.memory)
        blanked.toolsDisclosed = packet.toolsDisclosed.map { _ in "" }
        blanked.omitted = packet.omitted.map { OmittedItem(id: "", reason: $0.reason, detail: $0.detail.map { _ in "" }) }
        if var delta = packet.delta {
            delta.observations = blank(delta.observations)
            delta.evidence = blank(delta.evidence)
            delta.memory = blank(delta.memory)
            delta.toolsDisclosed = delta.toolsDisclosed.map { if case .item = $0 { .item("") } else { $0 } }
            delta.omitted = delta.omitted.map {
                if case .item(let item) = $0 {
                    .item(OmittedItem(id: "", reason: item.reason, detail: item.detail.map { _ in "" }))
                } else {
                    $0
                }
            }
            blanked.delta = delta
        }
        return blanked
    }

    @Test("a reader that keeps no packet text gives the same events but the packets' strings, the same fold, and the same errors")
    func packetsWithoutText() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path("run.jsonl.gz")
            try SampleRun.writeGrowingRun(to: path, steps: 30, options: LogWriter.Options(memberBound: 4096))
            let full = try LogReader(path: path).readAll()
            let lean = try LogReader(path: path, options: .init(keepsPacketText: false)).readAll()
            #expect(lean.summary == full.summary)
            #expect(lean.events.count == full.events.count)
            var packets = 0
            for (read, expected) in zip(lean.events, full.events) {
                #expect(read.hash == expected.hash && read.location == expected.location)
                if case .contextBuilt(let packet) = expected.event.payload {
                    packets += 1
                    var blanked = expected.event
                    blanked.payload = .contextBuilt(Self.withoutText(packet))
                    #expect(read.event == blanked, "seq \(expected.event.sequence)")
                } else {
                    #expect(read.event == expected.event, "seq \(expected.event.sequence)")
                }
            }
            #expect(packets == 30)
            let state = RunState(folding: lean.events.map(\.event))
            #expect(state == RunState(folding: full.events.map(\.event)))
            #expect(state.digest == RunState(folding: full.events.map(\.event)).digest)

            // Damage inside a packet's strings, or in its shape, stops both readers at the same
            // event with the same message.
            let lines = try await Self.lines(of: path).map { Array($0.utf8) }
            let index = try #require(
                lines.firstIndex {
                    let line = String(decoding: $0, as: UTF8.self)
                    return line.contains(#""base_seq":"#) && line.contains(#""observations":[["#) && line.contains(#""reason":"budget""#)
                })
            func damaged(_ edit: (String) -> String) -> [UInt8] { Array(edit(String(decoding: lines[index], as: UTF8.self)).utf8) }
            let goal = #""goal":"Summarise the incident.""#
            var variants: [(String, [UInt8])] = [
                ("a number for a string", damaged { $0.replacingOccurrences(of: goal, with: #""goal":5"#) }),
                ("an unknown escape", damaged { $0.replacingOccurrences(of: goal, with: #""goal":"Summarise \q""#) }),
                ("a control character", damaged { $0.replacingOccurrences(of: goal, with: "\"goal\":\"Summarise\u{01}\"") }),
                (
                    "a copy past the base",
                    damaged {
                        $0.replacingOccurrences(
                            of: #""observations":\[\[[0-9]+,"#, with: #""observations":[[90,"#, options: .regularExpression)
                    }
                ),
                (
                    "an omission reason no version knows",
                    damaged { $0.replacingOccurrences(of: #""reason":"budget""#, with: #""reason":"b""#) }
                ),
            ]
            // Bytes that are not UTF-8 inside a string.
            let text = String(decoding: lines[index], as: UTF8.self)
            let at = try #require(text.range(of: "Summarise")).lowerBound.utf16Offset(in: text)
            var invalid = lines[index]
            invalid[at] = 0xC3
            invalid[at + 1] = 0x28
            variants.append(("invalid UTF-8", invalid))
            for (name, line) in variants {
                var edited = lines
                edited[index] = line
                let log = directory.path("damaged.jsonl.gz")
                try? FileManager.default.removeItem(atPath: log)
                try await LogDamageTests.gzipLines(edited, to: log)
                func firstError(keepsPacketText: Bool) -> String {
                    do {
                        _ = try LogReader(path: log, options: .init(keepsPacketText: keepsPacketText)).forEachEvent { _ in }
                        return "no error"
                    } catch {
                        return "\(error)"
                    }
                }
                let expected = firstError(keepsPacketText: true)
                #expect(expected != "no error", "\(name)")
                #expect(firstError(keepsPacketText: false) == expected, "\(name)")
            }
        }
    }
}

extension ContextDeltaTests {
    /// A `context_built` line of format version 2 with `data` as given.
    static func version2Line(_ data: String) -> [UInt8] {
        let zeros = String(repeating: "0", count: 64)
        return Array(
            #"{"v":2,"run":"r","seq":5,"step":1,"time_us":1,"kind":"context_built","prev":"\#(zeros)","data":\#(data)}"#.utf8)
    }

    @Test(
        "a version 2 packet's lists: a whole packet's items as items, a copy without base_seq named where it is, a delta's items and copies in order"
    )
    func version2Lists() throws {
        let item = #"{"id":"a","summary":"s"}"#
        let whole =
            #"{"goal":"g","observations":[\#(item),{"id":"b"}],"omitted":null,"state_summary":"x","token_estimate":3,"tools_disclosed":["t"]}"#
        for keepsText in [true, false] {
            let event = try Self.version2Line(whole).withUnsafeBytes {
                try Event(line: $0, runId: nil, previousHash: nil, keepsPacketText: keepsText)
            }
            guard case .contextBuilt(let packet) = event.payload else {
                Issue.record("not a packet")
                return
            }
            #expect(packet.delta == nil)
            #expect(packet.observations.map(\.id) == (keepsText ? ["a", "b"] : ["", ""]))
            #expect(packet.observations.map(\.summary) == (keepsText ? ["s", nil] : ["", nil]))
            #expect(packet.toolsDisclosed == (keepsText ? ["t"] : [""]))
            #expect(packet.omitted.isEmpty && packet.tokenEstimate == 3)
        }

        // A copy in a packet with no base: named by its list and the place of its first copy.
        // The lists are looked at in a fixed order (observations before evidence), not in the
        // line's (members in byte order: evidence first).
        let copying = #"{"evidence":[\#(item),\#(item),[0,1],[0,1]],"goal":"g","state_summary":"x","token_estimate":3}"#
        #expect {
            try Event(line: Self.version2Line(copying))
        } throws: { error in
            let message = "\(error)"
            return message.contains("copies from a base packet, but the packet has no base_seq") && message.contains("evidence[2]")
                && !message.contains("evidence[3]")
        }
        let copyingTwice = copying.replacingOccurrences(of: #""goal""#, with: #""observations":[[0,1]],"goal""#)
        #expect {
            try Event(line: Self.version2Line(copyingTwice))
        } throws: { error in
            "\(error)".contains("observations[0]") && !"\(error)".contains("evidence")
        }

        // A delta: items before, between and after copies, in the order written, read the same
        // whether its text is kept or not; a copy is checked as any.
        let delta =
            #"{"base_seq":2,"goal":"g","memory":[\#(item),{"id":"b"},[1,2],{"id":"c"},[0,1]],"state_summary":"x","token_estimate":3}"#
        for keepsText in [true, false] {
            let event = try Self.version2Line(delta).withUnsafeBytes {
                try Event(line: $0, runId: nil, previousHash: nil, keepsPacketText: keepsText)
            }
            guard case .contextBuilt(let packet) = event.payload, let edits = packet.delta else {
                Issue.record("not a delta")
                return
            }
            let (a, b, c) =
                keepsText
                ? (ItemReference(id: "a", summary: "s"), ItemReference(id: "b"), ItemReference(id: "c"))
                : (ItemReference(id: "", summary: ""), ItemReference(id: ""), ItemReference(id: ""))
            #expect(edits.baseSequence == 2)
            #expect(edits.memory == [.item(a), .item(b), .copy(start: 1, count: 2), .item(c), .copy(start: 0, count: 1)])
            #expect(edits.observations.isEmpty && packet.memory.isEmpty)
        }
        #expect {
            try Event(line: Self.version2Line(delta.replacingOccurrences(of: "[1,2]", with: "[1,0]")))
        } throws: { error in
            "\(error)".contains("must be a copy [start, count] with start ≥ 0 and count ≥ 1") && "\(error)".contains("memory[2]")
        }
    }
}
