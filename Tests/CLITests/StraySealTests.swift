import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// A `<log>.seal` side file that is not a seal of the log beside it — garbage, or another log's
/// interrupted seal — is reported and ignored by every command; a real interrupted seal is
/// still finished.
@Suite("Stray seal side files")
struct StraySealTests {
    /// A side file as an interrupted seal of the torn fixture leaves it (docs/log-format.md §8):
    /// the torn log, the side file, and the offset the sealed member goes to.
    static func interruptedSeal(in directory: TemporaryDirectory) throws -> (torn: [UInt8], sideFile: [UInt8], offset: Int) {
        let torn = [UInt8](try Data(contentsOf: FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz")))
        let reference = directory.path("reference.jsonl.gz")
        try Data(torn).write(to: URL(fileURLWithPath: reference))
        let report = try #require(try LogRepair.seal(path: reference))
        let member = Array([UInt8](try Data(contentsOf: URL(fileURLWithPath: reference)))[report.memberOffset...])
        let offset = report.memberOffset
        let header =
            "agent-eval seal v2 offset=\(offset) length=\(member.count) size=\(torn.count) "
            + "before=\(ContentHash.sha256Hex(torn[max(0, offset - 65_536)..<offset])) torn=\(ContentHash.sha256Hex(torn[offset...]))\n"
        try FileManager.default.removeItem(atPath: reference)
        return (torn, Array(header.utf8) + member, offset)
    }

    static let strays = ["garbage", "another log's seal"]

    @Test(
        "beside an intact log: verify says intact with a warning, run accepts the log, repair has nothing to do and says to remove it",
        arguments: strays)
    func besideAnIntactLog(stray: String) async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("budget.jsonl.gz")
            let intact = try Data(
                contentsOf: FixtureLogs.directory.deletingLastPathComponent().appendingPathComponent("runs/research-budget.jsonl.gz"))
            try intact.write(to: URL(fileURLWithPath: log))
            let side = stray == "garbage" ? Array("left here by someone else".utf8) : try Self.interruptedSeal(in: directory).sideFile
            try Data(side).write(to: URL(fileURLWithPath: log + ".seal"))

            let verify = try await agentEval(["log", "verify", log])
            #expect(verify.status == 0, "\(verify.stdoutText)")
            #expect(verify.stdoutText.hasPrefix("\(log): intact"), "\(verify.stdoutText)")
            #expect(verify.stdoutText.contains("warning [stray_seal]: \(log).seal is not a seal of this log"), "\(verify.stdoutText)")
            #expect(verify.stdoutText.contains("hint: if nothing needs it, remove it: rm \(log).seal"), "\(verify.stdoutText)")
            let verifyJSON = try await agentEval(["log", "verify", "--json", log])
            #expect(verifyJSON.status == 0)
            let report = try JSONParser.parse(verifyJSON.stdout)
            #expect(report["intact"] == .bool(true))
            #expect(report["warnings"]?.arrayValue?.first?["code"] == .string("stray_seal"))

            try "caseId: stray-seal\nlogs: budget.jsonl.gz\nexpected: {stopReason: budget_exhausted}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", directory.path("case.yaml"), "--out", directory.path("runs")])
            #expect(run.status == 0, "\(run.stdoutText)\n\(run.stderr)")

            let repair = try await agentEval(["log", "repair", log])
            #expect(repair.status == 0, "\(repair.stderr)")
            #expect(repair.stdoutText == "\(log): intact, nothing to repair\n")
            #expect(repair.stderr.hasPrefix("warning: \(log).seal is not a seal of this log as it is now"), "\(repair.stderr)")
            #expect(repair.stderr.contains("hint: if nothing needs it, remove it: rm \(log).seal"), "\(repair.stderr)")
            // Nothing was changed: the log, and the side file, which may be someone's evidence.
            #expect(try Data(contentsOf: URL(fileURLWithPath: log)) == intact)
            #expect(try Data(contentsOf: URL(fileURLWithPath: log + ".seal")) == Data(side))
        }
    }

    @Test("beside a torn log: repair refuses to replace the stray side file, and seals once it is removed")
    func besideATornLog() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("torn.jsonl.gz")
            try Data(contentsOf: FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz")).write(
                to: URL(fileURLWithPath: log))
            try "left here by someone else".write(toFile: log + ".seal", atomically: true, encoding: .utf8)
            let verify = try await agentEval(["log", "verify", log])
            #expect(verify.status == 1)
            #expect(verify.stdoutText.contains("[torn_tail]"), "\(verify.stdoutText)")
            #expect(verify.stdoutText.contains("warning [stray_seal]"), "\(verify.stdoutText)")

            let refused = try await agentEval(["log", "repair", log])
            #expect(refused.status == 1)
            #expect(refused.stderr.hasPrefix("error: the log is torn, but \(log).seal is in the way"), "\(refused.stderr)")
            #expect(refused.stderr.contains("hint: if nothing needs it, remove it: rm \(log).seal"), "\(refused.stderr)")
            #expect(FileManager.default.fileExists(atPath: log + ".seal"))

            try FileManager.default.removeItem(atPath: log + ".seal")
            let repair = try await agentEval(["log", "repair", log])
            #expect(repair.status == 0, "\(repair.stderr)")
            #expect(repair.stdoutText.contains("sealed"))
        }
    }

    @Test("a real interrupted repair is still reported as pending, refused by run, and finished by repair")
    func interruptedRepair() async throws {
        try await TemporaryDirectory.with { directory in
            let (torn, sideFile, offset) = try Self.interruptedSeal(in: directory)
            // The crash: side file written and synced, log truncated, new member not yet written.
            let log = directory.path("crashed.jsonl.gz")
            try Data(torn[..<offset]).write(to: URL(fileURLWithPath: log))
            try Data(sideFile).write(to: URL(fileURLWithPath: log + ".seal"))

            let verify = try await agentEval(["log", "verify", log])
            #expect(verify.status == 1)
            #expect(verify.stdoutText.contains("[pending_seal]"), "\(verify.stdoutText)")
            try "caseId: crashed\nlogs: crashed.jsonl.gz\nallowUnfinished: true\nexpected: {toolsCalled: [web_search]}\n".write(
                toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
            let run = try await agentEval(["run", directory.path("case.yaml"), "--out", directory.path("runs")])
            #expect(run.status == 2, "\(run.stdoutText)\n\(run.stderr)")
            #expect((run.stdoutText + run.stderr).contains("a seal of this log was interrupted"), "\(run.stdoutText)\n\(run.stderr)")

            let repair = try await agentEval(["log", "repair", log])
            #expect(repair.status == 0, "\(repair.stderr)")
            #expect(repair.stdoutText.hasPrefix("\(log): finished an interrupted seal from \(log).seal"), "\(repair.stdoutText)")
            #expect(repair.stderr.isEmpty)
            #expect(!FileManager.default.fileExists(atPath: log + ".seal"))
            #expect(try await agentEval(["log", "verify", log]).status == 0)
            #expect(try await agentEval(["run", directory.path("case.yaml"), "--out", directory.path("runs")]).status == 0)
        }
    }
}
