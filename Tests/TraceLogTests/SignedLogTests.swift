import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@Suite("Signed logs")
struct SignedLogTests {
    /// A signed support run (two members: the approval stop, then the rest) and its key files.
    func signedLog(in directory: TemporaryDirectory) throws -> (log: String, publicKey: String, signer: LogSigner) {
        let keyPath = directory.path("key")
        try LogSigner.generateKeyFiles(at: keyPath)
        let signer = try LogSigner(keyFile: keyPath)
        let log = directory.path("signed.jsonl.gz")
        let options = LogWriter.Options(signer: signer)
        _ = try LogWriter.withWriter(creating: log, runId: "run-signed", options: options) { try SampleRun.recordSupportRun(into: $0) }
        return (log, keyPath + ".pub", signer)
    }

    func problems(_ log: String, key: String) throws -> [String] {
        try LogVerifier.verify(path: log, key: try LogVerificationKey(keyFile: key)).problems.filter { $0.code == .badSignature }.map(
            \.message)
    }

    /// Writes `events` as a new log (payloads as they are, signature events included).
    func rewrite(_ events: [Event], to path: String) throws {
        try LogWriter.withWriter(creating: path, runId: events.first?.runId ?? "r") { writer in
            for event in events { try writer.append(event.payload, step: event.step, timeUs: event.timeUs) }
        }
    }

    @Test("keygen makes the key's folder, keeps the private key its owner's, and overwrites no key")
    func keygenFolder() async throws {
        try await TemporaryDirectory.with { directory in
            let keyPath = directory.path("keys/ci")
            try LogSigner.generateKeyFiles(at: keyPath)
            let mode = try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            _ = try LogVerificationKey(keyFile: keyPath + ".pub")
            #expect(throws: LogError.self) { try LogSigner.generateKeyFiles(at: keyPath) }
            // A file where the folder would be: an error naming it, not a crash.
            try "x".write(toFile: directory.path("file"), atomically: true, encoding: .utf8)
            let error = #expect(throws: LogError.self) { try LogSigner.generateKeyFiles(at: directory.path("file/ci")) }
            #expect(error?.message.contains("cannot make the folder") == true, "\(String(describing: error))")
        }
    }

    @Test("a signed log verifies with its key; without the key it is an ordinary log, and its digests still replay")
    func verifies() async throws {
        try await TemporaryDirectory.with { directory in
            let (log, publicKey, _) = try signedLog(in: directory)
            let report = try LogVerifier.verify(path: log, key: try LogVerificationKey(keyFile: publicKey))
            #expect(report.isIntact, "\(report.problems)")
            #expect(report.signatureCount >= 2)
            #expect(report.ending == .complete)
            #expect(try LogVerifier.verify(path: log).isIntact)
            // log cat names a signature for what it is, not as an unknown kind.
            let signatures = try LogReader(path: log).readAll().events.map(\.event).filter { $0.kind == LogSigner.kind }
            let last = try #require(signatures.last)
            #expect(last.summaryLine.contains("signature (ed25519, key \(try LogVerificationKey(keyFile: publicKey).keyId)) of seq 0 to"))
            #expect(last.summaryLine.hasSuffix(", final"))
            #expect(try await Subprocess.run(gzipPath, ["-t", log]).status == 0)
        }
    }

    @Test("an edit with the chain recomputed, a cut end, appended events and another key are each caught")
    func tampering() throws {
        try TemporaryDirectory.with { directory in
            let (log, publicKey, _) = try signedLog(in: directory)
            // Whole packets: a writer writes its own deltas.
            let events = try LogReader(path: log, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)

            // An edit, with the whole chain recomputed: intact to the chain, not to the key.
            var edited = events
            for index in edited.indices {
                if case .toolIntended(var intent) = edited[index].payload, intent.tool == "refund_order" {
                    intent.arguments = ["order_id": "A-1042", "amount_cents": 1]
                    edited[index].payload = .toolIntended(intent)
                }
            }
            let editedPath = directory.path("edited.jsonl.gz")
            try rewrite(edited, to: editedPath)
            #expect(try LogVerifier.verify(path: editedPath).isIntact)
            #expect(
                try problems(editedPath, key: publicKey).contains {
                    $0.contains("does not cover the event before it") || $0.contains("does not check")
                })

            // The end cut off at an event boundary: the final signature is gone.
            let cutPath = directory.path("cut.jsonl.gz")
            try rewrite(Array(events.prefix(events.count - 4)), to: cutPath)
            #expect(try LogVerifier.verify(path: cutPath).isIntact)
            #expect(try !problems(cutPath, key: publicKey).isEmpty)

            // Events appended by someone without the key.
            let extendedPath = directory.path("extended.jsonl.gz")
            try FileManager.default.copyItem(atPath: log, toPath: extendedPath)
            let (writer, _) = try LogWriter.open(at: extendedPath)
            try writer.append(.contentStored(ContentStored(text: "later")), step: events.last?.step ?? 0, timeUs: 9_000_000_000_000_000)
            try writer.close()
            #expect(
                try problems(extendedPath, key: publicKey).contains { $0.hasSuffix("come after the last signature: the log was extended") })

            // Another key.
            let otherKey = directory.path("other")
            try LogSigner.generateKeyFiles(at: otherKey)
            #expect(try problems(log, key: otherKey + ".pub").contains { $0.contains("another key") })

            // An unsigned log under --key.
            let unsigned = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path
            #expect(try problems(unsigned, key: publicKey) == ["the log is not signed"])
        }
    }
}
