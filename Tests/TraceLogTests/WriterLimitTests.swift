import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// The writer never writes a log its own reader rejects: an event whose line could take a
/// member past the reader's limit is refused, whole and unwritten, and the log goes on.
@Suite("The writer's size rule")
struct WriterLimitTests {
    @Test(
        "events of every size around the limit: the ones refused are said so and not written; every log written reads and verifies",
        arguments: [false, true])
    func everyLogReads(signed: Bool) throws {
        let limit = 1 << 20
        try TemporaryDirectory.with { directory in
            var signer: LogSigner?
            if signed {
                try LogSigner.generateKeyFiles(at: directory.path("key"))
                signer = try LogSigner(keyFile: directory.path("key"))
            }
            let options = LogWriter.Options(memberBound: 64 * 1024, signer: signer, readerMemberLimit: limit)
            #expect(options.maximumLineBytes < limit - options.memberBound)
            let path = directory.path("sizes.jsonl.gz")
            var generator = SeededGenerator(seed: 53)
            var written: [Int] = []
            var refused: [Int] = []
            try LogWriter.withWriter(creating: path, runId: "run-sizes", options: options) { writer in
                try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 0)
                for index in 1...80 {
                    // Small events fill members between the large ones, which come near the limit.
                    let size =
                        index % 3 == 0
                        ? Int.random(in: (limit - 200 * 1024)...(limit + 64 * 1024), using: &generator)
                        : Int.random(in: 1...(48 * 1024), using: &generator)
                    let content = ContentStored(text: String(repeating: "x", count: size))
                    do {
                        try writer.append(.contentStored(content), step: 0, timeUs: index)
                        written.append(size)
                    } catch let error as LogError {
                        #expect(error.code == .eventTooLarge)
                        #expect(error.message.contains("so it is not written") && error.message.contains("\(limit)"), "\(error.message)")
                        #expect(error.sequence == writer.nextSequence, "the refused event took no sequence number")
                        refused.append(size)
                    }
                }
            }
            #expect(!refused.isEmpty && written.contains { $0 > limit / 2 }, "both sides of the limit were tried")
            #expect(refused.allSatisfy { $0 > options.maximumLineBytes - 512 })
            // A reader whose limit is the writer's reads every event written, and nothing else.
            var read: [Int] = []
            let summary = try LogReader(path: path, options: .init(isStrict: true, memberContentLimit: limit)).forEachEvent { recorded in
                if case .contentStored(let content) = recorded.event.payload { read.append(content.byteCount) }
            }
            #expect(read == written)
            #expect(summary.tear == nil)
            let report = try LogVerifier.verify(path: path, memberContentLimit: limit)
            #expect(report.isIntact, "\(report.problems)")
        }
    }

    @Test(
        "a member over a reader's limit stops the reader and the verifier there, naming the member and its first event")
    func readerStopsAtTheMember() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("big.jsonl.gz")
            // Written for readers of 4 MiB; read with 1 MiB.
            let options = LogWriter.Options(memberBound: 64 * 1024, readerMemberLimit: 4 << 20)
            try LogWriter.withWriter(creating: path, runId: "run-big", options: options) { writer in
                try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 0)
                for index in 1...3 { try writer.append(.contentStored(ContentStored(text: "small \(index)")), step: 0, timeUs: index) }
                // Past the member bound: the next event begins a member of its own.
                try writer.append(.contentStored(ContentStored(text: String(repeating: "y", count: 80 * 1024))), step: 0, timeUs: 4)
                try writer.append(.contentStored(ContentStored(text: String(repeating: "x", count: 2 << 20))), step: 0, timeUs: 5)
            }
            let limited = LogReader.Options(memberContentLimit: 1 << 20)
            var seen: [Int] = []
            let error = #expect(throws: LogError.self) {
                _ = try LogReader(path: path, options: limited).forEachEvent { seen.append($0.event.sequence) }
            }
            #expect(error?.code == .eventTooLarge)
            #expect(error?.message.contains("holds more than 1 MiB (1048576 bytes) of events") == true, "\(error?.message ?? "")")
            // The member holds the events after the last one handed out.
            #expect(error?.sequence == (seen.last ?? -1) + 1, "\(String(describing: error)) after \(seen)")
            #expect(error?.memberOffset != nil && error?.memberOffset != 0)
            let verified = #expect(throws: LogError.self) { _ = try LogVerifier.verify(path: path, memberContentLimit: 1 << 20) }
            #expect(verified?.code == .eventTooLarge && verified?.sequence == error?.sequence)
            // At the writer's limit it reads, and is intact.
            #expect(try LogReader(path: path, options: .init(memberContentLimit: 4 << 20)).readAll().events.count == 6)
            #expect(try LogVerifier.verify(path: path, memberContentLimit: 4 << 20).isIntact)
        }
    }

    @Test("by default the limit is the readers' default: 64 MiB a member, less the member bound and room for a signature")
    func defaults() {
        let options = LogWriter.Options()
        #expect(options.readerMemberLimit == LogReadLimit.defaultMemberBytes)
        #expect(LogReader.Options().memberContentLimit == LogReadLimit.defaultMemberBytes)
        #expect(options.maximumLineBytes == (64 << 20) - 256 * 1024 - 64 * 1024)
    }
}

@Suite("The house's worker threads")
struct WorkerThreadsTests {
    @Test("a bounded wait for threads' end: false while their work is held up, true once it ends")
    func boundedWaitForTheEnd() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        let reader = JobThreads(name: "test reader")
        reader.submit {
            var byte: UInt8 = 0
            _ = read(readEnd, &byte, 1)  // held up until the pipe's other end closes
        }
        reader.finish()
        #expect(!reader.waitUntilEnded(within: .milliseconds(50)), "the read is still waiting")
        close(writeEnd)
        #expect(reader.waitUntilEnded(within: .seconds(60)), "the pipe's end ended the work")
        close(readEnd)
    }
}
