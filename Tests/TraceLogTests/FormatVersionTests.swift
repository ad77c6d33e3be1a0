import Foundation
import TestSupport
import Testing
import TraceCore

@testable import TraceLog

/// Version 3 (the hash chain links gzip members) beside version 1 (it links lines): what each
/// writer writes, what a reader proves of it, and the rewrite from one to the other.
@Suite("Log format versions")
struct FormatVersionTests {
    static var v1Sample: String { FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path }

    /// Each member's lines, as read.
    static func members(_ path: String) throws -> [[[UInt8]]] {
        var members: [[[UInt8]]] = []
        _ = try LogReader(path: path).forEachLine { line, recorded in
            if recorded.location.memberIndex == members.count { members.append([]) }
            members[members.count - 1].append(Array(line))
        }
        return members
    }

    /// Writes members of lines as gzip members, one each, in order.
    static func write(_ members: [[[UInt8]]], to path: String) throws {
        var file: [UInt8] = []
        for member in members {
            var text: [UInt8] = []
            for line in member { text += line + [0x0A] }
            file += try text.withUnsafeBytes { try gzipMember($0) }
        }
        try writeBytes(file, to: path)
    }

    @Test("a version 3 log links each member to the one before by the hash of its lines, and the stop begins a member of its own")
    func memberChain() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("v3.jsonl.gz")
            _ = try LogWriter.withWriter(creating: path, runId: "run-v3") { try SampleRun.recordSupportRun(into: $0) }
            let members = try Self.members(path)
            var previous = ContentHash.genesis
            for member in members {
                let events = try member.map { try Event(line: $0) }
                #expect(events.allSatisfy { $0.version == 3 })
                #expect(events.first?.previousHash == previous)
                #expect(events.dropFirst().allSatisfy { $0.previousHash == nil })
                previous = ContentHash.sha256Hex(member.flatMap { $0 + [0x0A] })
            }
            // Every stop (the approval stop, and the last) is alone in its member.
            for member in members {
                let kinds = try member.map { try Event(line: $0).kind }
                if kinds.contains("run_stopped") { #expect(kinds == ["run_stopped"]) }
            }
            #expect(members.count == 4)
            // Without the line hashes the chain needs no more: a read gives them only when asked.
            #expect(try LogReader(path: path).readAll().events.allSatisfy { $0.hash.isEmpty })
            let hashed = try LogReader(path: path, options: .init(hashesLines: true)).readAll().events
            #expect(hashed.allSatisfy { $0.hash == ContentHash.sha256Hex($0.event.encodedLine()) })
            // The same run as version 1 is larger by its links.
            let v1 = directory.path("v1.jsonl.gz")
            _ = try LogWriter.withWriter(creating: v1, runId: "run-v3", options: .init(formatVersion: 1)) {
                try SampleRun.recordSupportRun(into: $0)
            }
            let sizes = (try readBytes(path).count, try readBytes(v1).count)
            #expect(sizes.0 < sizes.1 * 9 / 10, "\(sizes)")
        }
    }

    @Test("a writer that opens a log to continue it keeps the log's version, and a torn version 3 log is sealed and linked on")
    func reopeningKeepsTheVersion() throws {
        try TemporaryDirectory.with { directory in
            for version in [1, 3] {
                let path = directory.path("resumed-\(version).jsonl.gz")
                let writer = try LogWriter.create(
                    at: path, runId: "run-resumed", options: .init(durability: .init(flush: .everyEvent), formatVersion: version))
                let clock = SteppingClock()
                let recorder = RunRecorder(writer: writer, clock: { clock.now() })
                try recorder.record(.runStarted(SampleRun.supportStart()))
                try recorder.endStep()
                try recorder.record(.decisionMade(DecisionMade(raw: "ask", outcome: .valid(.askHuman("Which order?")))))
                try recorder.endStep()
                // Killed mid-event: the member is left open, the last bytes never written.
                let size = writer.bytesWritten
                withExtendedLifetime(writer) {}
                try? writer.close()
                let bytes = try readBytes(path)
                try writeBytes(Array(bytes.prefix(size - 9)), to: path)
                #expect(try LogReader(path: path).readAll().summary.tear != nil)

                let (reopened, repair) = try LogWriter.open(at: path)
                #expect(repair != nil)
                #expect(reopened.linksMembers == (version == 3))
                try reopened.append(.runStopped(RunStopped(reason: .success, answer: "done")), step: 2, timeUs: clock.now())
                try reopened.close()
                let report = try LogVerifier.verify(path: path)
                #expect(report.isIntact, "version \(version): \(report.problems)")
                #expect(report.ending == .complete)
                let versions = Set(try LogReader(path: path).readAll().events.map(\.event.version))
                #expect(versions == (version == 3 ? [3] : [1]))
            }
        }
    }

    @Test("a signed version 3 log: a signature covers its member's lines before it, and an edit of the stop's member is caught")
    func signedMembers() throws {
        try TemporaryDirectory.with { directory in
            let keyPath = directory.path("key")
            try LogSigner.generateKeyFiles(at: keyPath)
            let key = try LogVerificationKey(keyFile: keyPath + ".pub")
            let log = directory.path("signed.jsonl.gz")
            let options = LogWriter.Options(signer: try LogSigner(keyFile: keyPath))
            _ = try LogWriter.withWriter(creating: log, runId: "run-signed", options: options) { try SampleRun.recordSupportRun(into: $0) }
            #expect(try LogVerifier.verify(path: log, key: key).isIntact)

            // The last member (the stop and its final signature) is covered by no later link: an
            // edit recompressed with a good CRC is intact to the chain, not to the key.
            var members = try Self.members(log)
            let last = members.count - 1
            members[last][0] = Array(
                String(decoding: members[last][0], as: UTF8.self).replacingOccurrences(
                    of: #""reason":"success""#, with: #""reason":"blocked""#
                )
                .utf8)
            let edited = directory.path("edited.jsonl.gz")
            try Self.write(members, to: edited)
            #expect(try LogVerifier.verify(path: edited).isIntact)
            let problems = try LogVerifier.verify(path: edited, key: key).problems
            #expect(
                problems.contains { $0.code == .badSignature && $0.message.contains("does not cover the event before it") }, "\(problems)")
        }
    }

    @Test("a read from a member that stops inside a later member checks the link that covers what it read (version 3)")
    func positionedReadsCheckTheirLink() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("long.jsonl.gz")
            try SampleRun.writeGrowingRun(to: path, steps: 40, options: LogWriter.Options(memberBound: 2048))
            var members = try Self.members(path)
            #expect(members.count > 6)
            let all = try LogReader(path: path).readAll().events
            let start = try #require(all.first { $0.location.memberIndex == 3 })
            // Each copy below is recompressed, its members where they were: member 3 starts at
            // the same offset in both.
            let original = directory.path("original.jsonl.gz")
            try Self.write(members, to: original)
            let position = LogReader.Position(
                memberOffset: try memberOffsets(original)[3], memberIndex: 3, sequence: start.event.sequence,
                previousHash: try #require(start.event.previousHash), runId: start.event.runId)
            // Stop in the middle of member 4: its events are covered by member 5's link.
            let inside = try #require(all.filter { $0.location.memberIndex == 4 }.dropFirst(2).first).event.sequence
            func readToTheMiddle(_ log: String, stopsAtOnce: Bool = false) throws -> Int {
                var read = 0
                try LogReader(path: log).forEachEvent(from: position, stopsAtOnce: stopsAtOnce) { recorded in
                    guard recorded.event.sequence < inside else { return false }
                    read += 1
                    return true
                }
                return read
            }
            #expect(try readToTheMiddle(original) == inside - start.event.sequence)

            // The last line of member 4 changed (its bytes are never decoded by that read), the
            // members recompressed one by one: the read finds it at member 5's link.
            let last = members[4].count - 1
            members[4][last] = Array(String(decoding: members[4][last], as: UTF8.self).replacingOccurrences(of: "step", with: "stop").utf8)
            let edited = directory.path("edited.jsonl.gz")
            try Self.write(members, to: edited)
            #expect(try memberOffsets(edited)[3] == position.memberOffset)
            #expect { try readToTheMiddle(edited) } throws: { ($0 as? LogError)?.code == .brokenChain }
            // Asked to stop at once, it does not look further.
            #expect(try readToTheMiddle(edited, stopsAtOnce: true) == inside - start.event.sequence)
        }
    }

    @Test("upgrade rewrites a version 1 log as version 3: the same events and digests, fewer bytes, and the old log untouched")
    func upgrade() throws {
        try TemporaryDirectory.with { directory in
            let old = directory.path("old.jsonl.gz")
            try FileManager.default.copyItem(atPath: Self.v1Sample, toPath: old)
            let before = try readBytes(old)
            let new = directory.path("new.jsonl.gz")
            let report = try LogUpgrade.upgrade(from: old, to: new)
            #expect(try readBytes(old) == before)
            #expect(report.sourceVersion == 2 && report.destinationVersion == 3, "the sample holds delta packets: version 2 lines")
            #expect(report.destinationBytes < report.sourceBytes)
            let resolved = LogReader.Options(resolvesContextPackets: true)
            let was = try LogReader(path: old, options: resolved).readAll().events.map(\.event)
            let now = try LogReader(path: new, options: resolved).readAll().events.map(\.event)
            #expect(report.eventCount == was.count)
            #expect(now.map(\.version).allSatisfy { $0 == 3 })
            // The same events: run, seq, step, time and data (digests included), but the links.
            for (a, b) in zip(was, now) {
                #expect(
                    a.runId == b.runId && a.sequence == b.sequence && a.step == b.step && a.timeUs == b.timeUs && a.payload == b.payload,
                    "seq \(a.sequence)")
            }
            #expect(try LogVerifier.verify(path: new).isIntact)
            #expect(RunState(folding: was) == RunState(folding: now))

            // Nothing to do for a version 3 log; a path taken is not overwritten.
            #expect { try LogUpgrade.upgrade(from: new, to: directory.path("again.jsonl.gz")) } throws: {
                ($0 as? LogError)?.code == .alreadyUpgraded
            }
            #expect { try LogUpgrade.upgrade(from: old, to: new) } throws: { ($0 as? LogError)?.code == .alreadyExists }
        }
    }

    @Test("upgrade refuses a torn log and one whose digests do not match, and writes nothing")
    func upgradeRefuses() throws {
        try TemporaryDirectory.with { directory in
            let torn = FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path
            let tampered = ConformanceTests.directory.appendingPathComponent("edited-with-chain-recomputed.jsonl.gz").path
            let edited = ConformanceTests.directory.appendingPathComponent("edited-event.jsonl.gz").path
            for (source, code) in [(torn, LogError.Code.tornTail), (tampered, .digestMismatch), (edited, .brokenChain)] {
                let new = directory.path("new.jsonl.gz")
                #expect { try LogUpgrade.upgrade(from: source, to: new) } throws: { ($0 as? LogError)?.code == code }
                #expect(!FileManager.default.fileExists(atPath: new), "\(source)")
            }
        }
    }

    /// The version 1 sample's lines with `edit` applied to each, every `prev` then made the hash
    /// of the line before as edited: a log whose chain holds, edited at the byte level (so that
    /// members this build does not know stay in it).
    static func v1Lines(editing edit: (Int, String) -> String) throws -> [[UInt8]] {
        var previous = ContentHash.genesis
        return try Self.members(Self.v1Sample).joined().enumerated().map { index, line in
            var text = edit(index, String(decoding: line, as: UTF8.self))
            if let range = text.range(of: #""prev":""#) {
                let hex = range.upperBound..<text.index(range.upperBound, offsetBy: 64)
                text.replaceSubrange(hex, with: previous)
            }
            previous = ContentHash.sha256Hex(Array(text.utf8))
            return Array(text.utf8)
        }
    }

    @Test("upgrade refuses a log whose events hold data members it does not know, naming the first, rather than drop them")
    func upgradeKeepsOrRefusesUnknownMembers() throws {
        try TemporaryDirectory.with { directory in
            // A newer writer's members, one at the top of a start's data and one inside a decision.
            var sawDecision = false
            let lines = try Self.v1Lines { _, line in
                if line.contains(#""kind":"decision_made""#) && !sawDecision {
                    sawDecision = true
                    return line.replacingOccurrences(of: #""decision":{"#, with: #""decision":{"confidence":0.9,"#)
                }
                return line
            }
            #expect(sawDecision)
            let old = directory.path("newer.jsonl.gz")
            try Self.write([lines], to: old)
            #expect(try LogVerifier.verify(path: old).isIntact, "the members are allowed (section 4), and the chain holds")
            let new = directory.path("new.jsonl.gz")
            #expect { try LogUpgrade.upgrade(from: old, to: new) } throws: { error in
                let error = error as? LogError
                return error?.code == .unknownMembers && error?.message.contains("decision.confidence") == true
            }
            #expect(!FileManager.default.fileExists(atPath: new))

            let started = try Self.v1Lines { index, line in
                index == 0 ? line.replacingOccurrences(of: #""data":{"#, with: #""data":{"added_by_a_newer_writer":true,"#) : line
            }
            try Self.write([started], to: old)
            #expect { try LogUpgrade.upgrade(from: old, to: new) } throws: { error in
                (error as? LogError)?.message.contains("member added_by_a_newer_writer") == true
            }
            #expect(!FileManager.default.fileExists(atPath: new))

            // A member a newer writer added to the envelope is refused the same way, not dropped.
            let enveloped = try Self.v1Lines { index, line in
                index == 3 ? line.replacingOccurrences(of: #""kind":"#, with: #""sig":"zzz","kind":"#) : line
            }
            try Self.write([enveloped], to: old)
            #expect(try LogVerifier.verify(path: old).isIntact)
            #expect { try LogUpgrade.upgrade(from: old, to: new) } throws: { error in
                (error as? LogError)?.code == .unknownMembers && (error as? LogError)?.message.contains("sig") == true
            }
            #expect(!FileManager.default.fileExists(atPath: new))

            // What says the same as a member left out is no loss: an empty list, a null.
            let spelledOut = try Self.v1Lines { index, line in
                index == 0
                    ? line.replacingOccurrences(of: #""data":{"#, with: #""data":{"tool_servers":[],"unused_by_anyone":null,"#) : line
            }
            try Self.write([spelledOut], to: old)
            #expect(try LogUpgrade.upgrade(from: old, to: new).eventCount == spelledOut.count)
        }
    }

    @Test("a log whose first line says version 3 but whose others do not is damaged: upgrade says so, and a read from the middle finds it")
    func mixedVersionsFromTheFirstLine() throws {
        try TemporaryDirectory.with { directory in
            // Only the first line says version 3: not a log to leave alone as upgraded already.
            let firstEdited = try Self.v1Lines { index, line in
                index == 0 ? line.replacingOccurrences(of: #"{"v":1,"#, with: #"{"v":3,"#) : line
            }
            let path = directory.path("first-edited.jsonl.gz")
            try Self.write([firstEdited], to: path)
            #expect { try LogUpgrade.upgrade(from: path, to: directory.path("new.jsonl.gz")) } throws: { error in
                let code = (error as? LogError)?.code
                return code != nil && code != .alreadyUpgraded
            }

            // A version 1 log with a member of version 3 lines appended, linked as version 3
            // links: a read from that member knows the log's version from its first line.
            let lines = try Self.members(Self.v1Sample).joined().map { $0 }
            let kept = Array(lines.prefix(6))
            var memberText: [UInt8] = []
            for line in kept { memberText += line + [0x0A] }
            var appended = String(decoding: lines[6], as: UTF8.self).replacingOccurrences(
                of: #"^\{"v":[12],"#, with: #"{"v":3,"#, options: .regularExpression)
            #expect(appended.hasPrefix(#"{"v":3,"#))
            if let range = appended.range(of: #""prev":""#) {
                appended.replaceSubrange(
                    range.upperBound..<appended.index(range.upperBound, offsetBy: 64), with: ContentHash.sha256Hex(memberText))
            }
            let mixed = directory.path("mixed.jsonl.gz")
            try Self.write([kept, [Array(appended.utf8)]], to: mixed)
            #expect(!(try LogVerifier.verify(path: mixed).isIntact))
            let event = try Event(line: Array(appended.utf8))
            let position = LogReader.Position(
                memberOffset: try memberOffsets(mixed)[1], memberIndex: 1, sequence: event.sequence,
                previousHash: ContentHash.sha256Hex(memberText), runId: event.runId)
            #expect { try LogReader(path: mixed).forEachEvent(from: position) { _ in true } } throws: {
                ($0 as? LogError)?.code == .invalidEvent
            }
        }
    }

    @Test("a signed version 1 log upgrades without its old signatures, or signed anew, and verifies either way")
    func upgradeSigned() throws {
        try TemporaryDirectory.with { directory in
            let keyPath = directory.path("key")
            try LogSigner.generateKeyFiles(at: keyPath)
            let signer = try LogSigner(keyFile: keyPath)
            let key = try LogVerificationKey(keyFile: keyPath + ".pub")
            let old = directory.path("old.jsonl.gz")
            _ = try LogWriter.withWriter(creating: old, runId: "run-signed", options: .init(signer: signer, formatVersion: 1)) {
                try SampleRun.recordSupportRun(into: $0)
            }
            #expect(try LogVerifier.verify(path: old, key: key).isIntact)

            let plain = directory.path("plain.jsonl.gz")
            let unsigned = try LogUpgrade.upgrade(from: old, to: plain)
            #expect(unsigned.signaturesLeftOut > 0 && unsigned.signaturesAdded == 0)
            #expect(try LogVerifier.verify(path: plain).isIntact)

            // Signed anew only once the old signatures checked: with the old log's key.
            let signed = directory.path("signed.jsonl.gz")
            #expect { try LogUpgrade.upgrade(from: old, to: signed, writing: .init(signer: signer)) } throws: {
                ($0 as? LogError)?.code == .badSignature
            }
            #expect(!FileManager.default.fileExists(atPath: signed))
            let resigned = try LogUpgrade.upgrade(from: old, to: signed, writing: .init(signer: signer), sourceKey: key)
            #expect(resigned.signaturesAdded > 0)
            let report = try LogVerifier.verify(path: signed, key: key)
            #expect(report.isIntact, "\(report.problems)")

            // An edit with the chain and the digests recomputed is intact to the chain and the
            // fold, but not to the key: it is not signed anew.
            let events = try LogReader(path: old, options: .init(resolvesContextPackets: true)).readAll().events.map(\.event)
            let edited = directory.path("edited.jsonl.gz")
            try LogWriter.withWriter(creating: edited, runId: "run-signed", options: .init(formatVersion: 1)) { writer in
                var state = RunState()
                var digester = StateDigester()
                for event in events {
                    var payload = event.payload
                    if case .runStopped(var stop) = payload, stop.reason == .success {
                        stop.answer = "Refunded 999.99 EUR."
                        payload = .runStopped(stop)
                    }
                    if case .stepEnded = payload { payload = .stepEnded(StepEnded(stateDigest: digester.digest(of: state))) }
                    let written = try writer.append(payload, step: event.step, timeUs: event.timeUs)
                    digester.track(RunState.reduce(into: &state, written))
                }
            }
            #expect(try LogVerifier.verify(path: edited).isIntact)
            let again = directory.path("again.jsonl.gz")
            #expect { try LogUpgrade.upgrade(from: edited, to: again, writing: .init(signer: signer), sourceKey: key) } throws: {
                ($0 as? LogError)?.code == .badSignature
            }
            #expect(!FileManager.default.fileExists(atPath: again))
        }
    }
}
