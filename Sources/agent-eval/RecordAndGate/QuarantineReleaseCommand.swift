import ArgumentParser
import Catalog
import ConfigFile
import EvalEngine
import Foundation
import TraceCore

struct QuarantineReleaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "release",
        abstract: "End a case's quarantine: remove its entry from the quarantine file.",
        discussion: """
            Exit codes: 0 released; 2 the case has no entry in the file, or the file cannot be read or written; 64 usage \
            error. An entry written as `quarantine:` in a case file is released by deleting it there.
            """)

    @Argument(help: "The caseIds to release.")
    var caseIds: [String]

    @OptionGroup var location: QuarantineFileArgument

    func validate() throws {
        if caseIds.isEmpty { throw ValidationError("give the caseId to release") }
    }

    func run() throws {
        var file = try location.load(mustExist: true)
        let missing = caseIds.filter { file.entry(for: $0) == nil }
        if !missing.isEmpty {
            throw diagnose(
                CommandError(
                    "not_quarantined", "\(missing.joined(separator: ", ")) \(missing.count == 1 ? "has" : "have") no entry in \(file.path)",
                    hint:
                        "`agent-eval quarantine list` shows the entries; one written in a case file is released by deleting its quarantine: key"
                ))
        }
        file.entries.removeAll { caseIds.contains($0.caseId) }
        do {
            try file.save()
        } catch {
            throw diagnose(error)
        }
        var said = Set<String>()
        for caseId in caseIds where said.insert(caseId).inserted { say("released \(caseId) from \(displayPath(file.path))") }
    }
}
