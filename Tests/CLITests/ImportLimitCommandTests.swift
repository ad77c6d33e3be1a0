import Foundation
import TestSupport
import Testing
import TraceCore

/// `agent-eval import` over hostile Inspect archives: each archive's budget (total inflated
/// bytes, inflated-to-compressed ratio) is checked before anything is inflated, and the
/// process's peak memory stays far below what the archive claims.
@Suite("agent-eval import inspect: decompression bombs are refused within the archive budget")
struct ImportLimitCommandTests {
    static let header = Array(#"{"eval": {"task": "bounded", "model": "openai/m", "created": "2026-11-23T10:00:00+00:00"}}"#.utf8)

    /// A sample with one question and one answer, then `padding` spaces (still valid JSON).
    static func sample(_ id: Int) -> [UInt8] {
        Array(
            (#"{"id": \#(id), "epoch": 1, "messages": [{"role": "user", "content": "Where is order A-\#(id)?"}, "#
                + #"{"role": "assistant", "content": "It has shipped."}]}"#).utf8)
    }

    static func importArchive(_ archive: String, in directory: TemporaryDirectory, _ options: [String] = []) async throws -> MeasuredProcess
    {
        try await PeakMemory.run(
            try agentEvalBinary(),
            ["import", "inspect", archive, "--out", directory.path("imported-\(UUID().uuidString)"), "--no-catalog"] + options,
            environment: ["NO_COLOR": "1"])
    }

    @Test("a 33 KB .eval whose zstd sample inflates to 1 GiB is refused unread, naming the entry, in a fraction of the memory")
    func zstdBomb() async throws {
        try await TemporaryDirectory.with { directory in
            var zip = ZipBuilder()
            zip.addStored("header.json", Self.header)
            zip.addZstd("samples/1_epoch_1.json", prefix: Self.sample(1), repeating: 0x20, count: (1 << 30) - Self.sample(1).count)
            let bomb = directory.path("bomb.eval")
            try Data(zip.bytes).write(to: URL(fileURLWithPath: bomb))
            #expect(zip.bytes.count < 40_000)

            let refused = try await Self.importArchive(bomb, in: directory)
            #expect(refused.result.status == 2, "\(refused.result.stderr)")
            let error = refused.result.stderr
            #expect(error.contains("error: \(bomb): the entry samples/1_epoch_1.json would inflate to 1 GiB"), "\(error)")
            #expect(error.contains("over the limit of 1000:1"), "\(error)")
            #expect(
                error.contains("hint: if you trust the archive, raise the limit: agent-eval import inspect --max-archive-ratio"), "\(error)"
            )
            #expect(refused.peakResidentBytes < 300 << 20, "peak \(refused.peakResidentBytes >> 20) MiB")

            // The zip headers say 1000 bytes; the frame inside holds 1 GiB: stopped at 1000.
            var lying = ZipBuilder()
            lying.addStored("header.json", Self.header)
            lying.addZstd("samples/1_epoch_1.json", prefix: Self.sample(1), repeating: 0x20, count: 1 << 30, declaredSize: 1000)
            let liar = directory.path("liar.eval")
            try Data(lying.bytes).write(to: URL(fileURLWithPath: liar))
            let damaged = try await Self.importArchive(liar, in: directory)
            #expect(damaged.result.status == 2, "\(damaged.result.stderr)")
            #expect(
                damaged.result.stderr.contains(
                    "samples/1_epoch_1.json does not decompress (zstd): it decompresses to more than the 1000 bytes its header says"),
                "\(damaged.result.stderr)")
            #expect(damaged.peakResidentBytes < 300 << 20, "peak \(damaged.peakResidentBytes >> 20) MiB")
        }
    }

    @Test(
        "ten 100 MiB samples, each under the ratio limit, are refused by the archive's 512 MiB total at the sixth, before any is inflated")
    func totalBudget() async throws {
        try await TemporaryDirectory.with { directory in
            var generator = SeededGenerator(seed: 53)
            var zip = ZipBuilder()
            zip.addStored("header.json", Self.header)
            for id in 1...10 {
                // 128 KiB that do not compress, so the entry is 100 MiB from 131 KiB: under 1000:1.
                let noise = (0..<(128 << 10)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                zip.addZstd("samples/\(id)_epoch_1.json", prefix: noise, repeating: 0x20, count: (100 << 20) - noise.count)
            }
            let archive = directory.path("ten.eval")
            try Data(zip.bytes).write(to: URL(fileURLWithPath: archive))

            let refused = try await Self.importArchive(archive, in: directory)
            #expect(refused.result.status == 2, "\(refused.result.stderr)")
            let error = refused.result.stderr
            #expect(
                error.contains("error: \(archive): the entry samples/6_epoch_1.json would inflate to 100 MiB after the"),
                "\(error)")
            #expect(error.contains("over the limit of 512 MiB for one archive; nothing of it was inflated"), "\(error)")
            #expect(error.contains("--max-archive-bytes"), "\(error)")
            #expect(!error.contains("samples/1_epoch_1.json"), "\(error)")
            #expect(refused.peakResidentBytes < 300 << 20, "peak \(refused.peakResidentBytes >> 20) MiB")
        }
    }

    @Test("--max-archive-bytes and --max-archive-ratio move the limits: a trusted archive over the defaults imports with them")
    func raisedLimits() async throws {
        try await TemporaryDirectory.with { directory in
            // Two samples of 3 MiB each, mostly spaces: about 25,000:1.
            var zip = ZipBuilder()
            zip.addStored("header.json", Self.header)
            for id in 1...2 {
                zip.addZstd(
                    "samples/\(id)_epoch_1.json", prefix: Self.sample(id), repeating: 0x20, count: (3 << 20) - Self.sample(id).count)
            }
            // Compressed by the real zstd program in two frames, as a streaming writer may.
            if let zstd = Subprocess.which("zstd") {
                let third = Self.sample(3) + [UInt8](repeating: 0x20, count: 200)
                let first = try await Subprocess.run(zstd, ["-q", "-c"], input: Array(third.prefix(40))).stdout
                let second = try await Subprocess.run(zstd, ["-q", "-c", "-19"], input: Array(third.dropFirst(40))).stdout
                zip.add("samples/3_epoch_1.json", method: 93, data: first + second, size: third.count, crc: ZipBuilder.crc32(prefix: third))
            }
            let archive = directory.path("trusted.eval")
            try Data(zip.bytes).write(to: URL(fileURLWithPath: archive))

            let byDefault = try await Self.importArchive(archive, in: directory)
            #expect(byDefault.result.status == 2)
            #expect(
                byDefault.result.stderr.contains("the entry samples/1_epoch_1.json would inflate to 3 MiB"), "\(byDefault.result.stderr)")

            let ratioOnly = try await Self.importArchive(
                archive, in: directory, ["--max-archive-ratio", "100000", "--max-archive-bytes", "5MiB"])
            #expect(ratioOnly.result.status == 2)
            #expect(
                ratioOnly.result.stderr.contains("the entry samples/2_epoch_1.json would inflate to 3 MiB after the"),
                "\(ratioOnly.result.stderr)")
            #expect(ratioOnly.result.stderr.contains("over the limit of 5 MiB for one archive"), "\(ratioOnly.result.stderr)")

            let raised = try await Self.importArchive(
                archive, in: directory, ["--max-archive-ratio", "100000", "--max-archive-bytes", "8MiB"])
            #expect(raised.result.status == 0, "\(raised.result.stderr)")
            let runs = Subprocess.which("zstd") == nil ? 2 : 3
            #expect(raised.result.stdoutText.contains("\(runs) runs imported"), "\(raised.result.stdoutText)")

            let usage = try await agentEval(["import", "inspect", archive, "--out", directory.path("x"), "--max-archive-bytes", "lots"])
            #expect(usage.status == 64)
            #expect(
                usage.stderr.contains("--max-archive-bytes takes a size in bytes, KiB, MiB or GiB (e.g. 2GiB), not 'lots'"),
                "\(usage.stderr)")
        }
    }
}
