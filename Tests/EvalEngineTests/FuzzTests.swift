import Foundation
import TestSupport
import Testing

/// A short, fixed-seed pass of the fuzzer over every reader of untrusted input; the long run is
/// `swift run -c release fuzz --seconds 3600`.
@Suite("Fuzzing the readers of untrusted input")
struct FuzzTests {
    @Test(
        "mutated logs, JSON, case files and agent files: every input is read or refused with a diagnostic", arguments: FuzzTarget.allCases)
    func fuzz(_ target: FuzzTarget) throws {
        let corpus = target.corpus
        #expect(!corpus.isEmpty, "the corpus of \(target) is empty")
        try TemporaryDirectory.with { directory in
            var fuzzer = Fuzzer(seed: 2026)
            let findings = fuzzer.run(corpus: corpus, count: target == .log ? 150 : 300) { try target.read($0, in: directory.url.path) }
            #expect(findings.isEmpty, "\(findings.prefix(3))")
        }
    }
}
