// The fuzzer for the readers of untrusted input (logs, JSON, case files, agent files): seeded
// mutations of the repository's own fixtures, for as long as asked. The test suite runs a short
// fixed-seed pass of the same harness (FuzzTests); this is the long run:
//
//   swift run -c release fuzz --seconds 3600                 # every target, an hour in all
//   swift run -c release fuzz --target log --seed 7 --seconds 600
//
// A crash is a finding by itself (the process dies; rerun with the same --seed to reproduce);
// an error that is not one of the project's diagnostics is printed with its input (base64) and
// makes the exit status 1.
import Foundation
import TestSupport

var seconds = 60.0
var targets = FuzzTarget.allCases
var seed: UInt64 = UInt64(Date().timeIntervalSince1970)
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--seconds": seconds = arguments.next().flatMap(Double.init) ?? seconds
    case "--seed": seed = arguments.next().flatMap { UInt64($0) } ?? seed
    case "--target":
        guard let name = arguments.next(), let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(
                Data("fuzz: --target takes one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8))
            exit(64)
        }
        targets = [target]
    default:
        FileHandle.standardError.write(Data("usage: fuzz [--seconds N] [--target log|json|case-file|agent-file] [--seed S]\n".utf8))
        exit(argument == "--help" ? 0 : 64)
    }
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-fuzz-\(getpid())").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
print("fuzz: seed \(seed), \(Int(seconds)) s over \(targets.map(\.rawValue).joined(separator: ", "))")
var findings = 0
for (number, target) in targets.enumerated() {
    let corpus = target.corpus
    var fuzzer = Fuzzer(seed: seed &+ UInt64(number))
    let end = Date().addingTimeInterval(seconds / Double(targets.count))
    var inputs = 0
    while Date() < end {
        let found = fuzzer.run(corpus: corpus, count: 100) { try target.read($0, in: directory) }
        inputs += 100
        for finding in found { print("\(target): \(finding)") }
        findings += found.count
    }
    print("\(target): \(inputs) inputs from \(corpus.count) seeds, \(findings) findings so far")
}
exit(findings == 0 ? 0 : 1)
